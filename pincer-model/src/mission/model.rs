//! What a mission says: its grants, its defaults and how parked requests are
//! voted on, as read from the file (before any path is resolved).

use std::{io, path::PathBuf, time::Duration};

use crate::{
    toml_file::{FileError, Named, TomlError, named},
    vote::{Extent, Voting},
};

/// An error in a mission file or in resolving its grants.
#[derive(Debug, thiserror::Error)]
pub enum MissionError {
    /// The mission file could not be read, or is not a valid mission: bad
    /// TOML, an unknown key, a wrong type or a value out of range.
    #[error(transparent)]
    File(#[from] FileError),
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
    /// No profile has that name.
    #[error("unknown profile {name:?} (known: {known})")]
    UnknownProfile {
        /// The name asked for.
        name: String,
        /// The built-in profiles.
        known: String,
    },
    /// A directory a grant makes could not be made.
    #[error("cannot make {}", .path.display())]
    Make {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// A grant of the run itself could not be looked up.
    #[error("cannot resolve the run's {what} {}", .path.display())]
    RunGrant {
        /// What it is.
        what: &'static str,
        /// Its path.
        path: PathBuf,
        /// The lookup error.
        #[source]
        source: io::Error,
    },
}

impl From<TomlError> for MissionError {
    fn from(error: TomlError) -> Self {
        MissionError::File(error.into())
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
    /// `[defaults].on_unknown`.
    pub on_unknown: Mode,
    /// `[defaults].tmp`.
    pub tmp: Tmp,
    /// The capabilities the agent may use (bits of
    /// [`pincer_common::caps`]): the default set and what
    /// `[defaults].capabilities` adds.
    pub capabilities: u64,
    /// `[vote]`: how parked requests are decided.
    pub vote: Voting,
    /// The profiles of `[mission].profiles` and of `pincer run --profile`.
    pub profiles: Vec<Profile>,
    /// `[labels] policy`: patterns the mission adds to the policy set.
    pub policy: Vec<crate::labels::PolicyPattern>,
    /// `[[source]]`: where content of lower authority comes from.
    pub sources: Vec<SourceSpec>,
    /// `[[action]]`: what only an untainted agent does without the owner.
    pub actions: Vec<ActionSpec>,
    /// `[[asset]]`: the task's assets as nodes, identified from the start
    /// or discovered in the evidence of the source the mission scoped for
    /// them (the runtime's `pincer::assets`).
    pub assets: Vec<AssetSpec>,
}

/// One `[[asset]]`: an object the task needs, with the operations and the
/// extent it needs. Identified from the start (`path`), or unknown until
/// the content of the one node it may be `found_in` names an object that
/// meets its `constraints`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssetSpec {
    /// `id`: unique in the mission.
    pub id: String,
    /// `description`: what the task says of it (shown in prompts and
    /// `pincer mission status`).
    pub description: String,
    /// `path`, `~` expanded: the node is identified from the start.
    pub path: Option<PathBuf>,
    /// `found_in`: the index (in [`Mission::assets`]) of the only node
    /// whose content may identify this one.
    pub found_in: Option<usize>,
    /// Bits of [`pincer_common::ops`].
    pub ops: u32,
    /// What a grant on it covers.
    pub extent: Extent,
    /// What an object must be to be this node.
    pub constraints: Constraints,
    /// The line of the entry's `id`, for messages.
    pub line: usize,
}

/// `constraints` of an `[[asset]]`: what a discovered object must be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Constraints {
    /// `under`: directories (`~` expanded) strictly below one of which the
    /// object lies. Required for a node found in evidence: a name in a
    /// page is never enough to reach anywhere.
    pub under: Vec<PathBuf>,
    /// `glob`: a pattern its file name matches (`*.{png,jpg}`), as
    /// written.
    pub glob: Option<String>,
    /// `kind`: a regular file or a directory (a `tree` node is a
    /// directory).
    pub kind: Option<AssetKind>,
    /// `max_count`: how many objects the node may become (1 when not
    /// written).
    pub max_count: u32,
}

impl Default for Constraints {
    fn default() -> Self {
        Self {
            under: Vec::new(),
            glob: None,
            kind: None,
            max_count: 1,
        }
    }
}

/// What kind of object an asset is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AssetKind {
    /// A regular file.
    File,
    /// A directory.
    Directory,
}

named!(AssetKind: "file" => File, "directory" => Directory);

