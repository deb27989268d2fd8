//! pincer's BPF LSM programs.
//!
//! Every hook first honours a denial made by an earlier LSM, then looks the
//! current cgroup up in [`maps::AGENTS`]: a task outside every agent cgroup
//! pays that one hash lookup and is let through. For an agent, the object is
//! identified by (device, inode) and checked against the agent's grants
//! ([`decide`]); what is not granted is denied with `EACCES` (enforce mode),
//! allowed and reported (audit mode) or parked for the twin (ask mode). The
//! self-protection hooks ([`guard`]) refuse with `EPERM` whatever the grants.
//! Every decision that userspace must see is sent on the [`maps::EVENTS`] ring
//! buffer; a full ring buffer never turns a denial into an allow, it is
//! counted (and a request that cannot be sent is denied).
#![cfg_attr(target_arch = "bpf", no_std)]
#![cfg_attr(target_arch = "bpf", no_main)]
// For the one atomic instruction in `maps::bump_epoch`.
#![cfg_attr(target_arch = "bpf", feature(asm_experimental_arch))]

mod decide;
mod guard;
mod kernel;
mod maps;
mod park;
mod report;

use aya_ebpf::{EbpfContext, macros::lsm, programs::LsmContext};
use pincer_common::{Agent, CLONE_INTO_CGROUP, attr, event_flags, file_type, fmode, hook, ops};

use crate::decide::{Access, decide};

/// `security_file_open(struct file *file)`: an existing object is opened,
/// including by `execve` (the program and its interpreter).
///
/// | task                  | grants cover the `f_mode` ops | enforce    | audit          |
/// |-----------------------|-------------------------------|------------|----------------|
/// | not in an agent cgroup| —                             | allow      | allow          |
/// | agent                 | yes                           | allow      | allow          |
/// | agent                 | no                            | `EACCES`   | allow + report |
///
/// `/proc/<pid>` entries of pincer's own processes are refused whatever the
/// grants (the `/proc` baseline grants reads there).
///
/// Opened for exec (`__FMODE_EXEC` in `f_flags`: `execve`, `execveat`, a
/// memfd, an interpreter) needs `exec` only, the kernel's read for exec being
/// part of it; otherwise read and/or write as the open mode says. The open that has
/// just created its file needs nothing more: `inode_create` decided the
/// creation, and a new empty file holds nothing to protect.
#[lsm(hook = "file_open")]
pub fn file_open(ctx: LsmContext) -> i32 {
    let agent = match agent_unless(ctx.arg(1)) {
        Ok(agent) => agent,
        Err(verdict) => return verdict,
    };
    let file: *const u8 = ctx.arg(0);
    let access = opened(hook::FILE_OPEN, file, ops_for_open);
    if matches!(&access, Ok(a) if a.dev == u64::from(kernel::off().proc_dev)) && guarded_proc(file)
    {
        return decide::refuse(&agent, access, event_flags::GUARD);
    }
    decide(&agent, access)
}

/// Whether an open file is a `/proc/<pid>` entry of one of pincer's guarded
/// processes (unreadable counts as guarded).
#[inline(always)]
fn guarded_proc(file: *const u8) -> bool {
    let off = kernel::off();
    let pid = kernel::read::<*const u8>(file, off.file_f_inode)
        .and_then(|inode| kernel::proc_pid(off, inode));
    match pid {
        Ok(0) => false,
        Ok(pid) => unsafe { maps::GUARDED.get(pid) }.is_some(),
        Err(_) => true,
    }
}

/// `security_inode_create(struct inode *dir, struct dentry *dentry, umode_t mode)`:
/// a regular file is about to be created in `dir`.
///
/// | task                  | `create` granted for the name or a tree above | enforce  | audit          |
/// |-----------------------|-----------------------------------------------|----------|----------------|
/// | not in an agent cgroup| —                                             | allow    | allow          |
/// | agent                 | yes                                           | allow    | allow          |
/// | agent                 | no                                            | `EACCES` | allow + report |
#[lsm(hook = "inode_create")]
pub fn inode_create(ctx: LsmContext) -> i32 {
    match agent_unless(ctx.arg(3)) {
        Ok(agent) => decide_new_name(
            &agent,
            hook::INODE_CREATE,
            ops::CREATE,
            ctx.arg(0),
            ctx.arg(1),
        ),
        Err(verdict) => verdict,
    }
}

