//! A kernel for the twin's unit tests: maps as plain collections, and a
//! list of the tasks continued.

use std::collections::{BTreeMap, HashMap, HashSet};

use pincer_common::{
    Action, Agent, GrantKey, GrantValue, Label, NameGrantKey, ObjectKey, Pending, Taint, Verdict,
};
use pincer_model::{
    labels::policy::KernelRules,
    mission::{PrefixKey, ResolvedGrants},
};

use crate::loader::{Held, Kernel, LoadError, SlotGrants};

/// A kernel for unit tests: maps as plain collections, and a list of the
/// tasks continued.
#[derive(Debug, Default)]
pub(super) struct FakeKernel {
    pub agents: HashMap<u64, Agent>,
    pub grants: HashMap<GrantKey, GrantValue>,
    pub name_grants: HashMap<NameGrantKey, GrantValue>,
    pub prefix_grants: HashMap<PrefixKey, GrantValue>,
    pub verdicts: HashMap<u32, Verdict>,
    pub pending: HashMap<u32, Pending>,
    pub guarded: HashSet<u32>,
    pub heartbeat: Option<(u64, u64)>,
    /// Thread ids continued, in order.
    pub resumed: Vec<u32>,
    /// Thread ids held by a pidfd because their answer waited, in order.
    pub held: Vec<u32>,
    pub counters: BTreeMap<&'static str, u64>,
    /// Inode grants cannot be written (a full map, say).
    pub fail_grants: bool,
    pub policy_rules: KernelRules,
    pub labels: HashMap<ObjectKey, Label>,
    pub actions: HashMap<GrantKey, Action>,
    pub taints: HashMap<u64, Taint>,
    pub revoked: HashMap<u32, u32>,
    pub watched: HashMap<u64, u32>,
    /// The programs "attached", each with whether a link runs it.
    pub programs: Vec<(&'static str, bool)>,
}

impl Kernel for FakeKernel {
    fn add_grants(&mut self, grants: &ResolvedGrants) -> Result<(), LoadError> {
        self.grants
            .extend(grants.inode.iter().map(|(k, v, _)| (*k, *v)));
        self.name_grants
            .extend(grants.names.iter().map(|(k, v, _)| (*k, *v)));
        self.prefix_grants
            .extend(grants.prefixes.iter().map(|(k, v, _)| (*k, *v)));
        Ok(())
    }

    fn add_agent(&mut self, cgroup: u64, agent: Agent) -> Result<(), LoadError> {
        self.agents.insert(cgroup, agent);
        Ok(())
    }

    fn remove_agent(&mut self, cgroup: u64) -> Result<(), LoadError> {
        self.agents.remove(&cgroup);
        self.taints.remove(&cgroup);
        Ok(())
    }

    fn agents(&mut self) -> Result<Vec<(u64, Agent)>, LoadError> {
        Ok(self.agents.iter().map(|(k, v)| (*k, *v)).collect())
    }

    fn remove_slot(&mut self, slot: u32) -> Result<(), LoadError> {
        self.grants.retain(|k, _| k.slot != slot);
        self.name_grants.retain(|k, _| k.slot != slot);
        self.prefix_grants.retain(|k, _| k.slot() != slot);
        self.actions.retain(|k, _| k.slot != slot);
        Ok(())
    }

    fn retain_slots(&mut self, live: &HashSet<u32>) -> Result<(), LoadError> {
        self.grants.retain(|k, _| live.contains(&k.slot));
        self.actions.retain(|k, _| live.contains(&k.slot));
        self.name_grants.retain(|k, _| live.contains(&k.slot));
        self.prefix_grants.retain(|k, _| live.contains(&k.slot()));
        Ok(())
    }

    fn set_grant(&mut self, key: GrantKey, value: GrantValue) -> Result<(), LoadError> {
        if self.fail_grants {
            return Err(LoadError::Map {
                name: pincer_common::names::GRANTS,
                source: aya::maps::MapError::KeyNotFound,
            });
        }
        set_or_remove(&mut self.grants, key, value);
        Ok(())
    }

    fn set_name_grant(&mut self, key: NameGrantKey, value: GrantValue) -> Result<(), LoadError> {
        set_or_remove(&mut self.name_grants, key, value);
        Ok(())
    }

