//! The file hooks: each builds the [`Access`] its operation needs and has it
//! decided against the agent's grants ([`decide`]). What is not granted is
//! refused with `EACCES` (enforce), allowed and reported (audit), or parked
//! for the twin (ask, see [`crate::park`]).
//!
//! The tables below are for a task in an agent cgroup whose access could be
//! identified; [`super`] says what comes before and after.

use aya_ebpf::helpers::bpf_get_current_pid_tgid;
use aya_ebpf::programs::LsmContext;
use pincer_common::{Agent, EEXIST, event_flags, file_type, fmode, hook, ioctl, ops};

use super::{agent, fixed_arg, guard};
use crate::{
    access::{self, Access},
    decide::{self, decide},
    kernel::{self, Failure},
    maps,
    objects::{self, Rule},
};

/// `security_file_open(struct file *file)`: an existing object is opened,
/// including by `execve` (the program and its interpreter).
///
/// | the open                                                   | enforce            | audit          | ask                |
/// |------------------------------------------------------------|--------------------|----------------|--------------------|
/// | the grants cover what its mode asks for                    | allow              | allow          | allow              |
/// | they do not                                                | `EACCES`           | allow + report | park               |
/// | refused whatever the grants ([`objects`]: a block device, debugfs, another process's `/proc` entries, a `/proc` write) | `EACCES` | allow + report | `EACCES` |
/// | a `/proc` entry of one of pincer's processes or threads    | `EACCES` (guarded) | allow + report | `EACCES` (guarded) |
/// | a `/proc/<pid>` entry of a process in the agent's cgroup   | allow              | allow          | allow              |
///
/// What the mode asks for ([`access::for_open`]): opened for exec
/// (`__FMODE_EXEC` in `f_flags`: `execve`, `execveat`, a memfd, an
/// interpreter) needs `exec` only, the kernel's read for exec being part of
/// it; otherwise read and/or write as the open mode says. The open that has
/// just created its file needs nothing more: `inode_create` decided the
/// creation, and a new empty file holds nothing to protect. The open that
/// made a placeholder (see `decide::placeholder`) is refused with `EEXIST`
/// instead: the file exists, empty, and no descriptor writes it.
#[inline(always)]
pub fn file_open<const HOOK: u32>(ctx: &LsmContext) -> Result<i32, i32> {
    let agent = agent::<HOOK>(ctx)?;
    let file: *const u8 = ctx.arg(0);
    if made_placeholder(file) {
        return Ok(-EEXIST);
    }
    Ok(decide_existing(
        &agent,
        Access::opened(HOOK, file, access::for_open),
        0,
    ))
}

/// Whether `file` is the open that made a placeholder file: it created
/// its file, and its thread recorded that dentry as a placeholder. The
/// thread's record is spent by any open that creates, so a stale one (a
/// creation that failed after its hook) lives only until the next.
///
/// It reads `f_mode` before [`Access::opened`] reads it again, on purpose:
/// a mode read once and tested here would reach the decision as a value
/// the verifier knows on one way and not on the other, and it would check
/// more of the decision twice (file_open's instructions verified on 6.1:
/// 345 783 so, 334 658 with this read, before `decide::decide_object`
/// took more away). One more read of a field of the open file costs less
/// than that.
#[inline(always)]
fn made_placeholder(file: *const u8) -> bool {
    if kernel::loaded().is_err() {
        return false;
    }
    let off = kernel::off();
    let created = kernel::read::<u32>(file, off.file_f_mode).is_ok_and(|m| m & fmode::CREATED != 0);
    if !created {
        return false;
    }
    let tid = bpf_get_current_pid_tgid() as u32;
    let Some(&dentry) = (unsafe { maps::PLACEHOLDERS.get(tid) }) else {
        return false;
    };
    let _ = maps::PLACEHOLDERS.remove(tid);
    // An unreadable dentry is taken as the placeholder's: refused.
    kernel::read::<u64>(file, off.file_f_path_dentry).map_or(true, |d| d == dentry)
}

