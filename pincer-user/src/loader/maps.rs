//! What the twin needs of the kernel: the maps it reads and writes, and the
//! stopped tasks it continues — the [`Kernel`] trait, implemented here by
//! the loaded (or reopened) programs.
//!
//! The twin reaches the kernel only through this trait, so its whole path
//! (parked event → votes → verdict → map writes → continue → audit) runs in
//! the unit tests over a fake kernel that records what it was told.

use std::{
    collections::{BTreeMap, HashSet},
    os::fd::{AsRawFd, FromRawFd, OwnedFd},
};

use aya::maps::{
    Array, HashMap, LpmTrie, MapData, PerCpuArray, PerCpuValues, RingBuf, lpm_trie::Key,
};
use nix::errno::Errno;
use pincer_common::{
    Action, Agent, GrantKey, GrantValue, Label, Making, NameGrantKey, ObjectKey, Pending,
    PolicyNameKey, PolicyRules, PolicySuffixKey, PrefixName, Taint, Twin, VacatedKey, Verdict,
    counter, names,
};
use pincer_model::{labels::policy::KernelRules, mission::ResolvedGrants};

use super::{Enforcer, LoadError};

/// A stopped task the twin will continue, taken while it was stopped.
///
/// A parked task is named by numbers in its event. A task answered in the
/// same step that took its event off the ring buffer is continued by
/// `tgkill` on those numbers ([`Held::now`]); one whose answer waits (a
/// person, a webhook) is first held by a pidfd ([`Held::take`]), so a
/// continue minutes later cannot reach a process that reused the numbers.
/// Both resolve the numbers after the event was made: a pidfd taken on
/// receipt is exposed to reuse before it exactly as `tgkill` is, and the
/// step between receipt and answer is tens of microseconds, while a pid
/// comes back only after the kernel has handed out every other one. The
/// `pidfd_open` was a sixth of what the twin did for a request.
#[derive(Debug)]
pub struct Held {
    /// Its process id.
    pub pid: u32,
    /// Its thread id (the one that parked).
    pub tid: u32,
    /// `None` for a task answered at once (continued by `tgkill`);
    /// otherwise a pidfd taken while the task was stopped and its pid could
    /// not be reused, or why none could be had.
    pidfd: Option<Result<OwnedFd, Errno>>,
}

impl Held {
    /// A task to continue with no pidfd (what a fake kernel hands out).
    pub fn without_pidfd(pid: u32, tid: u32) -> Held {
        Held {
            pid,
            tid,
            pidfd: Some(Err(Errno::ESRCH)),
        }
    }

    /// A task answered in the step that received its event: continued by
    /// its numbers.
    pub fn now(pid: u32, tid: u32) -> Held {
        Held {
            pid,
            tid,
            pidfd: None,
        }
    }

    /// Takes hold of a stopped task whose answer waits: a pidfd for it, or
    /// why none could be had.
    pub fn take(pid: u32, tid: u32) -> Held {
        let pidfd = pidfd_open(pid);
        if let Err(errno) = pidfd
            && errno != Errno::ESRCH
        {
            tracing::warn!(
                pid,
                tid,
                %errno,
                "cannot take a pidfd for a parked task (out of descriptors?): it will be \
                 continued all the same"
            );
        }
        Held {
            pid,
            tid,
            pidfd: Some(pidfd),
        }
    }

    /// Sends `SIGCONT` to the task; false when it is gone. A task whose
    /// pidfd could not be taken (out of descriptors, say) is not lost: the
    /// pidfd is tried again, and failing that the signal goes to its thread
    /// by `tgkill`, which reaches it only while that thread id still belongs
    /// to that process.
    pub fn resume(&self) -> bool {
        match &self.pidfd {
            None => self.tgkill(),
            Some(Ok(fd)) => pidfd_send_sigcont(fd),
            Some(Err(Errno::ESRCH)) => false,
            Some(Err(_)) => match pidfd_open(self.pid) {
                Ok(fd) => pidfd_send_sigcont(&fd),
                Err(Errno::ESRCH) => false,
                Err(_) => self.tgkill(),
            },
        }
    }

