//! What the twin needs of the kernel: the maps it writes and the stopped
//! tasks it continues.
//!
//! [`Enforcer`] is the real kernel. Keeping the twin's whole path behind this
//! trait lets the unit tests drive it (parked event → votes → verdict → map
//! writes → continue → audit) on any host, with a fake that records what the
//! twin did.

use std::{
    collections::{BTreeMap, HashSet},
    os::fd::{AsRawFd, FromRawFd, OwnedFd},
};

use pincer_common::{Agent, GrantKey, GrantValue, NameGrantKey, Pending, Verdict};

use crate::{
    loader::{Enforcer, LoadError},
    mission::ResolvedGrants,
};

/// A stopped task the twin will continue, taken while it was stopped.
#[derive(Debug)]
pub struct Held {
    /// Its process id.
    pub pid: u32,
    /// Its thread id (the one that parked).
    pub tid: u32,
    /// A pidfd taken while the task was stopped and its pid could not be
    /// reused: continuing it later cannot hit another process. `None` when
    /// none could be had.
    pidfd: Option<OwnedFd>,
}

impl Held {
    /// A task to continue with no pidfd (what a fake kernel hands out).
    pub fn without_pidfd(pid: u32, tid: u32) -> Held {
        Held {
            pid,
            tid,
            pidfd: None,
        }
    }
}

/// The kernel side of the twin: maps and tasks.
pub trait Kernel {
    /// Writes a mission's resolved grants.
    fn add_grants(&mut self, grants: &ResolvedGrants) -> Result<(), LoadError>;
    /// Confines a cgroup (or moves it to another slot) in one map update.
    fn add_agent(&mut self, cgroup: u64, agent: Agent) -> Result<(), LoadError>;
    /// Stops confining a cgroup.
    fn remove_agent(&mut self, cgroup: u64) -> Result<(), LoadError>;
    /// The confined cgroups, with their entries.
    fn agents(&mut self) -> Result<Vec<(u64, Agent)>, LoadError>;
    /// Removes every grant of a slot.
    fn remove_slot(&mut self, slot: u32) -> Result<(), LoadError>;
    /// Removes the grants of every slot not in `live`.
    fn retain_slots(&mut self, live: &HashSet<u32>) -> Result<(), LoadError>;
    /// Sets (or, with no operations, removes) one inode grant.
    fn set_grant(&mut self, key: GrantKey, value: GrantValue) -> Result<(), LoadError>;
    /// Sets (or, with no operations, removes) one name grant.
    fn set_name_grant(&mut self, key: NameGrantKey, value: GrantValue) -> Result<(), LoadError>;
    /// Records the twin's heartbeat.
    fn heartbeat(&mut self, now_ns: u64, timeout_ns: u64) -> Result<(), LoadError>;
    /// Writes a one-shot verdict for a parked thread.
    fn write_verdict(&mut self, tid: u32, verdict: Verdict) -> Result<(), LoadError>;
    /// Forgets a parked request (its task will find a grant, or is gone).
    fn remove_pending(&mut self, tid: u32) -> Result<(), LoadError>;
    /// The parked requests, by thread id.
    fn pending(&mut self) -> Result<Vec<(u32, Pending)>, LoadError>;
    /// Protects one of pincer's processes from agents.
    fn guard(&mut self, pid: u32) -> Result<(), LoadError>;
    /// Stops protecting a process.
    fn unguard(&mut self, pid: u32) -> Result<(), LoadError>;
    /// The kernel's counters by name.
    fn counters(&mut self) -> Result<BTreeMap<&'static str, u64>, LoadError>;
    /// Takes hold of a stopped task.
    fn hold(&mut self, pid: u32, tid: u32) -> Held;
    /// Continues a held task; `false` when it is gone.
    fn resume(&mut self, task: &Held) -> bool;
}

impl Kernel for Enforcer {
    fn add_grants(&mut self, grants: &ResolvedGrants) -> Result<(), LoadError> {
        Enforcer::add_grants(self, grants)
    }

    fn add_agent(&mut self, cgroup: u64, agent: Agent) -> Result<(), LoadError> {
        Enforcer::add_agent(self, cgroup, agent)
    }

    fn remove_agent(&mut self, cgroup: u64) -> Result<(), LoadError> {
        Enforcer::remove_agent(self, cgroup)
    }

    fn agents(&mut self) -> Result<Vec<(u64, Agent)>, LoadError> {
        Enforcer::agents(self)
    }

    fn remove_slot(&mut self, slot: u32) -> Result<(), LoadError> {
        Enforcer::remove_slot(self, slot)
    }

    fn retain_slots(&mut self, live: &HashSet<u32>) -> Result<(), LoadError> {
        Enforcer::retain_slots(self, live)
    }

