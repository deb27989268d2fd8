//! Resolving a mission's grants to the kernel identities (device and inode)
//! the BPF programs check, as entries of the grant maps.

use std::{
    collections::{HashMap, hash_map::Entry},
    ffi::OsString,
    fmt, fs,
    hash::Hash,
    io,
    os::unix::{ffi::OsStrExt, fs::MetadataExt},
    path::{Component, Path, PathBuf},
};

use pincer_common::{
    Action, GrantKey, GrantValue, Label, NAME_LEN, NameGrantKey, ObjectKey, PrefixName, kernel_dev,
    label_flags, ops,
};

use super::{
    baseline::{RUNTIME_BASELINE, expand},
    model::{ActionSpec, Baseline, GrantSpec, Mission, MissionError, RunGrant, SourceSpec},
};
use crate::vote::Extent;

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
    /// Entries of [`pincer_common::names::PREFIXES`]: every name in a
    /// directory that starts with given bytes. Each value carries the ops
    /// of the shorter prefixes of the same directory it starts with, as the
    /// trie answers with the longest one only.
    pub prefixes: Vec<(PrefixKey, GrantValue, Reason)>,
    /// Labels of the `[[source]]` objects (a directory's whole tree as it
    /// is now; what is made in it later is labelled by the programs), with
    /// their paths, which name them in taint chains.
    pub sources: Vec<(ObjectKey, Label, PathBuf)>,
    /// Entries of [`pincer_common::names::ACTIONS`], with their paths.
    pub actions: Vec<(GrantKey, Action, PathBuf)>,
}

/// The most objects one `[[source]]` labels when the mission is loaded: a
/// larger tree is refused rather than half labelled.
pub const MAX_SOURCE_OBJECTS: usize = 65_536;

/// A prefix grant's key in the trie: its bit count and its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PrefixKey {
    /// [`PrefixName::bits`] of the prefix's length.
    pub bits: u32,
    /// Slot, directory and prefix.
    pub name: PrefixName,
}

impl PrefixKey {
    /// The prefix's length in bytes.
    pub fn prefix_len(&self) -> usize {
        ((self.bits - pincer_common::PREFIX_HEADER_BITS) / 8) as usize
    }

    /// Its slot.
    pub fn slot(&self) -> u32 {
        u32::from_ne_bytes(self.name.slot)
    }

    /// The key of its first `len` bytes in the same directory.
    fn shortened(&self, len: usize) -> Self {
        let mut name = self.name;
        name.name[len..].fill(0);
        Self {
            bits: PrefixName::bits(len),
            name,
        }
    }
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

/// Collects map entries, merging those with the same key.
pub(super) struct Entries<K> {
    entries: Vec<(K, GrantValue, Vec<String>)>,
    index: HashMap<K, usize>,
}

impl<K: Copy + Eq + Hash> Entries<K> {
    pub(super) fn new() -> Self {
        Self {
            entries: Vec::new(),
            index: HashMap::new(),
        }
    }