    /// `SIGCONT` to the thread by its numbers.
    fn tgkill(&self) -> bool {
        // SAFETY: tgkill takes two ids and a signal number.
        let sent = unsafe {
            libc::syscall(
                libc::SYS_tgkill,
                self.pid as libc::pid_t,
                self.tid as libc::pid_t,
                libc::SIGCONT,
            )
        };
        sent == 0
    }
}

/// What the maps hold for one slot ([`Kernel::grants_by_slot`]).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SlotGrants {
    /// Its inode grants.
    pub inode: Vec<(GrantKey, GrantValue)>,
    /// Its name grants.
    pub names: Vec<(NameGrantKey, GrantValue)>,
    /// How many prefix grants it has.
    pub prefixes: usize,
}

/// The kernel side of the twin: maps and tasks.
pub trait Kernel {
    /// Writes a mission's resolved grants.
    fn add_grants(&mut self, grants: &ResolvedGrants) -> Result<(), LoadError>;
    /// Confines a cgroup: from now on its tasks are checked against the
    /// entry's slot. A cgroup confined already moves to the new slot in this
    /// one map update.
    fn add_agent(&mut self, cgroup: u64, agent: Agent) -> Result<(), LoadError>;
    /// Stops confining a cgroup.
    fn remove_agent(&mut self, cgroup: u64) -> Result<(), LoadError>;
    /// The confined cgroups, with their entries.
    fn agents(&mut self) -> Result<Vec<(u64, Agent)>, LoadError>;
    /// Removes every grant of a slot.
    fn remove_slot(&mut self, slot: u32) -> Result<(), LoadError>;
    /// Removes the grants of every slot not in `live` (left by agents a
    /// previous daemon served).
    fn retain_slots(&mut self, live: &HashSet<u32>) -> Result<(), LoadError>;
    /// Sets (or, with no operations left, removes) one inode grant.
    fn set_grant(&mut self, key: GrantKey, value: GrantValue) -> Result<(), LoadError>;
    /// Sets (or, with no operations left, removes) one name grant.
    fn set_name_grant(&mut self, key: NameGrantKey, value: GrantValue) -> Result<(), LoadError>;
    /// Records the twin's heartbeat: parked requests are only made while it
    /// is fresh (`timeout_ns`); zeroes mean no twin.
    fn heartbeat(&mut self, now_ns: u64, timeout_ns: u64) -> Result<(), LoadError>;
    /// Writes a one-shot verdict for a parked thread.
    fn write_verdict(&mut self, tid: u32, verdict: Verdict) -> Result<(), LoadError>;
    /// Forgets a parked request (its task will find a grant, or is gone).
    fn remove_pending(&mut self, tid: u32) -> Result<(), LoadError>;
    /// The parked requests, by thread id.
    fn pending(&mut self) -> Result<Vec<(u32, Pending)>, LoadError>;
    /// Protects one of pincer's processes: agents cannot signal or trace it.
    fn guard(&mut self, pid: u32) -> Result<(), LoadError>;
    /// Stops protecting a process.
    fn unguard(&mut self, pid: u32) -> Result<(), LoadError>;
    /// The kernel's counters by their names in
    /// [`pincer_common::counter::NAMES`] (the reserved slot left out), as
    /// audit lines, metrics and `pincer status` show them.
    fn counters(&mut self) -> Result<BTreeMap<&'static str, u64>, LoadError>;
    /// Writes the policy set's tries (every key of the set: a set only
    /// grows, so a key written before stays right or is written again).
    fn set_policy_rules(&mut self, rules: &KernelRules) -> Result<(), LoadError>;
    /// Labels objects by identity (for every agent on the host); cached
    /// walks become stale, since a label can make an object or a tree policy.
    fn set_labels(&mut self, labels: &[(ObjectKey, Label)]) -> Result<(), LoadError>;
    /// Every label in the map.
    fn labels(&mut self) -> Result<Vec<(ObjectKey, Label)>, LoadError>;
    /// The label of one object, if it has one.
    fn label(&mut self, key: ObjectKey) -> Result<Option<Label>, LoadError>;
    /// Adds the labels the map lacks (what it holds is newer); returns how
    /// many were added.
    fn restore_labels(&mut self, labels: &[(ObjectKey, Label)]) -> Result<usize, LoadError>;
    /// The sources' revocation counters, by source id.
    fn revocations(&mut self) -> Result<Vec<(u32, u32)>, LoadError>;
    /// Sets one source's revocation counter.
    fn set_revocation(&mut self, source: u32, counter: u32) -> Result<(), LoadError>;
    /// Writes what a slot's mission reserves for agents at or above a level.
    fn set_actions(&mut self, actions: &[(GrantKey, Action)]) -> Result<(), LoadError>;
    /// An agent cgroup's level, if its reads lowered it.
    fn taint(&mut self, cgroup: u64) -> Result<Option<Taint>, LoadError>;
    /// Replaces the cgroups below which new ones are held: cgroup id → one
    /// of `pincer_common::watch`.
    fn set_watched(&mut self, watched: &[(u64, u32)]) -> Result<(), LoadError>;
    /// What the maps hold, by slot: each slot's inode and name grants, and
    /// how many prefix grants (what [`crate::twin`]'s integrity check
    /// compares with what it wrote). Each map is read once.
    fn grants_by_slot(&mut self) -> Result<std::collections::HashMap<u32, SlotGrants>, LoadError>;
    /// The programs this enforcer attached, each with whether a live link
    /// still runs it.
    fn attached(&mut self) -> Result<Vec<(&'static str, bool)>, LoadError>;
    /// Takes hold of a stopped task whose answer waits ([`Held::take`]).
    fn hold(&mut self, pid: u32, tid: u32) -> Held;
    /// Continues a held task; `false` when it is gone.
    fn resume(&mut self, task: &Held) -> bool;
}

impl Enforcer {
    fn hash_map<K: aya::Pod, V: aya::Pod>(
        &mut self,
        name: &'static str,
    ) -> Result<HashMap<&mut MapData, K, V>, LoadError> {
        HashMap::try_from(self.map_mut(name)?).map_err(|source| LoadError::Map { name, source })
    }

