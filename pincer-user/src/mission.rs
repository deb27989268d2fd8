//! Missions: what an agent may touch, read from a TOML file and resolved to
//! the kernel identities (device and inode) the BPF programs check.
//!
//! ```toml
//! [mission]
//! name = "fix the failing test"
//!
//! [[grant]]
//! path = "~/project"          # absolute, or starting with `~/`
//! ops = ["read", "write", "create"]
//! extent = "tree"             # "file" (the default) or "tree"
//!
//! [defaults]
//! baseline = "runtime"        # "runtime" (the default) or "none"
//! ```
//!
//! Parsing is strict: unknown keys, wrong types and unknown values are errors
//! that name the file, the line and column, and the field (`grant[2].ops`;
//! grants are counted from 1 in the order they are written).

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fmt;
use std::fs;
use std::hash::Hash;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use pincer_common::{GrantKey, GrantValue, NAME_LEN, NameGrantKey, kernel_dev, ops};
use serde::Deserialize;
use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
use toml::Spanned;

/// An error in a mission file or in resolving its grants.
#[derive(Debug, thiserror::Error)]
pub enum MissionError {
    /// The mission file could not be read.
    #[error("cannot read mission file {}", .path.display())]
    Io {
        /// The mission file.
        path: PathBuf,
        /// Why it could not be read.
        #[source]
        source: io::Error,
    },
    /// The file is not a valid mission: bad TOML, an unknown key, a wrong type
    /// or a value out of range.
    #[error("{}:{line}:{column}: {}{message}", .path.display(), FieldPrefix(.field.as_deref()))]
    Invalid {
        /// The mission file.
        path: PathBuf,
        /// 1-based line of the offending text.
        line: usize,
        /// 1-based column (in characters) of the offending text.
        column: usize,
        /// The field, such as `grant[2].ops`, when the error is about one.
        field: Option<String>,
        /// What is wrong.
        message: String,
    },
    /// A grant's path could not be looked up.
    #[error("{}:{line}: {field}: cannot resolve {}", .mission.display(), .path.display())]
    Unresolvable {
        /// The mission file.
        mission: PathBuf,
        /// Line of the grant's path.
        line: usize,
        /// The field, such as `grant[2].path`.
        field: String,
        /// The path that failed to resolve (the grant's path or its parent).
        path: PathBuf,
        /// The lookup error.
        #[source]
        source: io::Error,
    },
    /// A grant names an object it cannot apply to.
    #[error("{}:{line}: {field}: {message}", .mission.display())]
    Rejected {
        /// The mission file.
        mission: PathBuf,
        /// Line of the grant's path.
        line: usize,
        /// The field, such as `grant[2].extent`.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// An entry of the baseline exists but could not be looked up.
    #[error("cannot resolve baseline entry {}", .path.display())]
    Baseline {
        /// The baseline entry.
        path: PathBuf,
        /// The lookup error.
        #[source]
        source: io::Error,
    },
}

/// Writes `field: ` before a message when the error names a field.
struct FieldPrefix<'a>(Option<&'a str>);

impl fmt::Display for FieldPrefix<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(field) => write!(f, "{field}: "),
            None => Ok(()),
        }
    }
}

/// A parsed mission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mission {
    /// `[mission].name`.
    pub name: String,
    /// The file the mission was read from (used in messages).
    pub source: PathBuf,
    /// The `[[grant]]` entries, in file order.
    pub grants: Vec<GrantSpec>,
    /// `[defaults].baseline`.
    pub baseline: Baseline,
}

/// One `[[grant]]` entry as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantSpec {
    /// Absolute path, with a leading `~` expanded, otherwise as written:
    /// symbolic links are followed only when the mission is resolved.
    pub path: PathBuf,
    /// Bits of [`pincer_common::ops`].
    pub ops: u32,
    /// What the grant covers.
    pub extent: Extent,
    /// 1-based line of the entry's `path` in the mission file.
    pub line: usize,
}

/// What a grant covers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Extent {
    /// The object itself: an existing file or directory, or a file the agent
    /// will create.
    #[default]
    File,
    /// An existing directory and everything below it.
    Tree,
}

impl fmt::Display for Extent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Extent::File => "file",
            Extent::Tree => "tree",
        })
    }
}

/// Grants every mission gets besides its own.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Baseline {
    /// What a program needs to start and run at all: see [`RUNTIME_BASELINE`].
    #[default]
    Runtime,
    /// Nothing: the mission lists everything itself.
    None,
}

impl fmt::Display for Baseline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Baseline::Runtime => "runtime",
            Baseline::None => "none",
        })
    }
}

/// The `runtime` baseline: what dynamically linked programs, shells and
/// language runtimes touch just to start, resolve names and print.
///
/// Each entry is resolved like a grant (symbolic links followed); a
/// directory is granted as a tree, anything else as a file. Entries that do
/// not exist on the machine are skipped.
///
/// | Path | Operations |
/// |---|---|
/// | `/usr`, `/bin`, `/sbin`, `/lib`, `/lib32`, `/lib64`, `/libx32` | read, exec |
/// | `/proc` | read (runtimes read `/proc/self/*`; nothing under `/proc` is writable) |
/// | `/etc/ld.so.cache`, `/etc/ld.so.conf`, `/etc/ld.so.conf.d` | read |
/// | `/etc/nsswitch.conf`, `/etc/passwd`, `/etc/group` | read |
/// | `/etc/hosts`, `/etc/host.conf`, `/etc/resolv.conf`, `/etc/gai.conf` | read |
/// | `/etc/localtime`, `/etc/timezone`, `/etc/os-release` | read |
/// | `/etc/ssl/certs`, `/etc/ca-certificates`, `/etc/alternatives` | read |
/// | `/etc/terminfo`, `/etc/inputrc`, `/etc/mime.types` | read |
/// | `/etc/profile`, `/etc/bash.bashrc`, `/etc/environment` | read |
/// | `/dev/null`, `/dev/zero`, `/dev/full`, `/dev/tty` | read, write |
/// | `/dev/random`, `/dev/urandom` | read |
pub const RUNTIME_BASELINE: &[(&str, u32)] = &[
    ("/usr", ops::READ | ops::EXEC),
    ("/bin", ops::READ | ops::EXEC),
    ("/sbin", ops::READ | ops::EXEC),
    ("/lib", ops::READ | ops::EXEC),
    ("/lib32", ops::READ | ops::EXEC),
    ("/lib64", ops::READ | ops::EXEC),
    ("/libx32", ops::READ | ops::EXEC),
    ("/proc", ops::READ),
    ("/etc/ld.so.cache", ops::READ),
    ("/etc/ld.so.conf", ops::READ),
    ("/etc/ld.so.conf.d", ops::READ),
    ("/etc/nsswitch.conf", ops::READ),
    ("/etc/passwd", ops::READ),
    ("/etc/group", ops::READ),
    ("/etc/hosts", ops::READ),
    ("/etc/host.conf", ops::READ),
    ("/etc/resolv.conf", ops::READ),
    ("/etc/gai.conf", ops::READ),
    ("/etc/localtime", ops::READ),
    ("/etc/timezone", ops::READ),
    ("/etc/os-release", ops::READ),
    ("/etc/ssl/certs", ops::READ),
    ("/etc/ca-certificates", ops::READ),
    ("/etc/alternatives", ops::READ),
    ("/etc/terminfo", ops::READ),
    ("/etc/inputrc", ops::READ),
    ("/etc/mime.types", ops::READ),
    ("/etc/profile", ops::READ),
    ("/etc/bash.bashrc", ops::READ),
    ("/etc/environment", ops::READ),
    ("/dev/null", ops::READ | ops::WRITE),
    ("/dev/zero", ops::READ | ops::WRITE),
    ("/dev/full", ops::READ | ops::WRITE),
    ("/dev/tty", ops::READ | ops::WRITE),
    ("/dev/random", ops::READ),
    ("/dev/urandom", ops::READ),
];

