//! Cgroups made below a watched cgroup are held from their first instant
//! until the daemon has decided what they are, so no task of an agent's
//! cgroup runs a single hook unconfined while the daemon looks.
//!
//! [`cgroup_mkdir`] runs in the kernel's `mkdir` of a cgroup, after the
//! cgroup exists and before its directory is visible (`kernfs_activate`
//! comes after the tracepoint): nobody can have moved a task into it yet.
//!
//! | a cgroup is made ...                                        | result                                   |
//! |-------------------------------------------------------------|------------------------------------------|
//! | with no ancestor (up to [`watch::MAX_DEPTH`]) in `WATCHED`  | nothing                                  |
//! | whose nearest ancestor in `WATCHED` is [`watch::EXEMPT`]    | nothing                                  |
//! | whose nearest ancestor in `WATCHED` is [`watch::HOLD`]      | an agent entry in [`mode::HELD`], counted |
//! | ... but the agents map is full or a kernel read failed      | not held, counted (`hold_failed`)        |
//!
//! A task of a held cgroup, at any hook ([`stop`]):
//!
//! | situation                                                        | result                                 |
//! |------------------------------------------------------------------|----------------------------------------|
//! | a hook that returns nothing (`d_instantiate`)                    | nothing                                |
//! | a hook whose caller cannot restart (`capable`, `file_receive`, `ptrace_access_check`) | `EACCES`, reported |
//! | no twin alive                                                    | `EACCES`, reported                     |
//! | the task cannot be stopped (io_uring, kernel thread, exiting)    | `EACCES`, reported                     |
//! | the pending table full                                           | `EACCES`, reported                     |
//! | ring buffer full                                                 | `EACCES`, counted                      |
//! | otherwise                                                        | pending with no request id, reported, `SIGSTOP`, `-ERESTARTNOINTR` |
//!
//! The daemon, woken by the report or by its scan, confines the cgroup
//! (replacing the entry in one update) or removes the entry, then continues
//! the cgroup's stopped tasks: the restarted system call is decided under
//! the mission, or not at all.

use aya_ebpf::{
    helpers::{bpf_get_current_cgroup_id, bpf_get_current_pid_tgid},
    macros::raw_tracepoint,
    programs::{LsmContext, RawTracePointContext},
};
use pincer_common::{
    Agent, EACCES, ERESTARTNOINTR, NO_OWN_NAMESPACES, Pending, agent_flags, counter, event_flags,
    fmode, hook, mode, verdict, watch,
};

use crate::{
    kernel::{self, ReadFailed},
    maps::{AGENTS, PENDING, WATCHED, count, twin_alive},
    park, report,
};

/// `BPF_NOEXIST`: a new cgroup's id has no entry (ids are never reused).
const NO_EXIST: u64 = 1;

/// The `cgroup_mkdir` tracepoint: `(struct cgroup *cgrp, const char *path)`.
#[raw_tracepoint(tracepoint = "cgroup_mkdir")]
pub fn cgroup_mkdir(ctx: RawTracePointContext) -> i32 {
    let cgroup: *const u8 = ctx.arg(0);
    match hold(cgroup) {
        Ok(true) => count(counter::HELD),
        Ok(false) => {}
        Err(ReadFailed) => count(counter::HOLD_FAILED),
    }
    0
}

/// Holds `cgroup` when its nearest watched ancestor says so; whether it
/// did.
#[inline(always)]
fn hold(cgroup: *const u8) -> Result<bool, ReadFailed> {
    let off = kernel::off();
    if off.loaded == 0 {
        return Err(ReadFailed);
    }
    let mut node: *const u8 = kernel::read(cgroup, off.cgroup_kn)?;
    let id: u64 = kernel::read(node, off.kernfs_node_id)?;
    for _ in 0..watch::MAX_DEPTH {
        let parent: *const u8 = kernel::read(node, off.kernfs_node_parent)?;
        if parent.is_null() {
            return Ok(false);
        }
        let parent_id: u64 = kernel::read(parent, off.kernfs_node_id)?;
        if let Some(watched) = unsafe { WATCHED.get(parent_id) } {
            if *watched != watch::HOLD {
                return Ok(false);
            }
            let held = Agent {
                slot: 0,
                mode: mode::HELD,
                flags: 0,
                userns_home: NO_OWN_NAMESPACES,
                capabilities: 0,
            };
            return AGENTS
                .insert(id, held, NO_EXIST)
                .map(|()| true)
                .map_err(|_| ReadFailed);
        }
        node = parent;
    }
    Ok(false)
}