/// The hooks that read what an object holds besides its data, needing
/// `read` on it: `security_inode_getxattr(struct dentry *dentry, const char *name)`
/// and `security_inode_listxattr(struct dentry *dentry)`, extended
/// attributes (and, before 6.2, POSIX ACLs) are read or listed.
///
/// | the object                                             | enforce  | audit          | ask      |
/// |--------------------------------------------------------|----------|----------------|----------|
/// | `read` granted on it                                   | allow    | allow          | allow    |
/// | not granted                                            | `EACCES` | allow + report | park     |
/// | another process's `/proc` entry ([`objects`])          | `EACCES` | allow + report | `EACCES` |
///
/// An attribute holds what the object's owner put there (`user.*` values,
/// labels, ACLs): as much the object's as its bytes. `stat` is not
/// mediated: the type, mode, owner, size, times and link count of any
/// object the agent can name stay visible, as Unix shows them to anyone who
/// may search the directory.
#[inline(always)]
pub fn xattr_read<const HOOK: u32>(ctx: &LsmContext) -> Result<i32, i32> {
    let agent = agent::<HOOK>(ctx)?;
    Ok(read_object::<HOOK>(&agent, ctx.arg(0), 0))
}

/// `security_inode_get_acl(idmap, struct dentry *dentry, const char *acl_name)`
/// (6.2 and later): a POSIX ACL is read. As [`xattr_read`].
#[inline(always)]
pub fn acl_read<const HOOK: u32>(ctx: &LsmContext) -> Result<i32, i32> {
    let agent = agent::<HOOK>(ctx)?;
    Ok(read_object::<HOOK>(&agent, ctx.arg(1), 0))
}

/// `security_inode_readlink(struct dentry *dentry)`: a symbolic link's
/// target is read, which needs `read` on the link. As [`xattr_read`],
/// except that the global links of `/proc` (`self`, `thread-self`,
/// `mounts`, `net`) are read by anyone: they name the reader's own entries.
///
/// Following a link while a path is looked up is not mediated: what the
/// path reaches is decided when it is used. A grant's path is resolved
/// through its links, and the mission grants reading those links.
#[inline(always)]
pub fn inode_readlink<const HOOK: u32>(ctx: &LsmContext) -> Result<i32, i32> {
    let agent = agent::<HOOK>(ctx)?;
    Ok(read_object::<HOOK>(&agent, ctx.arg(0), ops::READ))
}

/// `security_path_notify(const struct path *path, u64 mask, unsigned int obj_type)`:
/// an inotify watch, a dnotify request (`fcntl(F_NOTIFY)`, on a descriptor
/// the agent may have inherited) or a fanotify mark on the object (or its
/// mount or file system) would report what happens to it and, for a
/// directory, the names made and removed in it: it needs `read`, as
/// [`xattr_read`]. (fanotify permission events, which would let the agent
/// hold other processes' opens, need `CAP_SYS_ADMIN`, which agents never
/// have.)
#[inline(always)]
pub fn path_notify<const HOOK: u32>(ctx: &LsmContext) -> Result<i32, i32> {
    let agent = agent::<HOOK>(ctx)?;
    let path: *const u8 = ctx.arg(0);
    // One way to the decision, whether the path could be read or not.
    let access = kernel::loaded().and_then(|()| {
        let dentry: *const u8 = kernel::read(path, kernel::off().path_dentry)?;
        Access::existing(HOOK, ops::READ, dentry)
    });
    Ok(decide_existing(&agent, access, 0))
}