/// `security_inode_unlink(struct inode *dir, struct dentry *dentry)`: a name
/// is removed; needs `delete` on the object.
#[lsm(hook = "inode_unlink")]
pub fn inode_unlink(ctx: LsmContext) -> i32 {
    let dentry: *const u8 = ctx.arg(1);
    // An object with other names keeps them: cached walks that found a tree
    // grant through this name become stale, whoever removes it (like a
    // rename, for every task, not only agents). An unreadable link count
    // counts as more than one.
    let shared = kernel::loaded().is_err() || {
        let off = kernel::off();
        match kernel::dentry_inode(off, dentry) {
            Ok(inode) => kernel::read::<u32>(inode, off.inode_i_nlink).map_or(true, |n| n > 1),
            Err(_) => true,
        }
    };
    if shared {
        maps::bump_epoch();
    }
    match agent_unless(ctx.arg(2)) {
        Ok(agent) => decide_existing(&agent, hook::INODE_UNLINK, ops::DELETE, dentry),
        Err(verdict) => verdict,
    }
}

/// `security_inode_rmdir(struct inode *dir, struct dentry *dentry)`: a
/// directory is removed; needs `delete` on it.
#[lsm(hook = "inode_rmdir")]
pub fn inode_rmdir(ctx: LsmContext) -> i32 {
    match agent_unless(ctx.arg(2)) {
        Ok(agent) => decide_existing(&agent, hook::INODE_RMDIR, ops::DELETE, ctx.arg(1)),
        Err(verdict) => verdict,
    }
}

/// `security_inode_mkdir(struct inode *dir, struct dentry *dentry, umode_t mode)`:
/// needs `mkdir` for the new name.
#[lsm(hook = "inode_mkdir")]
pub fn inode_mkdir(ctx: LsmContext) -> i32 {
    match agent_unless(ctx.arg(3)) {
        Ok(agent) => decide_new_name(
            &agent,
            hook::INODE_MKDIR,
            ops::MKDIR,
            ctx.arg(0),
            ctx.arg(1),
        ),
        Err(verdict) => verdict,
    }
}

/// `security_inode_mknod(struct inode *dir, struct dentry *dentry, umode_t mode, dev_t dev)`:
/// a named pipe or socket needs `create`; a device node is refused whatever
/// the grants, as it would open the raw device behind every grant.
#[lsm(hook = "inode_mknod")]
pub fn inode_mknod(ctx: LsmContext) -> i32 {
    let agent = match agent_unless(ctx.arg(4)) {
        Ok(agent) => agent,
        Err(verdict) => return verdict,
    };
    let dir: *const u8 = ctx.arg(0);
    let dentry: *const u8 = ctx.arg(1);
    let mode: u64 = ctx.arg(2);
    let access = kernel::loaded()
        .and_then(|()| new_name(hook::INODE_MKNOD, ops::CREATE, dir, dentry).map_err(Into::into));
    let kind = mode as u32 & file_type::MASK;
    if kind == file_type::CHAR || kind == file_type::BLOCK {
        return decide::refuse(&agent, access, event_flags::DEVICE_NODE);
    }
    decide(&agent, access)
}

/// `security_inode_symlink(struct inode *dir, struct dentry *dentry, const char *old_name)`:
/// needs `create` for the new name. What the link points to needs nothing:
/// following it later is decided on the object it reaches.
#[lsm(hook = "inode_symlink")]
pub fn inode_symlink(ctx: LsmContext) -> i32 {
    match agent_unless(ctx.arg(3)) {
        Ok(agent) => decide_new_name(
            &agent,
            hook::INODE_SYMLINK,
            ops::CREATE,
            ctx.arg(0),
            ctx.arg(1),
        ),
        Err(verdict) => verdict,
    }
}

