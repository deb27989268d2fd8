//! The twin: pincer's userspace half of every decision.
//!
//! It serves any number of agents (`pincer run` has one, `pincer daemon`
//! many): each confined cgroup has its own grant slot, mission, voters and
//! policy, so grants, prompts and verdicts of one agent never touch
//! another's.
//!
//! For every record the kernel sends it either audits a decision the kernel
//! made, or handles a parked request: sanitizes it ([`procfs::request`]),
//! merges it with an identical request already waiting, runs the votes
//! ([`vote::begin`]: at once when the voters that know their answer decide
//! it, otherwise in a task of their own that reports back through a
//! channel), writes the verdict into the kernel (a one-shot
//! verdict, or a session / TTL grant), continues the stopped task, which
//! restarts its syscall and meets the verdict, and audits the verdict. A new
//! grant also releases every other waiting request it covers.
//!
//! [`Twin`] is that logic over a [`Kernel`] (the loaded programs, or a fake
//! in the unit tests); [`Service`] runs it: the ring
//! buffer, the vote outcomes, the heartbeat and the expiry of TTL grants, for
//! both `pincer run` and `pincer daemon`.
//!
//! [`Twin`]'s methods are kept by concern: `agents` sets up and tears down
//! what it confines, `parked` takes requests in and starts their votes,
//! `verdicts` answers them.
//!
//! [`procfs::request`]: crate::procfs::request
//! [`vote::begin`]: crate::vote::begin

mod agents;
mod discovery;
#[cfg(test)]
mod fake;
mod grants;
mod inspect;
pub mod integrity;
mod journal;
mod parked;
pub mod refusals;
mod service;
#[cfg(test)]
mod tests;
mod verdicts;

use std::{collections::HashMap, path::PathBuf, sync::Arc, time::Duration};

use pincer_common::{AccessEvent, Agent, ObjectKey, event_flags};
use pincer_model::{
    assets::Assets,
    audit::{AuditError, AuditLog, Record},
    events::Mounts,
    labels::{self, PolicySet, policy::rules::RulesError},
    mission::{Mode, ResolvedGrants},
    request::Request,
    vote::{Outcome, Policy},
};
use tokio::{sync::mpsc, task::JoinHandle};

use self::grants::{Grants, VoteGrant};
pub use self::{
    grants::Target,
    journal::Journal,
    service::{Prepared, Service, Step},
};
use crate::{
    loader::{Held, Kernel, LoadError},
    metrics::Metrics,
    procfs::ExeNames,
    vote::Voter,
    voters::webhook::WebhookError,
};

/// How often the twin tells the programs it is alive.
pub const HEARTBEAT_EVERY: Duration = Duration::from_millis(500);
/// How old a heartbeat may get before the programs stop parking.
pub const HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(3);
/// The slot of the first agent a freshly loaded object confines: `pincer
/// run`'s one agent always has it.
pub const FIRST_SLOT: u32 = 1;

