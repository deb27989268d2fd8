//! Verdicts: writing what a vote decided into the kernel (a one-shot verdict
//! or a grant), releasing the other waiting requests a new grant covers,
//! continuing the stopped tasks and auditing, and the expiry of TTL grants.
//! Apart from the parked requests, which start what this ends.

use std::time::Duration;

use pincer_common::{ObjectKey, Verdict, event_flags};
use pincer_model::{
    audit::{Record, Stages, VerdictRecord},
    request::Request,
    vote::{Extent, Lifetime, MAX_TTL, Outcome},
};
use tokio::time::Instant;

use super::grants::{Grants, VoteGrant, tree_of};
use super::{SameAccess, Target, Twin, TwinError, Waiter, Waiting, boottime_ns, inspect, refusals};
use crate::loader::{Held, Kernel};

impl<K: Kernel> Twin<K> {
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
    pub(super) fn conclude(
        &mut self,
        waiting: Waiting,
        mut outcome: Outcome,
    ) -> Result<(), TwinError> {
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
        let stages = stages(&waiting, voted_ns, boottime_ns());
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
            // Every reader caps a ttl at `MAX_TTL`; capping here too
            // keeps the sum within what the clock can hold whatever the
            // voter.
            Lifetime::Ttl(ttl) => Some(Instant::now() + ttl.min(MAX_TTL)),
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
    pub(super) fn write_target(&mut self, target: &Target) -> Result<(), TwinError> {
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
                stages: stages(&waiting, now, now),
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
    pub(super) fn deny_where(
        &mut self,
        matches: impl Fn(&SameAccess) -> bool,
    ) -> Result<(), TwinError> {
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
    pub(super) fn answer(
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

/// The stages of a request that waited in `waiting`, voted on by
/// `voted_ns` and answered by `answered_ns`.
fn stages(waiting: &Waiting, voted_ns: u64, answered_ns: u64) -> Stages {
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