    fn prefix_trie(&mut self) -> Result<LpmTrie<&mut MapData, PrefixName, GrantValue>, LoadError> {
        let name = names::PREFIXES;
        LpmTrie::try_from(self.map_mut(name)?).map_err(|source| LoadError::Map { name, source })
    }

    /// Removes the prefix grants of the slots `which` picks; one already
    /// gone is what was wanted.
    /// Empties both policy tries: the next run writes its own set.
    fn clear_policy_rules(&mut self) -> Result<(), LoadError> {
        self.clear_trie::<PolicyNameKey>(names::POLICY_NAMES)?;
        self.clear_trie::<PolicySuffixKey>(names::POLICY_SUFFIXES)
    }

    /// Empties a policy trie keyed by `K`.
    fn clear_trie<K: aya::Pod>(&mut self, name: &'static str) -> Result<(), LoadError> {
        let mut trie = LpmTrie::<&mut MapData, K, PolicyRules>::try_from(self.map_mut(name)?)
            .map_err(|source| LoadError::Map { name, source })?;
        let keys: Vec<_> = trie.keys().filter_map(Result::ok).collect();
        for key in keys {
            let _ = trie.remove(&key);
        }
        Ok(())
    }

    /// Writes `entries` into the policy trie keyed by `K`; whether any
    /// changed.
    fn write_trie<K: aya::Pod>(
        &mut self,
        name: &'static str,
        entries: &[(u32, K, PolicyRules)],
    ) -> Result<bool, LoadError> {
        let mut trie = LpmTrie::<&mut MapData, K, PolicyRules>::try_from(self.map_mut(name)?)
            .map_err(|source| LoadError::Map { name, source })?;
        let mut changed = false;
        for (bits, key, value) in entries {
            let key = Key::new(*bits, *key);
            if trie.get(&key, 0).ok().as_ref() != Some(value) {
                trie.insert(&key, value, 0)
                    .map_err(|source| LoadError::Map { name, source })?;
                changed = true;
            }
        }
        Ok(changed)
    }