/// Why an entry is in the grant maps, for `pincer` output and audit lines:
/// `mission line 7: /home/me/project (tree: read, write)` or
/// `baseline runtime: /usr`; reasons of merged grants are joined with `; `.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reason(pub String);

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A mission's grants as map entries, one per object: grants on the same
/// object are merged.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResolvedGrants {
    /// Entries of [`pincer_common::names::GRANTS`]: existing objects.
    pub inode: Vec<(GrantKey, GrantValue, Reason)>,
    /// Entries of [`pincer_common::names::NAME_GRANTS`]: files that do not
    /// exist yet, by parent directory and name.
    pub names: Vec<(NameGrantKey, GrantValue, Reason)>,
}

/// Operation names of `ops` in bit order, such as `read, write`.
pub fn format_ops(bits: u32) -> String {
    let mut names: Vec<String> = ops::NAMES
        .iter()
        .filter(|(bit, _)| bits & bit != 0)
        .map(|(_, name)| (*name).to_owned())
        .collect();
    if bits & !ops::ALL != 0 {
        names.push(format!("{:#x}", bits & !ops::ALL));
    }
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    }
}

// The file as written. Every value is optional and spanned so that pincer,
// not serde, reports a missing or invalid value, with its position and field.
// serde still reports unknown keys and wrong types; `field_at` names the
// field from the error's position. A new key is a new field here plus its
// check in `Mission::parse_with_home`.

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
struct RawFile {
    mission: Option<Spanned<RawMission>>,
    #[serde(default)]
    grant: Vec<Spanned<RawGrant>>,
    defaults: Option<Spanned<RawDefaults>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
struct RawMission {
    name: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
struct RawGrant {
    path: Option<Spanned<String>>,
    ops: Option<Spanned<Vec<Spanned<String>>>>,
    extent: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
struct RawDefaults {
    baseline: Option<Spanned<String>>,
}

/// The text being parsed, to turn byte offsets into positioned errors.
struct Doc<'a> {
    text: &'a str,
    source: &'a Path,
}

impl Doc<'_> {
    fn invalid(&self, offset: usize, field: Option<String>, message: String) -> MissionError {
        let (line, column) = line_column(self.text, offset);
        MissionError::Invalid {
            path: self.source.to_owned(),
            line,
            column,
            field,
            message,
        }
    }

    fn field_error(&self, offset: usize, field: &str, message: impl Into<String>) -> MissionError {
        self.invalid(offset, Some(field.to_owned()), message.into())
    }

    fn toml_error(&self, error: &toml::de::Error) -> MissionError {
        let offset = error.span().map_or(0, |span| span.start);
        // Errors such as "invalid basic string" carry only the first line.
        let mut message = error.message().trim_end().replace('\n', ": ");
        let field = field_at(self.text, offset);
        // Datetimes reach serde as maps; say what the user wrote.
        if message.starts_with("invalid type: map")
            && self
                .text
                .get(offset..)
                .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
        {
            message = message.replacen("invalid type: map", "invalid type: datetime", 1);
        }
        if field.as_deref() == Some("grant") && message.ends_with("expected a sequence") {
            message.push_str(" (write each grant as a [[grant]] table)");
        }
        self.invalid(offset, field, message)
    }

    /// Looks `value` up in `choices`, the accepted spellings of a setting.
    fn choice<T: Copy>(
        &self,
        value: &Spanned<String>,
        field: &str,
        what: &str,
        choices: &[(&str, T)],
    ) -> Result<T, MissionError> {
        choices
            .iter()
            .find(|(name, _)| *name == value.get_ref())
            .map(|(_, choice)| *choice)
            .ok_or_else(|| {
                let expected: Vec<&str> = choices.iter().map(|(name, _)| *name).collect();
                self.field_error(
                    value.span().start,
                    field,
                    format!(
                        "unknown {what} {:?} (expected {})",
                        value.get_ref(),
                        or_list(&expected)
                    ),
                )
            })
    }
}

/// `a, b or c`.
fn or_list(items: &[&str]) -> String {
    match items {
        [] => String::new(),
        [one] => (*one).to_owned(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

/// 1-based line and column (in characters) of a byte offset.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut line = 1;
    let mut column = 1;
    for (index, c) in text.char_indices() {
        if index >= offset {
            break;
        }
        if c == '\n' {
            line += 1;
            column = 1;
        } else {
            column += 1;
        }
    }
    (line, column)
}

/// The document as a tree of spans, only to name the field at an offset.
enum Node {
    Scalar,
    Array(Vec<Spanned<Node>>),
    Table(Vec<(Spanned<String>, Spanned<Node>)>),
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct NodeVisitor;

        impl<'de> Visitor<'de> for NodeVisitor {
            type Value = Node;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a TOML value")
            }

            fn visit_bool<E>(self, _: bool) -> Result<Node, E> {
                Ok(Node::Scalar)
            }

            fn visit_i64<E>(self, _: i64) -> Result<Node, E> {
                Ok(Node::Scalar)
            }

            fn visit_u64<E>(self, _: u64) -> Result<Node, E> {
                Ok(Node::Scalar)
            }

            fn visit_f64<E>(self, _: f64) -> Result<Node, E> {
                Ok(Node::Scalar)
            }

            fn visit_str<E>(self, _: &str) -> Result<Node, E> {
                Ok(Node::Scalar)
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(Node::Array(items))
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    entries.push(entry);
                }
                Ok(Node::Table(entries))
            }
        }

        deserializer.deserialize_any(NodeVisitor)
    }
}