/// What a hook answers for a task of a held cgroup (see the module's
/// table). Not inlined: one copy serves every program.
#[inline(never)]
pub fn stop(agent: &Agent, hook: u32) -> i32 {
    match hook {
        hook::D_INSTANTIATE => return 0,
        hook::CAPABLE | hook::FILE_RECEIVE | hook::PTRACE => {
            return refuse(agent, hook, event_flags::NOT_RESTARTABLE);
        }
        _ => {}
    }
    if !twin_alive() {
        count(counter::NO_TWIN);
        return refuse(agent, hook, event_flags::NO_TWIN);
    }
    if let Some(why) = park::unparkable() {
        count(counter::UNPARKABLE);
        return refuse(agent, hook, event_flags::UNPARKABLE | why);
    }
    // Recorded as pending with no request id: a watchdog whose daemon died
    // continues it like any parked task (it then meets no twin, and
    // `EACCES`), and the next daemon knows it is no request to replay.
    let tid = bpf_get_current_pid_tgid() as u32;
    let cgroup = unsafe { bpf_get_current_cgroup_id() };
    let waiting = Pending {
        id: 0,
        dev: 0,
        ino: cgroup,
        name_hash: 0,
        ops: 0,
        hook,
    };
    if PENDING.insert(tid, waiting, 0).is_err() {
        count(counter::PENDING_FULL);
        return refuse(agent, hook, event_flags::PENDING_FULL);
    }
    if !report::send_refusal(agent, hook, 0, verdict::HELD, 0) {
        let _ = PENDING.remove(tid);
        count(counter::DENIED);
        return -EACCES;
    }
    if !park::stop() {
        let _ = PENDING.remove(tid);
        count(counter::UNPARKABLE);
        return refuse(agent, hook, event_flags::UNPARKABLE);
    }
    -ERESTARTNOINTR
}

/// An agent confined from its first exec ([`agent_flags::FROM_EXEC`]):
/// every hook lets its tasks through until one opens a program to execute
/// it; that open ends the wait for the whole cgroup and is decided, as
/// everything after it, under the mission.
///
/// | the hook, for a task of such an agent      | result                                       |
/// |--------------------------------------------|----------------------------------------------|
/// | `file_open` of a program being executed    | the flag cleared; decided under the mission  |
/// | `file_open` whose flags cannot be read     | decided under the mission (flag kept)        |
/// | anything else                              | allowed, nothing reported                    |
#[inline(always)]
pub fn armed<const HOOK: u32>(ctx: &LsmContext, mut agent: Agent) -> Result<Agent, i32> {
    if HOOK != hook::FILE_OPEN {
        return Err(0);
    }
    let file: *const u8 = ctx.arg(0);
    let Ok(flags) = kernel::read::<u32>(file, kernel::off().file_f_flags) else {
        return Ok(agent);
    };
    if flags & fmode::EXEC == 0 {
        return Err(0);
    }
    let cgroup = unsafe { bpf_get_current_cgroup_id() };
    if let Some(entry) = AGENTS.get_ptr_mut(cgroup) {
        // SAFETY: the map's value for this cgroup; a plain store of an
        // aligned word, as the daemon's own updates replace whole entries.
        unsafe { (*entry).flags &= !agent_flags::FROM_EXEC };
    }
    agent.flags &= !agent_flags::FROM_EXEC;
    Ok(agent)
}

/// Refuses a held task's hook with `EACCES` and says why.
#[inline(always)]
fn refuse(agent: &Agent, hook: u32, flags: u32) -> i32 {
    // Woken by a watchdog whose daemon died: nothing waits any more.
    let _ = PENDING.remove(bpf_get_current_pid_tgid() as u32);
    count(counter::DENIED);
    let _ = report::send_refusal(agent, hook, 0, verdict::DENIED, flags | event_flags::HELD);
    -EACCES
}