/// One `[[source]]`: a file or a directory tree whose content has a given
/// authority (`evidence`: fetched pages, downloads, tool output the harness
/// stores; `user`: a teammate's files). Reading it lowers the reader to
/// that authority ([`pincer_common::Taint`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceSpec {
    /// Absolute path, `~` expanded.
    pub path: PathBuf,
    /// One of [`pincer_common::authority`]: `EVIDENCE` or `USER`.
    pub authority: u32,
    /// The line of the entry, for messages.
    pub line: usize,
    /// The file that declares it when that is not the mission: the
    /// daemon's configuration, whose sources every agent it confines gets.
    pub file: Option<PathBuf>,
}

/// One `[[action]]`: operations on an object (executing a program, writing
/// a destination) that an agent whose level fell below `authority` takes
/// only with the owner's approval; an untainted agent follows its grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionSpec {
    /// Absolute path, `~` expanded (symbolic links are followed when the
    /// mission is loaded: the action is the object).
    pub path: PathBuf,
    /// Bits of [`pincer_common::ops`] (`exec` when not written).
    pub ops: u32,
    /// One of [`pincer_common::authority`]: `USER` or `POLICY`, the lowest
    /// level that takes the action without the owner.
    pub authority: u32,
    /// The line of the entry, for messages.
    pub line: usize,
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
    /// `make = true`: `pincer run` makes the directory (mode 0700) when it
    /// is missing, so a tree grant can name a directory the task fills.
    pub make: bool,
    /// `optional = true`: a path that does not exist (or whose link points
    /// nowhere) grants nothing instead of failing the mission: a profile
    /// names every place its program may be installed.
    pub optional: bool,
    /// `own = true`: the directory is the agent program's own place (its
    /// state, caches and logs): what is made below it is the agent's own,
    /// hidden names included, as in a directory it made itself; the
    /// instruction names of the policy set still hold there.
    pub own: bool,
}

impl GrantSpec {
    /// The prefix of a prefix grant (its path's last component ends with
    /// `*`): the grant covers every name in the directory that starts with
    /// it.
    pub fn prefix(&self) -> Option<&[u8]> {
        use std::os::unix::ffi::OsStrExt;
        self.path.file_name()?.as_bytes().strip_suffix(b"*")
    }
}

/// An agent program's profile: what its own runtime needs beside the
/// task's grants (its state and caches, its settings and instructions for
/// reading), and the environment it runs with. Built in
/// ([`super::profile::BUILT_IN`]) or read from a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    /// `[profile].name`.
    pub name: String,
    /// `[profile].description`.
    pub description: String,
    /// Where it was read from, for messages.
    pub source: PathBuf,
    /// Its `[[grant]]` entries.
    pub grants: Vec<GrantSpec>,
    /// Its `[env]`: variables set for the command (a leading `~` expanded).
    pub env: Vec<(String, String)>,
}

/// Grants every mission gets besides its own.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Baseline {
    /// What a program needs to start and run at all: see
    /// [`RUNTIME_BASELINE`](super::RUNTIME_BASELINE).
    #[default]
    Runtime,
    /// Nothing: the mission lists everything itself.
    None,
}

named!(Baseline: "runtime" => Runtime, "none" => None);

/// Where the command's temporary files go (`[defaults].tmp`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Tmp {
    /// `pincer run` makes a fresh directory for the command alone, grants
    /// it every operation but `exec`, points `TMPDIR` at it and removes it
    /// at the end: compilers, `patch`, Python's `tempfile` work, and `/tmp`
    /// itself (where other users' files are) stays ungranted.
    #[default]
    Private,
    /// Nothing: the mission grants temporary directories itself.
    None,
}

named!(Tmp: "private" => Private, "none" => None);

/// A grant `pincer run` adds for its own command beside the mission's:
/// something that exists only for this run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunGrant {
    /// The object.
    pub path: PathBuf,
    /// Bits of [`pincer_common::ops`].
    pub ops: u32,
    /// What it covers.
    pub extent: Extent,
    /// What it is, for the grant's reason (`private temporary directory`).
    pub what: &'static str,
}

impl RunGrant {
    /// The run's private temporary directory ([`Tmp::Private`]): every
    /// operation but `exec` (nothing the agent writes there runs).
    pub fn private_tmp(dir: &std::path::Path) -> RunGrant {
        RunGrant {
            path: dir.to_owned(),
            ops: pincer_common::ops::ALL & !pincer_common::ops::EXEC,
            extent: Extent::Tree,
            what: Self::PRIVATE_TMP,
        }
    }

    /// What a run's private temporary directory is ([`RunGrant::private_tmp`]).
    pub const PRIVATE_TMP: &'static str = "private temporary directory";