    fn set_grant(&mut self, key: GrantKey, value: GrantValue) -> Result<(), LoadError> {
        Enforcer::set_grant(self, key, value)
    }

    fn set_name_grant(&mut self, key: NameGrantKey, value: GrantValue) -> Result<(), LoadError> {
        Enforcer::set_name_grant(self, key, value)
    }

    fn heartbeat(&mut self, now_ns: u64, timeout_ns: u64) -> Result<(), LoadError> {
        Enforcer::heartbeat(self, now_ns, timeout_ns)
    }

    fn write_verdict(&mut self, tid: u32, verdict: Verdict) -> Result<(), LoadError> {
        Enforcer::write_verdict(self, tid, verdict)
    }

    fn remove_pending(&mut self, tid: u32) -> Result<(), LoadError> {
        Enforcer::remove_pending(self, tid)
    }

    fn pending(&mut self) -> Result<Vec<(u32, Pending)>, LoadError> {
        Enforcer::pending(self)
    }

    fn guard(&mut self, pid: u32) -> Result<(), LoadError> {
        Enforcer::guard(self, pid)
    }

    fn unguard(&mut self, pid: u32) -> Result<(), LoadError> {
        Enforcer::unguard(self, pid)
    }

    fn counters(&mut self) -> Result<BTreeMap<&'static str, u64>, LoadError> {
        Enforcer::named_counters(self)
    }

    fn hold(&mut self, pid: u32, tid: u32) -> Held {
        Held {
            pid,
            tid,
            pidfd: pidfd_open(pid),
        }
    }

    fn resume(&mut self, task: &Held) -> bool {
        let Some(fd) = &task.pidfd else {
            return false;
        };
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

/// A kernel for unit tests: maps as plain collections, and a list of the
/// tasks continued.
#[cfg(test)]
#[derive(Debug, Default)]
pub(crate) struct FakeKernel {
    pub agents: std::collections::HashMap<u64, Agent>,
    pub grants: std::collections::HashMap<GrantKey, GrantValue>,
    pub name_grants: std::collections::HashMap<NameGrantKey, GrantValue>,
    pub verdicts: std::collections::HashMap<u32, Verdict>,
    pub pending: std::collections::HashMap<u32, Pending>,
    pub guarded: HashSet<u32>,
    pub heartbeat: Option<(u64, u64)>,
    /// Thread ids continued, in order.
    pub resumed: Vec<u32>,
    pub counters: BTreeMap<&'static str, u64>,
}

#[cfg(test)]
impl Kernel for FakeKernel {
    fn add_grants(&mut self, grants: &ResolvedGrants) -> Result<(), LoadError> {
        self.grants
            .extend(grants.inode.iter().map(|(k, v, _)| (*k, *v)));
        self.name_grants
            .extend(grants.names.iter().map(|(k, v, _)| (*k, *v)));
        Ok(())
    }

    fn add_agent(&mut self, cgroup: u64, agent: Agent) -> Result<(), LoadError> {
        self.agents.insert(cgroup, agent);
        Ok(())
    }

    fn remove_agent(&mut self, cgroup: u64) -> Result<(), LoadError> {
        self.agents.remove(&cgroup);
        Ok(())
    }

    fn agents(&mut self) -> Result<Vec<(u64, Agent)>, LoadError> {
        Ok(self.agents.iter().map(|(k, v)| (*k, *v)).collect())
    }

    fn remove_slot(&mut self, slot: u32) -> Result<(), LoadError> {
        self.grants.retain(|k, _| k.slot != slot);
        self.name_grants.retain(|k, _| k.slot != slot);
        Ok(())
    }

    fn retain_slots(&mut self, live: &HashSet<u32>) -> Result<(), LoadError> {
        self.grants.retain(|k, _| live.contains(&k.slot));
        self.name_grants.retain(|k, _| live.contains(&k.slot));
        Ok(())
    }

    fn set_grant(&mut self, key: GrantKey, value: GrantValue) -> Result<(), LoadError> {
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

    fn hold(&mut self, pid: u32, tid: u32) -> Held {
        Held::without_pidfd(pid, tid)
    }

    fn resume(&mut self, task: &Held) -> bool {
        self.resumed.push(task.tid);
        true
    }
}

/// A grant with no operations is no entry, as in the kernel's maps.
#[cfg(test)]
fn set_or_remove<K: std::hash::Hash + Eq>(
    map: &mut std::collections::HashMap<K, GrantValue>,
    key: K,
    value: GrantValue,
) {
    if value == GrantValue::default() {
        map.remove(&key);
    } else {
        map.insert(key, value);
    }
}
