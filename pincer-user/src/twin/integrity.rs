//! The integrity check: pincer never reports healthy while the kernel holds
//! something else than what it was told, or while the programs do not
//! decide.
//!
//! Each check compares, for every confined cgroup, the kernel's agent entry
//! and the grants of its slot (inode, name and prefix grants: counts, and a
//! digest of the inode and name grants) with what the twin wrote; looks for
//! a live link running each program the enforcer attached; and runs a
//! **canary** in the cgroup: a process forked from the twin joins the
//! cgroup and calls `bpf(BPF_PROG_GET_NEXT_ID)`, which root may do and which
//! the programs refuse every agent with `EPERM` and report (in audit mode,
//! allow and report). A canary that is not refused (where the mission
//! enforces or asks), or whose report has not reached the twin by the next
//! check, is a problem: the cgroup is not confined whatever the maps say.
//! A check runs at most `MAX_CANARIES` canaries (each a `fork` the twin
//! waits for); with more cgroups they take turns.
//!
//! The canary holds nothing of pincer's: before it joins the cgroup it
//! closes every descriptor but the cgroup's `cgroup.procs` and makes itself
//! non-dumpable (no agent can trace it or read its memory: that takes
//! `CAP_SYS_PTRACE`, which agents never have), and it only makes the one
//! call. An agent decided from its first `exec` (`from_exec`) is not armed
//! before it: no canary runs there until then. A frozen cgroup gets none
//! either (the canary would freeze with it).

use std::{
    collections::HashMap,
    fs,
    os::fd::AsRawFd,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use nix::{
    sys::{
        signal::{Signal, kill},
        wait::{WaitPidFlag, WaitStatus, waitpid},
    },
    unistd::{ForkResult, Pid, fork},
};
use pincer_common::{Agent, GrantKey, GrantValue, NameGrantKey, agent_flags};
use pincer_model::{
    control::{AgentIntegrity, Integrity},
    mission::Mode,
};
use sha2::{Digest, Sha256};

use super::{Record, Twin, TwinError};
use crate::loader::Kernel;

/// `bpf(2)`'s `BPF_PROG_GET_NEXT_ID`: harmless, allowed to root, refused to
/// every agent by the programs.
const BPF_PROG_GET_NEXT_ID: libc::c_long = 11;
/// The most canaries one check runs: each is a `fork` of the twin, which
/// waits for it. With more confined cgroups they take turns, so each gets
/// one every `ceil(n / MAX_CANARIES)` checks.
const MAX_CANARIES: usize = 16;
/// How long a canary may take before it is killed and counted as a problem.
const CANARY_TIMEOUT: Duration = Duration::from_secs(2);

/// The canary's exit codes.
mod code {
    /// `bpf` failed with `EPERM`: refused.
    pub const REFUSED: i32 = 10;
    /// `bpf` succeeded (or failed for want of programs): not refused.
    pub const ALLOWED: i32 = 11;
    /// `bpf` failed otherwise.
    pub const OTHER: i32 = 12;
    /// The canary could not join the cgroup.
    pub const NOT_JOINED: i32 = 13;
}

/// What a canary met.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Refused with `EPERM`.
    Refused,
    /// Allowed.
    Allowed,
    /// Another error, or none could be had.
    Failed(&'static str),
}

/// Canaries run by the last check, by process id, until the next one
/// judges whether the kernel reported them.
#[derive(Debug, Default)]
pub struct Canaries {
    waiting: HashMap<u32, Watched>,
    /// Where the next check's canaries start, among the cgroups in order.
    cursor: usize,
    /// What each cgroup's last canary met, as shown.
    last: HashMap<u64, String>,
    /// The problems the last check found.
    problems: Vec<String>,
}

#[derive(Debug)]
struct Watched {
    cgroup: u64,
    reported: bool,
}

impl Canaries {
    /// Whether a record from process `pid` is a canary's (then it is
    /// counted as reported, and is not the agent's doing).
    pub(super) fn reported(&mut self, pid: u32) -> bool {
        match self.waiting.get_mut(&pid) {
            Some(watched) => {
                watched.reported = true;
                true
            }
            None => false,
        }
    }

    /// Starts watching a canary's report.
    pub(super) fn watch(&mut self, pid: u32, cgroup: u64) {
        self.waiting.insert(
            pid,
            Watched {
                cgroup,
                reported: false,
            },
        );
    }

    /// Takes the canaries watched: cgroup id → whether it was reported.
    pub(super) fn take(&mut self) -> HashMap<u64, bool> {
        self.waiting
            .drain()
            .map(|(_, watched)| (watched.cgroup, watched.reported))
            .collect()
    }
}

/// Runs a canary in the cgroup at `dir`; returns its process id and what
/// it met.
pub fn canary(dir: &Path) -> Result<(u32, Outcome), String> {
    if fs::read_to_string(dir.join("cgroup.freeze")).is_ok_and(|f| f.trim() == "1") {
        return Err("the cgroup is frozen".into());
    }
    let procs = fs::OpenOptions::new()
        .write(true)
        .open(dir.join("cgroup.procs"))
        .map_err(|e| format!("cannot open {}: {e}", dir.join("cgroup.procs").display()))?;
    let fd = procs.as_raw_fd();
    // SAFETY: the child makes only system calls (no allocation, no lock)
    // and ends with `_exit`, as a child of a threaded process must.
    let child = match unsafe { fork() }.map_err(|e| format!("cannot fork: {e}"))? {
        ForkResult::Child => unsafe { canary_child(fd) },
        ForkResult::Parent { child } => child,
    };
    drop(procs);
    let started = Instant::now();
    let outcome = loop {
        match waitpid(child, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) if started.elapsed() < CANARY_TIMEOUT => {
                std::thread::sleep(Duration::from_millis(1));
            }
            Ok(WaitStatus::StillAlive) => {
                let _ = kill(child, Signal::SIGKILL);
                let _ = waitpid(child, None);
                break Outcome::Failed("timed out");
            }
            Ok(WaitStatus::Exited(_, code::REFUSED)) => break Outcome::Refused,
            Ok(WaitStatus::Exited(_, code::ALLOWED)) => break Outcome::Allowed,
            Ok(WaitStatus::Exited(_, code::NOT_JOINED)) => {
                break Outcome::Failed("could not join the cgroup");
            }
            Ok(WaitStatus::Exited(..)) => break Outcome::Failed("bpf() failed otherwise"),
            Ok(_) => break Outcome::Failed("ended by a signal"),
            Err(nix::errno::Errno::EINTR) => {}
            Err(_) => break Outcome::Failed("lost"),
        }
    };
    Ok((pid_u32(child), outcome))
}