/// The dotted name (`grant[2].ops`) of the key or value at `offset`, if the
/// text is valid TOML. Array elements are counted from 1.
fn field_at(text: &str, offset: usize) -> Option<String> {
    // Datetimes cannot be spanned; such a file gets messages without a field.
    let root: Node = toml::from_str(text).ok()?;
    let mut path = String::new();
    let mut node = &root;
    loop {
        match node {
            Node::Scalar => break,
            Node::Array(items) => {
                let Some((index, item)) = items
                    .iter()
                    .enumerate()
                    .find(|(_, item)| item.span().contains(&offset))
                else {
                    break;
                };
                path.push_str(&format!("[{}]", index + 1));
                node = item.get_ref();
            }
            Node::Table(entries) => {
                let mut next = None;
                for (key, value) in entries {
                    let on_key = key.span().contains(&offset);
                    if on_key || value.span().contains(&offset) {
                        if !path.is_empty() {
                            path.push('.');
                        }
                        path.push_str(key.get_ref());
                        if !on_key {
                            next = Some(value.get_ref());
                        }
                        break;
                    }
                }
                match next {
                    Some(value) => node = value,
                    None => break,
                }
            }
        }
    }
    (!path.is_empty()).then_some(path)
}

impl Mission {
    /// Reads and parses a mission file; `~` expands to `$HOME`.
    pub fn from_file(path: &Path) -> Result<Mission, MissionError> {
        let text = fs::read_to_string(path).map_err(|source| MissionError::Io {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Parses a mission; `source` names the file in messages and `~`
    /// expands to `$HOME`.
    pub fn parse(text: &str, source: &Path) -> Result<Mission, MissionError> {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        Self::parse_with_home(text, source, home.as_deref())
    }

    /// Parses a mission, expanding `~` to `home`: the caller decides whose
    /// home that is (under `sudo`, `$HOME` may be root's). A `~` with no
    /// home is an error.
    pub fn parse_with_home(
        text: &str,
        source: &Path,
        home: Option<&Path>,
    ) -> Result<Mission, MissionError> {
        let doc = Doc { text, source };
        let raw: RawFile = toml::from_str(text).map_err(|error| doc.toml_error(&error))?;

        let mission = raw
            .mission
            .ok_or_else(|| doc.field_error(0, "mission", "missing section"))?;
        let name = mission.get_ref().name.as_ref().ok_or_else(|| {
            doc.field_error(mission.span().start, "mission.name", "missing field")
        })?;
        if name.get_ref().trim().is_empty() {
            return Err(doc.field_error(name.span().start, "mission.name", "must not be empty"));
        }

        let grants = raw
            .grant
            .iter()
            .enumerate()
            .map(|(index, grant)| parse_grant(&doc, index + 1, grant, home))
            .collect::<Result<Vec<_>, _>>()?;

        let mut baseline = Baseline::default();
        if let Some(defaults) = &raw.defaults {
            if let Some(value) = &defaults.get_ref().baseline {
                baseline = doc.choice(
                    value,
                    "defaults.baseline",
                    "baseline",
                    &[("runtime", Baseline::Runtime), ("none", Baseline::None)],
                )?;
            }
        }

        Ok(Mission {
            name: name.get_ref().clone(),
            source: source.to_owned(),
            grants,
            baseline,
        })
    }
}

fn parse_grant(
    doc: &Doc<'_>,
    number: usize,
    grant: &Spanned<RawGrant>,
    home: Option<&Path>,
) -> Result<GrantSpec, MissionError> {
    let field = |name: &str| format!("grant[{number}].{name}");
    let raw = grant.get_ref();
    let start = grant.span().start;

    let path = raw
        .path
        .as_ref()
        .ok_or_else(|| doc.field_error(start, &field("path"), "missing field"))?;
    let path_error = |message: String| doc.field_error(path.span().start, &field("path"), message);
    let written = path.get_ref();
    if written.contains('\0') {
        return Err(path_error("must not contain a NUL byte".to_owned()));
    }
    let expanded = match written.strip_prefix('~') {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => {
            let home = home.ok_or_else(|| path_error("cannot expand ~: HOME is not set".into()))?;
            if !home.is_absolute() {
                return Err(path_error(format!(
                    "cannot expand ~: HOME is not absolute ({:?})",
                    home.display().to_string()
                )));
            }
            home.join(rest.trim_start_matches('/'))
        }
        _ => PathBuf::from(written),
    };
    if !expanded.is_absolute() {
        return Err(path_error(format!("must be absolute ({written:?})")));
    }

    let ops_list = raw
        .ops
        .as_ref()
        .ok_or_else(|| doc.field_error(start, &field("ops"), "missing field"))?;
    if ops_list.get_ref().is_empty() {
        return Err(doc.field_error(
            ops_list.span().start,
            &field("ops"),
            "must list at least one operation",
        ));
    }
    let mut bits = 0;
    for op in ops_list.get_ref() {
        bits |= doc.choice(
            op,
            &field("ops"),
            "operation",
            &ops::NAMES.map(|(bit, name)| (name, bit)),
        )?;
    }

    let extent = match &raw.extent {
        Some(value) => doc.choice(
            value,
            &field("extent"),
            "extent",
            &[("file", Extent::File), ("tree", Extent::Tree)],
        )?,
        None => Extent::default(),
    };

    Ok(GrantSpec {
        path: expanded,
        ops: bits,
        extent,
        line: line_column(doc.text, path.span().start).0,
    })
}

/// Collects map entries, merging those with the same key.
struct Entries<K> {
    entries: Vec<(K, GrantValue, Vec<String>)>,
    index: HashMap<K, usize>,
}

impl<K: Copy + Eq + Hash> Entries<K> {
    fn new() -> Self {
        Self {
            entries: Vec::new(),
            index: HashMap::new(),
        }
    }

    fn add(&mut self, key: K, value: GrantValue, reason: String) {
        match self.index.entry(key) {
            Entry::Occupied(slot) => {
                let (_, merged, reasons) = &mut self.entries[*slot.get()];
                merged.file_ops |= value.file_ops;
                merged.tree_ops |= value.tree_ops;
                reasons.push(reason);
            }
            Entry::Vacant(slot) => {
                slot.insert(self.entries.len());
                self.entries.push((key, value, vec![reason]));
            }
        }
    }

    fn finish(self) -> Vec<(K, GrantValue, Reason)> {
        self.entries
            .into_iter()
            .map(|(key, value, reasons)| (key, value, Reason(reasons.join("; "))))
            .collect()
    }
}

fn grant_key(slot: u32, metadata: &fs::Metadata) -> GrantKey {
    GrantKey {
        slot,
        _pad: 0,
        dev: kernel_dev(metadata.dev()),
        ino: metadata.ino(),
    }
}

impl Mission {
    /// Resolves the grants, and the baseline, to map entries for mission
    /// `slot`.
    ///
    /// A grant names an object: its path is followed through symbolic links
    /// and the object's identity is what the kernel checks, so renaming or
    /// linking it later does not change what is granted. A `file` grant whose
    /// path does not exist yet becomes a name grant on its (existing) parent
    /// directory, for an output the task will create; a `tree` grant needs an
    /// existing directory.
    pub fn resolve(&self, slot: u32) -> Result<ResolvedGrants, MissionError> {
        let mut inode = Entries::new();
        let mut names = Entries::new();
        for (index, grant) in self.grants.iter().enumerate() {
            self.resolve_grant(slot, index + 1, grant, &mut inode, &mut names)?;
        }
        if self.baseline == Baseline::Runtime {
            for (path, bits) in RUNTIME_BASELINE {
                let path = Path::new(path);
                let metadata = match fs::canonicalize(path).and_then(fs::metadata) {
                    Ok(metadata) => metadata,
                    Err(error) if error.kind() == io::ErrorKind::NotFound => continue,
                    Err(source) => {
                        return Err(MissionError::Baseline {
                            path: path.to_owned(),
                            source,
                        });
                    }
                };
                let value = if metadata.is_dir() {
                    GrantValue {
                        file_ops: 0,
                        tree_ops: *bits,
                    }
                } else {
                    GrantValue {
                        file_ops: *bits,
                        tree_ops: 0,
                    }
                };
                inode.add(
                    grant_key(slot, &metadata),
                    value,
                    format!("baseline runtime: {}", path.display()),
                );
            }
        }
        Ok(ResolvedGrants {
            inode: inode.finish(),
            names: names.finish(),
        })
    }

    fn resolve_grant(
        &self,
        slot: u32,
        number: usize,
        grant: &GrantSpec,
        inode: &mut Entries<GrantKey>,
        names: &mut Entries<NameGrantKey>,
    ) -> Result<(), MissionError> {
        let path = &grant.path;
        let rejected = |name: &str, message: String| MissionError::Rejected {
            mission: self.source.clone(),
            line: grant.line,
            field: format!("grant[{number}].{name}"),
            message,
        };
        let unresolvable = |target: &Path, source: io::Error| MissionError::Unresolvable {
            mission: self.source.clone(),
            line: grant.line,
            field: format!("grant[{number}].path"),
            path: target.to_owned(),
            source,
        };

        match fs::canonicalize(path).and_then(fs::metadata) {
            Ok(metadata) => {
                let value = match grant.extent {
                    Extent::File => GrantValue {
                        file_ops: grant.ops,
                        tree_ops: 0,
                    },
                    Extent::Tree if metadata.is_dir() => GrantValue {
                        file_ops: 0,
                        tree_ops: grant.ops,
                    },
                    Extent::Tree => {
                        return Err(rejected(
                            "extent",
                            format!(
                                "extent = \"tree\" needs an existing directory ({} is not one)",
                                path.display()
                            ),
                        ));
                    }
                };
                let reason = format!(
                    "mission line {}: {} ({}: {})",
                    grant.line,
                    path.display(),
                    grant.extent,
                    format_ops(grant.ops)
                );
                inode.add(grant_key(slot, &metadata), value, reason);
                Ok(())
            }
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                if grant.extent == Extent::Tree {
                    return Err(rejected(
                        "extent",
                        format!(
                            "extent = \"tree\" needs an existing directory ({} does not exist)",
                            path.display()
                        ),
                    ));
                }
                if fs::symlink_metadata(path).is_ok() {
                    return Err(rejected(
                        "path",
                        format!(
                            "{} is a symbolic link to a missing file: name the file it points to",
                            path.display()
                        ),
                    ));
                }
                let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
                    return Err(rejected(
                        "path",
                        format!("{} does not exist and names no file", path.display()),
                    ));
                };
                let name = name.as_bytes();
                if name.len() >= NAME_LEN {
                    return Err(rejected(
                        "path",
                        format!("file name is longer than {} bytes", NAME_LEN - 1),
                    ));
                }
                let parent_metadata = match fs::canonicalize(parent).and_then(fs::metadata) {
                    Ok(metadata) => metadata,
                    Err(error) if error.kind() == io::ErrorKind::NotFound => {
                        return Err(rejected(
                            "path",
                            format!("neither {} nor its parent directory exists", path.display()),
                        ));
                    }
                    Err(source) => return Err(unresolvable(parent, source)),
                };
                if !parent_metadata.is_dir() {
                    return Err(rejected(
                        "path",
                        format!("{} is not a directory", parent.display()),
                    ));
                }
                let parent_key = grant_key(slot, &parent_metadata);
                let mut key = NameGrantKey::zeroed();
                key.slot = slot;
                key.name_len = name.len() as u32;
                key.parent_dev = parent_key.dev;
                key.parent_ino = parent_key.ino;
                key.name[..name.len()].copy_from_slice(name);
                names.add(
                    key,
                    GrantValue {
                        file_ops: grant.ops,
                        tree_ops: 0,
                    },
                    format!(
                        "mission line {}: {} (file, not yet created: {})",
                        grant.line,
                        path.display(),
                        format_ops(grant.ops)
                    ),
                );
                Ok(())
            }
            Err(source) => Err(unresolvable(path, source)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    fn parse(text: &str) -> Result<Mission, MissionError> {
        Mission::parse_with_home(text, Path::new("m.toml"), Some(Path::new("/home/me")))
    }

    /// The position, field and message of an `Invalid` error.
    fn invalid(text: &str) -> (usize, usize, Option<String>, String) {
        match parse(text) {
            Err(MissionError::Invalid {
                line,
                column,
                field,
                message,
                ..
            }) => (line, column, field, message),
            other => panic!("expected an invalid mission, got {other:?}"),
        }
    }

    fn field(name: &str) -> Option<String> {
        Some(name.to_owned())
    }

    const GOOD: &str = r#"# What the agent may do.
[mission]
name = "fix the failing test"

[[grant]]
path = "/home/me/project"
ops = ["read", "write", "create"]
extent = "tree"

[[grant]]
path = "~/notes.txt"
ops = ["read"]

[[grant]]
path = "/usr/bin/cargo"
ops = ["exec", "read", "exec"]
extent = "file"

[defaults]
baseline = "none"
"#;

    #[test]
    fn parses_a_good_file() {
        let mission = parse(GOOD).unwrap();
        assert_eq!(
            mission,
            Mission {
                name: "fix the failing test".to_owned(),
                source: PathBuf::from("m.toml"),
                grants: vec![
                    GrantSpec {
                        path: PathBuf::from("/home/me/project"),
                        ops: ops::READ | ops::WRITE | ops::CREATE,
                        extent: Extent::Tree,
                        line: 6,
                    },
                    GrantSpec {
                        path: PathBuf::from("/home/me/notes.txt"),
                        ops: ops::READ,
                        extent: Extent::File,
                        line: 11,
                    },
                    GrantSpec {
                        path: PathBuf::from("/usr/bin/cargo"),
                        ops: ops::READ | ops::EXEC,
                        extent: Extent::File,
                        line: 15,
                    },
                ],
                baseline: Baseline::None,
            }
        );
    }

    #[test]
    fn defaults_and_no_grants() {
        let mission = parse("[mission]\nname = \"idle\"\n").unwrap();
        assert_eq!(mission.name, "idle");
        assert!(mission.grants.is_empty());
        assert_eq!(mission.baseline, Baseline::Runtime);
        let mission = parse("[mission]\nname = \"x\"\n[defaults]\n").unwrap();
        assert_eq!(mission.baseline, Baseline::Runtime);
    }

    #[test]
    fn accepts_inline_tables() {
        let text = "mission = { name = \"x\" }\ngrant = [{ path = \"/a\", ops = [\"read\"] }]\n";
        let mission = parse(text).unwrap();
        assert_eq!(mission.grants[0].path, Path::new("/a"));
        assert_eq!(mission.grants[0].line, 2);
    }

    #[test]
    fn expands_the_home_directory() {
        let grant = |path: &str| {
            let text =
                format!("[mission]\nname = \"x\"\n[[grant]]\npath = {path:?}\nops = [\"read\"]\n");
            parse(&text).map(|mission| mission.grants[0].path.clone())
        };
        assert_eq!(grant("~").unwrap(), Path::new("/home/me"));
        assert_eq!(grant("~/").unwrap(), Path::new("/home/me"));
        assert_eq!(grant("~/a/b").unwrap(), Path::new("/home/me/a/b"));
        // Only a leading `~` is special.
        assert_eq!(grant("/x/~/y").unwrap(), Path::new("/x/~/y"));
        // Lexically as written: no normalisation.
        assert_eq!(grant("/a/../b").unwrap(), Path::new("/a/../b"));
    }

    #[test]
    fn other_users_homes_are_not_expanded() {
        let text = "[mission]\nname = \"x\"\n[[grant]]\npath = \"~bob/x\"\nops = [\"read\"]\n";
        assert_eq!(
            invalid(text),
            (
                4,
                8,
                field("grant[1].path"),
                "must be absolute (\"~bob/x\")".to_owned()
            )
        );
    }

    #[test]
    fn tilde_without_a_home_is_an_error() {
        let text = "[mission]\nname = \"x\"\n[[grant]]\npath = \"~/x\"\nops = [\"read\"]\n";
        let error = Mission::parse_with_home(text, Path::new("m.toml"), None).unwrap_err();
        assert_eq!(
            error.to_string(),
            "m.toml:4:8: grant[1].path: cannot expand ~: HOME is not set"
        );
        let error = Mission::parse_with_home(text, Path::new("m.toml"), Some(Path::new("rel")))
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "m.toml:4:8: grant[1].path: cannot expand ~: HOME is not absolute (\"rel\")"
        );
    }

    #[test]
    fn unknown_operation() {
        let text = r#"[mission]
name = "m"

[[grant]]
path = "/a"
ops = ["read"]

[[grant]]
path = "/b"
ops = ["write", "raed"]
"#;
        assert_eq!(
            invalid(text),
            (
                10,
                17,
                field("grant[2].ops"),
                "unknown operation \"raed\" (expected read, write, create or exec)".to_owned()
            )
        );
        assert_eq!(
            parse(text).unwrap_err().to_string(),
            "m.toml:10:17: grant[2].ops: unknown operation \"raed\" \
             (expected read, write, create or exec)"
        );
    }

    #[test]
    fn missing_mission_name() {
        let text = "# no name\n\n[mission]\n\n[[grant]]\npath = \"/a\"\nops = [\"read\"]\n";
        assert_eq!(
            invalid(text),
            (3, 1, field("mission.name"), "missing field".to_owned())
        );
        assert_eq!(
            parse(text).unwrap_err().to_string(),
            "m.toml:3:1: mission.name: missing field"
        );
    }

    #[test]
    fn missing_mission_section() {
        let text = "[[grant]]\npath = \"/a\"\nops = [\"read\"]\n";
        assert_eq!(
            invalid(text),
            (1, 1, field("mission"), "missing section".to_owned())
        );
    }

    #[test]
    fn empty_mission_name() {
        assert_eq!(
            invalid("[mission]\nname = \"  \"\n"),
            (2, 8, field("mission.name"), "must not be empty".to_owned())
        );
    }

    #[test]
    fn relative_path() {
        let text = "[mission]\nname = \"m\"\n[[grant]]\nops = [\"read\"]\npath = \"src/x\"\n";
        assert_eq!(
            invalid(text),
            (
                5,
                8,
                field("grant[1].path"),
                "must be absolute (\"src/x\")".to_owned()
            )
        );
        let empty = "[mission]\nname = \"m\"\n[[grant]]\npath = \"\"\nops = [\"read\"]\n";
        assert_eq!(
            invalid(empty),
            (
                4,
                8,
                field("grant[1].path"),
                "must be absolute (\"\")".to_owned()
            )
        );
    }

    #[test]
    fn nul_in_path() {
        let text = "[mission]\nname = \"m\"\n[[grant]]\npath = \"/a\\u0000b\"\nops = [\"read\"]\n";
        assert_eq!(
            invalid(text),
            (
                4,
                8,
                field("grant[1].path"),
                "must not contain a NUL byte".to_owned()
            )
        );
    }

    #[test]
    fn syntax_error() {
        let text = "[mission]\nname = \"m\n";
        let (line, column, field, message) = invalid(text);
        assert_eq!((line, column, field), (2, 10, None));
        assert_eq!(message, "invalid basic string");
        assert_eq!(
            parse(text).unwrap_err().to_string(),
            "m.toml:2:10: invalid basic string"
        );
    }

    #[test]
    fn duplicate_key() {
        let text = "[mission]\nname = \"a\"\nname = \"b\"\n";
        assert_eq!(
            invalid(text),
            (
                3,
                1,
                None,
                "duplicate key `name` in table `mission`".to_owned()
            )
        );
    }

    #[test]
    fn duplicate_section() {
        let (line, column, field, message) = invalid("[mission]\nname = \"a\"\n[mission]\n");
        assert_eq!((line, column, field), (3, 1, None));
        assert_eq!(
            message,
            "invalid table header: duplicate key `mission` in document root"
        );
    }

    #[test]
    fn wrong_type_of_a_value() {
        assert_eq!(
            invalid("[mission]\nname = 3\n"),
            (
                2,
                8,
                field("mission.name"),
                "invalid type: integer `3`, expected a string".to_owned()
            )
        );
    }

    #[test]
    fn wrong_type_of_a_section() {
        assert_eq!(
            invalid("mission = \"x\"\n"),
            (
                1,
                11,
                field("mission"),
                "invalid type: string \"x\", expected a table".to_owned()
            )
        );
    }

    #[test]
    fn wrong_type_in_the_ops_list() {
        let text = "[mission]\nname = \"m\"\n[[grant]]\npath = \"/a\"\nops = [\"read\", 3]\n";
        assert_eq!(
            invalid(text),
            (
                5,
                16,
                field("grant[1].ops[2]"),
                "invalid type: integer `3`, expected a string".to_owned()
            )
        );
    }

    #[test]
    fn ops_must_be_a_list() {
        let text = "[mission]\nname = \"m\"\n[[grant]]\npath = \"/a\"\nops = \"read\"\n";
        assert_eq!(
            invalid(text),
            (
                5,
                7,
                field("grant[1].ops"),
                "invalid type: string \"read\", expected a sequence".to_owned()
            )
        );
    }

    #[test]
    fn empty_ops_list() {
        let text = "[mission]\nname = \"m\"\n[[grant]]\npath = \"/a\"\nops = []\n";
        assert_eq!(
            invalid(text),
            (
                5,
                7,
                field("grant[1].ops"),
                "must list at least one operation".to_owned()
            )
        );
    }

    #[test]
    fn missing_path_and_ops() {
        let no_path = "[mission]\nname = \"m\"\n\n[[grant]]\nops = [\"read\"]\n";
        assert_eq!(
            invalid(no_path),
            (4, 1, field("grant[1].path"), "missing field".to_owned())
        );
        let no_ops = "[mission]\nname = \"m\"\n\n[[grant]]\npath = \"/a\"\n";
        assert_eq!(
            invalid(no_ops),
            (4, 1, field("grant[1].ops"), "missing field".to_owned())
        );
    }

    #[test]
    fn unknown_extent() {
        let text = "[mission]\nname = \"m\"\n[[grant]]\npath = \"/a\"\nops = [\"read\"]\n\
                    extent = \"subtree\"\n";
        assert_eq!(
            invalid(text),
            (
                6,
                10,
                field("grant[1].extent"),
                "unknown extent \"subtree\" (expected file or tree)".to_owned()
            )
        );
    }

    #[test]
    fn unknown_baseline() {
        let text = "[mission]\nname = \"m\"\n[defaults]\nbaseline = \"all\"\n";
        assert_eq!(
            invalid(text),
            (
                4,
                12,
                field("defaults.baseline"),
                "unknown baseline \"all\" (expected runtime or none)".to_owned()
            )
        );
    }

    #[test]
    fn unknown_key_in_a_grant() {
        let text = "[mission]\nname = \"m\"\n[[grant]]\npath = \"/a\"\n[[grant]]\npath = \"/b\"\n\
                    opz = [\"read\"]\n";
        assert_eq!(
            invalid(text),
            (
                7,
                1,
                field("grant[2].opz"),
                "unknown field `opz`, expected one of `path`, `ops`, `extent`".to_owned()
            )
        );
    }

    #[test]
    fn unknown_keys_elsewhere() {
        let (line, column, field_name, message) =
            invalid("[mission]\nname = \"m\"\ngoal = \"x\"\n");
        assert_eq!((line, column, field_name), (3, 1, field("mission.goal")));
        assert!(message.starts_with("unknown field `goal`"), "{message}");

        let (line, column, field_name, _) =
            invalid("[mission]\nname = \"m\"\n[vote]\nquorum = 2\n");
        assert_eq!((line, column, field_name), (3, 2, field("vote")));

        let (line, column, field_name, _) =
            invalid("[mission]\nname = \"m\"\n[defaults]\non_unknown = \"deny\"\n");
        assert_eq!(
            (line, column, field_name),
            (4, 1, field("defaults.on_unknown"))
        );

        let (line, _, field_name, _) = invalid("name = \"m\"\n[mission]\nname = \"m\"\n");
        assert_eq!((line, field_name), (1, field("name")));
    }

    #[test]
    fn a_single_grant_table_gets_a_hint() {
        let text = "[mission]\nname = \"m\"\n[grant]\npath = \"/a\"\nops = [\"read\"]\n";
        let (line, column, field_name, message) = invalid(text);
        assert_eq!((line, column, field_name), (3, 1, field("grant")));
        assert_eq!(
            message,
            "invalid type: map, expected a sequence (write each grant as a [[grant]] table)"
        );
    }

    #[test]
    fn datetimes_are_named_as_such() {
        let (line, column, _, message) = invalid("[mission]\nname = 1979-05-27\n");
        assert_eq!((line, column), (2, 8));
        assert_eq!(message, "invalid type: datetime, expected a string");
    }

    #[test]
    fn columns_count_characters() {
        // "ü" is two bytes and one column: "bad" starts at column 32.
        let text = "grant = [{ path = \"/ü\", ops = [\"bad\"] }]\n[mission]\nname = \"m\"\n";
        let (line, column, field_name, _) = invalid(text);
        assert_eq!((line, column, field_name), (1, 32, field("grant[1].ops")));
    }

    #[test]
    fn line_and_column_of_offsets() {
        let text = "ab\nçd\n\nx";
        assert_eq!(line_column(text, 0), (1, 1));
        assert_eq!(line_column(text, 2), (1, 3));
        assert_eq!(line_column(text, 3), (2, 1));
        // After the two bytes of "ç": column 2.
        assert_eq!(line_column(text, 5), (2, 2));
        assert_eq!(line_column(text, 8), (4, 1));
        assert_eq!(line_column(text, 100), (4, 2));
    }

    #[test]
    fn reads_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.toml");
        fs::write(&path, "[mission]\nname = \"from a file\"\n").unwrap();
        let mission = Mission::from_file(&path).unwrap();
        assert_eq!(mission.name, "from a file");
        assert_eq!(mission.source, path);

        let missing = dir.path().join("missing.toml");
        let error = Mission::from_file(&missing).unwrap_err();
        assert!(matches!(error, MissionError::Io { ref path, .. } if *path == missing));
        assert_eq!(
            error.to_string(),
            format!("cannot read mission file {}", missing.display())
        );
    }

    #[test]
    fn error_messages_name_the_file() {
        let error = Mission::parse_with_home("[mission]\n", Path::new("/etc/pincer/m.toml"), None)
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "/etc/pincer/m.toml:1:1: mission.name: missing field"
        );
    }

    #[test]
    fn formats_ops() {
        assert_eq!(format_ops(0), "none");
        assert_eq!(format_ops(ops::READ | ops::EXEC), "read, exec");
        assert_eq!(format_ops(ops::ALL), "read, write, create, exec");
        assert_eq!(format_ops(ops::WRITE | 0x40), "write, 0x40");
    }

    // Resolution.

    /// A mission without baseline whose grants start on line 5.
    fn mission(grants: &str) -> Mission {
        let text = format!("[mission]\nname = \"t\"\n[defaults]\nbaseline = \"none\"\n{grants}");
        Mission::parse_with_home(&text, Path::new("m.toml"), None).unwrap()
    }

    fn grant(path: &Path, ops: &str, extent: &str) -> String {
        format!(
            "[[grant]]\npath = {:?}\nops = [{ops}]\nextent = \"{extent}\"\n",
            path.display().to_string()
        )
    }

    fn key_of(slot: u32, path: &Path) -> GrantKey {
        let metadata = fs::metadata(path).unwrap();
        GrantKey {
            slot,
            _pad: 0,
            dev: kernel_dev(metadata.dev()),
            ino: metadata.ino(),
        }
    }

    fn file_ops(bits: u32) -> GrantValue {
        GrantValue {
            file_ops: bits,
            tree_ops: 0,
        }
    }

    fn tree_ops(bits: u32) -> GrantValue {
        GrantValue {
            file_ops: 0,
            tree_ops: bits,
        }
    }

    #[test]
    fn resolves_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.txt");
        fs::write(&file, "a").unwrap();
        let resolved = mission(&grant(&file, "\"read\", \"write\"", "file"))
            .resolve(3)
            .unwrap();
        assert_eq!(
            resolved.inode,
            vec![(
                key_of(3, &file),
                file_ops(ops::READ | ops::WRITE),
                Reason(format!(
                    "mission line 6: {} (file: read, write)",
                    file.display()
                ))
            )]
        );
        assert!(resolved.names.is_empty());
    }

