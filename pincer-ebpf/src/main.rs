//! pincer's BPF LSM programs.
//!
//! Every program first honours a denial made by an earlier LSM, then looks
//! the current cgroup up in [`maps::AGENTS`]: a task outside every agent
//! cgroup pays that one hash lookup and is let through ([`hooks`]). For an
//! agent, the file hooks ([`hooks::file`]) identify the object by (device,
//! inode) ([`access`]) and check it against the agent's grants ([`decide`]);
//! what is not granted is denied with `EACCES` (enforce mode), allowed and
//! reported (audit mode) or parked for the twin ([`park`], ask mode); some
//! objects are decided by a rule before the grants ([`objects`]: block
//! devices, debugfs, `/proc`). The self-protection hooks ([`hooks::guard`])
//! refuse with `EPERM` whatever the grants, capabilities outside the agent's
//! set among them; IPC objects and keys ([`hooks::owned`]) are reached only
//! by the cgroup that created them. A cgroup made below one the daemon
//! watches is held from its first instant until the daemon has decided
//! what it is ([`held`]). Every decision that userspace must see
//! is sent on the [`maps::EVENTS`] ring buffer ([`report`]); a full ring
//! buffer never turns a denial into an allow, it is counted (and a request
//! that cannot be sent is denied).
//!
//! The programs are listed below, one per hook, with the function in
//! [`hooks`] that decides it. Modules depend one way: `hooks` → `objects`,
//! `decide` → `policy`, `park`, `report` → `access` → `kernel`, `maps`; the types and
//! names shared with userspace (the hook table among them) come from
//! `pincer_common`. One arrow crosses: `decide` asks `objects::own_limit`
//! whether a refused `/proc` write is a sandbox's own limit, in a callback
//! of its own (`objects` holds what `/proc` objects are).
#![cfg_attr(target_arch = "bpf", no_std)]
#![cfg_attr(target_arch = "bpf", no_main)]
// For the one atomic instruction in `maps::bump_epoch`.
#![cfg_attr(target_arch = "bpf", feature(asm_experimental_arch))]

mod access;
mod decide;
mod held;
mod hooks;
mod kernel;
mod labels;
mod maps;
mod objects;
mod park;
mod policy;
mod report;

use hooks::{file, guard, owned, programs};
use pincer_common::ops;

programs! {
    file_open => file::file_open(),
    inode_create => file::new_name(ops::CREATE),
    inode_unlink => file::inode_unlink(),
    inode_rmdir => file::object(ops::DELETE),
    inode_mkdir => file::new_name(ops::MKDIR),
    inode_mknod => file::inode_mknod(),
    inode_symlink => file::new_name(ops::CREATE),
    inode_link => file::inode_link(),
    inode_rename => file::inode_rename(),
    inode_setattr => file::inode_setattr(),
    inode_setxattr => file::object(ops::SETATTR),
    inode_removexattr => file::object(ops::SETATTR),
    file_receive => file::file_receive(),
    task_kill => guard::task_kill(),
    ptrace_access_check => guard::ptrace_access_check(),
    bpf => guard::refused(),
    sb_mount => guard::mount(),
    move_mount => guard::mount(),
    sb_umount => guard::mount(),
    task_alloc => guard::task_alloc(),
    inode_set_acl => file::object(ops::SETATTR),
    inode_remove_acl => file::object(ops::SETATTR),
    capable => guard::capable(),
    kernel_load_data => guard::kernel_data(0),
    kernel_read_file => guard::kernel_data(1),
    inode_getxattr => file::xattr_read(),
    inode_listxattr => file::xattr_read(),
    inode_readlink => file::inode_readlink(),
    path_notify => file::path_notify(),
    msg_queue_alloc_security => owned::created(),
    shm_alloc_security => owned::created(),
    sem_alloc_security => owned::created(),
    ipc_permission => owned::ipc(),
    msg_queue_msgctl => owned::ipc(),
    shm_shmctl => owned::ipc(),
    sem_semctl => owned::ipc(),
    key_alloc => owned::key_created(),
    key_permission => owned::key_permission(),
    inode_get_acl => file::acl_read(),
    file_ioctl => file::file_ioctl(),
    file_ioctl_compat => file::file_ioctl(),
    d_instantiate => file::d_instantiate(),
    mmap_file => file::mmap_file(),
    file_mprotect => file::file_mprotect(),
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