fn pid_u32(pid: Pid) -> u32 {
    pid.as_raw().unsigned_abs()
}

/// The canary itself, after `fork`.
///
/// # Safety
///
/// Only in the child of `fork`, with `procs` an open `cgroup.procs`.
unsafe fn canary_child(procs: i32) -> ! {
    // SAFETY: plain system calls on integers and stack buffers; `_exit`
    // ends the child without running the parent's destructors.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
        if procs > 0 {
            libc::syscall(libc::SYS_close_range, 0u32, (procs - 1) as u32, 0u32);
        }
        libc::syscall(libc::SYS_close_range, (procs + 1) as u32, u32::MAX, 0u32);
        // `0` is the writer itself.
        if libc::write(procs, b"0".as_ptr().cast(), 1) != 1 {
            libc::_exit(code::NOT_JOINED);
        }
        libc::close(procs);
        let attr = [0u32; 4];
        let result = libc::syscall(
            libc::SYS_bpf,
            BPF_PROG_GET_NEXT_ID,
            attr.as_ptr(),
            std::mem::size_of_val(&attr),
        );
        let errno = *libc::__errno_location();
        libc::_exit(match (result, errno) {
            (0.., _) | (_, libc::ENOENT) => code::ALLOWED,
            (_, libc::EPERM) => code::REFUSED,
            _ => code::OTHER,
        })
    }
}