    fn remove_prefixes(&mut self, which: impl Fn(u32) -> bool) -> Result<(), LoadError> {
        let mut trie = self.prefix_trie()?;
        let keys: Vec<_> = trie.keys().filter_map(Result::ok).collect();
        for key in keys {
            if which(u32::from_ne_bytes(key.data().slot)) {
                let _ = trie.remove(&key);
            }
        }
        Ok(())
    }

    fn insert<K: aya::Pod, V: aya::Pod>(
        &mut self,
        name: &'static str,
        key: K,
        value: V,
    ) -> Result<(), LoadError> {
        self.hash_map::<K, V>(name)?
            .insert(key, value, 0)
            .map_err(|source| LoadError::Map { name, source })
    }

    /// Removes a key; one already gone is what was wanted.
    fn remove<K: aya::Pod, V: aya::Pod>(
        &mut self,
        name: &'static str,
        key: &K,
    ) -> Result<(), LoadError> {
        let _ = self.hash_map::<K, V>(name)?.remove(key);
        Ok(())
    }

    fn entries<K: aya::Pod, V: aya::Pod>(
        &mut self,
        name: &'static str,
    ) -> Result<Vec<(K, V)>, LoadError> {
        Ok(self
            .hash_map::<K, V>(name)?
            .iter()
            .filter_map(Result::ok)
            .collect())
    }

    fn keys<K: aya::Pod, V: aya::Pod>(&mut self, name: &'static str) -> Result<Vec<K>, LoadError> {
        Ok(self
            .hash_map::<K, V>(name)?
            .keys()
            .filter_map(Result::ok)
            .collect())
    }

    /// Forgets the guarded processes that are gone (a previous daemon's, a
    /// run that was killed): the map is shared by every pincer on the host,
    /// so the live ones are other pincers' and stay.
    pub fn forget_dead_guarded(&mut self) -> Result<(), LoadError> {
        for pid in self.keys::<u32, u32>(names::GUARDED)? {
            if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                self.remove::<u32, u32>(names::GUARDED, &pid)?;
            }
        }
        Ok(())
    }

    /// Clears what a run left in programs it pinned, so that the next run
    /// that takes them over finds what a fresh load has: no agent, grant,
    /// parked request, verdict, recorded owner or heartbeat, counters at
    /// zero, no cgroup watched, every cached walk stale and no event waiting. The guard map is
    /// every pincer's and stays; request ids go on counting.
    pub fn clear_for_new_run(&mut self) -> Result<(), LoadError> {
        self.clear::<u64, Agent>(names::AGENTS)?;
        self.clear::<GrantKey, GrantValue>(names::GRANTS)?;
        self.clear::<NameGrantKey, GrantValue>(names::NAME_GRANTS)?;
        self.remove_prefixes(|_| true)?;
        self.clear::<u32, Pending>(names::PENDING)?;
        self.clear::<u32, Verdict>(names::VERDICTS)?;
        self.clear::<u64, u64>(names::OWNERS)?;
        // The labels are every pincer's and stay; the name rules are the
        // next run's to write.
        self.clear_policy_rules()?;
        self.clear::<VacatedKey, u32>(names::VACATED)?;
        self.clear::<u32, Making>(names::MAKING)?;
        self.clear::<u32, u64>(names::PLACEHOLDERS)?;
        self.clear::<u64, Taint>(names::TAINTS)?;
        self.clear::<GrantKey, Action>(names::ACTIONS)?;
        // What a daemon watched is the next daemon's to write.
        self.clear::<u64, u32>(names::WATCHED)?;
        self.heartbeat(0, 0)?;
        self.bump_epoch()?;
        let name = names::COUNTERS;
        let map_error = |source| LoadError::Map { name, source };
        let cpus = aya::util::nr_cpus().map_err(|(_, e)| map_error(e.into()))?;
        let mut counters =
            PerCpuArray::<&mut MapData, u64>::try_from(self.map_mut(name)?).map_err(map_error)?;
        for index in 0..counter::COUNT {
            let zeros =
                PerCpuValues::try_from(vec![0u64; cpus]).map_err(|e| map_error(e.into()))?;
            counters.set(index, zeros, 0).map_err(map_error)?;
        }
        let name = names::EVENTS;
        let mut events = RingBuf::try_from(self.map_mut(name)?)
            .map_err(|source| LoadError::Map { name, source })?;
        while events.next().is_some() {}
        Ok(())
    }

