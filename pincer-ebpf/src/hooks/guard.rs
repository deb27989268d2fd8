//! Self-protection: what an agent may never do, whatever its grants, because
//! it would switch pincer off, step outside its cgroup or reach into the
//! kernel: signal or trace pincer, `bpf`, mount outside a sandbox of its
//! own, start a process elsewhere, use a capability outside its set (but in
//! a user namespace it made), have the kernel load code. A refusal is
//! the kernel's own answer to a forbidden action, `EPERM`, and is reported
//! (`event_flags::GUARD`); in audit mode it is allowed and reported, like
//! everything else. Nothing here parks.
//!
//! The tables below are for a task in an agent cgroup; [`super`] says what
//! comes before.

use aya_ebpf::{helpers::bpf_get_current_cgroup_id, programs::LsmContext};
use pincer_common::{
    Agent, CLONE_INTO_CGROUP, EPERM, PTRACE_MODE_NOAUDIT, caps, counter, event_flags, mode, verdict,
};

use super::agent;
use crate::{
    kernel,
    maps::{self, count},
    report,
};

/// `security_task_kill(struct task_struct *p, info, int sig, cred)`: agents
/// cannot signal pincer's own processes, nor any of their threads
/// (`tgkill`): the target is matched by its thread group's id.
///
/// | the signal                                         | enforce | audit          | ask     |
/// |----------------------------------------------------|---------|----------------|---------|
/// | signal 0 (a probe), or to a process not guarded    | allow   | allow          | allow   |
/// | to pincer's process, or to one that cannot be read | `EPERM` | allow + report | `EPERM` |
#[inline(always)]
pub fn task_kill<const HOOK: u32>(ctx: &LsmContext) -> Result<i32, i32> {
    let agent = agent::<HOOK>(ctx)?;
    let sig: u64 = ctx.arg(2);
    if sig as u32 == 0 {
        return Ok(0);
    }
    let task: *const u8 = ctx.arg(0);
    let target = kernel::loaded()
        .ok()
        .and_then(|()| kernel::read::<u32>(task, kernel::off().task_struct_tgid).ok());
    Ok(match target {
        Some(tgid) if unsafe { maps::GUARDED.get(tgid) }.is_none() => 0,
        // Unreadable: refuse, as for every access that cannot be identified.
        target => refuse(&agent, HOOK, target.unwrap_or(0)),
    })
}

/// `security_ptrace_access_check(struct task_struct *child, unsigned int mode)`:
/// agents can trace, and read the ptrace-guarded `/proc/<pid>` entries
/// (`mem`, `environ`, `fd/`, `maps`, `root`, ...) of, only tasks of their own
/// cgroup. Anything else would let them act through an unconfined process
/// (pincer's twin included).
///
/// | the traced task                                                  | enforce | audit          | ask     |
/// |------------------------------------------------------------------|---------|----------------|---------|
/// | in the agent's own cgroup                                        | allow   | allow          | allow   |
/// | anywhere else, or its cgroup cannot be read                      | `EPERM` | allow + report | `EPERM` |
/// | anywhere else, asked with `PTRACE_MODE_NOAUDIT`                  | `EPERM` | allow          | `EPERM` |
///
/// The kernel asks with `PTRACE_MODE_NOAUDIT` to choose what to show (as
/// when `ps` reads `/proc/<pid>/stat`), not because the task tries to trace:
/// refused, counted, not reported, like the capability checks the kernel
/// makes quietly.
#[inline(always)]
pub fn ptrace_access_check<const HOOK: u32>(ctx: &LsmContext) -> Result<i32, i32> {
    let agent = agent::<HOOK>(ctx)?;
    let child: *const u8 = ctx.arg(0);
    let mode: u64 = ctx.arg(1);
    let quiet = mode as u32 & PTRACE_MODE_NOAUDIT != 0;
    let own = unsafe { bpf_get_current_cgroup_id() };
    if kernel::loaded().is_err() {
        return Ok(refuse_as(&agent, HOOK, 0, quiet));
    }
    let off = kernel::off();
    Ok(match kernel::task_cgroup_id(off, child) {
        Ok(id) if id == own => 0,
        _ => {
            let tgid = kernel::read::<u32>(child, off.task_struct_tgid).unwrap_or(0);
            refuse_as(&agent, HOOK, tgid, quiet)
        }
    })
}

