//! The policy set: what in a tree is the agent's work and what is the
//! owner's, because a tool obeys it later.
//!
//! The set is a few rules by structure (`policy.toml` beside this file,
//! each with its class and reason): names that start with a dot are
//! configuration, git's metadata is the owner's but for what git's
//! ordinary work writes, agents' instruction names hold everywhere, start-up
//! code of interpreters is the owner's, and what tools make and remake is
//! work. Missions and the daemon configuration add patterns
//! (`[labels] policy = [...]`).
//!
//! A pattern names objects by a name or the start of one (`CLAUDE.md`,
//! `.*`), by a name in a directory of a given name (`.git/config`,
//! `site-packages/*.pth`), or by path (`/etc/pincer/`, `~/.bashrc`), and
//! says what of them it protects ([`Protects`]). The programs match names
//! on every change an agent makes ([`rules`]); paths are resolved when
//! pincer starts, and their objects labelled policy by identity
//! ([`PolicySet::objects`]), as are the targets of links a policy name
//! points through ([`links`]).

pub mod links;
pub mod rules;

use std::{
    path::{Path, PathBuf},
    sync::LazyLock,
};

use pincer_common::{
    MAX_POLICY_NAME, ObjectKey, POLICY_SUFFIX_LEN, label_flags, policy_name_hash_of, policy_rule,
};
use serde::Deserialize;

pub use self::rules::{Classifier, KernelRules, Placed};
use crate::toml_file::fields::check_names_files;

/// What of a matching object a rule protects (bits of
/// [`pincer_common::policy_rule`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Protects(pub u32);

impl Protects {
    /// An existing object and a new one of that name: what a pattern a
    /// mission adds protects.
    pub const NAMED: Protects = Protects(policy_rule::OBJECT | policy_rule::NEW);
    /// A directory, a new one, and everything below it: what a pattern with
    /// a trailing `/` protects.
    pub const TREE: Protects = Protects(policy_rule::OBJECT | policy_rule::NEW | policy_rule::TREE);

    /// Whether everything below is protected.
    pub fn tree(self) -> bool {
        self.0 & policy_rule::TREE != 0
    }

    /// Whether it makes its objects work rather than policy.
    pub fn work(self) -> bool {
        self.0 & policy_rule::WORK != 0
    }

    /// The words `policy.toml` and the documentation use.
    pub fn words(self) -> Vec<&'static str> {
        policy_rule::NAMES
            .into_iter()
            .filter(|(bit, _)| self.0 & bit != 0)
            .map(|(_, word)| word)
            .collect()
    }

    /// Reads the words back.
    fn from_words(words: &[String]) -> Result<Protects, String> {
        let mut bits = 0;
        for word in words {
            let Some((bit, _)) = policy_rule::NAMES.iter().find(|(_, w)| w == word) else {
                return Err(format!("unknown {word:?}"));
            };
            bits |= bit;
        }
        let protects = Protects(bits);
        if protects.work() && bits != policy_rule::WORK {
            return Err("`work` stands alone".to_owned());
        }
        if bits & (policy_rule::OBJECT | policy_rule::NEW | policy_rule::WORK) == 0 {
            return Err("protects neither an object, a new one, nor work".to_owned());
        }
        Ok(protects)
    }
}

/// How a pattern's name matches a name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NameMatch {
    /// The name itself.
    Exact(String),
    /// Every name that starts with these bytes (`.*`, `index*`).
    Prefix(String),
    /// Every name that ends with these bytes (`*.pth`).
    Suffix(String),
}

impl NameMatch {
    /// The match as written.
    fn text(&self) -> String {
        match self {
            NameMatch::Exact(name) => name.clone(),
            NameMatch::Prefix(start) => format!("{start}*"),
            NameMatch::Suffix(end) => format!("*{end}"),
        }
    }