    /// Removes every entry of a hash map.
    fn clear<K: aya::Pod, V: aya::Pod>(&mut self, name: &'static str) -> Result<(), LoadError> {
        for key in self.keys::<K, V>(name)? {
            self.remove::<K, V>(name, &key)?;
        }
        Ok(())
    }

    /// Invalidates the kernel's grant cache.
    fn bump_epoch(&mut self) -> Result<(), LoadError> {
        let name = names::EPOCH;
        let mut epoch = Array::<&mut MapData, u64>::try_from(self.map_mut(name)?)
            .map_err(|source| LoadError::Map { name, source })?;
        let current = epoch
            .get(&0, 0)
            .map_err(|source| LoadError::Map { name, source })?;
        epoch
            .set(0, current.wrapping_add(1), 0)
            .map_err(|source| LoadError::Map { name, source })
    }
}

impl Kernel for Enforcer {
    fn add_grants(&mut self, grants: &ResolvedGrants) -> Result<(), LoadError> {
        for (key, value, _) in &grants.inode {
            self.insert(names::GRANTS, *key, *value)?;
        }
        for (key, value, _) in &grants.names {
            self.insert(names::NAME_GRANTS, *key, *value)?;
        }
        let name = names::PREFIXES;
        let mut trie = self.prefix_trie()?;
        for (key, value, _) in &grants.prefixes {
            trie.insert(&Key::new(key.bits, key.name), *value, 0)
                .map_err(|source| LoadError::Map { name, source })?;
        }
        Ok(())
    }

    fn add_agent(&mut self, cgroup: u64, agent: Agent) -> Result<(), LoadError> {
        self.insert(names::AGENTS, cgroup, agent)
    }

    fn remove_agent(&mut self, cgroup: u64) -> Result<(), LoadError> {
        let name = names::AGENTS;
        self.hash_map::<u64, Agent>(name)?
            .remove(&cgroup)
            .map_err(|source| LoadError::Map { name, source })?;
        // Its level goes with it: a cgroup id is never reused.
        self.remove::<u64, Taint>(names::TAINTS, &cgroup)
    }

    fn agents(&mut self) -> Result<Vec<(u64, Agent)>, LoadError> {
        self.entries(names::AGENTS)
    }

    fn grants_by_slot(&mut self) -> Result<std::collections::HashMap<u32, SlotGrants>, LoadError> {
        let mut slots: std::collections::HashMap<u32, SlotGrants> = Default::default();
        let inode: Vec<(GrantKey, GrantValue)> = self.entries(names::GRANTS)?;
        for (key, value) in inode {
            slots.entry(key.slot).or_default().inode.push((key, value));
        }
        let named: Vec<(NameGrantKey, GrantValue)> = self.entries(names::NAME_GRANTS)?;
        for (key, value) in named {
            slots.entry(key.slot).or_default().names.push((key, value));
        }
        for key in self.prefix_trie()?.keys().filter_map(Result::ok) {
            let slot = u32::from_ne_bytes(key.data().slot);
            slots.entry(slot).or_default().prefixes += 1;
        }
        Ok(slots)
    }

