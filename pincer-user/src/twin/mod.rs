//! The twin: pincer's userspace half of every decision.
//!
//! It serves any number of agents (`pincer run` has one, `pincer daemon`
//! many): each confined cgroup has its own grant slot, mission, voters and
//! policy, so grants, prompts and verdicts of one agent never touch
//! another's.
//!
//! For every record the kernel sends it either audits a decision the kernel
//! made, or handles a parked request: sanitizes it ([`events::request`]),
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

mod discovery;
#[cfg(test)]
mod fake;
mod grants;
mod inspect;
pub mod integrity;
mod journal;
pub mod refusals;
mod service;
#[cfg(test)]
mod tests;

use std::{
    collections::HashMap, collections::HashSet, os::unix::ffi::OsStrExt, path::PathBuf, sync::Arc,
    time::Duration,
};

use pincer_common::{
    AccessEvent, Action, Agent, GrantKey, Label, ObjectKey, Pending, Verdict, agent_flags,
    authority, caps, event_flags, policy_entry, verdict,
};
use tokio::{sync::mpsc, task::JoinHandle, time::Instant};

use self::grants::{Grants, VoteGrant, tree_of};
pub use self::{
    grants::Target,
    journal::Journal,
    service::{Prepared, Service, Step},
};
use crate::{
    assets::Assets,
    audit::{AuditError, AuditLog, Record, Stages, VerdictRecord},
    control::{ControlError, ListedGrant},
    events::{self, Mounts},
    labels::{self, PolicySet, policy::rules::RulesError},
    loader::{Held, Kernel, LoadError},
    metrics::Metrics,
    mission::{Mode, ResolvedGrants},
    procfs::ExeNames,
    request::{PolicyReason, Request},
    vote::{self, Extent, Lifetime, Outcome, Policy, Voter},
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
    /// The control socket could not be opened.
    #[error(transparent)]
    Control(#[from] ControlError),
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
    /// for the verdict's [`Stages`].
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
    /// executes ([`agent_flags::FROM_EXEC`]).
    pub from_exec: bool,
    /// The capabilities its tasks may use (the mission's
    /// [`Mission::capabilities`](crate::mission::Mission::capabilities)).
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

    /// Confines a cgroup: writes its mission grants, then its kernel agent
    /// entry (grants first, so its first access already finds them). A
    /// cgroup confined already moves to the new slot in that one map update,
    /// so it is never unconfined; its old slot's grants go afterwards.
    pub fn confine(&mut self, cgroup: u64, confinement: Confinement) -> Result<(), TwinError> {
        let Confinement {
            name,
            slot,
            mode,
            report_allowed,
            from_exec,
            capabilities,
            userns_home,
            grants,
            mut voters,
            mut policy,
            policy_set,
            policy_roots,
            own_roots,
            assets,
            tell,
        } = confinement;
        // Discovery votes on what no grant covers, so that is parked even
        // when the mission refuses it: then only the mission's rules vote
        // beside discovery, and what neither allows is refused at once.
        let discovers = assets.as_ref().is_some_and(Assets::discovers);
        let mode = if discovers && mode == Mode::Enforce {
            voters.retain(|voter| voter.name() == "mission");
            policy.default = vote::DefaultVerdict::Deny;
            Mode::Ask
        } else {
            mode
        };
        self.policy.merge(&policy_set);
        self.kernel.set_policy_rules(&self.policy.kernel_rules()?)?;
        let mut policy_labels = labels::policy_labels(&policy_set);
        policy_labels.extend(labels::linked_labels(&policy_set, &policy_roots));
        self.kernel.set_labels(&policy_labels)?;
        for root in &own_roots {
            self.set_label_as_made(root, cgroup)?;
        }
        // Stamped with their source's counter now; an object labelled
        // before keeps its stamp, so a revocation still refuses what the
        // source held then.
        let counters: HashMap<u32, u32> = self.kernel.revocations()?.into_iter().collect();
        let sources: Vec<(ObjectKey, Label)> = grants
            .sources
            .iter()
            .map(|(key, label, _)| {
                let mut label = *label;
                for origin in &mut label.origins.at {
                    origin.stamp = counters.get(&origin.source).copied().unwrap_or(0);
                }
                (*key, label)
            })
            .collect();
        self.kernel.restore_labels(&sources)?;
        let actions: Vec<(GrantKey, Action)> = grants
            .actions
            .iter()
            .map(|(key, action, _)| (*key, *action))
            .collect();
        self.kernel.set_actions(&actions)?;
        self.kernel.add_grants(&grants)?;
        let entry = Agent {
            slot,
            mode: mode.kernel_mode(),
            flags: if report_allowed {
                agent_flags::REPORT_ALLOWED
            } else {
                0
            } | if actions.is_empty() {
                0
            } else {
                agent_flags::ACTIONS
            } | if from_exec { agent_flags::FROM_EXEC } else { 0 },
            userns_home,
            // Never more than an agent may be given, whoever built the set.
            capabilities: capabilities & !caps::NEVER,
        };
        if let Err(error) = self.kernel.add_agent(cgroup, entry) {
            let _ = self.kernel.remove_slot(slot);
            return Err(error.into());
        }
        self.grants.add_mission(&grants);
        let prefixes = grants.prefixes.len();
        // A slot chosen by the caller (`FIRST_SLOT`) is used from now on.
        self.next_slot = self.next_slot.max(slot + 1);
        let sources = grants
            .sources
            .into_iter()
            .map(|(key, _, path)| (key, path))
            .collect();
        // A new mission does not raise the level the cgroup's reads left.
        let taint = self
            .agents
            .get(&cgroup)
            .map(|old| old.taint.clone())
            .unwrap_or_default();
        let before = self.agents.insert(
            cgroup,
            AgentState {
                slot,
                name,
                mode,
                voters: Arc::new(voters),
                policy,
                root: None,
                sources,
                taint,
                assets,
                policy_set,
                refusals: refusals::Refusals::new(&tell),
                entry,
                prefixes,
            },
        );
        match before {
            Some(old) if old.slot != slot => self.drop_slot(old.slot),
            _ => Ok(()),
        }
    }

    /// Stops confining a cgroup: its waiting requests are denied, its
    /// kernel entry and every grant of its slot (mission and votes) removed.
    pub fn release(&mut self, cgroup: u64) -> Result<(), TwinError> {
        let Some(agent) = self.agents.remove(&cgroup) else {
            return Ok(());
        };
        self.deny_where(|key| key.cgroup == cgroup)?;
        self.kernel.remove_agent(cgroup)?;
        self.drop_slot(agent.slot)
    }

    /// Forgets a slot: its mission and vote grants go.
    fn drop_slot(&mut self, slot: u32) -> Result<(), TwinError> {
        self.grants.drop_slot(slot);
        self.kernel.remove_slot(slot)?;
        Ok(())
    }

    /// Takes over from a previous daemon: of the cgroups it confined
    /// (`previous`), those this twin has not confined again are released,
    /// and every grant of a slot no agent uses now is removed.
    pub fn take_over(&mut self, previous: &[(u64, Agent)]) -> Result<(), TwinError> {
        for (cgroup, agent) in previous {
            // A held cgroup is the daemon's to decide, not an agent to let go.
            if agent.mode != pincer_common::mode::HELD && !self.agents.contains_key(cgroup) {
                let _ = self.kernel.remove_agent(*cgroup);
            }
        }
        let live: HashSet<u32> = self.agents.values().map(|a| a.slot).collect();
        self.kernel.retain_slots(&live)?;
        Ok(())
    }

    /// Replaces the cgroups below which new cgroups are held (cgroup id →
    /// one of [`pincer_common::watch`]).
    pub fn watch(&mut self, watched: &[(u64, u32)]) -> Result<(), TwinError> {
        Ok(self.kernel.set_watched(watched)?)
    }

    /// The cgroups the kernel holds now, waiting for the daemon to decide
    /// what they are.
    pub fn held(&mut self) -> Result<Vec<u64>, TwinError> {
        Ok(self
            .kernel
            .agents()?
            .into_iter()
            .filter(|(_, agent)| agent.mode == pincer_common::mode::HELD)
            .map(|(cgroup, _)| cgroup)
            .collect())
    }

    /// Lets a held cgroup go: it is no agent, and its tasks run as any
    /// other task once continued.
    pub fn let_go(&mut self, cgroup: u64) -> Result<(), TwinError> {
        Ok(self.kernel.remove_agent(cgroup)?)
    }

    /// Forgets the pending entries of the held tasks of `cgroup` (entries
    /// with no request id), before they are continued: once continued, a
    /// task may park for a request of its own under the same thread id.
    /// Returns their thread ids, the tasks to continue.
    pub fn forget_held_tasks(&mut self, cgroup: u64) -> Result<Vec<u32>, TwinError> {
        let mut held = Vec::new();
        for (tid, pending) in self.kernel.pending()? {
            if pending.id == 0 && pending.ino == cgroup {
                self.kernel.remove_pending(tid)?;
                held.push(tid);
            }
        }
        Ok(held)
    }

    /// Whether a task of a held cgroup was reported since the last call.
    pub fn take_held_reports(&mut self) -> bool {
        std::mem::take(&mut self.held_reported)
    }

    /// The cgroups the kernel confines now, with their entries.
    pub fn kernel_agents(&mut self) -> Result<Vec<(u64, Agent)>, TwinError> {
        Ok(self.kernel.agents()?)
    }

    /// Puts back the labels a snapshot saved that the map lacks (see
    /// [`labels::store`]); a snapshot not sealed by this host is refused.
    pub fn restore_labels(&mut self, store: &labels::Store) -> Result<usize, TwinError> {
        // The counters first: a label put back is judged by them. The
        // kernel's outlive this process; a file that says less than they
        // do was restored from an earlier copy.
        let revoked = store.revocations()?;
        for (source, kernel) in self.kernel.revocations()? {
            let saved = revoked.iter().find(|r| r.source == source);
            let counter = saved.map_or(0, |r| r.counter);
            if kernel > counter {
                return Err(labels::StoreError::RolledBack {
                    path: store.revocations_path(),
                    source_path: saved
                        .map_or_else(|| format!("source {source:#x}"), |r| r.path.clone()),
                    saved: counter,
                    kernel,
                }
                .into());
            }
        }
        for r in &revoked {
            self.kernel.set_revocation(r.source, r.counter)?;
        }
        let saved = store.load()?;
        Ok(self.kernel.restore_labels(&saved)?)
    }

    /// Every label in the map.
    pub fn all_labels(&mut self) -> Result<Vec<(ObjectKey, Label)>, TwinError> {
        Ok(self.kernel.labels()?)
    }

    /// The sources' revocation counters now, by source id.
    pub fn revocations(&mut self) -> Result<HashMap<u32, u32>, TwinError> {
        Ok(self.kernel.revocations()?.into_iter().collect())
    }

    /// Sets one object's label.
    pub fn set_label(&mut self, key: ObjectKey, label: Label) -> Result<(), TwinError> {
        Ok(self.kernel.set_labels(&[(key, label)])?)
    }

    /// Labels the directory at `path` as made by the agent of `cgroup`:
    /// its own place (a run's private temporary directory). Returns
    /// whether it was there to label.
    pub fn set_label_as_made(
        &mut self,
        path: &std::path::Path,
        cgroup: u64,
    ) -> Result<bool, TwinError> {
        use std::os::unix::fs::MetadataExt;
        let Ok(meta) = std::fs::metadata(path) else {
            return Ok(false);
        };
        let key = ObjectKey {
            dev: pincer_common::kernel_dev(meta.dev()),
            ino: meta.ino(),
        };
        let label = Label {
            authority: authority::EVIDENCE,
            flags: pincer_common::label_flags::AGENT_MADE,
            generation: labels::generation(path).unwrap_or(0),
            taint: 0,
            agent: cgroup,
            origins: pincer_common::Origins::NONE,
        };
        self.kernel.set_labels(&[(key, label)])?;
        Ok(true)
    }

    /// Saves the map's labels in the snapshot.
    pub fn save_labels(&mut self, store: &labels::Store) -> Result<usize, TwinError> {
        let labels = self.kernel.labels()?;
        Ok(store.save(&labels)?)
    }

    /// Sets an agent's first process, where parent chains stop.
    pub fn set_root(&mut self, cgroup: u64, pid: u32) {
        if let Some(agent) = self.agents.get_mut(&cgroup) {
            agent.root = Some(pid);
        }
    }

    /// Protects one of pincer's processes: agents cannot signal or trace it.
    pub fn guard(&mut self, pid: u32) -> Result<(), TwinError> {
        Ok(self.kernel.guard(pid)?)
    }

    /// Stops protecting a process.
    pub fn unguard(&mut self, pid: u32) -> Result<(), TwinError> {
        Ok(self.kernel.unguard(pid)?)
    }

    /// Tells the programs the twin is alive.
    pub fn heartbeat(&mut self) -> Result<(), TwinError> {
        self.kernel
            .heartbeat(boottime_ns(), HEARTBEAT_TIMEOUT.as_nanos() as u64)?;
        // A revocation is written by `pincer label revoke` straight into
        // the kernel's counters: what discovery admitted on the revoked
        // source's evidence is taken back within a heartbeat.
        self.revoke_discovered()
    }

    /// Tells the programs no twin answers any more: nothing parks from now
    /// on, and a parked task that is continued meets `EACCES`.
    pub fn stop_heartbeat(&mut self) -> Result<(), TwinError> {
        Ok(self.kernel.heartbeat(0, 0)?)
    }

    /// The kernel's counters by name.
    pub fn counters(&mut self) -> Result<std::collections::BTreeMap<&'static str, u64>, TwinError> {
        Ok(self.kernel.counters()?)
    }

    /// Appends a record to the audit log.
    pub fn audit(&mut self, record: &Record<'_>) -> Result<(), TwinError> {
        Ok(self.audit.record(record)?)
    }

    /// Records that pincer failed; the audit log gets no close line.
    pub fn audit_failure(&mut self, message: &str) -> Result<(), TwinError> {
        Ok(self.audit.fail(message)?)
    }

    /// The requests parked in the kernel, by thread id (a previous daemon's
    /// included).
    pub fn kernel_pending(&mut self) -> Result<Vec<(u32, Pending)>, TwinError> {
        Ok(self.kernel.pending()?)
    }

    /// Forgets a request parked in the kernel whose task is gone.
    pub fn forget_pending(&mut self, tid: u32) -> Result<(), TwinError> {
        if let Some(journal) = &self.journal {
            journal.forget(tid);
        }
        Ok(self.kernel.remove_pending(tid)?)
    }

    /// The grants votes made for `slot` and that still last.
    pub fn vote_grants(&self, slot: u32) -> Vec<ListedGrant> {
        self.grants.listed_votes(slot, Instant::now())
    }

    /// Withdraws the grants votes made for `slot` (only those on `path`,
    /// when given); returns how many. The mission's grants stay.
    pub fn revoke(&mut self, slot: u32, path: Option<&str>) -> Result<usize, TwinError> {
        let gone = self.grants.revoke(slot, path);
        for grant in &gone {
            self.write_target(&grant.target)?;
        }
        Ok(gone.len())
    }

    /// The requests waiting for a verdict now.
    pub fn waiting(&self) -> impl Iterator<Item = &Request> {
        self.waiting.values().map(|w| &*w.request)
    }

    /// Handles one record from the ring buffer: audits a decision, or
    /// decides, starts or joins the vote on a parked request.
    pub fn handle_record(&mut self, bytes: &[u8]) -> Result<Handled, TwinError> {
        let Some(event) = events::parse(bytes) else {
            tracing::warn!(len = bytes.len(), "dropped a short event record");
            return Ok(Handled::Audited);
        };
        if self.canaries.reported(event.tgid) {
            // The integrity check's own probe: proof that the programs
            // decide, not the agent's doing.
            return Ok(Handled::Audited);
        }
        if event.verdict == verdict::PARKED {
            self.on_parked(event)
        } else if event.verdict == verdict::HELD {
            // The daemon decides the cgroup and continues its tasks; each
            // decision the restarted calls make is audited then.
            self.held_reported = true;
            Ok(Handled::Audited)
        } else {
            let mut decision = events::decision(&event, &self.mounts);
            if event.flags & event_flags::TAINT != 0 {
                decision.taint = Some(self.tainted(&event, &decision.path));
            }
            if event.flags & event_flags::POLICY != 0 {
                decision.name_policy(self.policy_reason(&event, &decision.path));
            }
            self.audit(&Record::Decision(&decision))?;
            if decision.verdict == "deny" {
                self.tell_refusal(
                    event.cgroup_id,
                    &refusals::Refusal {
                        operation: &decision.operation,
                        path: &decision.path,
                        hook: decision.hook,
                        reason: &decision.reason,
                    },
                );
            }
            Ok(Handled::Audited)
        }
    }

    /// Tells the agent of `cgroup` of a refusal, when its confinement asks
    /// for it.
    fn tell_refusal(&mut self, cgroup: u64, refusal: &refusals::Refusal<'_>) {
        if let Some(told) = self
            .agents
            .get_mut(&cgroup)
            .and_then(|agent| agent.refusals.as_mut())
        {
            told.refused(
                refusal,
                std::time::Instant::now(),
                std::time::SystemTime::now(),
            );
        }
    }

    /// What made the object of a change a policy object, from the rule the
    /// kernel reports: its class and pattern, and the path up to the
    /// component it met (`path` is the object's, escaped).
    fn policy_reason(&self, event: &AccessEvent, path: &str) -> PolicyReason {
        // The component the rule met: the object's path less the names
        // below it.
        let mut at = path;
        for _ in 1..event.policy_step {
            at = at
                .rsplit_once('/')
                .map_or(at, |(up, _)| if up.is_empty() { "/" } else { up });
        }
        let (class, rule, why) = match event.policy_entry {
            policy_entry::LABEL => (
                "labelled".to_owned(),
                "a policy label".to_owned(),
                "labelled a policy object by identity: a path of the policy set, the target of a link a policy name points through, or a tree the owner labelled".to_owned(),
            ),
            policy_entry::VACATED => (
                "person's directory".to_owned(),
                "a name a person's directory was moved away from".to_owned(),
                "a link or a moved directory put there would stand where the person's tools look for theirs".to_owned(),
            ),
            policy_entry::SWAP => (
                "person's directory".to_owned(),
                "a person's directory".to_owned(),
                "replacing it puts another directory where the person's tools look for theirs".to_owned(),
            ),
            entry => match self.policy.entry(entry) {
                Some(found) => {
                    let why = if found.why.is_empty() {
                        labels::policy::class(&found.class)
                            .map_or_else(String::new, |class| class.why.clone())
                    } else {
                        found.why.clone()
                    };
                    (found.class.clone(), found.pattern.text(), why)
                }
                None => (
                    "unknown".to_owned(),
                    format!("rule {entry}"),
                    "a rule this twin did not write".to_owned(),
                ),
            },
        };
        PolicyReason {
            class,
            rule,
            at: at.to_owned(),
            why,
        }
    }

    /// A read lowered an agent's level: the chain of what did grows by it.
    /// Returns the level's name.
    fn tainted(&mut self, event: &AccessEvent, path: &str) -> &'static str {
        let level = match self.kernel.taint(event.cgroup_id) {
            Ok(Some(taint)) => authority::name(taint.level),
            _ => authority::name(0),
        };
        if let Some(agent) = self.agents.get_mut(&event.cgroup_id) {
            agent.taint.push(format!("read {path} ({level})"));
        }
        level
    }

    /// What lowered an agent's level, for a request: the reads reported,
    /// or, when none was (one allowed by a verdict), the object the
    /// kernel recorded.
    fn taint_chain(&mut self, cgroup: u64) -> Vec<String> {
        let Some(agent) = self.agents.get(&cgroup) else {
            return Vec::new();
        };
        if !agent.taint.is_empty() {
            return agent.taint.clone();
        }
        let Ok(Some(taint)) = self.kernel.taint(cgroup) else {
            return Vec::new();
        };
        let key = ObjectKey {
            dev: taint.dev,
            ino: taint.ino,
        };
        let level = authority::name(taint.level);
        let what = match agent.sources.get(&key) {
            Some(path) => crate::escape::escape(path.as_os_str().as_bytes()),
            None => format!(
                "the object {}:{} inode {}",
                taint.dev >> 20,
                taint.dev & 0xf_ffff,
                taint.ino
            ),
        };
        vec![format!("read {what} ({level})")]
    }

    /// A task was parked: join an identical waiting request, or vote on it;
    /// when the voters that answer at once decide it, the verdict is
    /// written and the task continued before this returns. A task of a
    /// cgroup the twin does not serve (released meanwhile) is refused at
    /// once.
    pub fn on_parked(&mut self, event: AccessEvent) -> Result<Handled, TwinError> {
        let received_ns = boottime_ns();
        let key = SameAccess::of(&event);
        // Held by its numbers while it is answered in this step; a pidfd
        // is taken only when the answer has to wait (see `Held`).
        let mut waiter = Waiter {
            task: Held::now(event.tgid, event.pid),
            request_id: event.request_id,
        };
        if let Some(journal) = &self.journal {
            journal.keep(&event);
        }
        if let Some(waiting) = self.waiting.get_mut(&key) {
            if let Some(metrics) = &self.metrics
                && let Some(agent) = self.agents.get(&key.cgroup)
            {
                metrics.parked(&agent.name, 1);
            }
            waiter.task = self.kernel.hold(event.tgid, event.pid);
            waiting.waiters.push(waiter);
            return Ok(Handled::Waiting);
        }
        let Some(agent) = self.agents.get(&event.cgroup_id) else {
            tracing::warn!(
                cgroup = event.cgroup_id,
                tid = event.pid,
                "a parked task of no agent: refused"
            );
            let _ = self.answer(&waiter, false, None);
            return Ok(Handled::Answered);
        };
        if let Some(metrics) = &self.metrics {
            metrics.request(&agent.name, events::hook_name(event.hook));
            metrics.parked(&agent.name, 1);
        }
        let mut request = events::request(
            &event,
            &self.mounts,
            &agent.name,
            agent.root,
            &mut self.exes,
        );
        // The kernel says whether the agent had a level when it parked: a
        // map read only when it did.
        if event.flags & event_flags::TAINTED != 0 {
            request.taint = self.taint_chain(event.cgroup_id);
        }
        if event.flags & event_flags::POLICY != 0 {
            let reason = self.policy_reason(&event, &request.path);
            request.name_policy(reason);
        }
        let mut inspected = None;
        if event.flags & event_flags::INSPECT != 0 {
            // The inspection answers what is the agent's, and in enforce
            // mode what is not; in ask mode the owner is asked about that.
            let enforced = self
                .agents
                .get(&event.cgroup_id)
                .is_some_and(|agent| agent.mode == Mode::Enforce);
            let answer = match inspect::inspect(&event, &request.path) {
                inspect::Inspection::Agents(changes, read) => Some((
                    Some(read),
                    Outcome::decided(
                        "inspection",
                        format!("{changes}: keys that run nothing are the agent's"),
                        Some((Lifetime::Once, Extent::File)),
                    ),
                )),
                inspect::Inspection::Owners(why, read) => {
                    request.owner_only = Some(format!("{why}: only the owner may allow it"));
                    inspected = read;
                    enforced.then(|| {
                        (
                            None,
                            Outcome::decided(
                                "inspection",
                                format!(
                                    "{why}: only the owner may allow it, and the mission asks nobody"
                                ),
                                None,
                            ),
                        )
                    })
                }
            };
            if let Some((read, outcome)) = answer {
                let waiting = Waiting {
                    received_ns,
                    sanitized_ns: boottime_ns(),
                    request: Arc::new(request),
                    event,
                    waiters: vec![waiter],
                    vote: None,
                    planned: None,
                    inspected: read,
                };
                self.conclude(waiting, outcome)?;
                return Ok(Handled::Answered);
            }
        }
        let discovered = self.discover(&event, &mut request);
        let Some(agent) = self.agents.get(&event.cgroup_id) else {
            unreachable!("looked up above")
        };
        let request = Arc::new(request);
        let sanitized_ns = boottime_ns();
        tracing::info!(id = request.id, agent = %agent.name, path = %request.path, ops = ?request.operation, "parked");
        let mut waiting = Waiting {
            received_ns,
            sanitized_ns,
            request,
            event,
            waiters: vec![waiter],
            vote: None,
            planned: None,
            inspected,
        };
        if let Some(discovered) = discovered {
            self.conclude_discovered(waiting, discovered)?;
            return Ok(Handled::Answered);
        }
        match vote::begin(&agent.voters, &waiting.request, &agent.policy) {
            Ok(outcome) => {
                // Decided here: no task, timer or channel between the vote
                // and the waiting task.
                self.conclude(waiting, outcome)?;
                Ok(Handled::Answered)
            }
            Err(pending) => {
                for waiter in &mut waiting.waiters {
                    waiter.task = self.kernel.hold(waiter.task.pid, waiter.task.tid);
                }
                let policy = agent.policy.clone();
                let outcomes = self.outcomes.clone();
                let request = Arc::clone(&waiting.request);
                waiting.vote = Some(tokio::spawn(async move {
                    let outcome = pending.finish(request, &policy).await;
                    let _ = outcomes.send((key, outcome));
                }));
                self.waiting.insert(key, waiting);
                Ok(Handled::Waiting)
            }
        }
    }

    /// A vote ended: write the verdict, continue the tasks, audit.
    pub fn on_outcome(&mut self, key: SameAccess, outcome: Outcome) -> Result<(), TwinError> {
        let Some(waiting) = self.waiting.remove(&key) else {
            return Ok(());
        };
        self.conclude(waiting, outcome)
    }

    /// Writes the verdict on requests that waited together, continues their
    /// tasks and audits it. Every task is continued whatever fails on the
    /// way, and the failure is returned after: when a grant cannot be
    /// written, an allow is answered once.
    fn conclude(&mut self, waiting: Waiting, mut outcome: Outcome) -> Result<(), TwinError> {
        let voted_ns = boottime_ns();
        // An inspected change lands exactly what was read, or nothing.
        let mut pin = None;
        if outcome.allow.is_some()
            && let Some(read) = &waiting.inspected
        {
            match inspect::seal(read, &mut self.kernel) {
                Ok(sealed) => pin = Some(sealed),
                Err(why) => {
                    tracing::warn!(id = waiting.request.id, %why, "an allowed change could not be sealed: refused");
                    outcome.allow = None;
                    outcome.reason = format!("{}; refused: {why}", outcome.reason);
                }
            }
        }
        // Once, whatever was voted: the next change is inspected again.
        if waiting.event.flags & event_flags::INSPECT != 0
            && let Some((lifetime, extent)) = &mut outcome.allow
        {
            *lifetime = Lifetime::Once;
            *extent = Extent::File;
        }
        let (granted, mut answered) = match outcome.allow {
            Some((lifetime @ (Lifetime::Session | Lifetime::Ttl(_)), extent)) => {
                match self.grant(&waiting, lifetime, extent) {
                    Ok(granted) => (granted, Ok(())),
                    Err(error) => (None, Err(error)),
                }
            }
            _ => (None, Ok(())),
        };
        for waiter in &waiting.waiters {
            let written = if granted.is_some() {
                // The restarted syscall finds the grant.
                let forgotten = self.kernel.remove_pending(waiter.task.tid);
                self.resume(&waiter.task);
                forgotten.map_err(TwinError::from)
            } else {
                self.answer(waiter, outcome.allow.is_some(), pin)
            };
            answered = answered.and(written);
        }
        let stages = Stages::of(&waiting, voted_ns, boottime_ns());
        if let Some(metrics) = &self.metrics {
            metrics.verdict(
                &waiting.request.mission,
                &outcome.decided_by,
                outcome.allow.is_some(),
                Duration::from_nanos(boottime_ns().saturating_sub(waiting.received_ns)),
            );
        }
        let (lifetime, extent) = match (outcome.allow, &granted) {
            (Some((lifetime, extent)), Some(_)) => (Some(lifetime), Some(extent)),
            (Some(_), None) => (Some(Lifetime::Once), Some(Extent::File)),
            (None, _) => (None, None),
        };
        self.audit(&Record::Verdict(VerdictRecord {
            request: &waiting.request,
            tids: waiting.waiters.iter().map(|w| w.task.tid).collect(),
            verdict: if outcome.allow.is_some() {
                "allow"
            } else {
                "deny"
            },
            lifetime,
            extent,
            decided_by: &outcome.decided_by,
            reason: &outcome.reason,
            votes: &outcome.ballots,
            stages,
        }))?;
        if outcome.allow.is_none() {
            let operation: Vec<&str> = waiting.request.operation.iter().map(|o| &**o).collect();
            self.tell_refusal(
                waiting.event.cgroup_id,
                &refusals::Refusal {
                    operation: &operation,
                    path: &waiting.request.path,
                    hook: &waiting.request.hook,
                    reason: &outcome.reason,
                },
            );
        }
        if let Some(grant) = granted {
            self.release_covered(&grant, &waiting.request)?;
        }
        answered
    }

    /// Makes a session or TTL grant for a request; `None` when the request
    /// cannot be granted beyond once (a created name too long to keep).
    fn grant(
        &mut self,
        waiting: &Waiting,
        lifetime: Lifetime,
        extent: Extent,
    ) -> Result<Option<VoteGrant>, TwinError> {
        let event = &waiting.event;
        let Some(slot) = self.agents.get(&event.cgroup_id).map(|a| a.slot) else {
            return Ok(None);
        };
        if let Some(planned) = &waiting.planned {
            let target = self.grants.add_vote(planned.clone()).clone();
            self.write_target(&target)?;
            return Ok(Some(planned.clone()));
        }
        let Some((target, tree)) = Grants::target_for(event, slot, extent) else {
            return Ok(None);
        };
        let expires = match lifetime {
            // Every reader caps a ttl at vote::MAX_TTL; capping here too
            // keeps the sum within what the clock can hold whatever the
            // voter.
            Lifetime::Ttl(ttl) => Some(Instant::now() + ttl.min(crate::vote::MAX_TTL)),
            _ => None,
        };
        let grant = VoteGrant {
            target,
            path: if tree {
                tree_of(&waiting.request.path)
            } else {
                waiting.request.path.clone()
            },
            ops: event.ops,
            tree,
            expires,
        };
        let target = self.grants.add_vote(grant.clone()).clone();
        self.write_target(&target)?;
        Ok(Some(grant))
    }

    /// Writes the kernel value of a grant target: the mission's grant plus
    /// every live vote grant on it.
    fn write_target(&mut self, target: &Target) -> Result<(), TwinError> {
        match target {
            Target::Inode(key) => {
                let value = self.grants.inode_value(key);
                self.kernel.set_grant(*key, value)?;
            }
            Target::Name(key) => {
                let value = self.grants.name_value(key);
                self.kernel.set_name_grant(**key, value)?;
            }
        }
        Ok(())
    }

    /// Releases the waiting requests a new grant covers: the grant answers
    /// them as well, so nobody is asked about them again.
    fn release_covered(
        &mut self,
        grant: &VoteGrant,
        granted_for: &Request,
    ) -> Result<(), TwinError> {
        let covered = self.take_waiting(|key, waiting| {
            key.ops & !grant.ops == 0
                && match &grant.target {
                    Target::Inode(on) if grant.tree => {
                        key.dev == on.dev
                            && std::path::Path::new(&waiting.request.path).starts_with(&grant.path)
                    }
                    Target::Inode(on) => !key.new_name && key.dev == on.dev && key.ino == on.ino,
                    Target::Name(_) => false,
                }
        });
        let reason = format!("covered by the grant made for request {}", granted_for.id);
        let now = boottime_ns();
        let mut result = Ok(());
        for waiting in covered {
            for waiter in &waiting.waiters {
                // Continued whatever the map says: the restarted syscall
                // finds the grant, or parks again.
                let forgotten = self.kernel.remove_pending(waiter.task.tid);
                result = result.and(forgotten.map_err(TwinError::from));
                self.resume(&waiter.task);
            }
            let audited = self.audit(&Record::Verdict(VerdictRecord {
                request: &waiting.request,
                tids: waiting.waiters.iter().map(|w| w.task.tid).collect(),
                verdict: "allow",
                lifetime: None,
                extent: None,
                decided_by: "grant",
                reason: &reason,
                votes: &[],
                stages: Stages::of(&waiting, now, now),
            }));
            result = result.and(audited);
        }
        result
    }

    /// Takes out the waiting requests that match, their votes stopped.
    fn take_waiting(&mut self, matches: impl Fn(&SameAccess, &Waiting) -> bool) -> Vec<Waiting> {
        let keys: Vec<SameAccess> = self
            .waiting
            .iter()
            .filter(|(key, waiting)| matches(key, waiting))
            .map(|(key, _)| *key)
            .collect();
        keys.iter()
            .filter_map(|key| self.waiting.remove(key))
            .inspect(|waiting| {
                if let Some(vote) = &waiting.vote {
                    vote.abort();
                }
            })
            .collect()
    }

    /// When the next TTL grant ends, if any.
    pub fn next_expiry(&self) -> Option<Instant> {
        self.grants.next_expiry()
    }

    /// Removes the TTL grants that have ended.
    pub fn expire(&mut self) -> Result<(), TwinError> {
        for grant in self.grants.expire(Instant::now()) {
            tracing::info!(target = ?grant.target, "a time-limited grant ended");
            self.write_target(&grant.target)?;
        }
        Ok(())
    }

    /// Denies every request still waiting (the agent is done or pincer is
    /// stopping): nothing stays stopped behind us.
    pub fn deny_all(&mut self) -> Result<(), TwinError> {
        self.deny_where(|_| true)
    }

    /// Denies the waiting requests whose key matches.
    /// Every task is answered and continued even when a write fails on the
    /// way: the first error is returned at the end.
    fn deny_where(&mut self, matches: impl Fn(&SameAccess) -> bool) -> Result<(), TwinError> {
        let mut result = Ok(());
        for waiting in self.take_waiting(|key, _| matches(key)) {
            for waiter in &waiting.waiters {
                let answered = self.answer(waiter, false, None);
                result = result.and(answered);
            }
        }
        result
    }

    /// Writes a one-shot verdict for a waiter and continues it; an allow
    /// `pin`ned to an object lets a rename move that object only.
    fn answer(
        &mut self,
        waiter: &Waiter,
        allow: bool,
        pin: Option<ObjectKey>,
    ) -> Result<(), TwinError> {
        let pin = pin.unwrap_or_default();
        let written = self.kernel.write_verdict(
            waiter.task.tid,
            Verdict {
                id: waiter.request_id,
                allow: u32::from(allow),
                _pad: 0,
                pin_dev: pin.dev,
                pin_ino: pin.ino,
            },
        );
        // Continued even when the write failed: a task continued with no
        // verdict parks again (or, with no twin, meets EACCES), which beats
        // leaving it stopped.
        self.resume(&waiter.task);
        Ok(written?)
    }

    /// Continues a parked task and forgets its journal entry.
    fn resume(&mut self, task: &Held) {
        if let Some(journal) = &self.journal {
            journal.forget(task.tid);
        }
        if !self.kernel.resume(task) {
            tracing::debug!(pid = task.pid, tid = task.tid, "the parked task is gone");
        }
    }
}

impl Stages {
    /// The stages of a request that waited in `waiting`, voted on by
    /// `voted_ns` and answered by `answered_ns`.
    fn of(waiting: &Waiting, voted_ns: u64, answered_ns: u64) -> Self {
        let micros = |from: u64, to: u64| to.saturating_sub(from) / 1000;
        Stages {
            // Zero when the event carries no time (a test's).
            kernel_to_twin_us: (waiting.event.at_ns != 0)
                .then(|| micros(waiting.event.at_ns, waiting.received_ns)),
            sanitize_us: micros(waiting.received_ns, waiting.sanitized_ns),
            vote_us: micros(waiting.sanitized_ns, voted_ns),
            answer_us: micros(voted_ns, answered_ns),
        }
    }
}

/// `CLOCK_BOOTTIME` in nanoseconds: the clock of `bpf_ktime_get_boot_ns`.
pub fn boottime_ns() -> u64 {
    let now = nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME)
        .expect("CLOCK_BOOTTIME is always available on Linux");
    now.tv_sec() as u64 * 1_000_000_000 + now.tv_nsec() as u64
}