    pub(super) fn add(&mut self, key: K, value: GrantValue, reason: String) {
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

pub(super) fn grant_key(slot: u32, metadata: &fs::Metadata) -> GrantKey {
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
        self.resolve_with(slot, &[])
    }

    /// Like [`Mission::resolve`], with the grants a run adds for its own
    /// command (its private temporary directory, its terminal).
    pub fn resolve_with(
        &self,
        slot: u32,
        run: &[RunGrant],
    ) -> Result<ResolvedGrants, MissionError> {
        let mut inode = Entries::new();
        let mut names = Entries::new();
        let mut prefixes = Entries::new();
        let mission = Origin {
            file: &self.source,
            label: "mission".to_owned(),
        };
        let profiles = self.profiles.iter().map(|profile| {
            let origin = Origin {
                file: &profile.source,
                label: format!("profile {}", profile.name),
            };
            (origin, &profile.grants)
        });
        for (origin, grants) in std::iter::once((mission, &self.grants)).chain(profiles) {
            for (index, grant) in grants.iter().enumerate() {
                resolve_grant(
                    &origin,
                    slot,
                    index + 1,
                    grant,
                    &mut inode,
                    &mut names,
                    &mut prefixes,
                )?;
            }
        }
        if self.baseline == Baseline::Runtime {
            add_runtime(slot, &mut inode)?;
        }
        for grant in run {
            let reason = format!(
                "run: {} {} ({}: {})",
                grant.what,
                grant.path.display(),
                grant.extent,
                format_ops(grant.ops)
            );
            add_existing(
                slot,
                &grant.path,
                grant.ops,
                grant.extent,
                &reason,
                &mut inode,
            )
            .map_err(|source| MissionError::RunGrant {
                what: grant.what,
                path: grant.path.clone(),
                source,
            })?;
        }
        let names = names.finish();
        let prefixes = with_shorter_prefixes(prefixes.finish());
        let mut sources = Vec::new();
        for (index, source) in self.sources.iter().enumerate() {
            // Numbered in the file that declares it, as its messages say.
            let number = 1 + self.sources[..index]
                .iter()
                .filter(|earlier| earlier.file == source.file)
                .count();
            resolve_source(&self.source, number, source, &mut sources)?;
        }
        let actions = self
            .actions
            .iter()
            .enumerate()
            .map(|(index, action)| resolve_action(&self.source, slot, index + 1, action))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ResolvedGrants {
            inode: inode.finish(),
            names,
            prefixes,
            sources,
            actions,
        })
    }
}

/// Labels a `[[source]]` (numbered from 1) and, for a directory, every
/// object below it, without following symbolic links: content of the
/// source's authority, which lowers its readers to it. A directory is a
/// source tree: what is made in it later is a source too.
fn resolve_source(
    mission: &Path,
    number: usize,
    source: &SourceSpec,
    into: &mut Vec<(ObjectKey, Label, PathBuf)>,
) -> Result<(), MissionError> {
    let field = format!("source[{number}].path");
    // A source of the daemon's configuration is that file's to answer for.
    let mission = source.file.as_deref().unwrap_or(mission);
    let unresolvable = |path: &Path, error: io::Error| MissionError::Unresolvable {
        mission: mission.to_owned(),
        line: source.line,
        field: field.clone(),
        path: path.to_owned(),
        source: error,
    };
    let root = fs::canonicalize(&source.path).map_err(|e| unresolvable(&source.path, e))?;
    // Revoked by its path: every object below gets the source's id, and the
    // twin stamps it with the source's counter when it writes the label.
    let origin = pincer_common::source_id(root.as_os_str().as_bytes());
    let mut count = 0;
    for entry in walkdir::WalkDir::new(&root).follow_links(false) {
        let entry = entry.map_err(|error| {
            let path = error.path().unwrap_or(&root).to_owned();
            unresolvable(&path, error.into())
        })?;
        let kind = entry.file_type();
        if kind.is_symlink() {
            // Decisions are made on what a link points to.
            continue;
        }
        count += 1;
        if count > MAX_SOURCE_OBJECTS {
            return Err(MissionError::Rejected {
                mission: mission.to_owned(),
                line: source.line,
                field,
                message: format!(
                    "{} holds more than {MAX_SOURCE_OBJECTS} objects: name a smaller tree",
                    root.display()
                ),
            });
        }
        let metadata = entry
            .metadata()
            .map_err(|error| unresolvable(entry.path(), error.into()))?;
        let flags = if kind.is_dir() {
            label_flags::SOURCE | label_flags::TREE
        } else {
            label_flags::SOURCE
        };
        let key = ObjectKey {
            dev: kernel_dev(metadata.dev()),
            ino: metadata.ino(),
        };
        let label = Label {
            authority: source.authority,
            flags,
            generation: crate::labels::generation(entry.path()).unwrap_or(0),
            taint: source.authority,
            agent: 0,
            origins: pincer_common::Origins::one(origin, 0),
        };
        into.push((key, label, entry.path().to_owned()));
    }
    Ok(())
}

/// An `[[action]]` (numbered from 1) as its map entry: the object its path
/// names now, symbolic links followed.
fn resolve_action(
    mission: &Path,
    slot: u32,
    number: usize,
    action: &ActionSpec,
) -> Result<(GrantKey, Action, PathBuf), MissionError> {
    let target = fs::canonicalize(&action.path).and_then(|target| {
        let metadata = fs::metadata(&target)?;
        Ok((target, metadata))
    });
    let (target, metadata) = target.map_err(|error| MissionError::Unresolvable {
        mission: mission.to_owned(),
        line: action.line,
        field: format!("action[{number}].path"),
        path: action.path.clone(),
        source: error,
    })?;
    let value = Action {
        ops: action.ops,
        authority: action.authority,
    };
    Ok((grant_key(slot, &metadata), value, target))
}

/// Where a grant was written, for its messages and reasons.
struct Origin<'a> {
    /// The file (a mission, or a profile).
    file: &'a Path,
    /// `mission`, or `profile <name>`.
    label: String,
}

