//! Reporting a decision to userspace on the ring buffer.

use aya_ebpf::{
    cty::c_void,
    helpers::{
        bpf_get_current_cgroup_id, bpf_get_current_comm, bpf_get_current_pid_tgid,
        bpf_ktime_get_boot_ns, bpf_loop, bpf_probe_read_kernel_buf,
        bpf_probe_read_kernel_str_bytes,
    },
    maps::ring_buf::RingBufEntry,
};
use pincer_common::{
    AccessEvent, Agent, COMPONENT_LEN, MAX_COMPONENTS, counter, event_flags, verdict,
};

use crate::{
    access::Access,
    kernel, labels,
    maps::{EVENTS, PATHS, count},
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
    /// With `event_flags::POLICY`: the rule that made the object policy.
    pub policy_entry: u32,
    /// With it: the path component that rule met.
    pub policy_step: u32,
}

/// A reserved, not yet submitted event.
pub type Reserved = RingBufEntry<AccessEvent>;

/// Reserves room for one event, or `None` when the ring buffer is full.
#[inline(always)]
pub fn reserve() -> Option<Reserved> {
    EVENTS.reserve::<AccessEvent>(0)
}

/// Fills a reserved event with an access, `identified` or not (then only
/// the flag `READ_FAILED` says anything of it). A flag beside the access
/// rather than an `Option`: the compiler may tell an `Option` apart by
/// another value it knows goes with it, a link between two values the
/// verifier does not follow.
#[inline(always)]
pub fn fill(
    entry: &mut Reserved,
    agent: &Agent,
    access: &Access,
    identified: bool,
    outcome: Outcome,
) {
    let event = entry.as_mut_ptr();
    let pid_tgid = bpf_get_current_pid_tgid();
    // SAFETY: a helper with no arguments.
    let cgroup_id = unsafe { bpf_get_current_cgroup_id() };
    let parked = outcome.verdict == verdict::PARKED;
    // SAFETY: `event` points to a reserved, exclusively owned record of the
    // right size; every field is written before it is submitted.
    unsafe {
        (*event).cgroup_id = cgroup_id;
        (*event).request_id = outcome.request_id;
        (*event).name_hash = outcome.name_hash;
        (*event).at_ns = bpf_ktime_get_boot_ns();
        (*event).parent_ino = 0;
        (*event).pid = pid_tgid as u32;
        (*event).tgid = (pid_tgid >> 32) as u32;
        (*event).slot = agent.slot;
        (*event).granted = outcome.granted;
        (*event).verdict = outcome.verdict;
        (*event).comm = bpf_get_current_comm().unwrap_or([0; 16]);
        (*event).depth = 0;
        (*event).flags = outcome.flags;
        (*event).policy_entry = outcome.policy_entry;
        (*event).policy_step = outcome.policy_step;
        // What the twin would otherwise read for every parked request:
        // the executable's identity (it reads the path once per process
        // and executable) and whether the agent has a level at all.
        let (exe_dev, exe_ino, exe_generation) = if parked {
            kernel::current_exe(kernel::off()).unwrap_or((0, 0, 0))
        } else {
            (0, 0, 0)
        };
        (*event).exe_dev = exe_dev;
        (*event).exe_ino = exe_ino;
        (*event).exe_generation = exe_generation;
        if parked && labels::has_level(cgroup_id) {
            (*event).flags |= event_flags::TAINTED;
        }
        if identified {
            (*event).dev = access.dev;
            (*event).ino = access.ino;
            (*event).ops = access.ops;
            (*event).hook = access.hook;
            if !access.exists {
                (*event).flags |= event_flags::NEW_NAME;
            }
            fill_path(&mut *event, access);
        } else {
            (*event).dev = 0;
            (*event).ino = 0;
            (*event).ops = 0;
            (*event).hook = 0;
            (*event).flags |= event_flags::READ_FAILED;
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

/// The state of the path walk, shared with [`path_step`].
#[repr(C)]
struct PathWalk {
    /// The dentry whose name comes next.
    dentry: u64,
    /// Inode of the object's parent (filled at the first step).
    parent_ino: u64,
    /// Bits of `event_flags` the walk found.
    flags: u32,
    /// Components copied so far.
    depth: u32,
    /// Whether the object exists (a new name has no inode of its own).
    exists: u32,
    /// Explicit padding.
    _pad: u32,
}

/// Copies the path components of the object, leaf first, up to the root of
/// its filesystem or [`MAX_COMPONENTS`].
///
/// The walk runs under `bpf_loop`, whose callback the verifier checks once:
/// inlined, the loop was checked again for every path leading to a report,
/// which was most of the programs' load time.
#[inline(always)]
fn fill_path(event: &mut AccessEvent, access: &Access) {
    let Ok(dentry) = access.dentry() else {
        event.flags |= event_flags::READ_FAILED;
        return;
    };
    let mut walk = PathWalk {
        dentry: dentry as u64,
        parent_ino: 0,
        flags: 0,
        depth: 0,
        exists: u32::from(access.exists),
        _pad: 0,
    };
    let ran = unsafe {
        bpf_loop(
            MAX_COMPONENTS as u32,
            path_step as *mut c_void,
            (&raw mut walk).cast(),
            0,
        )
    };
    let Some(paths) = PATHS.get_ptr(0) else {
        event.flags |= event_flags::READ_FAILED;
        return;
    };
    let components = unsafe {
        core::slice::from_raw_parts_mut(
            event.components.as_mut_ptr().cast::<u8>(),
            COMPONENT_LEN * MAX_COMPONENTS,
        )
    };
    if ran < 0 || unsafe { bpf_probe_read_kernel_buf(paths.cast::<u8>(), components) }.is_err() {
        event.flags |= event_flags::READ_FAILED;
        return;
    }
    event.flags |= walk.flags;
    event.depth = walk.depth.min(MAX_COMPONENTS as u32);
    event.parent_ino = walk.parent_ino;
}

/// One step of the path walk: copies the name of `walk.dentry` into the
/// per-CPU path buffer and moves to its parent. Returns 1 to stop.
extern "C" fn path_step(index: u64, ctx: *mut c_void) -> i64 {
    // SAFETY: `ctx` is the `PathWalk` on the caller's stack, for the
    // duration of `bpf_loop`.
    let walk = unsafe { &mut *ctx.cast::<PathWalk>() };
    let i = index as usize;
    let Some(paths) = PATHS.get_ptr_mut(0) else {
        walk.flags |= event_flags::READ_FAILED;
        return 1;
    };
    if i >= MAX_COMPONENTS {
        return 1;
    }
    let off = kernel::off();
    let dentry = walk.dentry as *const u8;
    let parent = match kernel::parent(off, dentry) {
        Ok(Some(parent)) => parent,
        Ok(None) => {
            walk.flags |= event_flags::ROOT_REACHED;
            return 1;
        }
        Err(_) => {
            walk.flags |= event_flags::READ_FAILED;
            return 1;
        }
    };
    let Ok(name) = kernel::name(off, dentry) else {
        walk.flags |= event_flags::READ_FAILED;
        return 1;
    };
    // SAFETY: a per-CPU buffer, used by one program at a time on this CPU.
    let slot = unsafe { &mut (*paths)[i] };
    match unsafe { bpf_probe_read_kernel_str_bytes(name, slot) } {
        Ok(bytes) if bytes.len() + 1 >= COMPONENT_LEN => {
            walk.flags |= event_flags::NAME_TRUNCATED;
        }
        Ok(_) => {}
        Err(_) => {
            slot[0] = 0;
            walk.flags |= event_flags::READ_FAILED;
        }
    }
    walk.depth = index as u32 + 1;
    if i == 0 && walk.exists != 0 {
        walk.parent_ino = kernel::dentry_ino(off, parent).unwrap_or(0);
    }
    walk.dentry = parent as u64;
    0
}

/// Sends the event of a refusal that names no file: a self-protection
/// refusal (`event_flags::GUARD`: the process, capability or kind of kernel
/// data acted on, or zero, in `ino`), or an IPC object or key not the
/// agent's (`event_flags::NOT_OWNED`: its id in `ino`), or a task of a
/// held cgroup (`crate::held`). No path. False when the ring buffer was
/// full.
#[inline(always)]
pub fn send_refusal(agent: &Agent, hook: u32, object: u64, verdict: u32, flags: u32) -> bool {
    let Some(mut entry) = EVENTS.reserve::<AccessEvent>(0) else {
        count(counter::RINGBUF_FULL);
        return false;
    };
    let event = entry.as_mut_ptr();
    let pid_tgid = bpf_get_current_pid_tgid();
    // SAFETY: as in `fill`; `components` is left as it is, `depth` is zero.
    unsafe {
        (*event).cgroup_id = bpf_get_current_cgroup_id();
        (*event).dev = 0;
        (*event).ino = object;
        (*event).request_id = 0;
        (*event).parent_ino = 0;
        (*event).name_hash = 0;
        (*event).at_ns = bpf_ktime_get_boot_ns();
        (*event).pid = pid_tgid as u32;
        (*event).tgid = (pid_tgid >> 32) as u32;
        (*event).slot = agent.slot;
        (*event).ops = 0;
        (*event).granted = 0;
        (*event).verdict = verdict;
        (*event).hook = hook;
        (*event).depth = 0;
        (*event).flags = flags;
        (*event).exe_dev = 0;
        (*event).exe_ino = 0;
        (*event).exe_generation = 0;
        (*event).comm = bpf_get_current_comm().unwrap_or([0; 16]);
    }
    entry.submit(0);
    true
}
