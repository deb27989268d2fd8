//! `pincer recommend`: the smallest mission that lets a workload run again
//! in enforce mode, written from the audit log of a run in audit mode.
//!
//! The log is verified first (its HMAC chain, as `pincer audit verify`
//! does), then read a line at a time; each kernel decision it holds is one
//! access (a parked one counts as its verdict says: allowed, or refused by
//! whom), in one of four kinds (`classify`):
//!
//! - an access a grant would allow: it goes into the mission, as a `file`
//!   grant on the object or within a `tree` grant (see `fold` for when a
//!   directory becomes one);
//! - a capability outside the default set: it goes into
//!   `[defaults] capabilities`;
//! - an access that is never granted: a secret ([`secrets`]), a change to
//!   a policy object (the default policy set, [`pincer_model::labels::policy`]:
//!   reading one is granted like any read, and a tree grant above one
//!   gives no change to it), pincer's own files (the audit log, its key,
//!   the mission written), or one no grant can allow (the kernel's own
//!   rules, self-protection): listed as a comment, `# not granted: read
//!   /home/u/.ssh/id_rsa (a secret, ...)`;
//! - an access the new mission allows anyway: the runtime baseline's, and
//!   the run's own (its private temporary directory, its terminal, its
//!   processes' `/proc` entries): counted in a comment.
//!
//! The mission keeps the defaults (`baseline = "runtime"`, a private
//! temporary directory) and enforces (`on_unknown = "deny"`). It adds to
//! what the run's own mission granted: those accesses are in the log only
//! when the run used `--log-allowed` (then they are folded in like the
//! others), so the run to learn from is one under a minimal mission, or
//! one with `--log-allowed`. Paths are written absolute: `~` in a mission
//! is whoever runs `pincer run`'s `$HOME` (root's under `sudo`), not
//! necessarily the home the log's paths are in.
//!
//! `render` writes the TOML, every grant with a comment on what it
//! covers; the unit tests read it back with the mission parser and check
//! that its grants cover every access they should.

mod classify;
mod fold;
mod log;
mod render;
pub mod secrets;

use std::{
    io,
    path::{Path, PathBuf},
};

use pincer_model::{
    audit::AuditError,
    labels::{PolicySet, policy::Classifier},
};

/// The default policy set, compiled.
pub(crate) fn default_classifier() -> Classifier {
    PolicySet::with_defaults(&[])
        .classifier()
        .expect("the default set fits the programs")
}

pub use self::fold::FOLD_AT;

/// What `pincer recommend` is asked.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The audit log.
    pub log: PathBuf,
    /// Its key (`<log>.key` by default).
    pub key: Option<PathBuf>,
    /// Read the log even when its chain cannot be verified.
    pub unverified: bool,
    /// Only the decisions of this mission (a log several share).
    pub mission: Option<String>,
    /// What the task is: the mission's name, and a comment.
    pub task: Option<String>,
    /// Where the mission will be written (`None`: standard output): never
    /// granted, and no tree is folded over it.
    pub output: Option<PathBuf>,
}

/// A recommended mission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recommendation {
    /// The mission's TOML.
    pub text: String,
    /// How many grants it has.
    pub grants: usize,
    /// What the reader should know (what the chain does not vouch for, a
    /// log read unverified), for standard error.
    pub warnings: Vec<String>,
}

/// Why no mission could be recommended.
#[derive(Debug, thiserror::Error)]
pub enum RecommendError {
    /// The log or its key could not be read.
    #[error(transparent)]
    Audit(#[from] AuditError),
    /// The log's chain does not verify.
    #[error(
        "{}: the audit chain is broken: line {line}: {problem}; not recommending from it \
         (--unverified reads it anyway)",
        .log.display()
    )]
    Broken {
        /// The log.
        log: PathBuf,
        /// The first line that is not authentic or in its place.
        line: usize,
        /// What is wrong with it.
        problem: String,
    },
    /// The log's key cannot be read: its chain cannot be verified.
    #[error(
        "{}: cannot verify the audit chain (--unverified reads the log anyway)",
        .log.display()
    )]
    Unverifiable {
        /// The log.
        log: PathBuf,
        /// Why the key cannot be read.
        #[source]
        source: AuditError,
    },
    /// A line is not an audit record, or a decision lacks what a decision
    /// has.
    #[error("{}:{line}: {problem}", .log.display())]
    Malformed {
        /// The log.
        log: PathBuf,
        /// The line, from 1.
        line: usize,
        /// What is wrong.
        problem: String,
    },
    /// The log holds no decision to learn from.
    #[error(
        "{}: no decisions: nothing to recommend (a run logs what its mission did not grant, \
         and what it did with --log-allowed)",
        .log.display()
    )]
    NoDecisions {
        /// The log.
        log: PathBuf,
    },
    /// `--mission` names none of the log's missions.
    #[error("{}: no decisions of mission {name:?} (the log has {found})", .log.display())]
    NoSuchMission {
        /// The log.
        log: PathBuf,
        /// The name asked for.
        name: String,
        /// The names the log has, quoted and joined.
        found: String,
    },
    /// The log holds decisions of several missions.
    #[error("{}: decisions of several missions ({found}): choose one with --mission", .log.display())]
    SeveralMissions {
        /// The log.
        log: PathBuf,
        /// The names, quoted and joined.
        found: String,
    },
    /// `--task` is blank.
    #[error("--task must not be blank: it names the mission")]
    BlankTask,
    /// `--output` is the log or its key.
    #[error("--output {}: that is the audit log or its key", .path.display())]
    OutputIsLog {
        /// The output.
        path: PathBuf,
    },
    /// The mission could not be written.
    #[error("failed to write {}", .path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
}

