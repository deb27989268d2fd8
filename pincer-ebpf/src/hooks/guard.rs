//! Self-protection: what an agent may never do, whatever its grants, because
//! it would switch pincer off or step outside its cgroup. A refusal is the
//! kernel's own answer to a forbidden signal, trace or mount, `EPERM`, and is
//! reported (`event_flags::GUARD`); in audit mode it is allowed and reported,
//! like everything else. Nothing here parks.
//!
//! The tables below are for a task in an agent cgroup; [`super`] says what
//! comes before.

use aya_ebpf::{helpers::bpf_get_current_cgroup_id, programs::LsmContext};
use pincer_common::{Agent, CLONE_INTO_CGROUP, EPERM, counter, mode, verdict};

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
/// | the traced task                             | enforce | audit          | ask     |
/// |---------------------------------------------|---------|----------------|---------|
/// | in the agent's own cgroup                   | allow   | allow          | allow   |
/// | anywhere else, or its cgroup cannot be read | `EPERM` | allow + report | `EPERM` |
#[inline(always)]
pub fn ptrace_access_check<const HOOK: u32>(ctx: &LsmContext) -> Result<i32, i32> {
    let agent = agent::<HOOK>(ctx)?;
    let child: *const u8 = ctx.arg(0);
    let own = unsafe { bpf_get_current_cgroup_id() };
    if kernel::loaded().is_err() {
        return Ok(refuse(&agent, HOOK, 0));
    }
    let off = kernel::off();
    Ok(match kernel::task_cgroup_id(off, child) {
        Ok(id) if id == own => 0,
        _ => {
            let tgid = kernel::read::<u32>(child, off.task_struct_tgid).unwrap_or(0);
            refuse(&agent, HOOK, tgid)
        }
    })
}

/// `security_bpf(cmd, attr, size[, ...])`: agents cannot use `bpf(2)` at
/// all (pincer's maps and programs are behind it). `security_sb_mount(dev_name,
/// path, type, flags, data)`, `security_move_mount(from_path, to_path)` (the
/// new mount API's attach step) and `security_sb_umount(mnt, flags)`: agents
/// cannot mount, bind mount, remount or unmount (a mount could hide or alias
/// what grants name, bind mounts in a new mount namespace included; an
/// unmount could uncover what a mount hides).
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

/// Whether an open file is a `/proc` entry of one of pincer's guarded
/// processes or of any of their threads (`/proc/<tid>`,
/// `/proc/<pid>/task/<tid>`; see [`kernel::proc_pid`]); unreadable counts as
/// guarded. `file_open` refuses those.
#[inline(always)]
pub fn is_guarded_proc(file: *const u8) -> bool {
    let off = kernel::off();
    let pid = kernel::read::<*const u8>(file, off.file_f_inode)
        .and_then(|inode| kernel::proc_pid(off, inode));
    match pid {
        Ok(0) => false,
        Ok(pid) => unsafe { maps::GUARDED.get(pid) }.is_some(),
        Err(_) => true,
    }
}

/// Refuses a guarded action with `EPERM` (allows and reports it in audit
/// mode); `target` is the process acted on, the ioctl command refused, or
/// zero.
#[inline(always)]
pub fn refuse(agent: &Agent, hook: u32, target: u32) -> i32 {
    if agent.mode == mode::AUDIT {
        count(counter::AUDITED);
        report::send_guard(agent, hook, target, verdict::AUDITED);
        return 0;
    }
    count(counter::GUARDED);
    count(counter::DENIED);
    report::send_guard(agent, hook, target, verdict::DENIED);
    -EPERM
}
