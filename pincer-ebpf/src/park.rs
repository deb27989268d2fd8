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
//! is found here. A restarted access to an existing object whose verdict
//! allows it skips the grants' walk ([`allowed_by_verdict`]): the walk's
//! answer would not change the outcome, and it repeats the walk that found
//! nothing when the access parked.

use aya_ebpf::helpers::{bpf_get_current_pid_tgid, bpf_get_current_task, bpf_send_signal_thread};
use pincer_common::{EACCES, ERESTARTNOINTR, Pending, SIGSTOP, counter, event_flags, task_flags};

use crate::{
    access::Access,
    kernel,
    maps::{PENDING, VERDICTS, count, next_request_id, twin_alive},
};

/// What parking an access came to before its event is sent.
pub enum Prepared {
    /// Decided without an event: a verdict applied, or a stray wake-up
    /// parked again. The hook returns this.
    Done(i32),
    /// A new request, recorded as pending for `tid`: send its event, then
    /// [`stop`] the task.
    New {
        /// The thread.
        tid: u32,
        /// The request id.
        id: u64,
        /// FNV-1a of a new name.
        name_hash: u64,
    },
    /// Cannot be parked: deny and report with this event flag.
    Deny(u32),
}

/// Parks an access no grant covers (or applies the verdict it was parked
/// for), up to sending its event, which the caller does. `moved` is the
/// object a rename moves when `access` is its name end (zeros otherwise):
/// a verdict pinned to another object refuses it.
#[inline(always)]
pub fn prepare(access: &Access, moved: (u64, u64)) -> Prepared {
    let tid = bpf_get_current_pid_tgid() as u32;
    let Ok(name_hash) = new_name_hash(access) else {
        return Prepared::Deny(event_flags::READ_FAILED);
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
        return restarted(tid, &pending, moved);
    }

    if !twin_alive() {
        count(counter::NO_TWIN);
        return Prepared::Deny(event_flags::NO_TWIN);
    }
    if let Some(why) = unparkable() {
        count(counter::UNPARKABLE);
        return Prepared::Deny(event_flags::UNPARKABLE | why);
    }
    let id = next_request_id();
    if PENDING.insert(tid, Pending { id, ..this }, 0).is_err() {
        count(counter::PENDING_FULL);
        return Prepared::Deny(event_flags::PENDING_FULL);
    }
    Prepared::New { tid, id, name_hash }
}

/// Whether this access is the current thread's parked one, restarted, and
/// its verdict, waiting, allows it: then no grant need be looked up, as
/// [`prepare`] applies that verdict whatever the grants say. Existing
/// objects only: a creation's label depends on the walk (whether it
/// happens in a policy place).
#[inline(always)]
pub fn allowed_by_verdict(access: &Access) -> bool {
    if !access.exists {
        return false;
    }
    let tid = bpf_get_current_pid_tgid() as u32;
    let Some(pending) = (unsafe { PENDING.get(tid) }).copied() else {
        return false;
    };
    let this = Pending {
        id: pending.id,
        dev: access.dev,
        ino: access.ino,
        name_hash: 0,
        ops: access.ops,
        hook: access.hook,
    };
    pending == this
        && unsafe { VERDICTS.get(tid) }.is_some_and(|v| v.id == pending.id && v.allow != 0)
}

/// Stops the current thread; false when the signal cannot be sent.
#[inline(always)]
pub fn stop() -> bool {
    unsafe { bpf_send_signal_thread(SIGSTOP) == 0 }
}

/// Forgets a request that could not be sent or stopped for.
#[inline(always)]
pub fn abandon(tid: u32) {
    let _ = PENDING.remove(tid);
}

/// The parked syscall runs again: apply the verdict, or stop again. A
/// verdict pinned to an object ([`pincer_common::Verdict::pin_ino`])
/// allows a rename of that object only: the twin's copy of what it
/// inspected, not whatever the agent put in its place meanwhile.
#[inline(always)]
fn restarted(tid: u32, pending: &Pending, moved: (u64, u64)) -> Prepared {
    if let Some(verdict) = unsafe { VERDICTS.get(tid) }.copied()
        && verdict.id == pending.id
    {
        let _ = VERDICTS.remove(tid);
        let _ = PENDING.remove(tid);
        let pinned = verdict.pin_ino == 0 || (verdict.pin_dev, verdict.pin_ino) == moved;
        if verdict.allow != 0 && pinned {
            count(counter::VERDICT_ALLOW);
            return Prepared::Done(0);
        }
        count(counter::VERDICT_DENY);
        count(counter::DENIED);
        return Prepared::Done(-EACCES);
    }
    if !twin_alive() {
        // The twin died with this request open: nobody will answer.
        let _ = PENDING.remove(tid);
        count(counter::NO_TWIN);
        return Prepared::Deny(event_flags::NO_TWIN);
    }
    // Woken by someone else's SIGCONT: stop again, same request, no event.
    if !stop() {
        let _ = PENDING.remove(tid);
        count(counter::UNPARKABLE);
        return Prepared::Deny(event_flags::UNPARKABLE);
    }
    count(counter::REPARKED);
    Prepared::Done(-ERESTARTNOINTR)
}

/// Why the current task cannot be parked, if it cannot: io_uring workers
/// must not be (the request would complete with -513), kernel threads and
/// exiting tasks cannot be. A task with an io_uring instance is not parked
/// either: an open it submits can run inline in `io_uring_enter`, in the
/// submitting task, where the restart would equally complete the request
/// with an error; and which of its accesses come from the ring cannot be
/// told from here. Such accesses are denied with `EACCES` and flagged.
#[inline(always)]
pub fn unparkable() -> Option<u32> {
    let task = unsafe { bpf_get_current_task() } as *const u8;
    let off = kernel::off();
    let Ok(flags) = kernel::read::<u32>(task, off.task_struct_flags) else {
        return Some(event_flags::READ_FAILED);
    };
    if flags & task_flags::IO_WORKER != 0 {
        return Some(event_flags::IO_URING);
    }
    if flags & (task_flags::KTHREAD | task_flags::EXITING) != 0 {
        return Some(0);
    }
    match kernel::read::<*const u8>(task, off.task_struct_io_uring) {
        Ok(ring) if ring.is_null() => None,
        Ok(_) => Some(event_flags::IO_URING),
        Err(_) => Some(event_flags::READ_FAILED),
    }
}

/// The hash of the new name an access makes ([`Access::name_id`]; zero
/// for existing objects).
#[inline(always)]
fn new_name_hash(access: &Access) -> Result<u64, kernel::ReadFailed> {
    if access.exists {
        return Ok(0);
    }
    Ok(access.name_id()?.map_or(0, |(_, hash)| hash))
}