/// `security_bpf(cmd, attr, size[, ...])`: agents cannot use `bpf(2)` at
/// all (pincer's maps and programs are behind it).
///
/// | the call | enforce | audit          | ask     |
/// |----------|---------|----------------|---------|
/// | any      | `EPERM` | allow + report | `EPERM` |
///
/// No argument is read (the signature of `security_bpf` varies between
/// kernels).
#[inline(always)]
pub fn refused<const HOOK: u32>(ctx: &LsmContext) -> Result<i32, i32> {
    let agent = agent::<HOOK>(ctx)?;
    Ok(refuse(&agent, HOOK, 0))
}

/// `security_sb_mount(dev_name, path, type, flags, data)`,
/// `security_move_mount(from_path, to_path)` (the new mount API's attach
/// step) and `security_sb_umount(mnt, flags)`: agents mount, bind mount,
/// remount and unmount only in a mount namespace of a sandbox of their own
/// (owned by a user namespace they made, see [`capable`]).
///
/// | the task's mount namespace                        | enforce | audit          | ask     |
/// |---------------------------------------------------|---------|----------------|---------|
/// | owned by a user namespace the agent made          | allow   | allow          | allow   |
/// | any other (the host's, a container's), unreadable | `EPERM` | allow + report | `EPERM` |
///
/// A mount there changes only the agent's own view, and reaches nothing
/// more: grants name objects by (device, inode) and tree grants follow a
/// file's own parents, never mount points, so a bind mount of a secret is
/// still the secret, and a new proc is decided as `/proc` is
/// ([`crate::objects`]). The kernel keeps the rest: such a namespace's
/// mounts propagate to no one else's, and the mounts it was copied with
/// are locked to it (they cannot be unmounted to uncover what they hide).
/// Anywhere else a mount could hide or alias what grants name for other
/// processes, and an unmount could uncover what a mount hides.
#[inline(always)]
pub fn mount<const HOOK: u32>(ctx: &LsmContext) -> Result<i32, i32> {
    let agent = agent::<HOOK>(ctx)?;
    if kernel::loaded().is_ok() && kernel::own_mount_namespace(kernel::off(), agent.userns_home) {
        return Ok(0);
    }
    Ok(refuse(&agent, HOOK, 0))
}

/// `security_task_alloc(task, clone_flags)`: `clone3(CLONE_INTO_CGROUP)`
/// would start a child outside the agent's cgroup, and with it outside its
/// confinement. (Moving through `cgroup.procs` needs a write open that no
/// grant gives.)
///
/// | the new task          | enforce | audit          | ask     |
/// |-----------------------|---------|----------------|---------|
/// | in the agent's cgroup | allow   | allow          | allow   |
/// | `CLONE_INTO_CGROUP`   | `EPERM` | allow + report | `EPERM` |
#[inline(always)]
pub fn task_alloc<const HOOK: u32>(ctx: &LsmContext) -> Result<i32, i32> {
    let agent = agent::<HOOK>(ctx)?;
    let flags: u64 = ctx.arg(1);
    if flags & CLONE_INTO_CGROUP == 0 {
        return Ok(0);
    }
    Ok(refuse(&agent, HOOK, 0))
}