    fn attached(&mut self) -> Result<Vec<(&'static str, bool)>, LoadError> {
        // Every link of the host, by the program it runs: a program whose
        // link was detached (or never made) has none.
        let running: HashSet<u32> = aya::programs::loaded_links()
            .filter_map(Result::ok)
            .map(|link| link.program_id())
            .collect();
        Ok(self
            .programs
            .iter()
            .map(|&(hook, id)| (hook, running.contains(&id)))
            .collect())
    }

    fn remove_slot(&mut self, slot: u32) -> Result<(), LoadError> {
        for key in self.keys::<GrantKey, GrantValue>(names::GRANTS)? {
            if key.slot == slot {
                self.remove::<_, GrantValue>(names::GRANTS, &key)?;
            }
        }
        self.remove_prefixes(|of| of == slot)?;
        for key in self.keys::<NameGrantKey, GrantValue>(names::NAME_GRANTS)? {
            if key.slot == slot {
                self.remove::<_, GrantValue>(names::NAME_GRANTS, &key)?;
            }
        }
        for key in self.keys::<GrantKey, Action>(names::ACTIONS)? {
            if key.slot == slot {
                self.remove::<_, Action>(names::ACTIONS, &key)?;
            }
        }
        // After the removal: a walk that started before it may have cached
        // what it found under the old epoch, which this makes stale.
        self.bump_epoch()
    }

    fn retain_slots(&mut self, live: &HashSet<u32>) -> Result<(), LoadError> {
        let inode = self.keys::<GrantKey, GrantValue>(names::GRANTS)?;
        let named = self.keys::<NameGrantKey, GrantValue>(names::NAME_GRANTS)?;
        let prefixed: Vec<u32> = self
            .prefix_trie()?
            .keys()
            .filter_map(Result::ok)
            .map(|key| u32::from_ne_bytes(key.data().slot))
            .collect();
        let actions = self.keys::<GrantKey, Action>(names::ACTIONS)?;
        let stale: HashSet<u32> = inode
            .iter()
            .chain(&actions)
            .map(|k| k.slot)
            .chain(named.iter().map(|k| k.slot))
            .chain(prefixed)
            .filter(|slot| !live.contains(slot))
            .collect();
        for slot in stale {
            self.remove_slot(slot)?;
        }
        Ok(())
    }

    /// Removing operations invalidates the grant cache.
    fn set_grant(&mut self, key: GrantKey, value: GrantValue) -> Result<(), LoadError> {
        let before = self
            .hash_map::<GrantKey, GrantValue>(names::GRANTS)?
            .get(&key, 0)
            .unwrap_or_default();
        if value == GrantValue::default() {
            self.remove::<_, GrantValue>(names::GRANTS, &key)?;
        } else {
            self.insert(names::GRANTS, key, value)?;
        }
        if before.file_ops & !value.file_ops != 0 || before.tree_ops & !value.tree_ops != 0 {
            self.bump_epoch()?;
        }
        Ok(())
    }

    fn set_name_grant(&mut self, key: NameGrantKey, value: GrantValue) -> Result<(), LoadError> {
        if value == GrantValue::default() {
            self.remove::<_, GrantValue>(names::NAME_GRANTS, &key)?;
            // A file created under the name may be cached by inode.
            return self.bump_epoch();
        }
        self.insert(names::NAME_GRANTS, key, value)
    }

    fn heartbeat(&mut self, now_ns: u64, timeout_ns: u64) -> Result<(), LoadError> {
        let name = names::TWIN;
        let mut twin = Array::<&mut MapData, Twin>::try_from(self.map_mut(name)?)
            .map_err(|source| LoadError::Map { name, source })?;
        let value = Twin {
            heartbeat_ns: now_ns,
            timeout_ns,
        };
        twin.set(0, value, 0)
            .map_err(|source| LoadError::Map { name, source })
    }