    #[test]
    fn resolves_a_tree() {
        let dir = tempfile::tempdir().unwrap();
        let resolved = mission(&grant(dir.path(), "\"read\"", "tree"))
            .resolve(1)
            .unwrap();
        assert_eq!(
            resolved.inode,
            vec![(
                key_of(1, dir.path()),
                tree_ops(ops::READ),
                Reason(format!(
                    "mission line 6: {} (tree: read)",
                    dir.path().display()
                ))
            )]
        );
    }

    #[test]
    fn a_directory_as_a_file_grants_only_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        let resolved = mission(&grant(dir.path(), "\"read\"", "file"))
            .resolve(1)
            .unwrap();
        assert_eq!(resolved.inode[0].1, file_ops(ops::READ));
    }

    #[test]
    fn a_missing_file_becomes_a_name_grant() {
        let dir = tempfile::tempdir().unwrap();
        let output = dir.path().join("report.md");
        let resolved = mission(&grant(&output, "\"write\", \"create\"", "file"))
            .resolve(2)
            .unwrap();
        assert!(resolved.inode.is_empty());
        let parent = key_of(2, dir.path());
        let mut name = [0u8; NAME_LEN];
        name[..9].copy_from_slice(b"report.md");
        assert_eq!(
            resolved.names,
            vec![(
                NameGrantKey {
                    slot: 2,
                    name_len: 9,
                    parent_dev: parent.dev,
                    parent_ino: parent.ino,
                    name,
                },
                file_ops(ops::WRITE | ops::CREATE),
                Reason(format!(
                    "mission line 6: {} (file, not yet created: write, create)",
                    output.display()
                ))
            )]
        );
    }

    #[test]
    fn a_name_grant_uses_the_real_parent() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        fs::create_dir(&real).unwrap();
        symlink(&real, dir.path().join("link")).unwrap();
        let resolved = mission(&grant(&dir.path().join("link/new"), "\"create\"", "file"))
            .resolve(1)
            .unwrap();
        let parent = key_of(1, &real);
        let (key, _, _) = &resolved.names[0];
        assert_eq!((key.parent_dev, key.parent_ino), (parent.dev, parent.ino));
        assert_eq!(&key.name[..4], b"new\0");
    }

    #[test]
    fn grants_on_the_same_object_merge() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.txt");
        fs::write(&file, "a").unwrap();
        let link = dir.path().join("link");
        symlink(&file, &link).unwrap();
        let out = dir.path().join("out");
        let grants = [
            grant(&file, "\"read\"", "file"),
            grant(&link, "\"write\"", "file"),
            grant(dir.path(), "\"read\"", "tree"),
            grant(dir.path(), "\"exec\"", "file"),
            grant(&out, "\"create\"", "file"),
            grant(&out, "\"write\"", "file"),
        ]
        .concat();
        let resolved = mission(&grants).resolve(1).unwrap();
        assert_eq!(resolved.inode.len(), 2);
        let (key, value, reason) = &resolved.inode[0];
        assert_eq!(*key, key_of(1, &file));
        assert_eq!(*value, file_ops(ops::READ | ops::WRITE));
        assert_eq!(
            reason.0,
            format!(
                "mission line 6: {} (file: read); mission line 10: {} (file: write)",
                file.display(),
                link.display()
            )
        );
        let (key, value, _) = &resolved.inode[1];
        assert_eq!(*key, key_of(1, dir.path()));
        assert_eq!(
            *value,
            GrantValue {
                file_ops: ops::EXEC,
                tree_ops: ops::READ
            }
        );
        assert_eq!(resolved.names.len(), 1);
        assert_eq!(resolved.names[0].1, file_ops(ops::CREATE | ops::WRITE));
        assert!(resolved.names[0].2.0.contains("; "));
    }

    #[test]
    fn a_symlink_grant_resolves_to_its_target() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        fs::create_dir(&target).unwrap();
        let link = dir.path().join("link");
        symlink(&target, &link).unwrap();
        let resolved = mission(&grant(&link, "\"read\"", "tree"))
            .resolve(1)
            .unwrap();
        assert_eq!(resolved.inode[0].0, key_of(1, &target));
        assert_ne!(
            resolved.inode[0].0.ino,
            fs::symlink_metadata(&link).unwrap().ino()
        );
    }

    #[test]
    fn a_tree_on_a_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.txt");
        fs::write(&file, "a").unwrap();
        let error = mission(&grant(&file, "\"read\"", "tree"))
            .resolve(1)
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            format!(
                "m.toml:6: grant[1].extent: extent = \"tree\" needs an existing directory \
                 ({} is not one)",
                file.display()
            )
        );
    }

    #[test]
    fn a_tree_on_a_missing_path_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing");
        let grants = [
            grant(dir.path(), "\"read\"", "tree"),
            grant(&missing, "\"read\"", "tree"),
        ]
        .concat();
        let error = mission(&grants).resolve(1).unwrap_err();
        assert!(
            matches!(
                error,
                MissionError::Rejected { line: 10, ref field, .. } if field == "grant[2].extent"
            ),
            "{error}"
        );
        assert!(error.to_string().ends_with("does not exist)"), "{error}");
    }

    #[test]
    fn a_missing_parent_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("no/such.txt");
        let error = mission(&grant(&path, "\"create\"", "file"))
            .resolve(1)
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            format!(
                "m.toml:6: grant[1].path: neither {} nor its parent directory exists",
                path.display()
            )
        );
    }

    #[test]
    fn a_file_as_parent_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.txt");
        fs::write(&file, "a").unwrap();
        let error = mission(&grant(&file.join("b"), "\"create\"", "file"))
            .resolve(1)
            .unwrap_err();
        // The lookup itself fails (ENOTDIR), not only the parent check.
        assert!(
            matches!(error, MissionError::Unresolvable { line: 6, ref path, .. } if *path == file.join("b")),
            "{error:?}"
        );
    }

    #[test]
    fn a_dangling_symlink_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("link");
        symlink(dir.path().join("nowhere"), &link).unwrap();
        let error = mission(&grant(&link, "\"write\"", "file"))
            .resolve(1)
            .unwrap_err();
        assert!(
            matches!(error, MissionError::Rejected { ref field, .. } if field == "grant[1].path"),
            "{error}"
        );
        assert!(error.to_string().contains("symbolic link"), "{error}");
    }

    #[test]
    fn a_name_longer_than_255_bytes_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let longest = dir.path().join("x".repeat(255));
        let resolved = mission(&grant(&longest, "\"create\"", "file"))
            .resolve(1)
            .unwrap();
        assert_eq!(resolved.names[0].0.name_len, 255);
        assert_eq!(resolved.names[0].0.name[255], 0);

        // The kernel refuses the name too, so canonicalize reports it.
        let too_long = dir.path().join("x".repeat(256));
        let error = mission(&grant(&too_long, "\"create\"", "file"))
            .resolve(1)
            .unwrap_err();
        assert!(
            matches!(
                error,
                MissionError::Rejected { .. } | MissionError::Unresolvable { .. }
            ),
            "{error:?}"
        );
    }

    #[test]
    fn the_runtime_baseline() {
        let mut mission = mission("");
        assert!(mission.resolve(1).unwrap().inode.is_empty());

        mission.baseline = Baseline::Runtime;
        let resolved = mission.resolve(1).unwrap();
        assert!(resolved.names.is_empty());
        let value_of = |path: &str| {
            let key = key_of(1, Path::new(path));
            resolved
                .inode
                .iter()
                .find(|(candidate, _, _)| *candidate == key)
                .map(|(_, value, reason)| (*value, reason.0.clone()))
                .unwrap()
        };
        assert_eq!(
            value_of("/usr"),
            (
                tree_ops(ops::READ | ops::EXEC),
                "baseline runtime: /usr".to_owned()
            )
        );
        assert_eq!(value_of("/proc").0, tree_ops(ops::READ));
        assert_eq!(value_of("/dev/null").0, file_ops(ops::READ | ops::WRITE));
        assert_eq!(value_of("/dev/urandom").0, file_ops(ops::READ));
        assert_eq!(value_of("/etc/passwd").0, file_ops(ops::READ));
        // Never more than the list, whatever exists on this machine.
        assert!(resolved.inode.len() <= RUNTIME_BASELINE.len());
        // /etc itself is not granted.
        let etc = key_of(1, Path::new("/etc"));
        assert!(resolved.inode.iter().all(|(key, _, _)| *key != etc));
    }

    #[test]
    fn baseline_and_mission_merge() {
        let mut mission = mission(&grant(Path::new("/dev/null"), "\"exec\"", "file"));
        mission.baseline = Baseline::Runtime;
        let resolved = mission.resolve(1).unwrap();
        let key = key_of(1, Path::new("/dev/null"));
        let (_, value, reason) = resolved.inode.iter().find(|(k, _, _)| *k == key).unwrap();
        assert_eq!(*value, file_ops(ops::READ | ops::WRITE | ops::EXEC));
        assert_eq!(
            reason.0,
            "mission line 6: /dev/null (file: exec); baseline runtime: /dev/null"
        );
    }
}