impl<K: Kernel> Twin<K> {
    /// Checks what the kernel holds against what this twin wrote, and runs
    /// a canary in each confined cgroup whose directory `dirs` gives
    /// (see the module documentation). Every problem is named. When the
    /// set of problems is not the last check's, it is audited (an
    /// `integrity` record) and the answer's second half is `true`: the
    /// caller shows it (status, log, metric).
    pub fn check_integrity(
        &mut self,
        dirs: &HashMap<u64, PathBuf>,
    ) -> Result<(Integrity, bool), TwinError> {
        let integrity = self.integrity_now(dirs)?;
        let changed = integrity.problems != self.canaries.problems;
        if changed {
            self.audit(&Record::Integrity {
                problems: &integrity.problems,
            })?;
            self.canaries.problems.clone_from(&integrity.problems);
        }
        Ok((integrity, changed))
    }

    fn integrity_now(&mut self, dirs: &HashMap<u64, PathBuf>) -> Result<Integrity, TwinError> {
        let mut problems = Vec::new();
        let attached = self.kernel.attached()?;
        for (hook, _) in attached.iter().filter(|(_, running)| !running) {
            problems.push(format!(
                "program {hook} is not attached: its hook decides nothing"
            ));
        }
        let reported = self.canaries.take();
        let live: HashMap<u64, Agent> = self.kernel.agents()?.into_iter().collect();
        let mut cgroups: Vec<u64> = self.agents.keys().copied().collect();
        cgroups.sort_unstable();
        // This check's canaries: the next ones in turn.
        let candidates: Vec<u64> = cgroups
            .iter()
            .copied()
            .filter(|c| dirs.contains_key(c))
            .collect();
        let turn: std::collections::HashSet<u64> = if candidates.is_empty() {
            Default::default()
        } else {
            let start = self.canaries.cursor % candidates.len();
            let count = candidates.len().min(MAX_CANARIES);
            self.canaries.cursor = start + count;
            (0..count)
                .map(|i| candidates[(start + i) % candidates.len()])
                .collect()
        };
        self.canaries.last.retain(|c, _| dirs.contains_key(c));
        let mut held_by_slot = self.kernel.grants_by_slot()?;
        let mut agents = Vec::with_capacity(cgroups.len());
        for cgroup in cgroups {
            let agent = &self.agents[&cgroup];
            let (name, slot, entry, mode) =
                (agent.name.clone(), agent.slot, agent.entry, agent.mode);
            let who = format!("agent `{name}` (cgroup {cgroup})");
            let armed = match live.get(&cgroup) {
                None => {
                    problems.push(format!(
                        "{who} is not in the kernel's agent map: its tasks are not confined"
                    ));
                    // The canary shows what that means.
                    true
                }
                Some(held) if !same_entry(held, &entry) => {
                    problems.push(format!(
                        "{who}: the kernel's entry (slot {}, mode {}, capabilities {:#x}) is not the one written (slot {}, mode {}, capabilities {:#x})",
                        held.slot, held.mode, held.capabilities, entry.slot, entry.mode, entry.capabilities
                    ));
                    true
                }
                Some(held) => held.flags & agent_flags::FROM_EXEC == 0,
            };
            let expected = self.grants.expected(slot);
            let written = expected.inode.len() + expected.names.len() + agent.prefixes;
            let digest_written = digest(&expected.inode, &expected.names);
            let held = held_by_slot.remove(&slot).unwrap_or_default();
            let holds = held.inode.len() + held.names.len() + held.prefixes;
            let digest_held = digest(&held.inode, &held.names);
            if holds != written || digest_held != digest_written {
                problems.push(format!(
                    "{who}: the kernel holds {holds} grants (digest {digest_held}), pincer wrote {written} (digest {digest_written})"
                ));
            }
            if reported.get(&cgroup) == Some(&false) {
                problems.push(format!(
                    "{who}: the kernel did not report the last canary's bpf() call"
                ));
            }
            let canary = match dirs.get(&cgroup).filter(|_| turn.contains(&cgroup)) {
                None => self.canaries.last.get(&cgroup).cloned(),
                Some(_) if !armed => Some("not armed".to_owned()),
                Some(dir) => Some(match canary(dir) {
                    Ok((pid, outcome)) => {
                        // Only a canary that made its call has a report to
                        // wait for.
                        if matches!(outcome, Outcome::Refused | Outcome::Allowed) {
                            self.canaries.watch(pid, cgroup);
                        }
                        match (outcome, mode) {
                            (Outcome::Refused, _) => "refused".to_owned(),
                            (Outcome::Allowed, Mode::Audit) => "reported".to_owned(),
                            (Outcome::Allowed, _) => {
                                problems.push(format!(
                                    "{who}: the canary's bpf() call in its cgroup was not refused: the programs do not decide for it"
                                ));
                                "not refused".to_owned()
                            }
                            (Outcome::Failed(what), _) => {
                                problems.push(format!("{who}: the canary failed: {what}"));
                                what.to_owned()
                            }
                        }
                    }
                    Err(error) => {
                        problems.push(format!("{who}: no canary could run: {error}"));
                        error
                    }
                }),
            };
            if let Some(met) = &canary {
                self.canaries.last.insert(cgroup, met.clone());
            }
            agents.push(AgentIntegrity {
                agent: name,
                cgroup,
                grants: written,
                live: holds,
                digest: digest_written,
                live_digest: digest_held,
                canary,
            });
        }
        Ok(Integrity {
            checked: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            programs: attached.iter().filter(|(_, running)| *running).count(),
            problems,
            agents,
        })
    }
}

