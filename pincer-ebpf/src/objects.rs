//! Objects the grants alone do not decide: what no grant can give an agent,
//! and what is the agent's own whatever its grants. The hooks that open or
//! read an existing object ask [`rule`] before deciding on the grants.
//!
//! | the object                                                    | read              | write             |
//! |---------------------------------------------------------------|-------------------|-------------------|
//! | a block device, opened                                        | refused           | refused           |
//! | a file of debugfs or tracefs, opened                          | refused           | refused           |
//! | `/proc/<pid>/...` of one of pincer's processes                | refused (guarded) | refused (guarded) |
//! | `/proc/<pid>/...` of a process outside the agent's cgroup     | refused           | refused           |
//! | `/proc/<pid>/...` of a process in the agent's cgroup          | allowed           | allowed           |
//! | `/proc/sys/user/*`, written from a sandbox of the agent's own  | the grants        | allowed           |
//! | any other `/proc` object (`/proc/sys`, `meminfo`, `kcore`, ...) | the grants      | refused           |
//! | a pidfd (a file of pidfs, 6.9 and later: `pidfd_open`)        | allowed           | allowed           |
//!
//! A block device holds every file behind every grant; debugfs and tracefs
//! reach into the kernel's memory and code paths. A process's `/proc`
//! entries tell its command line, its open files, its memory map and more,
//! so an agent reads only those of its own processes (the ones it can trace
//! anyway), whichever `/proc` they are seen through, and `ps` lists only
//! them. Every other `/proc` object is global: the baseline grants reading
//! a short list of harmless ones (`meminfo`, `cpuinfo`, `/proc/sys`, ...),
//! and writing one changes the kernel (`/proc/sys/kernel/modprobe`,
//! `core_pattern`, `sysrq-trigger`), which no grant allows. Entries below
//! `/proc/<pid>/net` have no process of their own: they belong to the
//! process of the nearest `/proc/<pid>` above them. Every procfs mounted
//! (a sandbox's `/proc`) is decided as the one at `/proc`.
//!
//! The one global write allowed: the limits in `/proc/sys/user` are the
//! writer's own user namespace's (`max_user_namespaces` and the like), and
//! a namespace below can never hold more than the one above it allows. A
//! sandbox of the agent's own lowers them for itself (bubblewrap's
//! `--disable-userns`); from a task in a mount namespace of the agent's
//! own, which only a user namespace of its own can have made, they are the
//! sandbox's.

use aya_ebpf::helpers::bpf_get_current_cgroup_id;
use pincer_common::{NO_OWN_NAMESPACES, event_flags, file_type, fs_magic, ops};

use crate::{
    access::Access,
    kernel::{self, ReadFailed},
    maps,
};

/// `PROC_SUPER_MAGIC`.
const PROC_MAGIC: u32 = 0x9fa0;

/// Directories between a `/proc/<pid>/net` entry and its `/proc/<pid>`
/// (`/proc/<pid>/net/stat/arp_cache` is two below `net`).
const MAX_PROC_DEPTH: usize = 4;

/// What decides an access besides the grants.
pub enum Rule {
    /// The grants alone.
    Grants,
    /// The grants, with these operations given besides.
    Also(u32),
    /// Refused whatever the grants, for the reason of this event flag. A
    /// write of a global `/proc` object is refused as a kernel setting
    /// (`KERNEL_SETTING`), unless it is a limit of a sandbox of the agent's
    /// own ([`own_limit`], looked at in `decide::limit_step`, a callback
    /// the verifier checks once, rather than in every hook that asks this
    /// rule).
    Refused(u32),
}