impl RecommendError {
    /// The exit status of `pincer recommend`: 1 for a broken chain (as
    /// `pincer audit verify`), 2 for any other refusal.
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Broken { .. } => 1,
            _ => 2,
        }
    }
}

/// What decides, beside the log, what is granted and what is folded: the
/// places that are never granted and those too broad to be a tree.
#[derive(Debug, Clone)]
pub(crate) struct Context {
    /// Home directories: never a tree.
    pub homes: Vec<PathBuf>,
    /// pincer's own files (the audit log, its key, the mission written),
    /// with what each is: never granted, never below a tree.
    pub own: Vec<(PathBuf, &'static str)>,
    /// The policy set (the default one), read as the programs read it.
    pub policy: Classifier,
    /// The most objects looked at below a directory before it becomes a
    /// tree.
    pub max_scan: usize,
}

/// The most objects looked through below a directory before it becomes a
/// tree grant: a larger tree is not folded (what it holds cannot be vouched
/// for).
pub const MAX_SCAN: usize = 100_000;

impl Context {
    /// The context of a recommendation from `log` (keyed by `key`) written
    /// to `output`, on this machine.
    fn new(log: &Path, key: &Path, output: Option<&Path>) -> Self {
        // Each directory in /home is one by its place (`fold::too_broad`).
        let mut homes = vec![PathBuf::from("/root")];
        if let Some(home) = std::env::var_os("HOME") {
            homes.push(real(Path::new(&home)));
        }
        let mut own = vec![(real(log), "the audit log"), (real(key), "the audit key")];
        if let Some(output) = output {
            own.push((real(output), "the recommended mission"));
        }
        Context {
            homes,
            own,
            policy: default_classifier(),
            max_scan: MAX_SCAN,
        }
    }

    /// Why a change to `path` is never granted, when it is a policy
    /// object.
    pub fn owners(&self, path: &Path) -> Option<String> {
        self.policy.policy_of(path).map(|entry| {
            format!(
                "a policy object, `{}` ({}): only the owner changes it",
                entry.pattern.text(),
                entry.class
            )
        })
    }

    /// Why `path` is never granted, nor below a tree, if it is not: a
    /// secret, or one of pincer's own files.
    pub fn excluded(&self, path: &Path) -> Option<String> {
        if let Some(secret) = secrets::secret_at(path) {
            return Some(format!("a secret, `{}`: {}", secret.pattern, secret.why));
        }
        self.own
            .iter()
            .find(|(own, _)| own == path)
            .map(|(_, what)| format!("{what}: out of every agent's reach"))
    }
}

/// `path` as the kernel names it: links resolved where it exists (or its
/// directory does), absolute in any case.
fn real(path: &Path) -> PathBuf {
    if let Ok(real) = std::fs::canonicalize(path) {
        return real;
    }
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
    match (absolute.parent(), absolute.file_name()) {
        (Some(parent), Some(name)) => std::fs::canonicalize(parent)
            .map(|parent| parent.join(name))
            .unwrap_or(absolute),
        _ => absolute,
    }
}

/// Recommends a mission from the log `options` names.
pub fn recommend(options: &Options) -> Result<Recommendation, RecommendError> {
    let task = match &options.task {
        Some(task) if task.trim().is_empty() => return Err(RecommendError::BlankTask),
        Some(task) => Some(task.as_str()),
        None => None,
    };
    let key = options
        .key
        .clone()
        .unwrap_or_else(|| pincer_model::paths::default_key_path(&options.log));
    if let Some(output) = &options.output
        && [&options.log, &key]
            .iter()
            .any(|file| real(file) == real(output))
    {
        return Err(RecommendError::OutputIsLog {
            path: output.clone(),
        });
    }
    let logged = log::read(&log::Source {
        path: &options.log,
        key: &key,
        unverified: options.unverified,
        mission: options.mission.as_deref(),
    })?;
    let context = Context::new(&options.log, &key, options.output.as_deref());
    let plan = fold::plan(&logged.decisions, &context);
    let text = render::render(
        &plan,
        &render::Header {
            log: &real(&options.log),
            logged: &logged,
            task,
        },
    );
    let mut warnings = logged.warnings.clone();
    if let log::Verification::Unverified(why) = &logged.verification {
        warnings.push(format!(
            "{}: read without a verified chain ({why})",
            options.log.display()
        ));
    }
    Ok(Recommendation {
        text,
        grants: plan.grants.len(),
        warnings,
    })
}

#[cfg(test)]
mod tests;