/// Whether the kernel's agent entry is the one written: the kernel itself
/// only clears `FROM_EXEC` (at the agent's first `exec`).
pub fn same_entry(live: &Agent, written: &Agent) -> bool {
    let flags = |a: &Agent| a.flags & !agent_flags::FROM_EXEC;
    live.slot == written.slot
        && live.mode == written.mode
        && live.capabilities == written.capabilities
        && flags(live) == flags(written)
}

/// A digest of inode and name grants, whatever their order: 16 hex digits.
pub fn digest(inode: &[(GrantKey, GrantValue)], names: &[(NameGrantKey, GrantValue)]) -> String {
    let mut lines: Vec<String> = inode
        .iter()
        .map(|(k, v)| format!("inode {} {} {} {}", k.dev, k.ino, v.file_ops, v.tree_ops))
        .chain(names.iter().map(|(k, v)| {
            let name = &k.name[..(k.name_len as usize).min(k.name.len())];
            format!(
                "name {} {} {} {} {}",
                k.parent_dev,
                k.parent_ino,
                hex::encode(name),
                v.file_ops,
                v.tree_ops
            )
        }))
        .collect();
    lines.sort_unstable();
    let mut hash = Sha256::new();
    for line in &lines {
        hash.update(line.as_bytes());
        hash.update(b"\n");
    }
    hex::encode(&hash.finalize()[..8])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(ino: u64) -> GrantKey {
        GrantKey {
            slot: 1,
            _pad: 0,
            dev: 8,
            ino,
        }
    }

    fn value(ops: u32) -> GrantValue {
        GrantValue {
            file_ops: ops,
            tree_ops: 0,
        }
    }

    #[test]
    fn the_digest_ignores_order_and_sees_every_value() {
        let a = [(key(1), value(1)), (key(2), value(3))];
        let b = [(key(2), value(3)), (key(1), value(1))];
        assert_eq!(digest(&a, &[]), digest(&b, &[]));
        assert_eq!(digest(&a, &[]).len(), 16);
        let c = [(key(1), value(1)), (key(2), value(1))];
        assert_ne!(digest(&a, &[]), digest(&c, &[]));
        assert_ne!(digest(&a, &[]), digest(&a[..1], &[]));
    }

    #[test]
    fn an_entry_is_the_same_when_only_from_exec_was_cleared() {
        let written = Agent {
            slot: 3,
            mode: 1,
            flags: agent_flags::FROM_EXEC | agent_flags::REPORT_ALLOWED,
            userns_home: 0,
            capabilities: 5,
        };
        let mut live = written;
        live.flags &= !agent_flags::FROM_EXEC;
        assert!(same_entry(&live, &written));
        live.capabilities = 7;
        assert!(!same_entry(&live, &written));
        let other_slot = Agent { slot: 4, ..written };
        assert!(!same_entry(&other_slot, &written));
    }
}
