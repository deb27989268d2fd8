//! The agents a twin confines, and the kernel state kept around them: held
//! cgroups, labels, guarded processes, the heartbeat, the audit log and the
//! grants votes made. Apart from the handling of requests because none of
//! this decides an access: it sets up what the programs and the votes decide
//! with.

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
};

use pincer_common::{
    Action, Agent, GrantKey, Label, ObjectKey, Pending, agent_flags, authority, caps,
};
use pincer_model::{
    assets::Assets, audit::Record, control::ListedGrant, labels, mission::Mode,
    vote::DefaultVerdict,
};
use tokio::time::Instant;

use super::{AgentState, Confinement, HEARTBEAT_TIMEOUT, Twin, TwinError, boottime_ns, refusals};
use crate::loader::Kernel;

impl<K: Kernel> Twin<K> {
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
            policy.default = DefaultVerdict::Deny;
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
    /// [`labels::store`]), from what [`labels::Store::read`] read and
    /// checked.
    pub fn restore_labels(&mut self, saved: &labels::Saved) -> Result<usize, TwinError> {
        // The counters first: a label put back is judged by them. The
        // kernel's outlive this process; a file that says less than they
        // do was restored from an earlier copy.
        for (source, kernel) in self.kernel.revocations()? {
            let file = saved.revocations.iter().find(|r| r.source == source);
            let counter = file.map_or(0, |r| r.counter);
            if kernel > counter {
                return Err(labels::StoreError::RolledBack {
                    path: saved.revocations_path.clone(),
                    source_path: file
                        .map_or_else(|| format!("source {source:#x}"), |r| r.path.clone()),
                    saved: counter,
                    kernel,
                }
                .into());
            }
        }
        for r in &saved.revocations {
            self.kernel.set_revocation(r.source, r.counter)?;
        }
        Ok(self.kernel.restore_labels(&saved.labels)?)
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
}