/// `security_capable(const struct cred *cred, struct user_namespace *ns, int cap, unsigned int opts)`:
/// agents use only the capabilities of their set (`Agent::capabilities`:
/// the default set and what the mission adds, see `pincer_common::caps`),
/// whatever their credentials hold, but in a user namespace they made
/// themselves (a sandbox: bubblewrap's, `unshare -r`'s), where the kernel
/// gives its maker every capability.
///
/// | the capability                                       | enforce | audit          | ask     |
/// |------------------------------------------------------|---------|----------------|---------|
/// | in the agent's set                                   | allow   | allow          | allow   |
/// | any, checked against a user namespace the agent made | allow   | allow          | allow   |
/// | any other                                            | `EPERM` | allow + report | `EPERM` |
/// | any other, asked `CAP_OPT_NOAUDIT`                   | `EPERM` | allow          | `EPERM` |
///
/// A user namespace the agent made is one deeper than the one its tasks
/// start in (`Agent::userns_home`). A capability there acts only on what
/// that namespace owns: its own mounts, hostname, network and processes;
/// every object it reaches is still decided by the file hooks, and every
/// check against the initial namespace (or the one the agent starts in)
/// is decided as above. The agent cannot enter a namespace someone else
/// made below its home: `/proc/<pid>/ns` and `setns` through a pidfd need
/// the ptrace check ([`ptrace_access_check`]), and a namespace file bound
/// elsewhere is opened only with a grant.
///
/// The kernel asks with `CAP_OPT_NOAUDIT` to pick a path, not because the
/// task attempted something (whether `kallsyms` shows addresses, whether a
/// `trusted.*` name is listed): refused, counted, not reported. The check
/// is decided for the task that runs (an agent's task checking another
/// process's credentials is refused what its own set lacks; a process
/// outside agents checking an agent's credentials is not an agent). For a
/// task outside every agent cgroup this is the one hash lookup of every
/// program.
#[inline(always)]
pub fn capable<const HOOK: u32>(ctx: &LsmContext) -> Result<i32, i32> {
    let agent = agent::<HOOK>(ctx)?;
    let cap: u64 = ctx.arg(2);
    let cap = cap as u32;
    if cap < 64 && agent.capabilities & (1u64 << cap) != 0 {
        return Ok(0);
    }
    let ns: *const u8 = ctx.arg(1);
    if kernel::loaded().is_ok() && kernel::own_userns(kernel::off(), ns, agent.userns_home) {
        return Ok(0);
    }
    let opts: u64 = ctx.arg(3);
    let quiet = opts as u32 & caps::OPT_NOAUDIT != 0;
    Ok(refuse_as(&agent, HOOK, cap, quiet))
}

/// `security_kernel_load_data(enum kernel_load_data_id id, bool contents)`
/// and `security_kernel_read_file(struct file *file, enum kernel_read_file_id id, bool contents)`:
/// an agent never has the kernel load code or data, whether from memory
/// (`init_module`, `kexec_load`) or from a file (`finit_module`,
/// `kexec_file_load`), nor firmware, security policies or certificates on
/// its behalf. `id_arg` is the argument that holds the id.
///
/// | the load | enforce | audit          | ask     |
/// |----------|---------|----------------|---------|
/// | any      | `EPERM` | allow + report | `EPERM` |
///
/// The capability checks refuse modules (`CAP_SYS_MODULE`) and kexec
/// (`CAP_SYS_BOOT`) before these hooks are reached; these refuse again
/// where the kernel is about to take the code, whichever check led there
/// (a new load path, a capability a future kernel checks differently,
/// firmware a driver loads while it serves the agent), so one mistake in a
/// capability set cannot run code in the kernel.
#[inline(always)]
pub fn kernel_data<const HOOK: u32>(ctx: &LsmContext, id_arg: usize) -> Result<i32, i32> {
    let agent = agent::<HOOK>(ctx)?;
    let id: u64 = ctx.arg(id_arg);
    Ok(refuse(&agent, HOOK, id as u32))
}

/// Refuses a guarded action with `EPERM` (allows and reports it in audit
/// mode); `target` is what was acted on: a process id, a capability, the
/// kind of kernel data, the ioctl command refused, or zero.
#[inline(always)]
pub fn refuse(agent: &Agent, hook: u32, target: u32) -> i32 {
    refuse_as(agent, hook, target, false)
}

/// Like [`refuse`]; a `quiet` refusal is counted but not reported.
#[inline(always)]
fn refuse_as(agent: &Agent, hook: u32, target: u32, quiet: bool) -> i32 {
    let flags = event_flags::GUARD;
    if agent.mode == mode::AUDIT {
        if !quiet {
            count(counter::AUDITED);
            report::send_refusal(agent, hook, u64::from(target), verdict::AUDITED, flags);
        }
        return 0;
    }
    count(counter::GUARDED);
    count(counter::DENIED);
    if !quiet {
        report::send_refusal(agent, hook, u64::from(target), verdict::DENIED, flags);
    }
    -EPERM
}