/// The rule for an access to an existing object; `proc_global` is what
/// global `/proc` objects are given besides the grants (`read` for reading
/// a link: `/proc/self`, `/proc/mounts` and the like name only paths every
/// process has).
#[inline(always)]
pub fn rule(access: &mut Access, proc_global: u32) -> Result<Rule, ReadFailed> {
    let off = kernel::off();
    let inode = access.inode;
    let magic = kernel::fs_magic(off, inode)?;
    if magic == PROC_MAGIC {
        // Every procfs shows the same kernel objects (a sandbox's own
        // `/proc` only lists fewer processes): its global entries are
        // decided as those of the `/proc` the grants were resolved in.
        // Their inode numbers are the same in every instance, but for the
        // sysctl files below `/proc/sys`, numbered as they are first seen,
        // which the baseline grants for reading as a tree.
        if off.proc_dev != 0 {
            access.dev = u64::from(off.proc_dev);
        }
        return proc_rule(access, proc_global);
    }
    // A pidfd is a handle on a process, not a file: what it does to the
    // process (a signal, a descriptor taken from it) is decided by the
    // hooks of those acts.
    if magic == fs_magic::PIDFS {
        return Ok(Rule::Also(access.ops));
    }
    if access.file.is_null() {
        return Ok(Rule::Grants);
    }
    if magic == fs_magic::DEBUGFS || magic == fs_magic::TRACEFS {
        return Ok(Rule::Refused(event_flags::KERNEL_FS));
    }
    let mode: u16 = kernel::read(inode, off.inode_i_mode)?;
    if u32::from(mode) & file_type::MASK == file_type::BLOCK {
        return Ok(Rule::Refused(event_flags::BLOCK_DEVICE));
    }
    Ok(Rule::Grants)
}

/// Whether a `/proc` object is a limit of the writer's own user namespace
/// (`/proc/sys/user/<limit>`), written from a sandbox of the agent's own.
#[inline(always)]
pub fn own_limit(access: &Access, home: u32) -> Result<bool, ReadFailed> {
    if home == NO_OWN_NAMESPACES || !kernel::own_mount_namespace(kernel::off(), home) {
        return Ok(false);
    }
    let off = kernel::off();
    let Some(user) = kernel::parent(off, access.dentry()?)? else {
        return Ok(false);
    };
    let Some(sys) = kernel::parent(off, user)? else {
        return Ok(false);
    };
    let Some(root) = kernel::parent(off, sys)? else {
        return Ok(false);
    };
    Ok(kernel::parent(off, root)?.is_none() && named(user, b"user")? && named(sys, b"sys")?)
}

/// Whether a dentry's name is `name` (at most 7 bytes). Compared byte by
/// byte: a slice comparison becomes a call of `memcmp`, which BPF has not.
#[inline(always)]
fn named<const N: usize>(dentry: *const u8, name: &[u8; N]) -> Result<bool, ReadFailed> {
    let mut buf = [0u8; 8];
    let ptr = kernel::name(kernel::off(), dentry)?;
    let len = unsafe { aya_ebpf::helpers::bpf_probe_read_kernel_str_bytes(ptr, &mut buf) }
        .map_err(|_| ReadFailed)?
        .len();
    if len != N {
        return Ok(false);
    }
    let mut i = 0;
    while i < N {
        if buf[i] != name[i] {
            return Ok(false);
        }
        i += 1;
    }
    Ok(true)
}

/// The rule for an object of a procfs.
#[inline(always)]
fn proc_rule(access: &Access, global: u32) -> Result<Rule, ReadFailed> {
    let off = kernel::off();
    let mut pid = kernel::proc_pid_struct(off, access.inode)?;
    if pid.is_null() {
        // Below `/proc/<pid>/net`, the process is the nearest one above.
        let mut dentry = access.dentry()?;
        for _ in 0..MAX_PROC_DEPTH {
            let Some(parent) = kernel::parent(off, dentry)? else {
                break;
            };
            pid = kernel::proc_pid_struct(off, kernel::dentry_inode(off, parent)?)?;
            if !pid.is_null() {
                break;
            }
            dentry = parent;
        }
    }
    if pid.is_null() {
        return Ok(if access.ops & ops::WRITE != 0 {
            Rule::Refused(event_flags::KERNEL_SETTING)
        } else {
            Rule::Also(global)
        });
    }
    let task = kernel::pid_task(off, pid)?;
    // The entries of a thread (`/proc/<tid>`, `/proc/<pid>/task/<tid>`) hold
    // the thread's own pid: its thread group's id is the process to look
    // up. A thread already gone has no task, and its number is the one.
    let nr = if task.is_null() {
        kernel::pid_nr(off, pid)?
    } else {
        kernel::read(task, off.task_struct_tgid)?
    };
    if unsafe { maps::GUARDED.get(nr) }.is_some() {
        return Ok(Rule::Refused(event_flags::GUARD));
    }
    // A process that is gone is nobody's: refused like another's.
    let own = !task.is_null()
        && kernel::task_cgroup_id(off, task)? == unsafe { bpf_get_current_cgroup_id() };
    Ok(if own {
        Rule::Also(ops::READ | ops::WRITE)
    } else {
        Rule::Refused(event_flags::OTHER_PROCESS)
    })
}
