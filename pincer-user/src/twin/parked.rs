//! A parked request, from the ring buffer's record to its vote: sanitizing,
//! the reason the policy gave, the taint that lowered the agent's level,
//! joining an identical waiting request and starting the votes. Apart from
//! the verdicts, which end what this starts.

use std::{os::unix::ffi::OsStrExt, sync::Arc};

use pincer_common::{AccessEvent, ObjectKey, authority, event_flags, policy_entry, verdict};
use pincer_model::{
    audit::Record,
    events::{self},
    labels::{self},
    mission::Mode,
    request::{PolicyReason, Request},
    vote::{Extent, Lifetime, Outcome},
};

use super::{
    Handled, SameAccess, Twin, TwinError, Waiter, Waiting, boottime_ns, inspect, refusals,
};
use crate::{
    loader::{Held, Kernel},
    procfs::{self},
    vote,
};

impl<K: Kernel> Twin<K> {
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
    pub(super) fn tell_refusal(&mut self, cgroup: u64, refusal: &refusals::Refusal<'_>) {
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
    pub(super) fn taint_chain(&mut self, cgroup: u64) -> Vec<String> {
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
            Some(path) => pincer_model::escape::escape(path.as_os_str().as_bytes()),
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
        let mut request = procfs::request(
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
}
