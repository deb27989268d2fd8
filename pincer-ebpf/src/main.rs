//! pincer's BPF LSM programs.
//!
//! Every hook first honours a denial made by an earlier LSM, then looks the
//! current cgroup up in [`maps::AGENTS`]: a task outside every agent cgroup
//! pays that one hash lookup and is let through. For an agent, the object is
//! identified by (device, inode) and checked against the agent's grants
//! ([`decide`]); what is not granted is denied with `EACCES` (enforce mode) or
//! allowed and reported (audit mode). Every decision that userspace must see is
//! sent on the [`maps::EVENTS`] ring buffer; a full ring buffer never changes a
//! decision, it is only counted.
#![cfg_attr(target_arch = "bpf", no_std)]
#![cfg_attr(target_arch = "bpf", no_main)]
// For the one atomic instruction in `maps::bump_epoch`.
#![cfg_attr(target_arch = "bpf", feature(asm_experimental_arch))]

mod decide;
mod kernel;
mod maps;
mod park;
mod report;

use aya_ebpf::{macros::lsm, programs::LsmContext};
use pincer_common::{fmode, hook, ops};

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
/// Opened for exec needs `exec` only (the kernel's read for exec is part of
/// it); otherwise read and/or write as the open mode says. The open that has
/// just created its file needs nothing more: `inode_create` decided the
/// creation, and a new empty file holds nothing to protect.
#[lsm(hook = "file_open")]
pub fn file_open(ctx: LsmContext) -> i32 {
    // The phony last argument is the verdict of earlier LSMs.
    let previous: i32 = ctx.arg(1);
    if previous != 0 {
        return previous;
    }
    let Some(agent) = maps::current_agent() else {
        return 0;
    };
    let file: *const u8 = ctx.arg(0);
    let access = kernel::offsets().and_then(|off| {
        let mode: u32 = kernel::read(file, off.file_f_mode)?;
        let inode: *const u8 = kernel::read(file, off.file_f_inode)?;
        let (dev, ino) = kernel::identity(&off, inode)?;
        Ok(Access {
            off,
            hook: hook::FILE_OPEN,
            ops: ops_for_open(mode),
            dev,
            ino,
            dentry: core::ptr::null(),
            file,
            exists: true,
        })
    });
    decide(&agent, access)
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
    let previous: i32 = ctx.arg(3);
    if previous != 0 {
        return previous;
    }
    let Some(agent) = maps::current_agent() else {
        return 0;
    };
    let dir: *const u8 = ctx.arg(0);
    let dentry: *const u8 = ctx.arg(1);
    let access = kernel::offsets().and_then(|off| {
        let (dev, ino) = kernel::identity(&off, dir)?;
        Ok(Access {
            off,
            hook: hook::INODE_CREATE,
            ops: ops::CREATE,
            dev,
            ino,
            dentry,
            file: core::ptr::null(),
            exists: false,
        })
    });
    decide(&agent, access)
}

/// `security_inode_rename(old_dir, old_dentry, new_dir, new_dentry)`:
/// a rename changes which trees an object is below, so every cached walk
/// becomes stale. Decides nothing (yet): it honours earlier LSMs and allows.
#[lsm(hook = "inode_rename")]
pub fn inode_rename(ctx: LsmContext) -> i32 {
    maps::bump_epoch();
    ctx.arg(4)
}

/// `security_inode_link(old_dentry, dir, new_dentry)`: a new name for an
/// object; invalidates cached walks like a rename.
#[lsm(hook = "inode_link")]
pub fn inode_link(ctx: LsmContext) -> i32 {
    maps::bump_epoch();
    ctx.arg(3)
}

/// The operations an open in `f_mode` asks for.
#[inline(always)]
fn ops_for_open(f_mode: u32) -> u32 {
    if f_mode & fmode::CREATED != 0 {
        return 0;
    }
    if f_mode & fmode::EXEC != 0 {
        return ops::EXEC;
    }
    let mut need = 0;
    if f_mode & fmode::READ != 0 {
        need |= ops::READ;
    }
    if f_mode & fmode::WRITE != 0 {
        need |= ops::WRITE;
    }
    // An open with neither mode (`O_WRONLY|O_RDWR`, ioctl-only) still hands
    // out a descriptor to the object: treat it as a read.
    if need == 0 { ops::READ } else { need }
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