    /// Whether `name` matches.
    pub fn matches(&self, name: &[u8]) -> bool {
        match self {
            NameMatch::Exact(exact) => name == exact.as_bytes(),
            NameMatch::Prefix(start) => name.starts_with(start.as_bytes()),
            NameMatch::Suffix(end) => name.ends_with(end.as_bytes()),
        }
    }
}

/// Where a pattern finds its objects.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Place {
    /// A name, in any directory.
    Name(NameMatch),
    /// A name in a directory of a given name.
    InDir {
        /// The directory's name.
        dir: String,
        /// The name.
        name: NameMatch,
    },
    /// An absolute path (a leading `~` expanded).
    Path(PathBuf),
}

/// One pattern of the policy set.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PolicyPattern {
    /// Where its objects are.
    pub place: Place,
    /// What of them it protects.
    pub protects: Protects,
}

impl PolicyPattern {
    /// Reads a pattern as missions and configurations write it: a name, a
    /// name's start (`name*`), a `dir/name` (`dir/start*`, `dir/*end`), or
    /// an absolute (or `~/`) path; a trailing `/` protects everything
    /// below. `home` expands `~`.
    pub fn parse(text: &str, home: Option<&Path>) -> Result<PolicyPattern, String> {
        let (body, tree) = match text.strip_suffix('/') {
            Some(body) if !body.is_empty() => (body, true),
            _ => (text, false),
        };
        let protects = if tree {
            Protects::TREE
        } else {
            Protects::NAMED
        };
        check_names_files(body)?;
        if body.contains("{uid}") {
            // Only a mission knows whose id it is; elsewhere it would name
            // a directory nobody has.
            return Err(format!(
                "\"{{uid}}\" is expanded only in missions ({body:?})"
            ));
        }
        let place = if body == "~" || body.starts_with("~/") {
            let home = home.ok_or("cannot expand ~: HOME is not set")?;
            Place::Path(home.join(body.trim_start_matches('~').trim_start_matches('/')))
        } else if body.starts_with('~') {
            return Err(format!(
                "only \"~\" and \"~/...\" are expanded, not {body:?}"
            ));
        } else if body.starts_with('/') {
            if body.split('/').any(|part| part == "..") {
                return Err(format!("must not contain \"..\" ({body:?})"));
            }
            if body.contains('*') {
                return Err(format!("a path is one object: no `*` ({body:?})"));
            }
            Place::Path(PathBuf::from(body))
        } else {
            let parts: Vec<&str> = body.split('/').collect();
            if parts.iter().any(|part| part.is_empty()) {
                return Err("\"\" is not a name".to_owned());
            }
            match parts.as_slice() {
                [name] => Place::Name(name_match(name)?),
                [dir, name] => {
                    check_name(dir)?;
                    Place::InDir {
                        dir: (*dir).to_owned(),
                        name: name_match(name)?,
                    }
                }
                _ => {
                    return Err(format!(
                        "a name, a directory's name and a name in it, or an absolute path (not {body:?}: the programs compare at most two names)"
                    ));
                }
            }
        };
        Ok(PolicyPattern { place, protects })
    }

    /// The pattern as written.
    pub fn text(&self) -> String {
        let (body, prefix) = match &self.place {
            Place::Name(name) => (name.text(), matches!(name, NameMatch::Prefix(_))),
            Place::InDir { dir, name } => (
                format!("{dir}/{}", name.text()),
                matches!(name, NameMatch::Prefix(_)),
            ),
            Place::Path(path) => (path.display().to_string(), false),
        };
        if self.protects.tree() && !prefix {
            format!("{body}/")
        } else {
            body
        }
    }
}