    /// The terminal `pincer run` was started on, which the command shares:
    /// it may open it again by name (`tty`, programs that reopen their
    /// terminal), and no other.
    pub fn terminal(device: &std::path::Path) -> RunGrant {
        RunGrant {
            path: device.to_owned(),
            ops: pincer_common::ops::READ | pincer_common::ops::WRITE,
            extent: Extent::File,
            what: "terminal",
        }
    }
}

/// What an access that no grant covers does: the mission's
/// `defaults.on_unknown`, which `pincer run --mode`, an agent's `mode` in the
/// daemon's configuration and the control socket's `register` override. The
/// doc comments are the command line's help.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Mode {
    /// Deny with `EACCES` at once and audit (`on_unknown = "deny"`).
    #[default]
    Enforce,
    /// Allow, and audit what would have been denied (`on_unknown = "audit"`).
    Audit,
    /// Park the task and ask the voters (`on_unknown = "ask"`).
    Ask,
}

named!(Mode: "enforce" => Enforce, "audit" => Audit, "ask" => Ask);

impl Mode {
    /// The names `defaults.on_unknown` is written with in a mission: the
    /// policy's words rather than the switch's.
    pub const ON_UNKNOWN: &'static [(&'static str, Mode)] = &[
        ("deny", Mode::Enforce),
        ("audit", Mode::Audit),
        ("ask", Mode::Ask),
    ];

    /// The mode written `name` (`enforce`, `audit` or `ask`).
    pub fn from_name(name: &str) -> Option<Mode> {
        <Self as Named>::from_name(name)
    }

    /// The name it is written with.
    pub fn name(self) -> &'static str {
        <Self as Named>::name(self)
    }

    /// The agent entry's mode in the kernel ([`pincer_common::mode`]).
    pub fn kernel_mode(self) -> u32 {
        match self {
            Mode::Enforce => pincer_common::mode::ENFORCE,
            Mode::Audit => pincer_common::mode::AUDIT,
            Mode::Ask => pincer_common::mode::ASK,
        }
    }
}

/// Longest `vote.timeout`: the agent's access waits that long, and a
/// request nobody decides within an hour is better settled by the default.
pub const MAX_VOTE_TIMEOUT: Duration = Duration::from_secs(3600);

impl Mission {
    /// The trees the mission lets an agent change (tree grants with an
    /// operation that changes something), links resolved, where links
    /// through policy names are looked for.
    pub fn policy_roots(&self) -> Vec<PathBuf> {
        let mut roots: Vec<PathBuf> = self
            .grants
            .iter()
            .chain(self.profiles.iter().flat_map(|p| p.grants.iter()))
            .filter(|grant| {
                grant.extent == Extent::Tree && grant.ops & pincer_common::CHANGE_OPS != 0
            })
            .filter_map(|grant| std::fs::canonicalize(&grant.path).ok())
            .filter(|path| path.is_dir())
            .collect();
        roots.sort();
        // A tree inside another is looked through once.
        roots.dedup_by(|inner, outer| inner.starts_with(outer));
        roots
    }

    /// The directories of `own = true` grants (the mission's and its
    /// profiles'), links resolved: labelled as the agent's own when it is
    /// confined.
    pub fn own_roots(&self) -> Vec<PathBuf> {
        self.grants
            .iter()
            .chain(self.profiles.iter().flat_map(|p| p.grants.iter()))
            .filter(|grant| grant.own)
            .filter_map(|grant| std::fs::canonicalize(&grant.path).ok())
            .filter(|path| path.is_dir())
            .collect()
    }

    /// The objects only the owner changes while this mission runs: the
    /// default policy set, what `[labels] policy` adds, and the mission file
    /// itself.
    pub fn policy_set(&self) -> crate::labels::PolicySet {
        use crate::labels::policy::{Place, PolicyPattern, Protects};
        let mut extra = self.policy.clone();
        if let Ok(path) = std::fs::canonicalize(&self.source) {
            extra.push(PolicyPattern {
                place: Place::Path(path),
                protects: Protects::NAMED,
            });
        }
        crate::labels::PolicySet::with_defaults(&extra)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vote_names_display_as_written() {
        let names = [Mode::Enforce, Mode::Audit, Mode::Ask].map(|v| v.to_string());
        assert_eq!(names, ["enforce", "audit", "ask"]);
        let on_unknown: Vec<&str> = Mode::ON_UNKNOWN.iter().map(|(name, _)| *name).collect();
        assert_eq!(on_unknown, ["deny", "audit", "ask"]);

        assert_eq!(
            crate::vote::DefaultVerdict::AllowOnce.to_string(),
            "allow-once"
        );
    }
}
