//! Parking: stop the task, ask the twin, restart the syscall.
//!
//! | situation on entry                                     | result                          |
//! |--------------------------------------------------------|---------------------------------|
//! | a verdict for this thread's matching pending request   | apply it once (allow / `EACCES`) |
//! | matching pending request, no verdict, twin alive       | stop again, no new event (stray `SIGCONT`) |
//! | matching pending request, twin dead                    | `EACCES`                        |
//! | new request, twin dead (stale heartbeat)               | `EACCES`, reported              |
//! | new request, task cannot be stopped (io_uring worker, kernel thread, exiting) | `EACCES`, reported |
//! | new request, pending table full                        | `EACCES`, reported              |
//! | new request, ring buffer full                          | `EACCES`, counted               |
//! | new request, `SIGSTOP` cannot be sent                  | `EACCES`, reported              |
//! | new request                                            | record, report, `SIGSTOP`, `-ERESTARTNOINTR` |
//!
//! `-ERESTARTNOINTR` never reaches user space: the task stops on its way out
//! of the kernel and the syscall restarts when it is continued, so the hooks
//! decide again on fresh objects (no time-of-check to time-of-use gap). A
//! grant written meanwhile is found by the normal check; a one-shot verdict
//! is found here.

use aya_ebpf::helpers::{bpf_get_current_pid_tgid, bpf_get_current_task, bpf_send_signal_thread};
use pincer_common::{
    Agent, ERESTARTNOINTR, NAME_LEN, Pending, SIGSTOP, counter, event_flags, task_flags, verdict,
};

use crate::{
    decide::{Access, EACCES, deny, name_key},
    kernel,
    maps::{PENDING, VERDICTS, count, next_request_id, twin_alive},
    report::{self, Outcome},
};

/// Parks an access no grant covers (or applies the verdict it was parked for).
#[inline(always)]
pub fn park(agent: &Agent, access: &Access, granted: u32) -> i32 {
    let tid = bpf_get_current_pid_tgid() as u32;
    let Ok(name_hash) = created_name_hash(agent, access) else {
        return deny(agent, Some(access), granted, event_flags::READ_FAILED);
    };
    let this = Pending {
        id: 0,
        dev: access.dev,
        ino: access.ino,
        name_hash,
        ops: access.ops,
        hook: access.hook,
    };

    // A pending entry for another access by the same thread (a signal
    // handler during the restart, or a reused thread id) is replaced below.
    if let Some(pending) = unsafe { PENDING.get(tid) }.copied()
        && (Pending { id: 0, ..pending }) == this
    {
        return restarted(agent, access, granted, tid, &pending);
    }

    if !twin_alive() {
        count(counter::NO_TWIN);
        return deny(agent, Some(access), granted, event_flags::NO_TWIN);
    }
    if !parkable() {
        count(counter::UNPARKABLE);
        return deny(agent, Some(access), granted, event_flags::UNPARKABLE);
    }
    let id = next_request_id();
    let pending = Pending { id, ..this };
    if PENDING.insert(tid, pending, 0).is_err() {
        count(counter::PENDING_FULL);
        return deny(agent, Some(access), granted, event_flags::PENDING_FULL);
    }
    let Some(mut event) = report::reserve() else {
        let _ = PENDING.remove(tid);
        count(counter::RINGBUF_FULL);
        count(counter::DENIED);
        return -EACCES;
    };
    let outcome = Outcome {
        granted,
        verdict: verdict::PARKED,
        flags: 0,
        request_id: id,
        name_hash,
    };
    report::fill(&mut event, agent, Some(access), outcome);
    // Stop before the event is visible, so the twin never answers a request
    // whose task is still running.
    if unsafe { bpf_send_signal_thread(SIGSTOP) } != 0 {
        event.discard(0);
        let _ = PENDING.remove(tid);
        count(counter::UNPARKABLE);
        return deny(agent, Some(access), granted, event_flags::UNPARKABLE);
    }
    event.submit(0);
    count(counter::PARKED);
    -ERESTARTNOINTR
}

/// The parked syscall runs again: apply the verdict, or stop again.
#[inline(always)]
fn restarted(agent: &Agent, access: &Access, granted: u32, tid: u32, pending: &Pending) -> i32 {
    if let Some(verdict) = unsafe { VERDICTS.get(tid) }.copied()
        && verdict.id == pending.id
    {
        let _ = VERDICTS.remove(tid);
        let _ = PENDING.remove(tid);
        if verdict.allow != 0 {
            count(counter::VERDICT_ALLOW);
            return 0;
        }
        count(counter::VERDICT_DENY);
        count(counter::DENIED);
        return -EACCES;
    }
    if !twin_alive() {
        // The twin died with this request open: nobody will answer.
        let _ = PENDING.remove(tid);
        count(counter::NO_TWIN);
        return deny(agent, Some(access), granted, event_flags::NO_TWIN);
    }
    // Woken by someone else's SIGCONT: stop again, same request, no event.
    if unsafe { bpf_send_signal_thread(SIGSTOP) } != 0 {
        let _ = PENDING.remove(tid);
        count(counter::UNPARKABLE);
        return deny(agent, Some(access), granted, event_flags::UNPARKABLE);
    }
    count(counter::REPARKED);
    -ERESTARTNOINTR
}

/// Whether the current task can be stopped with a signal: io_uring workers
/// must not be (the request would complete with -513), kernel threads and
/// exiting tasks cannot be.
#[inline(always)]
fn parkable() -> bool {
    let task = unsafe { bpf_get_current_task() } as *const u8;
    let Ok(off) = kernel::offsets() else {
        return false;
    };
    match kernel::read::<u32>(task, off.task_struct_flags) {
        Ok(flags) => {
            flags & (task_flags::IO_WORKER | task_flags::KTHREAD | task_flags::EXITING) == 0
        }
        Err(_) => false,
    }
}

/// FNV-1a of the name a creation makes (zero for opens), so a verdict for
/// one name is never spent on another in the same directory.
#[inline(always)]
fn created_name_hash(agent: &Agent, access: &Access) -> Result<u64, kernel::ReadFailed> {
    if access.exists {
        return Ok(0);
    }
    let Some(key) = name_key(agent.slot, access)? else {
        return Ok(0);
    };
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    for i in 0..NAME_LEN {
        let byte = key.name[i];
        if byte == 0 {
            break;
        }
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    Ok(hash)
}
