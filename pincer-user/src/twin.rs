//! The twin: the one task that owns the loaded programs while agents run.
//!
//! It serves any number of agents (`pincer run` has one, `pincer daemon`
//! many): each confined cgroup has its own slot, mission, voters and policy,
//! so grants, prompts and verdicts of one agent never touch another's.
//!
//! It reads decisions off the ring buffer, audits them, and for every parked
//! request: sanitizes it ([`events::request`]), merges it with an identical
//! request already waiting, runs the votes ([`vote::collect`]), writes the
//! verdict into the kernel (a one-shot verdict, or a session / TTL grant)
//! and continues the stopped task, which restarts its syscall and meets the
//! verdict. A session grant also releases every other waiting request it
//! covers. The twin sends a heartbeat to the programs: without a fresh one
//! they deny at once instead of parking.

use std::{
    collections::HashMap,
    os::fd::{AsRawFd, FromRawFd, OwnedFd},
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use aya::maps::{MapData, RingBuf};
use pincer_common::{
    AccessEvent, GrantKey, GrantValue, NAME_LEN, NameGrantKey, Verdict, event_flags, verdict,
};
use serde::Serialize;
use tokio::{sync::mpsc, task::JoinHandle, time::Instant};

use crate::{
    audit::{AuditError, AuditLog},
    events::{self, Mounts},
    loader::{Enforcer, LoadError},
    metrics::Metrics,
    mission::ResolvedGrants,
    request::Request,
    vote::{self, Lifetime, Outcome, Policy, Scope, Voter},
};

/// How often the twin tells the programs it is alive.
pub const HEARTBEAT_EVERY: Duration = Duration::from_millis(500);
/// How old a heartbeat may get before the programs stop parking.
pub const HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(3);

/// Errors of the twin.
#[derive(Debug, thiserror::Error)]
pub enum TwinError {
    /// The kernel maps could not be written.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The audit log failed.
    #[error(transparent)]
    Audit(#[from] AuditError),
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

/// A stopped thread waiting for a verdict.
struct Waiter {
    tid: u32,
    pid: u32,
    request_id: u64,
    /// Taken when the event arrived, while the task was stopped and its pid
    /// could not be reused: continuing it later cannot hit another process.
    pidfd: Option<OwnedFd>,
}

/// Requests waiting on one vote.
struct Waiting {
    arrived: std::time::Instant,
    request: Arc<Request>,
    event: AccessEvent,
    waiters: Vec<Waiter>,
    vote: JoinHandle<()>,
}

/// A grant made by a vote, with its end.
struct DynamicGrant {
    target: Target,
    /// The path it was asked for (a tree's directory for a tree grant).
    path: String,
    ops: u32,
    tree: bool,
    expires: Option<Instant>,
}

/// A grant made by a vote, as `pincer grants` shows it.
#[derive(Clone, Debug, Serialize)]
pub struct VoteGrant {
    /// The slot of the agent it belongs to.
    pub slot: u32,
    /// The path it was made for.
    pub path: String,
    /// Operations granted.
    pub ops: Vec<&'static str>,
    /// `"file"` or `"tree"`.
    pub extent: &'static str,
    /// Seconds left for a time-limited grant; `None` for a session grant.
    pub expires_in: Option<u64>,
}

/// What a dynamic grant is on.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Target {
    Inode(GrantKey),
    Name(Box<NameGrantKey>),
}

impl Target {
    fn slot(&self) -> u32 {
        match self {
            Target::Inode(key) => key.slot,
            Target::Name(key) => key.slot,
        }
    }
}

/// One audit line about a parked request.
#[derive(Serialize)]
struct VerdictRecord<'a> {
    event: &'static str,
    request: &'a Request,
    tids: Vec<u32>,
    verdict: &'static str,
    lifetime: Option<Lifetime>,
    extent: Option<Scope>,
    decided_by: &'a str,
    reason: &'a str,
    votes: &'a [vote::Ballot],
}

/// One confined cgroup, as the twin knows it.
pub struct AgentEntry {
    /// The grant slot of its mission (unique per cgroup).
    pub slot: u32,
    /// The agent's name (the mission's, or the daemon configuration's).
    pub name: String,
    /// Who votes on its parked requests.
    pub voters: Vec<Arc<dyn Voter>>,
    /// The mission's vote policy.
    pub policy: Policy,
    /// Its first process, where parent chains stop (`pincer run`'s command).
    pub root: Option<u32>,
}

/// What the twin keeps per agent cgroup.
struct Agent {
    slot: u32,
    name: String,
    voters: Arc<Vec<Arc<dyn Voter>>>,
    policy: Policy,
    root: Option<u32>,
}

/// The twin's state.
pub struct Twin {
    enforcer: Enforcer,
    agents: HashMap<u64, Agent>,
    mounts: Mounts,
    waiting: HashMap<SameAccess, Waiting>,
    outcomes: mpsc::UnboundedSender<(SameAccess, Outcome)>,
    /// The mission grants of every agent (keys carry the slot).
    base: HashMap<GrantKey, GrantValue>,
    base_names: HashMap<NameGrantKey, GrantValue>,
    dynamic: Vec<DynamicGrant>,
    /// Where parked events are kept until their verdict, so a restarted
    /// daemon can ask about them again (`pincer daemon` only).
    journal: Option<PathBuf>,
    metrics: Option<Arc<Metrics>>,
}

impl Twin {
    /// A twin over loaded programs, with no agent yet. Returns the receiver
    /// of vote outcomes, to pass to [`Twin::on_outcome`].
    pub fn new(enforcer: Enforcer) -> (Self, mpsc::UnboundedReceiver<(SameAccess, Outcome)>) {
        let (outcomes, receiver) = mpsc::unbounded_channel();
        let twin = Self {
            enforcer,
            agents: HashMap::new(),
            mounts: Mounts::load(),
            waiting: HashMap::new(),
            outcomes,
            base: HashMap::new(),
            base_names: HashMap::new(),
            dynamic: Vec::new(),
            journal: None,
            metrics: None,
        };
        (twin, receiver)
    }

    /// Takes on an agent cgroup whose grants (`base`, for `entry.slot`) and
    /// kernel agent entry are written already.
    pub fn adopt(&mut self, cgroup: u64, entry: AgentEntry, base: &ResolvedGrants) {
        self.base
            .extend(base.inode.iter().map(|(k, v, _)| (*k, *v)));
        self.base_names
            .extend(base.names.iter().map(|(k, v, _)| (*k, *v)));
        self.agents.insert(
            cgroup,
            Agent {
                slot: entry.slot,
                name: entry.name,
                voters: Arc::new(entry.voters),
                policy: entry.policy,
                root: entry.root,
            },
        );
    }

    /// Confines a cgroup: writes its mission grants and its kernel agent
    /// entry (grants first, so its first access already finds them), then
    /// adopts it.
    pub fn confine(
        &mut self,
        cgroup: u64,
        kernel: pincer_common::Agent,
        entry: AgentEntry,
        base: &ResolvedGrants,
    ) -> Result<(), TwinError> {
        self.enforcer.add_grants(base)?;
        if let Err(error) = self.enforcer.add_agent(cgroup, kernel) {
            let _ = self.enforcer.remove_slot(entry.slot);
            return Err(error.into());
        }
        self.adopt(cgroup, entry, base);
        Ok(())
    }

    /// Stops confining a cgroup: its waiting requests are denied, its
    /// kernel entry and every grant of its slot (mission and votes) removed.
    pub fn release(&mut self, cgroup: u64) -> Result<(), TwinError> {
        let Some(agent) = self.agents.remove(&cgroup) else {
            return Ok(());
        };
        self.deny_where(|key| key.cgroup == cgroup)?;
        self.enforcer.remove_agent(cgroup)?;
        self.drop_slot(agent.slot)
    }

    /// Keeps every parked event in `dir` until its verdict.
    pub fn set_journal(&mut self, dir: PathBuf) {
        self.journal = Some(dir);
    }

    /// Counts requests and verdicts in `metrics`.
    pub fn set_metrics(&mut self, metrics: Arc<Metrics>) {
        self.metrics = Some(metrics);
    }

    /// Forgets a slot an agent no longer uses (it was confined again under a
    /// new one): its mission and vote grants go.
    pub fn drop_slot(&mut self, slot: u32) -> Result<(), TwinError> {
        self.base.retain(|k, _| k.slot != slot);
        self.base_names.retain(|k, _| k.slot != slot);
        self.dynamic.retain(|g| g.target.slot() != slot);
        self.enforcer.remove_slot(slot)?;
        Ok(())
    }

    /// The grants votes made and that still last.
    pub fn vote_grants(&self) -> Vec<VoteGrant> {
        let now = Instant::now();
        self.dynamic
            .iter()
            .filter(|g| g.expires.is_none_or(|e| e > now))
            .map(|g| VoteGrant {
                slot: g.target.slot(),
                path: g.path.clone(),
                ops: events::op_names(g.ops),
                extent: if g.tree { "tree" } else { "file" },
                expires_in: g
                    .expires
                    .map(|e| e.saturating_duration_since(now).as_secs()),
            })
            .collect()
    }

    /// Withdraws the grants votes made for `slot` (only those on `path`,
    /// when given); returns how many. The mission's grants stay.
    pub fn revoke(&mut self, slot: u32, path: Option<&str>) -> Result<usize, TwinError> {
        let (gone, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.dynamic)
            .into_iter()
            .partition(|g| g.target.slot() == slot && path.is_none_or(|p| p == g.path));
        self.dynamic = kept;
        for grant in &gone {
            self.write_target(&grant.target)?;
        }
        Ok(gone.len())
    }

    /// The requests waiting for a verdict now.
    pub fn waiting(&self) -> impl Iterator<Item = &Request> {
        self.waiting.values().map(|w| &*w.request)
    }

    /// The loaded programs (for teardown).
    pub fn enforcer(&mut self) -> &mut Enforcer {
        &mut self.enforcer
    }

    /// Sets an agent's first process, where parent chains stop.
    pub fn set_root(&mut self, cgroup: u64, pid: u32) {
        if let Some(agent) = self.agents.get_mut(&cgroup) {
            agent.root = Some(pid);
        }
    }

    /// Tells the programs the twin is alive.
    pub fn heartbeat(&mut self) -> Result<(), TwinError> {
        self.enforcer
            .heartbeat(boottime_ns(), HEARTBEAT_TIMEOUT.as_nanos() as u64)?;
        Ok(())
    }

    /// Handles every event waiting in the ring buffer.
    pub fn drain(
        &mut self,
        ring: &mut RingBuf<MapData>,
        audit: &mut AuditLog,
    ) -> Result<(), TwinError> {
        while let Some(item) = ring.next() {
            let Some(event) = events::parse(&item) else {
                tracing::warn!(len = item.len(), "dropped a short event record");
                continue;
            };
            drop(item);
            if event.verdict == verdict::PARKED {
                self.on_parked(event);
            } else {
                audit.record(&events::decision(&event, &self.mounts))?;
            }
        }
        Ok(())
    }

    /// A task was parked: join an identical waiting request, or start a vote.
    /// A task of a cgroup the twin does not serve (released meanwhile) is
    /// refused at once.
    pub fn on_parked(&mut self, event: AccessEvent) {
        let key = SameAccess {
            cgroup: event.cgroup_id,
            dev: event.dev,
            ino: event.ino,
            name_hash: event.name_hash,
            ops: event.ops,
            hook: event.hook,
            new_name: event.flags & event_flags::NEW_NAME != 0,
        };
        let waiter = Waiter {
            tid: event.pid,
            pid: event.tgid,
            request_id: event.request_id,
            pidfd: pidfd_open(event.tgid),
        };
        if let Some(dir) = &self.journal {
            journal_write(dir, &event);
        }
        if let Some(waiting) = self.waiting.get_mut(&key) {
            if let Some(metrics) = &self.metrics
                && let Some(agent) = self.agents.get(&key.cgroup)
            {
                metrics.parked(&agent.name, 1);
            }
            waiting.waiters.push(waiter);
            return;
        }
        let Some(agent) = self.agents.get(&event.cgroup_id) else {
            tracing::warn!(
                cgroup = event.cgroup_id,
                tid = event.pid,
                "a parked task of no agent: refused"
            );
            let _ = self.enforcer.write_verdict(
                waiter.tid,
                Verdict {
                    id: waiter.request_id,
                    allow: 0,
                    _pad: 0,
                },
            );
            self.resume(&waiter);
            return;
        };
        if let Some(metrics) = &self.metrics {
            metrics.request(&agent.name, events::hook_name(event.hook));
            metrics.parked(&agent.name, 1);
        }
        let request = Arc::new(events::request(
            &event,
            &self.mounts,
            &agent.name,
            agent.root,
        ));
        tracing::info!(id = request.id, agent = %agent.name, path = %request.path, ops = ?request.operation, "parked");
        let voters = Arc::clone(&agent.voters);
        let policy = agent.policy.clone();
        let outcomes = self.outcomes.clone();
        let for_vote = Arc::clone(&request);
        let vote = tokio::spawn(async move {
            let outcome = vote::collect(&voters, for_vote, &policy).await;
            let _ = outcomes.send((key, outcome));
        });
        self.waiting.insert(
            key,
            Waiting {
                arrived: std::time::Instant::now(),
                request,
                event,
                waiters: vec![waiter],
                vote,
            },
        );
    }

    /// A vote ended: write the verdict, continue the tasks, audit.
    pub fn on_outcome(
        &mut self,
        key: SameAccess,
        outcome: Outcome,
        audit: &mut AuditLog,
    ) -> Result<(), TwinError> {
        let Some(waiting) = self.waiting.remove(&key) else {
            return Ok(());
        };
        let granted = match outcome.allow {
            Some((lifetime @ (Lifetime::Session | Lifetime::Ttl(_)), extent)) => {
                self.grant(&waiting, lifetime, extent)?
            }
            _ => None,
        };
        let allow_once = outcome.allow.is_some() && granted.is_none();
        for waiter in &waiting.waiters {
            if granted.is_some() {
                // The restarted syscall finds the grant.
                self.enforcer.remove_pending(waiter.tid)?;
            } else {
                self.enforcer.write_verdict(
                    waiter.tid,
                    Verdict {
                        id: waiter.request_id,
                        allow: u32::from(allow_once),
                        _pad: 0,
                    },
                )?;
            }
            self.resume(waiter);
        }
        if let Some(metrics) = &self.metrics {
            metrics.verdict(
                &waiting.request.mission,
                &outcome.decided_by,
                outcome.allow.is_some(),
                waiting.arrived.elapsed(),
            );
        }
        let (lifetime, extent) = match (outcome.allow, &granted) {
            (Some((lifetime, extent)), Some(_)) => (Some(lifetime), Some(extent)),
            (Some(_), None) => (Some(Lifetime::Once), Some(Scope::File)),
            (None, _) => (None, None),
        };
        audit.record(&VerdictRecord {
            event: "verdict",
            request: &waiting.request,
            tids: waiting.waiters.iter().map(|w| w.tid).collect(),
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
        })?;
        if let Some(grant) = granted {
            self.release_covered(grant, &waiting.request, audit)?;
        }
        Ok(())
    }

    /// Makes a session or TTL grant for a request; `None` when the request
    /// cannot be granted beyond once (a created name too long to copy).
    fn grant(
        &mut self,
        waiting: &Waiting,
        lifetime: Lifetime,
        extent: Scope,
    ) -> Result<Option<(Target, u32, bool)>, TwinError> {
        let event = &waiting.event;
        let Some(slot) = self.agents.get(&event.cgroup_id).map(|a| a.slot) else {
            return Ok(None);
        };
        let inode = |ino| {
            Target::Inode(GrantKey {
                slot,
                _pad: 0,
                dev: event.dev,
                ino,
            })
        };
        let new_name = event.flags & event_flags::NEW_NAME != 0;
        let (target, tree) = match (new_name, extent) {
            // A tree on the object's directory; for a new name the event
            // already names the directory.
            (true, Scope::Tree) => (inode(event.ino), true),
            (false, Scope::Tree) if event.parent_ino != 0 => (inode(event.parent_ino), true),
            (true, _) => {
                let Some(name) = events::created_name(event).filter(|n| n.len() < NAME_LEN) else {
                    return Ok(None);
                };
                let mut key = NameGrantKey::zeroed();
                key.slot = slot;
                key.parent_dev = event.dev;
                key.parent_ino = event.ino;
                key.name_len = name.len() as u32;
                key.name[..name.len()].copy_from_slice(&name);
                (Target::Name(Box::new(key)), false)
            }
            _ => (inode(event.ino), false),
        };
        let expires = match lifetime {
            Lifetime::Ttl(ttl) => Some(Instant::now() + ttl),
            _ => None,
        };
        let path = if tree {
            Path::new(&waiting.request.path)
                .parent()
                .map_or_else(|| waiting.request.path.clone(), |p| p.display().to_string())
        } else {
            waiting.request.path.clone()
        };
        self.dynamic.push(DynamicGrant {
            target: target.clone(),
            path,
            ops: event.ops,
            tree,
            expires,
        });
        self.write_target(&target)?;
        Ok(Some((target, event.ops, tree)))
    }

    /// Writes the kernel value of a grant target: the mission's grant plus
    /// every live dynamic grant on it.
    fn write_target(&mut self, target: &Target) -> Result<(), TwinError> {
        let dynamic = self.dynamic.iter().filter(|g| g.target == *target);
        match target {
            Target::Inode(key) => {
                let mut value = self.base.get(key).copied().unwrap_or_default();
                for grant in dynamic {
                    if grant.tree {
                        value.tree_ops |= grant.ops;
                    } else {
                        value.file_ops |= grant.ops;
                    }
                }
                self.enforcer.set_grant(*key, value)?;
            }
            Target::Name(key) => {
                let mut value = self.base_names.get(&**key).copied().unwrap_or_default();
                for grant in dynamic {
                    value.file_ops |= grant.ops;
                }
                self.enforcer.set_name_grant(**key, value)?;
            }
        }
        Ok(())
    }

    /// Releases the waiting requests a new grant covers: the grant answers
    /// them as well, so nobody is asked about them again.
    fn release_covered(
        &mut self,
        (target, ops, tree): (Target, u32, bool),
        granted_for: &Request,
        audit: &mut AuditLog,
    ) -> Result<(), TwinError> {
        let tree_dir = Path::new(&granted_for.path).parent().map(Path::to_path_buf);
        let covered: Vec<SameAccess> = self
            .waiting
            .iter()
            .filter(|(key, waiting)| {
                key.ops & !ops == 0
                    && match &target {
                        Target::Inode(grant) if tree => {
                            key.dev == grant.dev
                                && tree_dir.as_deref().is_some_and(|d| {
                                    Path::new(&waiting.request.path).starts_with(d)
                                })
                        }
                        Target::Inode(grant) => {
                            !key.new_name && key.dev == grant.dev && key.ino == grant.ino
                        }
                        Target::Name(_) => false,
                    }
            })
            .map(|(key, _)| *key)
            .collect();
        for key in covered {
            let Some(waiting) = self.waiting.remove(&key) else {
                continue;
            };
            waiting.vote.abort();
            for waiter in &waiting.waiters {
                self.enforcer.remove_pending(waiter.tid)?;
                self.resume(waiter);
            }
            let reason = format!("covered by the grant made for request {}", granted_for.id);
            audit.record(&VerdictRecord {
                event: "verdict",
                request: &waiting.request,
                tids: waiting.waiters.iter().map(|w| w.tid).collect(),
                verdict: "allow",
                lifetime: None,
                extent: None,
                decided_by: "grant",
                reason: &reason,
                votes: &[],
            })?;
        }
        Ok(())
    }

    /// When the next TTL grant ends, if any.
    pub fn next_expiry(&self) -> Option<Instant> {
        self.dynamic.iter().filter_map(|g| g.expires).min()
    }

    /// Removes the TTL grants that have ended.
    pub fn expire(&mut self) -> Result<(), TwinError> {
        let now = Instant::now();
        let (ended, live): (Vec<_>, Vec<_>) = std::mem::take(&mut self.dynamic)
            .into_iter()
            .partition(|g| g.expires.is_some_and(|e| e <= now));
        self.dynamic = live;
        for grant in ended {
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
    fn deny_where(&mut self, matches: impl Fn(&SameAccess) -> bool) -> Result<(), TwinError> {
        let keys: Vec<SameAccess> = self
            .waiting
            .keys()
            .filter(|k| matches(k))
            .copied()
            .collect();
        for key in keys {
            let Some(waiting) = self.waiting.remove(&key) else {
                continue;
            };
            waiting.vote.abort();
            for waiter in &waiting.waiters {
                self.enforcer.write_verdict(
                    waiter.tid,
                    Verdict {
                        id: waiter.request_id,
                        allow: 0,
                        _pad: 0,
                    },
                )?;
                self.resume(waiter);
            }
        }
        Ok(())
    }
}

/// `CLOCK_BOOTTIME` in nanoseconds: the clock of `bpf_ktime_get_boot_ns`.
pub fn boottime_ns() -> u64 {
    let now = nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME)
        .expect("CLOCK_BOOTTIME is always available on Linux");
    now.tv_sec() as u64 * 1_000_000_000 + now.tv_nsec() as u64
}

/// A pidfd for a process, or `None` when it is gone.
fn pidfd_open(pid: u32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        return None;
    }
    // SAFETY: the kernel just returned this descriptor to us alone.
    Some(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

impl Twin {
    /// Continues a parked task and forgets its journal entry.
    fn resume(&self, waiter: &Waiter) {
        if let Some(dir) = &self.journal {
            let _ = std::fs::remove_file(dir.join(waiter.tid.to_string()));
        }
        resume(waiter);
    }
}

/// Keeps a parked event as `<dir>/<tid>` (its raw bytes).
fn journal_write(dir: &Path, event: &AccessEvent) {
    // SAFETY: `AccessEvent` is plain old data; its bytes are read, not
    // interpreted.
    let bytes = unsafe {
        std::slice::from_raw_parts(
            (event as *const AccessEvent).cast::<u8>(),
            size_of::<AccessEvent>(),
        )
    };
    let path = dir.join(event.pid.to_string());
    if let Err(error) = std::fs::write(&path, bytes) {
        tracing::warn!(%error, path = %path.display(), "cannot keep a parked event");
    }
}

/// The parked events kept in `dir` by a previous daemon, by thread id.
pub fn journal_read(dir: &Path) -> HashMap<u32, AccessEvent> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return HashMap::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let tid = entry.file_name().to_str()?.parse().ok()?;
            let event = events::parse(&std::fs::read(entry.path()).ok()?)?;
            (event.pid == tid).then_some((tid, event))
        })
        .collect()
}

/// Continues a stopped task, through its pidfd when there is one.
fn resume(waiter: &Waiter) {
    let sent = match &waiter.pidfd {
        // SAFETY: a valid pidfd, a signal number, no siginfo, no flags.
        Some(fd) => {
            (unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    fd.as_raw_fd(),
                    libc::SIGCONT,
                    std::ptr::null::<libc::siginfo_t>(),
                    0,
                )
            }) == 0
        }
        None => false,
    };
    if !sent {
        tracing::debug!(
            pid = waiter.pid,
            tid = waiter.tid,
            "the parked task is gone"
        );
    }
}