/// The hooks that make a new name, needing `ops` for it (the programs'
/// list says which): `security_inode_create(struct inode *dir, struct dentry
/// *dentry, umode_t mode)`, a regular file (`create`);
/// `security_inode_mkdir(...)` with the same arguments, a directory
/// (`mkdir`); `security_inode_symlink(struct inode *dir, struct dentry
/// *dentry, const char *old_name)`, a symbolic link (`create`).
///
/// | the creation                                   | enforce  | audit          | ask   |
/// |------------------------------------------------|----------|----------------|-------|
/// | `ops` granted for the name, or by a tree above | allow    | allow          | allow |
/// | not granted                                    | `EACCES` | allow + report | park  |
///
/// Files are created (and parked) here rather than in `file_open`, so
/// `O_CREAT|O_EXCL` works once approved. What a link points to needs
/// nothing: following it later is decided on the object it reaches.
///
/// A sandbox of the agent's own may make a directory, or a file with no
/// execute or set-id bit in its mode, as an empty placeholder at a policy
/// name its grants would otherwise cover (`decide::placeholder`).
#[inline(always)]
pub fn new_name<const HOOK: u32>(ctx: &LsmContext, ops: u32) -> Result<i32, i32> {
    let agent = agent::<HOOK>(ctx)?;
    let may_hold = match HOOK {
        hook::INODE_MKDIR => true,
        hook::INODE_CREATE => {
            let mode = fixed_arg::<2>(ctx) as u64;
            mode & 0o7111 == 0
        }
        _ => false,
    };
    Ok(decide::decide_new(
        &agent,
        Access::new_name(HOOK, ops, ctx.arg(0), ctx.arg(1)),
        may_hold,
    ))
}

/// `security_inode_unlink(struct inode *dir, struct dentry *dentry)`: a name
/// is removed.
///
/// | the removal                    | enforce  | audit          | ask   |
/// |--------------------------------|----------|----------------|-------|
/// | `delete` granted on the object | allow    | allow          | allow |
/// | a placeholder its agent made, still empty, where only its policy place refuses `delete` | allow | allow | allow |
/// | not granted                    | `EACCES` | allow + report | park  |
///
/// Whoever removes it, agent or not: when the object keeps other names
/// (or its link count cannot be read), cached walks that found a tree grant
/// through this name become stale, like after a rename.
#[inline(always)]
pub fn inode_unlink<const HOOK: u32>(ctx: &LsmContext) -> Result<i32, i32> {
    let dentry: *const u8 = ctx.arg(1);
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
    let agent = agent::<HOOK>(ctx)?;
    Ok(decide::decide_removal(
        &agent,
        Access::existing(HOOK, ops::DELETE, dentry),
    ))
}

/// `security_inode_mknod(struct inode *dir, struct dentry *dentry, umode_t mode, dev_t dev)`:
/// a named pipe, a socket or a device node is created.
///
/// | the creation                                                 | enforce                | audit          | ask                    |
/// |--------------------------------------------------------------|------------------------|----------------|------------------------|
/// | a pipe or socket, `create` granted for the name or by a tree | allow                  | allow          | allow                  |
/// | a pipe or socket, not granted                                | `EACCES`               | allow + report | park                   |
/// | a character or block device, whatever the grants             | `EACCES` (device node) | allow + report | `EACCES` (device node) |
///
/// A device node would open the raw device behind every grant.
#[inline(always)]
pub fn inode_mknod<const HOOK: u32>(ctx: &LsmContext) -> Result<i32, i32> {
    let agent = agent::<HOOK>(ctx)?;
    let access = Access::new_name(HOOK, ops::CREATE, ctx.arg(0), ctx.arg(1));
    let mode: u64 = ctx.arg(2);
    let kind = mode as u32 & file_type::MASK;
    let device = kind == file_type::CHAR || kind == file_type::BLOCK;
    let forced = if device { event_flags::DEVICE_NODE } else { 0 };
    Ok(decide::decide_with(&agent, access, 0, forced))
}

/// The hooks that need `ops` on the existing object of their dentry
/// (argument 1; the programs' list says which ops):
/// `security_inode_rmdir(struct inode *dir, struct dentry *dentry)`, a
/// directory is removed (`delete`); `security_inode_setxattr(idmap, struct
/// dentry *dentry, name, value, size, flags)`,
/// `security_inode_removexattr(idmap, struct dentry *dentry, name)` and,
/// since 6.2 (before, ACLs are extended attributes),
/// `security_inode_set_acl(idmap, struct dentry *dentry, acl_name, kacl)`,
/// `security_inode_remove_acl(idmap, struct dentry *dentry, acl_name)`, an
/// extended attribute or a POSIX ACL is set or removed (`setattr`).
///
/// | the access                  | enforce  | audit          | ask   |
/// |-----------------------------|----------|----------------|-------|
/// | `ops` granted on the object | allow    | allow          | allow |
/// | not granted                 | `EACCES` | allow + report | park  |
#[inline(always)]
pub fn object<const HOOK: u32>(ctx: &LsmContext, ops: u32) -> Result<i32, i32> {
    let agent = agent::<HOOK>(ctx)?;
    Ok(decide(&agent, Access::existing(HOOK, ops, ctx.arg(1))))
}