/// A name of a pattern: exact, a start (`start*`) or an end (`*end`).
fn name_match(text: &str) -> Result<NameMatch, String> {
    if let Some(start) = text.strip_suffix('*') {
        if start.is_empty() {
            return Err("`*` alone matches every name: name its start or end".to_owned());
        }
        check_part(start)?;
        if start.len() > MAX_POLICY_NAME {
            return Err(format!("{start:?} is longer than {MAX_POLICY_NAME} bytes"));
        }
        return Ok(NameMatch::Prefix(start.to_owned()));
    }
    if let Some(end) = text.strip_prefix('*') {
        check_part(end)?;
        if end.len() > POLICY_SUFFIX_LEN {
            return Err(format!(
                "the end of a name matches up to {POLICY_SUFFIX_LEN} bytes, not {end:?}"
            ));
        }
        return Ok(NameMatch::Suffix(end.to_owned()));
    }
    check_name(text)?;
    Ok(NameMatch::Exact(text.to_owned()))
}

/// Bytes of a name a pattern may hold: not empty, no `/` and no other `*`.
fn check_part(part: &str) -> Result<(), String> {
    if part.is_empty() || part.contains('*') {
        return Err(format!("{part:?} is not a name, its start or its end"));
    }
    Ok(())
}

/// A name the programs can compare whole: not empty, no `/` or `*`, not
/// `.` or `..`, short enough.
fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name == "." || name == ".." || name.contains('*') {
        return Err(format!("{name:?} is not a name"));
    }
    if policy_name_hash_of(name.as_bytes()).is_none() {
        return Err(format!("{name:?} is longer than {MAX_POLICY_NAME} bytes"));
    }
    Ok(())
}

/// A class of the default set: what its rules cover, and why.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyClass {
    /// Its name (`instructions`, `git`, ...).
    pub name: String,
    /// What it is, in a few words.
    pub is: String,
    /// Why its objects are policy (or work).
    pub why: String,
}

/// One rule of the policy set, with where it comes from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PolicyEntry {
    /// The pattern.
    pub pattern: PolicyPattern,
    /// Its class (`named` for what a mission or configuration adds).
    pub class: String,
    /// Why its objects are policy (or work); empty where the class says
    /// it all.
    pub why: String,
}

impl PolicyEntry {
    /// A pattern a mission or the configuration adds.
    pub fn named(pattern: PolicyPattern) -> PolicyEntry {
        PolicyEntry {
            pattern,
            class: NAMED_CLASS.to_owned(),
            why: String::new(),
        }
    }
}

/// The class of what missions and configurations add.
pub const NAMED_CLASS: &str = "named";

/// The default set, read from `policy.toml`.
pub struct Defaults {
    /// Its classes.
    pub classes: Vec<PolicyClass>,
    /// Its rules.
    pub entries: Vec<PolicyEntry>,
}

/// The default policy set: `policy.toml` beside this file.
pub static DEFAULT_POLICY: LazyLock<Defaults> =
    LazyLock::new(|| parse_defaults(include_str!("policy.toml")).expect("policy.toml is valid"));

