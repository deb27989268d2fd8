//! Reporting a decision to userspace on the ring buffer.

use aya_ebpf::{
    helpers::{
        bpf_get_current_cgroup_id, bpf_get_current_comm, bpf_get_current_pid_tgid,
        bpf_probe_read_kernel_str_bytes,
    },
    maps::ring_buf::RingBufEntry,
};
use pincer_common::{
    AccessEvent, Agent, COMPONENT_LEN, MAX_COMPONENTS, counter, event_flags, verdict,
};

use crate::{
    decide::Access,
    kernel,
    maps::{EVENTS, count},
};

/// What an event says beyond the access itself.
#[derive(Clone, Copy)]
pub struct Outcome {
    /// Operations the grants gave.
    pub granted: u32,
    /// One of `pincer_common::verdict`.
    pub verdict: u32,
    /// Bits of `pincer_common::event_flags`.
    pub flags: u32,
    /// Request id of a parked request, or zero.
    pub request_id: u64,
    /// FNV-1a of a created name, or zero.
    pub name_hash: u64,
}

/// A reserved, not yet submitted event.
pub type Reserved = RingBufEntry<AccessEvent>;

/// Reserves room for one event, or `None` when the ring buffer is full.
#[inline(always)]
pub fn reserve() -> Option<Reserved> {
    EVENTS.reserve::<AccessEvent>(0)
}

/// Fills a reserved event.
#[inline(always)]
pub fn fill(entry: &mut Reserved, agent: &Agent, access: Option<&Access>, outcome: Outcome) {
    let event = entry.as_mut_ptr();
    let pid_tgid = bpf_get_current_pid_tgid();
    // SAFETY: `event` points to a reserved, exclusively owned record of the
    // right size; every field is written before it is submitted.
    unsafe {
        (*event).cgroup_id = bpf_get_current_cgroup_id();
        (*event).request_id = outcome.request_id;
        (*event).name_hash = outcome.name_hash;
        (*event).parent_ino = 0;
        (*event).pid = pid_tgid as u32;
        (*event).tgid = (pid_tgid >> 32) as u32;
        (*event).slot = agent.slot;
        (*event).granted = outcome.granted;
        (*event).verdict = outcome.verdict;
        (*event)._pad = 0;
        (*event).comm = bpf_get_current_comm().unwrap_or([0; 16]);
        (*event).depth = 0;
        (*event).flags = outcome.flags;
        match access {
            Some(access) => {
                (*event).dev = access.dev;
                (*event).ino = access.ino;
                (*event).ops = access.ops;
                (*event).hook = access.hook;
                if !access.exists {
                    (*event).flags |= event_flags::NEW_NAME;
                }
                fill_path(&mut *event, access);
            }
            None => {
                (*event).dev = 0;
                (*event).ino = 0;
                (*event).ops = 0;
                (*event).hook = 0;
                (*event).flags |= event_flags::READ_FAILED;
            }
        }
    }
}

/// Turns a filled parked event into a denial with `flag`.
#[inline(always)]
pub fn mark_denied(entry: &mut Reserved, flag: u32) {
    let event = entry.as_mut_ptr();
    // SAFETY: a reserved record this program owns until it submits it.
    unsafe {
        (*event).verdict = verdict::DENIED;
        (*event).request_id = 0;
        (*event).flags |= flag;
    }
}

/// Copies the path components of the object, leaf first, up to the root of
/// its filesystem or [`MAX_COMPONENTS`].
#[inline(always)]
fn fill_path(event: &mut AccessEvent, access: &Access) {
    let off = kernel::off();
    let Ok(mut dentry) = access.dentry() else {
        event.flags |= event_flags::READ_FAILED;
        return;
    };
    for i in 0..MAX_COMPONENTS {
        let parent = match kernel::parent(off, dentry) {
            Ok(Some(parent)) => parent,
            Ok(None) => {
                event.flags |= event_flags::ROOT_REACHED;
                return;
            }
            Err(_) => {
                event.flags |= event_flags::READ_FAILED;
                return;
            }
        };
        let Ok(name) = kernel::name(off, dentry) else {
            event.flags |= event_flags::READ_FAILED;
            return;
        };
        let slot = &mut event.components[i];
        match unsafe { bpf_probe_read_kernel_str_bytes(name, slot) } {
            Ok(bytes) if bytes.len() + 1 >= COMPONENT_LEN => {
                event.flags |= event_flags::NAME_TRUNCATED;
            }
            Ok(_) => {}
            Err(_) => {
                slot[0] = 0;
                event.flags |= event_flags::READ_FAILED;
            }
        }
        event.depth = i as u32 + 1;
        if i == 0 && access.exists {
            event.parent_ino = kernel::dentry_ino(off, parent).unwrap_or(0);
        }
        dentry = parent;
    }
}

/// Sends the event of a self-protection refusal: no object path, the target
/// task's process id (or zero) in `ino`.
#[inline(always)]
pub fn send_guard(agent: &Agent, hook: u32, target: u32, verdict: u32) {
    let Some(mut entry) = EVENTS.reserve::<AccessEvent>(0) else {
        count(counter::RINGBUF_FULL);
        return;
    };
    let event = entry.as_mut_ptr();
    let pid_tgid = bpf_get_current_pid_tgid();
    // SAFETY: as in `fill`; `components` is left as it is, `depth` is zero.
    unsafe {
        (*event).cgroup_id = bpf_get_current_cgroup_id();
        (*event).dev = 0;
        (*event).ino = u64::from(target);
        (*event).request_id = 0;
        (*event).parent_ino = 0;
        (*event).name_hash = 0;
        (*event).pid = pid_tgid as u32;
        (*event).tgid = (pid_tgid >> 32) as u32;
        (*event).slot = agent.slot;
        (*event).ops = 0;
        (*event).granted = 0;
        (*event).verdict = verdict;
        (*event).hook = hook;
        (*event).depth = 0;
        (*event).flags = event_flags::GUARD;
        (*event)._pad = 0;
        (*event).comm = bpf_get_current_comm().unwrap_or([0; 16]);
    }
    entry.submit(0);
}