/// `security_inode_link(struct dentry *old_dentry, struct inode *dir, struct dentry *new_dentry)`:
/// a hard link needs `link` on the object and `create` for the new name, so
/// a protected file is never given a name inside a granted tree.
///
/// | the two ends    | enforce  | audit                           | ask                  |
/// |-----------------|----------|---------------------------------|----------------------|
/// | both granted    | allow    | allow                           | allow                |
/// | one granted     | `EACCES` | allow + report the other        | park the other       |
/// | neither granted | `EACCES` | allow + report the object's end | `EACCES` (both ends) |
///
/// Cached walks stay valid: a link adds a name and takes none away. The
/// name a cached walk went up from is still there, below the same
/// directories, and no other object gains ancestors (a directory cannot be
/// linked). What makes a cached allow stale is an object losing the name
/// that gave it, which only a rename and an unlink do, and both invalidate.
/// Through its new name the object gets what its other names give, as any
/// object with several names does: the grant cache is by object.
#[inline(always)]
pub fn inode_link<const HOOK: u32>(ctx: &LsmContext) -> Result<i32, i32> {
    two_ends::<HOOK>(
        ctx,
        |ctx| Access::existing(HOOK, ops::LINK, ctx.arg(0)),
        |ctx| Access::new_name(HOOK, ops::CREATE, ctx.arg(1), ctx.arg(2)),
    )
}