/// Errors of the twin and of its service, and of setting them up: the
/// programs and their maps, the audit log, the watchdog, the ring buffer,
/// the control socket people answer on and the voters. `pincer run` and
/// `pincer daemon` pass them on as they are.
#[derive(Debug, thiserror::Error)]
pub enum TwinError {
    /// The programs could not be loaded, or their maps written.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The audit log failed.
    #[error(transparent)]
    Audit(#[from] AuditError),
    /// The watchdog could not be started.
    #[error("failed to start the watchdog")]
    Watchdog(#[source] std::io::Error),
    /// The ring buffer could not be watched or read.
    #[error("failed to read the kernel's ring buffer")]
    Ring(#[source] std::io::Error),
    /// A webhook voter could not be set up.
    #[error(transparent)]
    Webhook(#[from] WebhookError),
    /// The labels snapshot could not be read or written, or was refused.
    #[error(transparent)]
    Labels(#[from] labels::StoreError),
    /// The policy set cannot be written for the programs.
    #[error("the policy set cannot be written for the programs")]
    Policy(#[from] RulesError),
}

/// What makes requests the same: one prompt, one verdict for all of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SameAccess {
    cgroup: u64,
    dev: u64,
    ino: u64,
    name_hash: u64,
    ops: u32,
    hook: u32,
    new_name: bool,
}

impl SameAccess {
    fn of(event: &AccessEvent) -> SameAccess {
        SameAccess {
            cgroup: event.cgroup_id,
            dev: event.dev,
            ino: event.ino,
            name_hash: event.name_hash,
            ops: event.ops,
            hook: event.hook,
            new_name: event.flags & event_flags::NEW_NAME != 0,
        }
    }
}

/// The result of one vote, for [`Twin::on_outcome`].
pub type VoteResult = (SameAccess, Outcome);

/// What [`Twin::handle_record`] did with a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handled {
    /// A decision of the kernel was audited (or a short record dropped).
    Audited,
    /// A parked request waits for its votes (a new one, or one that joined
    /// an identical request).
    Waiting,
    /// A parked request was answered at once: its voters decided without
    /// waiting (a grant may have been made), or its agent is gone.
    Answered,
}

/// A stopped thread waiting for a verdict.
struct Waiter {
    task: Held,
    request_id: u64,
}

/// Requests waiting on one vote.
struct Waiting {
    /// `CLOCK_BOOTTIME` when the twin took the event (its latency in the
    /// metrics is counted from here) and when the request was sanitized,
    /// for the verdict's [`Stages`](pincer_model::audit::Stages).
    received_ns: u64,
    sanitized_ns: u64,
    request: Arc<Request>,
    event: AccessEvent,
    waiters: Vec<Waiter>,
    /// The task waiting for the voters that do not answer at once; none
    /// when the votes were in at once.
    vote: Option<JoinHandle<()>>,
    /// The grant an allow makes, when it is not the request's own (an
    /// asset node's operations and extent): see [`discovery`].
    planned: Option<VoteGrant>,
    /// What the twin read of an inspected change ([`inspect`]): an allow
    /// lands exactly that.
    inspected: Option<inspect::Read>,
}

/// An agent cgroup to confine: its mission's grants, what becomes of what
/// they do not grant, and who votes on it.
pub struct Confinement {
    /// The agent's name (the mission's, or the daemon configuration's).
    pub name: String,
    /// Its grant slot: `grants` are resolved for it.
    pub slot: u32,
    /// What an ungranted access does.
    pub mode: Mode,
    /// Report granted accesses too.
    pub report_allowed: bool,
    /// Confinement starts at the first program a task of the cgroup
    /// executes ([`agent_flags::FROM_EXEC`](pincer_common::agent_flags::FROM_EXEC)).
    pub from_exec: bool,
    /// The capabilities its tasks may use (the mission's
    /// [`Mission::capabilities`](pincer_model::mission::Mission::capabilities)).
    pub capabilities: u64,
    /// The level of the user namespace its tasks start in
    /// ([`Agent::userns_home`], [`crate::procfs::userns_level`]): the
    /// namespaces below it are the agent's own sandboxes.
    pub userns_home: u32,
    /// The mission's grants.
    pub grants: ResolvedGrants,
    /// Who votes on its parked requests.
    pub voters: Vec<Arc<dyn Voter>>,
    /// The mission's vote policy.
    pub policy: Policy,
    /// The objects only the owner changes (the default set, with what the
    /// mission and the configuration add).
    pub policy_set: PolicySet,
    /// The trees the mission lets the agent change, where links through
    /// policy names are looked for ([`labels::policy::links`]).
    pub policy_roots: Vec<PathBuf>,
    /// Directories that are the agent's own place (`own = true` grants, a
    /// run's private temporary directory): labelled as made by it.
    pub own_roots: Vec<PathBuf>,
    /// The mission's asset nodes, when it has any.
    pub assets: Option<Assets>,
    /// What the agent is told of its refusals ([`refusals`]).
    pub tell: refusals::Tell,
}

/// What the twin keeps per agent cgroup.
struct AgentState {
    slot: u32,
    name: String,
    /// What an ungranted access does: an inspected change that is not the
    /// agent's is refused in enforce mode, asked about in ask mode.
    mode: Mode,
    voters: Arc<Vec<Arc<dyn Voter>>>,
    policy: Policy,
    /// Its first process, where parent chains stop (`pincer run`'s command).
    root: Option<u32>,
    /// The paths of its mission's sources by identity, to name what
    /// lowered its level.
    sources: HashMap<ObjectKey, PathBuf>,
    /// What lowered its level, first read first (see [`Request::taint`]).
    taint: Vec<String>,
    /// Its mission's asset nodes.
    assets: Option<Assets>,
    /// The objects only the owner changes, which discovery never admits.
    policy_set: PolicySet,
    /// Where its refusals are told, when its confinement asks for it.
    refusals: Option<refusals::Refusals>,
    /// Its entry in the kernel's agent map, as written.
    entry: Agent,
    /// How many prefix grants its mission wrote.
    prefixes: usize,
}

/// The twin's state over a kernel.
pub struct Twin<K> {
    kernel: K,
    audit: AuditLog,
    agents: HashMap<u64, AgentState>,
    mounts: Mounts,
    /// Executable paths read for parked requests.
    exes: ExeNames,
    waiting: HashMap<SameAccess, Waiting>,
    outcomes: mpsc::UnboundedSender<VoteResult>,
    grants: Grants,
    next_slot: u32,
    journal: Option<Journal>,
    metrics: Option<Arc<Metrics>>,
    /// A task of a held cgroup was reported since [`Twin::take_held_reports`]
    /// was last called: the daemon has a cgroup to decide.
    held_reported: bool,
    /// Every rule the programs hold: the policy sets of every agent
    /// confined, whose entry numbers the kernel reports.
    policy: PolicySet,
    /// The integrity check's canaries whose report has not been judged.
    canaries: integrity::Canaries,
}

impl<K: Kernel> Twin<K> {
    /// A twin over `kernel`, auditing to `audit`, with no agent yet. Slots
    /// are handed out after those the kernel's agents use already (a
    /// previous daemon's). Returns the receiver of vote results, to pass to
    /// [`Twin::on_outcome`].
    pub fn new(
        mut kernel: K,
        audit: AuditLog,
    ) -> Result<(Self, mpsc::UnboundedReceiver<VoteResult>), TwinError> {
        let next_slot = kernel
            .agents()?
            .iter()
            .map(|(_, a)| a.slot + 1)
            .max()
            .unwrap_or(FIRST_SLOT);
        let (outcomes, receiver) = mpsc::unbounded_channel();
        let twin = Self {
            kernel,
            audit,
            agents: HashMap::new(),
            mounts: Mounts::load(),
            exes: ExeNames::default(),
            waiting: HashMap::new(),
            outcomes,
            grants: Grants::default(),
            next_slot,
            journal: None,
            metrics: None,
            held_reported: false,
            policy: PolicySet::with_defaults(&[]),
            canaries: integrity::Canaries::default(),
        };
        Ok((twin, receiver))
    }

    /// Keeps every parked event in `journal` until its verdict.
    pub fn set_journal(&mut self, journal: Journal) {
        self.journal = Some(journal);
    }

    /// Counts requests and verdicts in `metrics`.
    pub fn set_metrics(&mut self, metrics: Arc<Metrics>) {
        self.metrics = Some(metrics);
    }

    /// A slot no agent of this twin has used.
    pub fn new_slot(&mut self) -> u32 {
        let slot = self.next_slot;
        self.next_slot += 1;
        slot
    }
}

/// `CLOCK_BOOTTIME` in nanoseconds: the clock of `bpf_ktime_get_boot_ns`.
pub fn boottime_ns() -> u64 {
    let now = nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME)
        .expect("CLOCK_BOOTTIME is always available on Linux");
    now.tv_sec() as u64 * 1_000_000_000 + now.tv_nsec() as u64
}
