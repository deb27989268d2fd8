//! Reporting a decision to userspace on the ring buffer.

use aya_ebpf::helpers::{
    bpf_get_current_cgroup_id, bpf_get_current_comm, bpf_get_current_pid_tgid,
    bpf_probe_read_kernel_str_bytes,
};
use pincer_common::{AccessEvent, Agent, COMPONENT_LEN, MAX_COMPONENTS, counter, event_flags};

use crate::{
    decide::Access,
    kernel,
    maps::{EVENTS, count},
};

/// Sends one event. A full ring buffer loses the event (counted), never the
/// decision: the caller has already made it.
#[inline(always)]
pub fn send(agent: &Agent, access: Option<&Access>, granted: u32, verdict: u32) {
    let Some(mut entry) = EVENTS.reserve::<AccessEvent>(0) else {
        count(counter::RINGBUF_FULL);
        return;
    };
    let event = entry.as_mut_ptr();
    let pid_tgid = bpf_get_current_pid_tgid();
    // SAFETY: `event` points to a reserved, exclusively owned record of the
    // right size; every field is written before it is submitted.
    unsafe {
        (*event).cgroup_id = bpf_get_current_cgroup_id();
        (*event).pid = pid_tgid as u32;
        (*event).tgid = (pid_tgid >> 32) as u32;
        (*event).slot = agent.slot;
        (*event).granted = granted;
        (*event).verdict = verdict;
        (*event)._pad = 0;
        (*event).comm = bpf_get_current_comm().unwrap_or([0; 16]);
        (*event).depth = 0;
        (*event).flags = 0;
        match access {
            Some(access) => {
                (*event).dev = access.dev;
                (*event).ino = access.ino;
                (*event).ops = access.ops;
                (*event).hook = access.hook;
                fill_path(&mut *event, access);
            }
            None => {
                (*event).dev = 0;
                (*event).ino = 0;
                (*event).ops = 0;
                (*event).hook = 0;
                (*event).flags = event_flags::READ_FAILED;
            }
        }
    }
    entry.submit(0);
}

/// Copies the path components of the object, leaf first, up to the root of
/// its filesystem or [`MAX_COMPONENTS`].
#[inline(always)]
fn fill_path(event: &mut AccessEvent, access: &Access) {
    let off = &access.off;
    let mut dentry = access.dentry;
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
        dentry = parent;
    }
}