/// `security_inode_link(struct dentry *old_dentry, struct inode *dir, struct dentry *new_dentry)`:
/// needs `link` on the object and `create` for the new name, so a protected
/// file is never given a name inside a granted tree. A new name changes
/// which trees an object is below, so cached walks become stale.
#[lsm(hook = "inode_link")]
pub fn inode_link(ctx: LsmContext) -> i32 {
    maps::bump_epoch();
    let agent = match agent_unless(ctx.arg(3)) {
        Ok(agent) => agent,
        Err(verdict) => return verdict,
    };
    let old_dentry: *const u8 = ctx.arg(0);
    let dir: *const u8 = ctx.arg(1);
    let new_dentry: *const u8 = ctx.arg(2);
    let (object, name) = match kernel::loaded() {
        Ok(()) => (
            existing(hook::INODE_LINK, ops::LINK, old_dentry).map_err(Into::into),
            new_name(hook::INODE_LINK, ops::CREATE, dir, new_dentry).map_err(Into::into),
        ),
        Err(failure) => (Err(failure), Err(kernel::Failure::NoOffsets)),
    };
    decide::decide_pair(&agent, object, name)
}

/// `security_inode_rename(old_dir, old_dentry, new_dir, new_dentry)`: needs
/// `rename` on the object moved, and at the destination `create` for a new
/// name or `delete` of the object it replaces. `RENAME_EXCHANGE` calls the
/// hook once for each direction, so both objects need `rename` and `delete`.
/// A rename changes ancestry: cached walks become stale.
#[lsm(hook = "inode_rename")]
pub fn inode_rename(ctx: LsmContext) -> i32 {
    maps::bump_epoch();
    let agent = match agent_unless(ctx.arg(4)) {
        Ok(agent) => agent,
        Err(verdict) => return verdict,
    };
    let old_dentry: *const u8 = ctx.arg(1);
    let new_dir: *const u8 = ctx.arg(2);
    let new_dentry: *const u8 = ctx.arg(3);
    let (object, target) = match kernel::loaded() {
        Ok(()) => (
            existing(hook::INODE_RENAME, ops::RENAME, old_dentry).map_err(Into::into),
            rename_target(new_dir, new_dentry).map_err(Into::into),
        ),
        Err(failure) => (Err(failure), Err(kernel::Failure::NoOffsets)),
    };
    decide::decide_pair(&agent, object, target)
}

/// The destination end of a rename: a new name in `new_dir`, or the object
/// it replaces. One constructor for both keeps every field defined on every
/// path (the verifier refuses reads of registers the compiler left unset).
#[inline(always)]
fn rename_target(new_dir: *const u8, new_dentry: *const u8) -> Result<Access, kernel::ReadFailed> {
    let off = kernel::off();
    let replaced = kernel::dentry_inode(off, new_dentry)?;
    let exists = !replaced.is_null();
    let (dev, ino) = kernel::identity(off, if exists { replaced } else { new_dir })?;
    Ok(Access {
        hook: hook::INODE_RENAME,
        ops: if exists { ops::DELETE } else { ops::CREATE },
        dev,
        ino,
        dentry: new_dentry,
        file: core::ptr::null(),
        exists,
    })
}

/// `security_inode_setattr([struct mnt_idmap *idmap,] struct dentry *dentry, struct iattr *attr)`:
/// mode and owner need `setattr`; size (truncate by path or descriptor) and
/// times need `write`. The truncation of `open(O_TRUNC)` was decided by the
/// open, and changes the kernel forces itself (dropping set-id bits on a
/// write) need nothing more.
///
/// The signature gained `idmap` in 6.8, so the loader tells which one this
/// kernel has; the earlier programs' verdict is not read here, as its
/// position moves with it (the trampoline stops at the first program that
/// refuses, so this program never runs after a refusal anyway).
#[lsm(hook = "inode_setattr")]
pub fn inode_setattr(ctx: LsmContext) -> i32 {
    let Some(agent) = maps::current_agent() else {
        return 0;
    };
    let access = kernel::loaded().and_then(|()| {
        let off = kernel::off();
        // Every slot is read, then the values are chosen (slot 2 is the
        // verdict slot on kernels whose hook has two arguments).
        let (first, second, third) = (
            fixed_arg::<0>(&ctx),
            fixed_arg::<1>(&ctx),
            fixed_arg::<2>(&ctx),
        );
        let (dentry, attr) = if off.setattr_has_idmap != 0 {
            (second, third)
        } else {
            (first, second)
        };
        let valid: u32 = kernel::read(attr, off.iattr_ia_valid)?;
        Ok((dentry, valid))
    });
    let access = match access {
        Ok((dentry, valid)) => {
            let ops = ops_for_setattr(valid);
            if ops == 0 {
                return 0;
            }
            existing(hook::INODE_SETATTR, ops, dentry).map_err(Into::into)
        }
        Err(failure) => Err(failure),
    };
    decide(&agent, access)
}