fn resolve_grant(
    origin: &Origin<'_>,
    slot: u32,
    number: usize,
    grant: &GrantSpec,
    inode: &mut Entries<GrantKey>,
    names: &mut Entries<NameGrantKey>,
    prefixes: &mut Entries<PrefixKey>,
) -> Result<(), MissionError> {
    let path = &grant.path;
    let rejected = |name: &str, message: String| MissionError::Rejected {
        mission: origin.file.to_owned(),
        line: grant.line,
        field: format!("grant[{number}].{name}"),
        message,
    };
    let unresolvable = |target: &Path, source: io::Error| MissionError::Unresolvable {
        mission: origin.file.to_owned(),
        line: grant.line,
        field: format!("grant[{number}].path"),
        path: target.to_owned(),
        source,
    };
    let label = format!("{} line {}", origin.label, grant.line);

    // An installation the program may have elsewhere: what is not there is
    // not granted, rather than an error (a prefix grant needs its directory).
    if grant.optional {
        let needed = match grant.prefix() {
            Some(_) => path.parent().unwrap_or(path),
            None => path,
        };
        if matches!(fs::metadata(needed), Err(error) if error.kind() == io::ErrorKind::NotFound) {
            return Ok(());
        }
    }

    if let Some(prefix) = grant.prefix() {
        return add_prefix(slot, grant, prefix, &label, prefixes)
            .map_err(|(target, source)| unresolvable(&target, source));
    }
    add_links(slot, path, &format!("{label}: {}", path.display()), inode)
        .map_err(|source| unresolvable(path, source))?;
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
                "{label}: {} ({}: {})",
                path.display(),
                grant.extent,
                format_ops(grant.ops)
            );
            inode.add(grant_key(slot, &metadata), value, reason);
            Ok(())
        }
        // A directory `pincer run` makes: nothing to grant until then
        // (`pincer mission check` shows it missing).
        Err(error) if error.kind() == io::ErrorKind::NotFound && grant.make => Ok(()),
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
                    "{label}: {} (file, not yet created: {})",
                    path.display(),
                    format_ops(grant.ops)
                ),
            );
            Ok(())
        }
        Err(source) => Err(unresolvable(path, source)),
    }
}

/// Adds a prefix grant: every name of the grant's existing directory that
/// starts with `prefix`.
fn add_prefix(
    slot: u32,
    grant: &GrantSpec,
    prefix: &[u8],
    label: &str,
    prefixes: &mut Entries<PrefixKey>,
) -> Result<(), (PathBuf, io::Error)> {
    let directory = grant.path.parent().unwrap_or(Path::new("/"));
    let metadata = fs::canonicalize(directory)
        .and_then(fs::metadata)
        .map_err(|e| (directory.to_owned(), e))?;
    if !metadata.is_dir() {
        let error = io::Error::from(io::ErrorKind::NotADirectory);
        return Err((directory.to_owned(), error));
    }
    let parent = grant_key(slot, &metadata);
    prefixes.add(
        PrefixKey {
            bits: PrefixName::bits(prefix.len()),
            name: PrefixName::new(slot, parent.dev, parent.ino, prefix),
        },
        GrantValue {
            file_ops: grant.ops,
            tree_ops: 0,
        },
        format!(
            "{label}: {} (names starting so: {})",
            grant.path.display(),
            format_ops(grant.ops)
        ),
    );
    Ok(())
}

/// Gives each prefix grant the ops of the shorter ones of its directory
/// that it starts with (`.tmp*` for `.tmp.x*`): the trie answers a lookup
/// with the longest match only.
fn with_shorter_prefixes(
    prefixes: Vec<(PrefixKey, GrantValue, Reason)>,
) -> Vec<(PrefixKey, GrantValue, Reason)> {
    let ops: HashMap<PrefixKey, u32> = prefixes
        .iter()
        .map(|(key, value, _)| (*key, value.file_ops))
        .collect();
    prefixes
        .into_iter()
        .map(|(key, mut value, reason)| {
            for len in 0..key.prefix_len() {
                if let Some(shorter) = ops.get(&key.shortened(len)) {
                    value.file_ops |= shorter;
                }
            }
            (key, value, reason)
        })
        .collect()
}

/// Adds the entries of [`RUNTIME_BASELINE`] that exist on this machine for
/// mission `slot`: a `tree` entry that is a directory as a tree, anything
/// else as the object itself; and the links on the way to each for reading.
fn add_runtime(slot: u32, inode: &mut Entries<GrantKey>) -> Result<(), MissionError> {
    for entry in RUNTIME_BASELINE.iter() {
        for path in expand(&entry.path) {
            let reason = format!("baseline runtime: {}", path.display());
            add_existing(slot, &path, entry.ops, entry.extent, &reason, inode).map_err(
                |source| MissionError::Baseline {
                    path: path.clone(),
                    source,
                },
            )?;
        }
    }
    Ok(())
}