    fn write_verdict(&mut self, tid: u32, verdict: Verdict) -> Result<(), LoadError> {
        self.insert(names::VERDICTS, tid, verdict)
    }

    fn remove_pending(&mut self, tid: u32) -> Result<(), LoadError> {
        self.remove::<u32, Pending>(names::PENDING, &tid)?;
        self.remove::<u32, Verdict>(names::VERDICTS, &tid)
    }

    fn pending(&mut self) -> Result<Vec<(u32, Pending)>, LoadError> {
        self.entries(names::PENDING)
    }

    fn guard(&mut self, pid: u32) -> Result<(), LoadError> {
        self.insert(names::GUARDED, pid, 1u32)
    }

    fn unguard(&mut self, pid: u32) -> Result<(), LoadError> {
        self.remove::<u32, u32>(names::GUARDED, &pid)
    }

    fn counters(&mut self) -> Result<BTreeMap<&'static str, u64>, LoadError> {
        let name = names::COUNTERS;
        let array = PerCpuArray::<&mut MapData, u64>::try_from(self.map_mut(name)?)
            .map_err(|source| LoadError::Map { name, source })?;
        let mut named = BTreeMap::new();
        for (index, counter) in counter::NAMES {
            let values = array
                .get(&index, 0)
                .map_err(|source| LoadError::Map { name, source })?;
            if index != counter::RESERVED {
                named.insert(counter, values.iter().sum());
            }
        }
        Ok(named)
    }

    fn set_policy_rules(&mut self, rules: &KernelRules) -> Result<(), LoadError> {
        let names = self.write_trie(names::POLICY_NAMES, &rules.names)?;
        let suffixes = self.write_trie(names::POLICY_SUFFIXES, &rules.suffixes)?;
        let changed = names || suffixes;
        if changed {
            self.bump_epoch()?;
        }
        Ok(())
    }

    fn set_labels(&mut self, labels: &[(ObjectKey, Label)]) -> Result<(), LoadError> {
        for (key, label) in labels {
            self.insert(names::LABELS, *key, *label)?;
        }
        if !labels.is_empty() {
            self.bump_epoch()?;
        }
        Ok(())
    }

    fn labels(&mut self) -> Result<Vec<(ObjectKey, Label)>, LoadError> {
        self.entries(names::LABELS)
    }

    fn label(&mut self, key: ObjectKey) -> Result<Option<Label>, LoadError> {
        let name = names::LABELS;
        match self.hash_map::<ObjectKey, Label>(name)?.get(&key, 0) {
            Ok(label) => Ok(Some(label)),
            Err(aya::maps::MapError::KeyNotFound) => Ok(None),
            Err(source) => Err(LoadError::Map { name, source }),
        }
    }

    fn restore_labels(&mut self, labels: &[(ObjectKey, Label)]) -> Result<usize, LoadError> {
        const BPF_NOEXIST: u64 = 1;
        let name = names::LABELS;
        let mut map = self.hash_map::<ObjectKey, Label>(name)?;
        let mut added = 0;
        for (key, label) in labels {
            match map.insert(key, label, BPF_NOEXIST) {
                Ok(()) => added += 1,
                Err(aya::maps::MapError::SyscallError(error))
                    if error.io_error.raw_os_error() == Some(libc::EEXIST) => {}
                Err(source) => return Err(LoadError::Map { name, source }),
            }
        }
        if added > 0 {
            self.bump_epoch()?;
        }
        Ok(added)
    }

    fn revocations(&mut self) -> Result<Vec<(u32, u32)>, LoadError> {
        self.entries(names::REVOKED)
    }

    fn set_revocation(&mut self, source: u32, counter: u32) -> Result<(), LoadError> {
        self.insert(names::REVOKED, source, counter)
    }

    fn set_actions(&mut self, actions: &[(GrantKey, Action)]) -> Result<(), LoadError> {
        for (key, action) in actions {
            self.insert(names::ACTIONS, *key, *action)?;
        }
        Ok(())
    }

    fn set_watched(&mut self, watched: &[(u64, u32)]) -> Result<(), LoadError> {
        // Added before the old ones go, so a cgroup watched before and
        // after is watched all along.
        for (cgroup, value) in watched {
            self.insert(names::WATCHED, *cgroup, *value)?;
        }
        for old in self.keys::<u64, u32>(names::WATCHED)? {
            if !watched.iter().any(|(cgroup, _)| *cgroup == old) {
                self.remove::<u64, u32>(names::WATCHED, &old)?;
            }
        }
        Ok(())
    }

    fn taint(&mut self, cgroup: u64) -> Result<Option<Taint>, LoadError> {
        Ok(self
            .hash_map::<u64, Taint>(names::TAINTS)?
            .get(&cgroup, 0)
            .ok())
    }

    fn hold(&mut self, pid: u32, tid: u32) -> Held {
        Held::take(pid, tid)
    }

    fn resume(&mut self, task: &Held) -> bool {
        task.resume()
    }
}