/// `security_inode_setxattr(idmap, struct dentry *dentry, name, value, size, flags)`:
/// needs `setattr`.
#[lsm(hook = "inode_setxattr")]
pub fn inode_setxattr(ctx: LsmContext) -> i32 {
    match agent_unless(ctx.arg(6)) {
        Ok(agent) => decide_existing(&agent, hook::INODE_SETXATTR, ops::SETATTR, ctx.arg(1)),
        Err(verdict) => verdict,
    }
}

/// `security_inode_removexattr(idmap, struct dentry *dentry, name)`: needs
/// `setattr`.
#[lsm(hook = "inode_removexattr")]
pub fn inode_removexattr(ctx: LsmContext) -> i32 {
    match agent_unless(ctx.arg(3)) {
        Ok(agent) => decide_existing(&agent, hook::INODE_REMOVEXATTR, ops::SETATTR, ctx.arg(1)),
        Err(verdict) => verdict,
    }
}

/// `security_inode_set_acl(idmap, struct dentry *dentry, acl_name, kacl)`
/// (6.2 and later; before, ACLs are extended attributes): needs `setattr`.
#[lsm(hook = "inode_set_acl")]
pub fn inode_set_acl(ctx: LsmContext) -> i32 {
    match agent_unless(ctx.arg(4)) {
        Ok(agent) => decide_existing(&agent, hook::INODE_SET_ACL, ops::SETATTR, ctx.arg(1)),
        Err(verdict) => verdict,
    }
}

/// `security_inode_remove_acl(idmap, struct dentry *dentry, acl_name)` (6.2
/// and later): needs `setattr`.
#[lsm(hook = "inode_remove_acl")]
pub fn inode_remove_acl(ctx: LsmContext) -> i32 {
    match agent_unless(ctx.arg(3)) {
        Ok(agent) => decide_existing(&agent, hook::INODE_REMOVE_ACL, ops::SETATTR, ctx.arg(1)),
        Err(verdict) => verdict,
    }
}

/// `security_file_receive(struct file *file)`: a descriptor arrives over a
/// Unix socket (`SCM_RIGHTS`) or `pidfd_getfd`; needs what opening it would.
/// The message is already consumed when the hook runs, so the syscall cannot
/// be restarted: an ungranted descriptor is dropped (`recvmsg` reports
/// `MSG_CTRUNC`, `pidfd_getfd` fails with `EACCES`), never parked.
#[lsm(hook = "file_receive")]
pub fn file_receive(ctx: LsmContext) -> i32 {
    let agent = match agent_unless(ctx.arg(1)) {
        Ok(agent) => agent,
        Err(verdict) => return verdict,
    };
    let access = opened(hook::FILE_RECEIVE, ctx.arg(0), |mode, _| ops_for_mode(mode));
    decide::decide_unrestartable(&agent, access)
}

/// `security_task_kill(struct task_struct *p, info, int sig, cred)`: agents
/// cannot signal pincer's own processes (probing with signal 0 is allowed).
#[lsm(hook = "task_kill")]
pub fn task_kill(ctx: LsmContext) -> i32 {
    let agent = match agent_unless(ctx.arg(4)) {
        Ok(agent) => agent,
        Err(verdict) => return verdict,
    };
    let sig: u64 = ctx.arg(2);
    if sig as u32 == 0 {
        return 0;
    }
    let task: *const u8 = ctx.arg(0);
    let target = kernel::loaded()
        .ok()
        .and_then(|()| kernel::read::<u32>(task, kernel::off().task_struct_tgid).ok());
    match target {
        Some(tgid) if unsafe { maps::GUARDED.get(tgid) }.is_none() => 0,
        // Unreadable: refuse, as for every access that cannot be identified.
        target => guard::refuse(&agent, hook::TASK_KILL, target.unwrap_or(0)),
    }
}