/// Grants `bits` on the object at `path`, when it exists (a missing one is
/// skipped): a directory as a tree when `extent` says so, anything else as
/// the object itself; and the links on the way to it for reading.
fn add_existing(
    slot: u32,
    path: &Path,
    bits: u32,
    extent: Extent,
    reason: &str,
    inode: &mut Entries<GrantKey>,
) -> io::Result<()> {
    let metadata = match fs::canonicalize(path).and_then(fs::metadata) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(error),
    };
    let value = if extent == Extent::Tree && metadata.is_dir() {
        GrantValue {
            file_ops: 0,
            tree_ops: bits,
        }
    } else {
        GrantValue {
            file_ops: bits,
            tree_ops: 0,
        }
    };
    add_links(slot, path, reason, inode)?;
    inode.add(grant_key(slot, &metadata), value, reason.to_owned());
    Ok(())
}

/// Grants reading the symbolic links met while `path` is resolved (the
/// links themselves: `readlink` needs `read` on a link), for a grant whose
/// reason is `reason`.
fn add_links(
    slot: u32,
    path: &Path,
    reason: &str,
    inode: &mut Entries<GrantKey>,
) -> io::Result<()> {
    for (link, metadata) in links_on_path(path)? {
        inode.add(
            grant_key(slot, &metadata),
            GrantValue {
                file_ops: ops::READ,
                tree_ops: 0,
            },
            format!("{reason} (the symbolic link {} on its way)", link.display()),
        );
    }
    Ok(())
}

/// The kernel's limit on symbolic links followed in one lookup.
const MAX_LINKS: usize = 40;

/// The symbolic links met while an absolute `path` is resolved, in the order
/// they are met, each with its own metadata (not its target's). Stops
/// quietly where the path no longer exists.
pub(super) fn links_on_path(path: &Path) -> io::Result<Vec<(PathBuf, fs::Metadata)>> {
    let mut links = Vec::new();
    let mut resolved = PathBuf::from("/");
    // Components still to resolve, the next one last.
    let mut todo = stacked(path);
    while let Some(name) = todo.pop() {
        if name == ".." {
            resolved.pop();
            continue;
        }
        let candidate = resolved.join(&name);
        let metadata = match fs::symlink_metadata(&candidate) {
            Ok(metadata) => metadata,
            Err(error) if error.kind() == io::ErrorKind::NotFound => break,
            Err(error) => return Err(error),
        };
        if !metadata.file_type().is_symlink() {
            resolved = candidate;
            continue;
        }
        if links.len() == MAX_LINKS {
            return Err(io::Error::from_raw_os_error(libc::ELOOP));
        }
        shared_link(&resolved, &candidate, &metadata)?;
        let target = fs::read_link(&candidate)?;
        links.push((candidate, metadata));
        if target.is_absolute() {
            resolved = PathBuf::from("/");
        }
        todo.extend(stacked(&target));
    }
    Ok(links)
}

/// Refuses to follow `link` in `dir` when another user could have put it
/// there for the loader to follow: `dir` is sticky and world-writable (a
/// shared `/tmp`) and the link is neither the directory owner's nor the
/// loader's. The kernel's `fs.protected_symlinks` rule, kept whatever that
/// setting is, so that a per-user name like `/tmp/cc-daemon-{uid}` taken
/// first by another user never turns a grant onto that user's choice.
fn shared_link(dir: &Path, link: &Path, metadata: &fs::Metadata) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let parent = fs::metadata(dir)?;
    let shared = libc::S_ISVTX | libc::S_IWOTH;
    let loader = nix::unistd::geteuid().as_raw();
    if parent.mode() & shared != shared
        || metadata.uid() == parent.uid()
        || metadata.uid() == loader
    {
        return Ok(());
    }
    Err(io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!(
            "{} is a symbolic link of user {} in the shared directory {}: not followed",
            link.display(),
            metadata.uid(),
            dir.display()
        ),
    ))
}

/// The names of a path to resolve one by one, the first one last.
fn stacked(path: &Path) -> Vec<OsString> {
    path.components()
        .rev()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name.to_owned()),
            Component::ParentDir => Some("..".into()),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .collect()
}

#[cfg(test)]
pub(super) mod tests;