/// `SIGCONT` through a pidfd.
fn pidfd_send_sigcont(fd: &OwnedFd) -> bool {
    // SAFETY: a valid pidfd, a signal number, no siginfo, no flags.
    let sent = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            libc::SIGCONT,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    sent == 0
}

/// A pidfd for a process; `ESRCH` when it is gone, `EMFILE` when this
/// process is out of descriptors.
fn pidfd_open(pid: u32) -> Result<OwnedFd, Errno> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        return Err(Errno::last());
    }
    // SAFETY: the kernel just returned this descriptor to us alone.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

#[cfg(test)]
mod tests {
    use std::process::{Child, Command};

    use super::*;

    /// A stopped `sleep`, as a parked task is.
    fn stopped() -> Child {
        let child = Command::new("sleep").arg("30").spawn().unwrap();
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
        wait_for_state(child.id(), 'T');
        child
    }

    fn wait_for_state(pid: u32, state: char) {
        for _ in 0..500 {
            let stat = std::fs::read(format!("/proc/{pid}/stat")).unwrap();
            if crate::procfs::stat_state(&stat) == Some(state as u8) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        panic!("process {pid} never reached state {state}");
    }

    #[test]
    fn a_task_held_with_a_pidfd_is_continued() {
        let mut child = stopped();
        let held = Held::take(child.id(), child.id());
        assert!(matches!(held.pidfd, Some(Ok(_))));
        assert!(held.resume());
        wait_for_state(child.id(), 'S');
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn a_task_whose_pidfd_could_not_be_taken_is_not_lost() {
        // What a twin out of descriptors holds.
        let mut child = stopped();
        let held = Held {
            pid: child.id(),
            tid: child.id(),
            pidfd: Some(Err(Errno::EMFILE)),
        };
        assert!(held.resume());
        wait_for_state(child.id(), 'S');
        child.kill().unwrap();
        child.wait().unwrap();
        // Gone is gone: nothing is signalled.
        let gone = Held::take(child.id(), child.id());
        assert!(matches!(gone.pidfd, Some(Err(Errno::ESRCH))));
        assert!(!gone.resume());
    }

    #[test]
    fn a_task_answered_at_once_is_continued_by_its_numbers() {
        let mut child = stopped();
        let held = Held::now(child.id(), child.id());
        assert!(held.pidfd.is_none());
        assert!(held.resume());
        wait_for_state(child.id(), 'S');
        // A thread id that is not the process's is not signalled.
        let other = Held::now(child.id(), std::process::id());
        assert!(!other.resume());
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!Held::now(child.id(), child.id()).resume());
    }
}