fn parse_defaults(text: &str) -> Result<Defaults, String> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct RawRule {
        pattern: String,
        protects: Vec<String>,
        class: String,
        #[serde(default)]
        why: String,
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Raw {
        class: Vec<PolicyClass>,
        rule: Vec<RawRule>,
    }
    let raw: Raw = toml::from_str(text).map_err(|e| e.to_string())?;
    let entries = raw
        .rule
        .into_iter()
        .map(|rule| {
            let context = |e: String| format!("{}: {e}", rule.pattern);
            let mut pattern = PolicyPattern::parse(&rule.pattern, None).map_err(context)?;
            let protects = Protects::from_words(&rule.protects).map_err(context)?;
            // A start of names (`.*`) covers files and directories alike;
            // otherwise a tree rule names a directory.
            let prefix = matches!(
                &pattern.place,
                Place::Name(NameMatch::Prefix(_))
                    | Place::InDir {
                        name: NameMatch::Prefix(_),
                        ..
                    }
            );
            if !protects.work() && !prefix && protects.tree() != pattern.protects.tree() {
                return Err(context(
                    "a tree rule is written with a trailing /, and only it".to_owned(),
                ));
            }
            pattern.protects = protects;
            if !raw.class.iter().any(|c| c.name == rule.class) {
                return Err(context(format!("no class {:?}", rule.class)));
            }
            Ok(PolicyEntry {
                pattern,
                class: rule.class,
                why: rule.why,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(Defaults {
        classes: raw.class,
        entries,
    })
}

/// A set of rules: the default set and what missions and configurations
/// add. An entry's number in the kernel's tables is its index here plus
/// one, so a set only grows.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PolicySet {
    /// The rules, defaults first.
    pub entries: Vec<PolicyEntry>,
}

impl PolicySet {
    /// The default set, with `extra` added.
    pub fn with_defaults(extra: &[PolicyPattern]) -> PolicySet {
        let mut set = PolicySet {
            entries: DEFAULT_POLICY.entries.clone(),
        };
        set.add(extra);
        set
    }

    /// Adds patterns the set does not hold yet.
    pub fn add(&mut self, extra: &[PolicyPattern]) {
        for pattern in extra {
            if !self.entries.iter().any(|e| e.pattern == *pattern) {
                self.entries.push(PolicyEntry::named(pattern.clone()));
            }
        }
    }

    /// Adds the entries of another set that this one does not hold yet.
    pub fn merge(&mut self, other: &PolicySet) {
        for entry in &other.entries {
            if !self.entries.iter().any(|e| e.pattern == entry.pattern) {
                self.entries.push(entry.clone());
            }
        }
    }

    /// The patterns a mission or configuration added to the defaults.
    pub fn added(&self) -> Vec<PolicyPattern> {
        self.entries
            .iter()
            .filter(|e| e.class == NAMED_CLASS)
            .map(|e| e.pattern.clone())
            .collect()
    }

    /// The entry the kernel reports as `entry` (`1..`).
    pub fn entry(&self, entry: u32) -> Option<&PolicyEntry> {
        self.entries.get((entry as usize).checked_sub(1)?)
    }

    /// The objects of the path patterns that exist here, with the label
    /// flags they get (policy, and tree for a directory of a tree pattern),
    /// and the path each was found at. Paths that do not exist are skipped:
    /// they are protected by the name rules, if any match them.
    pub fn objects(&self) -> Vec<(ObjectKey, u32, PathBuf)> {
        use std::os::unix::fs::MetadataExt;
        let mut objects = Vec::new();
        for entry in &self.entries {
            let pattern = &entry.pattern;
            let Place::Path(path) = &pattern.place else {
                continue;
            };
            if pattern.protects.work() {
                continue;
            }
            let Ok(meta) = std::fs::metadata(path) else {
                continue;
            };
            let mut flags = label_flags::POLICY;
            if pattern.protects.tree() && meta.is_dir() {
                flags |= label_flags::TREE;
            }
            objects.push((
                ObjectKey {
                    dev: pincer_common::kernel_dev(meta.dev()),
                    ino: meta.ino(),
                },
                flags,
                path.clone(),
            ));
        }
        objects
    }
}

/// The class of a name (`instructions`, ..., `named`), with its words.
pub fn class(name: &str) -> Option<&'static PolicyClass> {
    DEFAULT_POLICY.classes.iter().find(|c| c.name == name)
}

/// The documentation's tables of the default set, its classes then its
/// rules (docs/authority.md, "The rule: by structure, not by a list of names").
pub fn readme_table() -> String {
    let mut table = String::from("| class | what | why |\n|-------|------|-----|\n");
    for class in &DEFAULT_POLICY.classes {
        table.push_str(&format!(
            "| {} | {} | {} |\n",
            class.name, class.is, class.why
        ));
    }
    table
        .push_str("\n| pattern | protects | class | why |\n|---------|----------|-------|-----|\n");
    for entry in &DEFAULT_POLICY.entries {
        table.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            entry.pattern.text(),
            entry.pattern.protects.words().join(", "),
            entry.class,
            entry.why
        ));
    }
    table
}

#[cfg(test)]
mod tests;