/// `security_ptrace_access_check(struct task_struct *child, unsigned int mode)`:
/// agents can trace, and read the ptrace-guarded `/proc/<pid>` entries
/// (`mem`, `environ`, `fd/`, `maps`, `root`, ...) of, only tasks of their own
/// cgroup. Anything else would let them act through an unconfined process
/// (pincer's twin included).
#[lsm(hook = "ptrace_access_check")]
pub fn ptrace_access_check(ctx: LsmContext) -> i32 {
    let agent = match agent_unless(ctx.arg(2)) {
        Ok(agent) => agent,
        Err(verdict) => return verdict,
    };
    let child: *const u8 = ctx.arg(0);
    let own = unsafe { aya_ebpf::helpers::bpf_get_current_cgroup_id() };
    if kernel::loaded().is_err() {
        return guard::refuse(&agent, hook::PTRACE, 0);
    }
    let off = kernel::off();
    match kernel::task_cgroup_id(off, child) {
        Ok(id) if id == own => 0,
        _ => {
            let tgid = kernel::read::<u32>(child, off.task_struct_tgid).unwrap_or(0);
            guard::refuse(&agent, hook::PTRACE, tgid)
        }
    }
}

/// `security_bpf(cmd, attr, size[, ...])`: agents cannot use `bpf(2)` at all
/// (pincer's maps and programs are behind it). The signature varies between
/// kernels; no argument is read.
#[lsm(hook = "bpf")]
pub fn bpf(_ctx: LsmContext) -> i32 {
    match maps::current_agent() {
        Some(agent) => guard::refuse(&agent, hook::BPF, 0),
        None => 0,
    }
}

/// `security_sb_mount(dev_name, path, type, flags, data)`: agents cannot
/// mount, bind mount or remount (a mount could hide or alias what grants
/// name; bind mounts in a new mount namespace included).
#[lsm(hook = "sb_mount")]
pub fn sb_mount(ctx: LsmContext) -> i32 {
    match agent_unless(ctx.arg(5)) {
        Ok(agent) => guard::refuse(&agent, hook::SB_MOUNT, 0),
        Err(verdict) => verdict,
    }
}

/// `security_move_mount(from_path, to_path)`: the new mount API's attach
/// step, refused like `mount(2)`.
#[lsm(hook = "move_mount")]
pub fn move_mount(ctx: LsmContext) -> i32 {
    match agent_unless(ctx.arg(2)) {
        Ok(agent) => guard::refuse(&agent, hook::MOVE_MOUNT, 0),
        Err(verdict) => verdict,
    }
}

/// `security_sb_umount(mnt, flags)`: agents cannot unmount (it could uncover
/// what a mount hides).
#[lsm(hook = "sb_umount")]
pub fn sb_umount(ctx: LsmContext) -> i32 {
    match agent_unless(ctx.arg(2)) {
        Ok(agent) => guard::refuse(&agent, hook::SB_UMOUNT, 0),
        Err(verdict) => verdict,
    }
}

/// `security_task_alloc(task, clone_flags)`: `clone3(CLONE_INTO_CGROUP)`
/// would start a child outside the agent's cgroup, and with it outside its
/// confinement. (Moving through `cgroup.procs` needs a write open that no
/// grant gives.)
#[lsm(hook = "task_alloc")]
pub fn task_alloc(ctx: LsmContext) -> i32 {
    let agent = match agent_unless(ctx.arg(2)) {
        Ok(agent) => agent,
        Err(verdict) => return verdict,
    };
    let flags: u64 = ctx.arg(1);
    if flags & CLONE_INTO_CGROUP == 0 {
        return 0;
    }
    guard::refuse(&agent, hook::TASK_ALLOC, 0)
}

/// The agent to decide for, or the hook's answer without deciding: the
/// refusal of an earlier program (`previous`, the hook's phony last
/// argument), or 0 for a task in no agent cgroup.
#[inline(always)]
fn agent_unless(previous: i32) -> Result<Agent, i32> {
    if previous != 0 {
        return Err(previous);
    }
    maps::current_agent().ok_or(0)
}

/// Decides an access needing `ops` on the existing object of `dentry`.
#[inline(always)]
fn decide_existing(agent: &Agent, hook: u32, ops: u32, dentry: *const u8) -> i32 {
    let access = kernel::loaded().and_then(|()| existing(hook, ops, dentry).map_err(Into::into));
    decide(agent, access)
}

/// Decides an access needing `ops` to make the new name `dentry` in `dir`.
#[inline(always)]
fn decide_new_name(agent: &Agent, hook: u32, ops: u32, dir: *const u8, dentry: *const u8) -> i32 {
    let access =
        kernel::loaded().and_then(|()| new_name(hook, ops, dir, dentry).map_err(Into::into));
    decide(agent, access)
}