/// `security_inode_setattr([struct mnt_idmap *idmap,] struct dentry *dentry, struct iattr *attr)`:
/// mode and owner need `setattr`; size (truncate by path or descriptor) and
/// times need `write` ([`access::for_setattr`]).
///
/// | the change                                                | enforce  | audit          | ask   |
/// |-----------------------------------------------------------|----------|----------------|-------|
/// | made by the kernel itself, or the truncation of `O_TRUNC` | allow    | allow          | allow |
/// | what it needs is granted on the object                    | allow    | allow          | allow |
/// | not granted                                               | `EACCES` | allow + report | park  |
///
/// The truncation of `open(O_TRUNC)` was decided by the open, and changes
/// the kernel forces itself (dropping set-id bits on a write) need nothing
/// more. The signature gained `idmap` in 6.8, so the loader tells which one
/// this kernel has; the earlier programs' verdict is not read here, as its
/// position moves with it (the trampoline stops at the first program that
/// refuses, so this program never runs after a refusal anyway).
#[inline(always)]
pub fn inode_setattr<const HOOK: u32>(ctx: &LsmContext) -> Result<i32, i32> {
    let agent = agent::<HOOK>(ctx)?;
    let access = kernel::loaded().and_then(|()| {
        let off = kernel::off();
        // Every slot is read, then the values are chosen (slot 2 is the
        // verdict slot on kernels whose hook has two arguments).
        let (first, second, third) = (
            fixed_arg::<0>(ctx),
            fixed_arg::<1>(ctx),
            fixed_arg::<2>(ctx),
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
            let ops = access::for_setattr(valid);
            if ops == 0 {
                return Ok(0);
            }
            Access::existing(HOOK, ops, dentry)
        }
        Err(failure) => Err(failure),
    };
    Ok(decide(&agent, access))
}

/// `security_inode_rename(old_dir, old_dentry, new_dir, new_dentry)`: needs
/// `rename` on the object moved, and at the destination `create` for a new
/// name or `delete` of the object it replaces ([`Access::rename_target`]).
/// `RENAME_EXCHANGE` calls the hook once for each direction, so both objects
/// need `rename` and `delete`.
///
/// | the two ends    | enforce  | audit                           | ask                  |
/// |-----------------|----------|---------------------------------|----------------------|
/// | both granted    | allow    | allow                           | allow                |
/// | one granted     | `EACCES` | allow + report the other        | park the other       |
/// | neither granted | `EACCES` | allow + report the object's end | `EACCES` (both ends) |
///
/// Whoever renames, agent or not: the object (and, for a directory,
/// everything below it) changes ancestors, so cached walks become stale.
#[inline(always)]
pub fn inode_rename<const HOOK: u32>(ctx: &LsmContext) -> Result<i32, i32> {
    maps::bump_epoch();
    two_ends::<HOOK>(
        ctx,
        |ctx| Access::existing(HOOK, ops::RENAME, ctx.arg(1)),
        |ctx| Access::rename_target(HOOK, ctx.arg(2), ctx.arg(3)),
    )
}

/// `security_file_ioctl(struct file *file, unsigned int cmd, unsigned long arg)`,
/// and `security_file_ioctl_compat(...)` with the same arguments (a 32-bit
/// process, on kernels that have it; before, such calls reach
/// `file_ioctl`): an `ioctl(2)` on an open file, decided by its command
/// ([`ioctl::need`]).
///
/// | the command                                        | enforce           | audit          | ask               |
/// |----------------------------------------------------|-------------------|----------------|-------------------|
/// | typing into a terminal, changing a whole filesystem | `EPERM` (guarded) | allow + report | `EPERM` (guarded) |
/// | changing the file, what it needs granted           | allow             | allow          | allow             |
/// | changing the file, not granted                     | `EACCES`          | allow + report | park              |
/// | any other (`FIONREAD`, `TCGETS`, `FS_IOC_GETFLAGS`) | allow             | allow          | allow             |
///
/// Typing into a terminal is `TIOCSTI` and `TIOCLINUX` (which can paste):
/// keystrokes run as the person at the terminal, so they could answer
/// pincer's own prompt, or leave a command line for the shell that runs
/// after the agent, outside its cgroup. A whole filesystem is `FIFREEZE`,
/// `FITHAW`, its label, its UUID, `EXT4_IOC_SHUTDOWN`. These are refused by
/// number on any file: no other driver gives them a meaning an agent needs.
///
/// Changing the file's attributes (`FS_IOC_SETFLAGS`, `FS_IOC_FSSETXATTR`,
/// `FS_IOC_SETVERSION`, fs-verity, an encryption policy) needs `setattr`;
/// changing its data (`FICLONE`, `FICLONERANGE`, `FIDEDUPERANGE`) needs
/// `write`, except through the descriptor whose open created the file
/// ([`access::for_ioctl`]). Both are decided on the descriptor's object, like
/// the other file hooks: the attribute commands need no writable descriptor
/// (`chattr +i` works on a file open for reading), so the open that gave it
/// decided nothing about them. Of a dedupe only the source is seen here (its
/// destinations are descriptors in the argument); a dedupe changes none of
/// their bytes. Nothing is read from the task's memory before this hook, so
/// the system call restarts unchanged after a park.
#[inline(always)]
pub fn file_ioctl<const HOOK: u32>(ctx: &LsmContext) -> Result<i32, i32> {
    let agent = agent::<HOOK>(ctx)?;
    let cmd: u64 = ctx.arg(1);
    let cmd = cmd as u32;
    let need = match ioctl::need(cmd) {
        ioctl::Need::Nothing => return Ok(0),
        ioctl::Need::Refused => return Ok(guard::refuse(&agent, HOOK, cmd)),
        ioctl::Need::Ops(need) => need,
    };
    let access = Access::opened(HOOK, ctx.arg(0), |f_mode, _| {
        access::for_ioctl(need, f_mode)
    });
    Ok(decide(&agent, access))
}

/// `security_file_receive(struct file *file)`: a descriptor arrives over a
/// Unix socket (`SCM_RIGHTS`) or `pidfd_getfd`; needs what opening it would
/// ([`access::for_received`]).
///
/// | the descriptor                       | enforce  | audit          | ask                        |
/// |--------------------------------------|----------|----------------|----------------------------|
/// | the grants cover what its mode gives | allow    | allow          | allow                      |
/// | they do not                          | `EACCES` | allow + report | `EACCES` (not restartable) |
///
/// The message is already consumed when the hook runs, so the syscall cannot
/// be restarted: an ungranted descriptor is dropped (`recvmsg` reports
/// `MSG_CTRUNC`, `pidfd_getfd` fails with `EACCES`), never parked.
#[inline(always)]
pub fn file_receive<const HOOK: u32>(ctx: &LsmContext) -> Result<i32, i32> {
    let agent = agent::<HOOK>(ctx)?;
    let access = Access::opened(HOOK, ctx.arg(0), access::for_received);
    Ok(decide::decide_unrestartable(&agent, access))
}

/// `security_mmap_file(struct file *file, unsigned long reqprot, unsigned
/// long prot, unsigned long flags)`: memory is mapped. A file mapped
/// executable runs its bytes as code, as `execve` would (the dynamic
/// loader's `ld.so ./tool` maps `./tool` this way, with no `execve` of it):
/// it needs `exec` on the file ([`access::for_exec_mapping`]).
///
/// | the mapping                                                  | enforce  | audit          | ask      |
/// |--------------------------------------------------------------|----------|----------------|----------|
/// | not executable (`prot` without `PROT_EXEC`), or anonymous    | allow    | allow          | allow    |
/// | of a file opened for exec (`execve` mapping its program and interpreter, decided at their open) | allow | allow | allow |
/// | of a memfd or System V shared memory (the kernel's internal shmem mount) | allow | allow | allow |
/// | of any other file, `exec` granted on it                      | allow    | allow          | allow    |
/// | of any other file, not granted                               | `EACCES` | allow + report | park     |
///
/// `prot` is what the mapping gets, `PROT_EXEC` added by the personality
/// `READ_IMPLIES_EXEC` included. Memory that holds no file's bytes
/// (anonymous, a memfd) is where an agent's own generated code lives (JITs,
/// `libffi` closures): it is no object of anyone's, so it stays as `mmap`
/// gives it; running a memfd with `execveat` is decided at its open, as any
/// exec is. The mapping is made after the hook and outside the `mmap` lock,
/// so parking restarts `mmap` whole.
#[inline(always)]
pub fn mmap_file<const HOOK: u32>(ctx: &LsmContext) -> Result<i32, i32> {
    let file: *const u8 = ctx.arg(0);
    let prot: u64 = ctx.arg(2);
    if file.is_null() || prot & PROT_EXEC == 0 {
        // The answer of earlier programs, before any map is read: most
        // mappings of every process end here.
        return Err(ctx.arg(4));
    }
    let agent = agent::<HOOK>(ctx)?;
    let access = Access::opened(HOOK, file, access::for_exec_mapping);
    if undecided_mapping(&access) {
        return Ok(0);
    }
    Ok(decide(&agent, access))
}

/// `security_file_mprotect(struct vm_area_struct *vma, unsigned long
/// reqprot, unsigned long prot)`: a mapping's protection changes. Making a
/// file's mapping executable needs what mapping it executable would
/// ([`mmap_file`]), so `mmap(PROT_READ)` then `mprotect(PROT_EXEC)` is the
/// same access.
///
/// | the change                                                   | enforce  | audit          | ask                        |
/// |--------------------------------------------------------------|----------|----------------|----------------------------|
/// | not to executable, or of anonymous memory                    | allow    | allow          | allow                      |
/// | of a file opened for exec, a memfd or shared memory          | allow    | allow          | allow                      |
/// | of any other file, `exec` granted on it                      | allow    | allow          | allow                      |
/// | of any other file, not granted                               | `EACCES` | allow + report | `EACCES` (not restartable) |
///
/// The hook runs under the `mmap` lock, part way through a range of
/// mappings that `mprotect` may already have changed: it is decided at
/// once, never parked.
#[inline(always)]
pub fn file_mprotect<const HOOK: u32>(ctx: &LsmContext) -> Result<i32, i32> {
    let prot: u64 = ctx.arg(2);
    if prot & PROT_EXEC == 0 {
        return Err(ctx.arg(3));
    }
    let agent = agent::<HOOK>(ctx)?;
    let vma: *const u8 = ctx.arg(0);
    let file = kernel::loaded().and_then(|()| {
        kernel::read::<*const u8>(vma, kernel::off().vm_area_struct_vm_file).map_err(Failure::from)
    });
    let access = match file {
        Ok(file) if file.is_null() => return Ok(0),
        Ok(file) => Access::opened(HOOK, file, access::for_exec_mapping),
        Err(failure) => Err(failure),
    };
    if undecided_mapping(&access) {
        return Ok(0);
    }
    Ok(decide::decide_unrestartable(&agent, access))
}

/// `PROT_EXEC` of `mmap(2)` and `mprotect(2)`.
const PROT_EXEC: u64 = 0x4;

/// Whether an executable mapping is of a file that is not decided here: one
/// opened for exec (decided at its open), or one on the kernel's internal
/// shmem mount (a memfd, System V shared memory).
#[inline(always)]
fn undecided_mapping(access: &Result<Access, Failure>) -> bool {
    match access {
        Ok(access) => access.ops == 0 || kernel::is_internal_shm(kernel::off(), access.dev),
        Err(_) => false,
    }
}

/// `security_d_instantiate(struct dentry *dentry, struct inode *inode)`:
/// the kernel binds a name to its inode, as a new object is made (and as an
/// existing one is looked up). Decides nothing (the hook returns nothing):
/// for any task, an object bound in a source directory is a source too;
/// when the current thread of an agent was allowed to make that name, the
/// new object gets its label ([`crate::labels`]).
#[inline(always)]
pub fn d_instantiate<const HOOK: u32>(ctx: &LsmContext) -> Result<i32, i32> {
    if kernel::loaded().is_err() {
        return Ok(0);
    }
    let (dentry, inode) = (ctx.arg(0), ctx.arg(1));
    if agent::<HOOK>(ctx).is_err() || !crate::labels::instantiated(dentry, inode) {
        crate::labels::bound(dentry, inode);
    }
    Ok(0)
}

/// Decides `read` on the existing object of `dentry`; `proc_global` as in
/// [`objects::rule`].
#[inline(always)]
fn read_object<const HOOK: u32>(agent: &Agent, dentry: *const u8, proc_global: u32) -> i32 {
    decide_existing(
        agent,
        Access::existing(HOOK, ops::READ, dentry),
        proc_global,
    )
}

/// Decides an access to an existing object: first what [`objects::rule`]
/// says of it, then the grants.
#[inline(always)]
fn decide_existing(agent: &Agent, access: Result<Access, Failure>, proc_global: u32) -> i32 {
    let (access, also, forced) = match access {
        Ok(mut access) => match objects::rule(&mut access, proc_global) {
            Ok(Rule::Grants) => (Ok(access), 0, 0),
            Ok(Rule::Also(ops)) => (Ok(access), ops, 0),
            Ok(Rule::Refused(why)) => (Ok(access), 0, why),
            Err(_) => (Err(Failure::Read), 0, 0),
        },
        Err(failure) => (Err(failure), 0, 0),
    };
    decide::decide_object(agent, access, also, forced)
}

/// Decides an operation with two ends, the object and its new name, which
/// `object` and `name` read from the context (a hard link, a rename; see
/// [`decide::decide_pair`]).
///
/// Each end is read as it is checked (see [`decide::decide_pair`]): two
/// `Result`s alive at once let the compiler spill the unset payload of an
/// error, which the verifier refuses to read.
#[inline(always)]
fn two_ends<const HOOK: u32>(
    ctx: &LsmContext,
    object: impl FnOnce(&LsmContext) -> Result<Access, Failure>,
    name: impl FnOnce(&LsmContext) -> Result<Access, Failure>,
) -> Result<i32, i32> {
    let agent = agent::<HOOK>(ctx)?;
    Ok(decide::decide_pair(&agent, object(ctx), || name(ctx)))
}