    fn heartbeat(&mut self, now_ns: u64, timeout_ns: u64) -> Result<(), LoadError> {
        self.heartbeat = Some((now_ns, timeout_ns));
        Ok(())
    }

    fn write_verdict(&mut self, tid: u32, verdict: Verdict) -> Result<(), LoadError> {
        self.verdicts.insert(tid, verdict);
        Ok(())
    }

    fn remove_pending(&mut self, tid: u32) -> Result<(), LoadError> {
        self.pending.remove(&tid);
        self.verdicts.remove(&tid);
        Ok(())
    }

    fn pending(&mut self) -> Result<Vec<(u32, Pending)>, LoadError> {
        Ok(self.pending.iter().map(|(k, v)| (*k, *v)).collect())
    }

    fn guard(&mut self, pid: u32) -> Result<(), LoadError> {
        self.guarded.insert(pid);
        Ok(())
    }

    fn unguard(&mut self, pid: u32) -> Result<(), LoadError> {
        self.guarded.remove(&pid);
        Ok(())
    }

    fn counters(&mut self) -> Result<BTreeMap<&'static str, u64>, LoadError> {
        Ok(self.counters.clone())
    }

    fn set_policy_rules(&mut self, rules: &KernelRules) -> Result<(), LoadError> {
        self.policy_rules = rules.clone();
        Ok(())
    }

    fn set_labels(&mut self, labels: &[(ObjectKey, Label)]) -> Result<(), LoadError> {
        self.labels.extend(labels.iter().copied());
        Ok(())
    }

    fn labels(&mut self) -> Result<Vec<(ObjectKey, Label)>, LoadError> {
        Ok(self.labels.iter().map(|(k, l)| (*k, *l)).collect())
    }

    fn label(&mut self, key: ObjectKey) -> Result<Option<Label>, LoadError> {
        Ok(self.labels.get(&key).copied())
    }

    fn restore_labels(&mut self, labels: &[(ObjectKey, Label)]) -> Result<usize, LoadError> {
        let mut added = 0;
        for (key, label) in labels {
            if !self.labels.contains_key(key) {
                self.labels.insert(*key, *label);
                added += 1;
            }
        }
        Ok(added)
    }

    fn revocations(&mut self) -> Result<Vec<(u32, u32)>, LoadError> {
        Ok(self.revoked.iter().map(|(k, v)| (*k, *v)).collect())
    }

    fn set_watched(&mut self, watched: &[(u64, u32)]) -> Result<(), LoadError> {
        self.watched = watched.iter().copied().collect();
        Ok(())
    }

    fn set_revocation(&mut self, source: u32, counter: u32) -> Result<(), LoadError> {
        self.revoked.insert(source, counter);
        Ok(())
    }

    fn set_actions(&mut self, actions: &[(GrantKey, Action)]) -> Result<(), LoadError> {
        self.actions.extend(actions.iter().copied());
        Ok(())
    }

    fn taint(&mut self, cgroup: u64) -> Result<Option<Taint>, LoadError> {
        Ok(self.taints.get(&cgroup).copied())
    }

    fn grants_by_slot(&mut self) -> Result<HashMap<u32, SlotGrants>, LoadError> {
        let mut slots: HashMap<u32, SlotGrants> = HashMap::new();
        for (key, value) in &self.grants {
            slots
                .entry(key.slot)
                .or_default()
                .inode
                .push((*key, *value));
        }
        for (key, value) in &self.name_grants {
            slots
                .entry(key.slot)
                .or_default()
                .names
                .push((*key, *value));
        }
        for key in self.prefix_grants.keys() {
            slots.entry(key.slot()).or_default().prefixes += 1;
        }
        Ok(slots)
    }

    fn attached(&mut self) -> Result<Vec<(&'static str, bool)>, LoadError> {
        Ok(self.programs.clone())
    }

    fn hold(&mut self, pid: u32, tid: u32) -> Held {
        self.held.push(tid);
        Held::without_pidfd(pid, tid)
    }

    fn resume(&mut self, task: &Held) -> bool {
        self.resumed.push(task.tid);
        true
    }
}

/// A grant with no operations is no entry, as in the kernel's maps.
fn set_or_remove<K: std::hash::Hash + Eq>(
    map: &mut HashMap<K, GrantValue>,
    key: K,
    value: GrantValue,
) {
    if value == GrantValue::default() {
        map.remove(&key);
    } else {
        map.insert(key, value);
    }
}