/// An access to an open file, needing what `ops` makes of its `f_mode` and
/// `f_flags`.
#[inline(always)]
fn opened(hook: u32, file: *const u8, ops: fn(u32, u32) -> u32) -> Result<Access, kernel::Failure> {
    kernel::loaded()?;
    let off = kernel::off();
    let mode: u32 = kernel::read(file, off.file_f_mode)?;
    let flags: u32 = kernel::read(file, off.file_f_flags)?;
    let inode: *const u8 = kernel::read(file, off.file_f_inode)?;
    let (dev, ino) = kernel::identity(off, inode)?;
    Ok(Access {
        hook,
        ops: ops(mode, flags),
        dev,
        ino,
        dentry: core::ptr::null(),
        file,
        exists: true,
    })
}

/// Argument `N` of a hook, read with a load the compiler can neither drop nor
/// merge with another: the verifier only accepts context reads at constant
/// offsets, and a choice between two `ctx.arg` reads may be compiled into
/// one read at a computed offset.
#[inline(always)]
fn fixed_arg<const N: usize>(ctx: &LsmContext) -> *const u8 {
    let slot = ctx.as_ptr().cast::<u64>().wrapping_add(N);
    // SAFETY: the context holds the hook's arguments and verdict, at least
    // N + 1 slots for every `N` used here.
    unsafe { core::ptr::read_volatile(slot) as *const u8 }
}

/// An access to an existing object named by a dentry.
#[inline(always)]
fn existing(hook: u32, ops: u32, dentry: *const u8) -> Result<Access, kernel::ReadFailed> {
    let off = kernel::off();
    let inode = kernel::dentry_inode(off, dentry)?;
    let (dev, ino) = kernel::identity(off, inode)?;
    Ok(Access {
        hook,
        ops,
        dev,
        ino,
        dentry,
        file: core::ptr::null(),
        exists: true,
    })
}

/// An access that makes a new name (negative `dentry`) in `dir`.
#[inline(always)]
fn new_name(
    hook: u32,
    ops: u32,
    dir: *const u8,
    dentry: *const u8,
) -> Result<Access, kernel::ReadFailed> {
    let off = kernel::off();
    let (dev, ino) = kernel::identity(off, dir)?;
    Ok(Access {
        hook,
        ops,
        dev,
        ino,
        dentry,
        file: core::ptr::null(),
        exists: false,
    })
}

/// The operations a change of attributes asks for.
#[inline(always)]
fn ops_for_setattr(valid: u32) -> u32 {
    if valid & (attr::OPEN | attr::FORCE) != 0 {
        return 0;
    }
    let mut need = 0;
    if valid & (attr::MODE | attr::UID | attr::GID) != 0 {
        need |= ops::SETATTR;
    }
    if valid & attr::SIZE != 0 {
        need |= ops::WRITE;
    }
    // Times alone (`touch`, `utimes`) are what a write does to them; with a
    // mode or owner change the ctime update is part of that change.
    if need == 0 && valid & attr::TIMES != 0 {
        need = ops::WRITE;
    }
    need
}

/// The operations a descriptor with `f_mode` gives (read when it gives
/// neither, as for `O_PATH`: it still names the object).
#[inline(always)]
fn ops_for_mode(f_mode: u32) -> u32 {
    let mut need = 0;
    if f_mode & fmode::READ != 0 {
        need |= ops::READ;
    }
    if f_mode & fmode::WRITE != 0 {
        need |= ops::WRITE;
    }
    if need == 0 { ops::READ } else { need }
}

/// The operations an open with `f_mode` and `f_flags` asks for.
#[inline(always)]
fn ops_for_open(f_mode: u32, f_flags: u32) -> u32 {
    if f_mode & fmode::CREATED != 0 {
        return 0;
    }
    if f_flags & fmode::EXEC != 0 {
        return ops::EXEC;
    }
    // An open with neither mode (`O_WRONLY|O_RDWR`, ioctl-only) still hands
    // out a descriptor to the object: treat it as a read.
    ops_for_mode(f_mode)
}

#[cfg(target_arch = "bpf")]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    // The verifier rejects any path that reaches here.
    loop {}
}

/// Lets the crate build on the host so it can be linted there.
#[cfg(not(target_arch = "bpf"))]
fn main() {}
