//! The LSM hooks pincer attaches a program to: one table, read by the
//! programs (each hook's id, and where its context holds the verdict of
//! earlier programs), the loader (program names, the kernel function whose
//! BTF it checks, which hooks are optional) and the event decoder (names).
//!
//! A hook's id is what events and parked requests carry
//! ([`crate::AccessEvent::hook`], [`crate::Pending::hook`]); ids start at 1,
//! so zero means "no hook", and [`ALL`] holds hook `id` at index `id - 1`.

/// The arguments of a hook as its program reads them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Args {
    /// Exactly this many; the loader checks the count in the kernel's BTF,
    /// as a program reading a shifted argument would decide on the wrong
    /// object. The verdict of earlier programs on the hook follows them.
    Exactly(usize),
    /// Exactly this many, for a hook that returns nothing: the kernel
    /// ignores what the program answers, and there is no verdict of earlier
    /// programs to read.
    Void(usize),
    /// The signature differs between the kernels pincer runs on: the program
    /// finds its arguments itself (`inode_setattr`) or reads none (`bpf`),
    /// and reads no verdict, whose position moves with them.
    Varies,
}

/// When a hook's program is attached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attach {
    /// On every kernel: one without the hook is refused.
    Always,
    /// Only when the kernel has the hook (it was added after 6.1).
    WhenPresent,
}

/// One LSM hook and its program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hook {
    /// The id events and parked requests carry.
    pub id: u32,
    /// The LSM hook (`security_<name>` in the kernel), which is also the name
    /// of its program in the object, of its link pin, and what audit lines
    /// and metrics show. The kernel keeps the first 15 bytes of a program's
    /// name; those are distinct for every hook.
    pub name: &'static str,
    /// The kernel function the program attaches to, whose signature the
    /// loader reads from the BTF.
    pub btf_function: &'static str,
    /// The arguments the program reads.
    pub args: Args,
    /// When the program is attached.
    pub attach: Attach,
}

impl Hook {
    /// The index of the verdict of earlier programs in the program's context
    /// (the slot after the hook's arguments), when the program reads it.
    pub const fn verdict_slot(&self) -> Option<usize> {
        match self.args {
            Args::Exactly(count) => Some(count),
            Args::Void(_) | Args::Varies => None,
        }
    }
}

/// Defines the id constants, [`ALL`] and the names the table's check
/// compares from one list of hooks.
macro_rules! hooks {
    ($(
        $(#[doc = $doc:literal])*
        $id:ident = $value:literal, $name:literal, $args:expr, $attach:expr;
    )*) => {
        $(
            $(#[doc = $doc])*
            pub const $id: u32 = $value;
        )*

        /// The hooks' names, by id.
        const NAMES: [&str; ALL.len()] = [$($name),*];

        /// Every hook, by id: hook `id` is `ALL[id - 1]`.
        pub const ALL: [Hook; [$($value),*].len()] = [$(
            Hook {
                id: $id,
                name: $name,
                btf_function: concat!("bpf_lsm_", $name),
                args: $args,
                attach: $attach,
            },
        )*];
    };
}

use crate::text::{distinct, same_prefix};
use Args::{Exactly, Varies, Void};
use Attach::{Always, WhenPresent};

hooks! {
    /// `security_file_open`: an existing object is opened (also for exec).
    FILE_OPEN = 1, "file_open", Exactly(1), Always;
    /// `security_inode_create`: a regular file is about to be created.
    INODE_CREATE = 2, "inode_create", Exactly(3), Always;
    /// `security_inode_unlink`: a name is removed.
    INODE_UNLINK = 3, "inode_unlink", Exactly(2), Always;
    /// `security_inode_rmdir`: a directory is removed.
    INODE_RMDIR = 4, "inode_rmdir", Exactly(2), Always;
    /// `security_inode_mkdir`: a directory is created.
    INODE_MKDIR = 5, "inode_mkdir", Exactly(3), Always;
    /// `security_inode_mknod`: a named pipe, socket or device node is created.
    INODE_MKNOD = 6, "inode_mknod", Exactly(4), Always;
    /// `security_inode_symlink`: a symbolic link is created.
    INODE_SYMLINK = 7, "inode_symlink", Exactly(3), Always;
    /// `security_inode_link`: a hard link (either end).
    INODE_LINK = 8, "inode_link", Exactly(3), Always;
    /// `security_inode_rename`: a rename or exchange (either end).
    INODE_RENAME = 9, "inode_rename", Exactly(4), Always;
    /// `security_inode_setattr`: size, times, mode or owner change. 6.8
    /// added an `idmap` first argument; the loader tells the program which
    /// signature the kernel has.
    INODE_SETATTR = 10, "inode_setattr", Varies, Always;
    /// `security_inode_setxattr`: an extended attribute is set.
    INODE_SETXATTR = 11, "inode_setxattr", Exactly(6), Always;
    /// `security_inode_removexattr`: an extended attribute is removed.
    INODE_REMOVEXATTR = 12, "inode_removexattr", Exactly(3), Always;
    /// `security_file_receive`: a descriptor arrives over a socket or
    /// `pidfd_getfd`.
    FILE_RECEIVE = 13, "file_receive", Exactly(1), Always;
    /// `security_task_kill`: a signal to a task.
    TASK_KILL = 14, "task_kill", Exactly(4), Always;
    /// `security_ptrace_access_check`: ptrace, or a `/proc/<pid>` entry that
    /// needs ptrace access (`mem`, `environ`, `fd/`, `maps`, ...).
    PTRACE = 15, "ptrace_access_check", Exactly(2), Always;
    /// `security_bpf`: the `bpf(2)` system call (its signature changes
    /// between kernels; the program reads no argument).
    BPF = 16, "bpf", Varies, Always;
    /// `security_sb_mount`: `mount(2)`, including bind mounts and remounts.
    SB_MOUNT = 17, "sb_mount", Exactly(5), Always;
    /// `security_move_mount`: attaching a mount with the new mount API.
    MOVE_MOUNT = 18, "move_mount", Exactly(2), Always;
    /// `security_sb_umount`: `umount(2)`.
    SB_UMOUNT = 19, "sb_umount", Exactly(2), Always;
    /// `security_task_alloc`: `clone3(CLONE_INTO_CGROUP)`.
    TASK_ALLOC = 20, "task_alloc", Exactly(2), Always;
    /// `security_inode_set_acl` (6.2 and later; before, ACLs are extended
    /// attributes): a POSIX ACL is set.
    INODE_SET_ACL = 21, "inode_set_acl", Exactly(4), WhenPresent;
    /// `security_inode_remove_acl` (6.2 and later): a POSIX ACL is removed.
    INODE_REMOVE_ACL = 22, "inode_remove_acl", Exactly(3), WhenPresent;
    /// `security_capable`: a capability check.
    CAPABLE = 23, "capable", Exactly(4), Always;
    /// `security_kernel_load_data`: the kernel is handed code or data from
    /// memory (`init_module`, `kexec_load`, firmware and policy uploads).
    KERNEL_LOAD_DATA = 24, "kernel_load_data", Exactly(2), Always;
    /// `security_kernel_read_file`: the kernel reads code or data from a
    /// file (`finit_module`, `kexec_file_load`, firmware, policies,
    /// certificates).
    KERNEL_READ_FILE = 25, "kernel_read_file", Exactly(3), Always;
    /// `security_inode_getxattr`: an extended attribute is read.
    INODE_GETXATTR = 26, "inode_getxattr", Exactly(2), Always;
    /// `security_inode_listxattr`: extended attribute names are listed.
    INODE_LISTXATTR = 27, "inode_listxattr", Exactly(1), Always;
    /// `security_inode_readlink`: a symbolic link's target is read.
    INODE_READLINK = 28, "inode_readlink", Exactly(1), Always;
    /// `security_path_notify`: an inotify watch, a dnotify request or a
    /// fanotify mark is placed.
    PATH_NOTIFY = 29, "path_notify", Exactly(3), Always;
    /// `security_msg_queue_alloc`: a System V message queue is created.
    MSG_QUEUE_ALLOC = 30, "msg_queue_alloc_security", Exactly(1), Always;
    /// `security_shm_alloc`: a System V shared memory segment is created.
    SHM_ALLOC = 31, "shm_alloc_security", Exactly(1), Always;
    /// `security_sem_alloc`: a System V semaphore set is created.
    SEM_ALLOC = 32, "sem_alloc_security", Exactly(1), Always;
    /// `security_ipc_permission`: a System V IPC object is opened, used or
    /// read (`*get` of an existing key, `msgsnd`, `msgrcv`, `shmat`,
    /// `semop`, `IPC_STAT`).
    IPC_PERMISSION = 33, "ipc_permission", Exactly(2), Always;
    /// `security_msg_queue_msgctl`: `msgctl` (`IPC_RMID`, `IPC_SET`, ...).
    MSG_QUEUE_MSGCTL = 34, "msg_queue_msgctl", Exactly(2), Always;
    /// `security_shm_shmctl`: `shmctl`.
    SHM_SHMCTL = 35, "shm_shmctl", Exactly(2), Always;
    /// `security_sem_semctl`: `semctl`.
    SEM_SEMCTL = 36, "sem_semctl", Exactly(2), Always;
    /// `security_key_alloc`: a key or keyring is created.
    KEY_ALLOC = 37, "key_alloc", Exactly(3), Always;
    /// `security_key_permission`: a key or keyring is used.
    KEY_PERMISSION = 38, "key_permission", Exactly(3), Always;
    /// `security_inode_get_acl` (6.2 and later; before, ACLs are extended
    /// attributes): a POSIX ACL is read.
    INODE_GET_ACL = 39, "inode_get_acl", Exactly(3), WhenPresent;
    /// `security_file_ioctl`: an `ioctl(2)` on an open file (a 32-bit
    /// process's too, on kernels without the compat hook).
    FILE_IOCTL = 40, "file_ioctl", Exactly(3), Always;
    /// `security_file_ioctl_compat` (6.8, and the stable kernels it was
    /// backported to): an `ioctl(2)` of a 32-bit process.
    FILE_IOCTL_COMPAT = 41, "file_ioctl_compat", Exactly(3), WhenPresent;
    /// `security_d_instantiate`: a name is bound to its inode, as a new
    /// object is made (and as an existing one is looked up): where an
    /// agent's new object is labelled.
    D_INSTANTIATE = 42, "d_instantiate", Void(2), Always;
    /// `security_mmap_file`: a file (or anonymous memory, when the file is
    /// null) is mapped; decided when the mapping is executable.
    MMAP_FILE = 43, "mmap_file", Exactly(4), Always;
    /// `security_file_mprotect`: a mapping's protection changes; decided
    /// when a file's mapping becomes executable.
    FILE_MPROTECT = 44, "file_mprotect", Exactly(3), Always;
}

/// The hook with this id, if there is one.
pub const fn find(id: u32) -> Option<&'static Hook> {
    let index = id.wrapping_sub(1) as usize;
    if index < ALL.len() {
        Some(&ALL[index])
    } else {
        None
    }
}

/// The hook with one of this module's ids. Meant for constant ids: in a
/// constant context an id no hook has fails the build.
pub const fn get(id: u32) -> &'static Hook {
    match find(id) {
        Some(hook) => hook,
        None => panic!("no hook has this id"),
    }
}

/// The hook named `name`. Meant for constant names: in a constant context a
/// name no hook has fails the build (as a program named after no hook
/// does).
pub const fn named(name: &str) -> &'static Hook {
    let mut i = 0;
    while i < ALL.len() {
        if same_prefix(ALL[i].name, name, usize::MAX) {
            return &ALL[i];
        }
        i += 1;
    }
    panic!("no hook has this name")
}

/// The hooks whose programs are attached on every kernel
/// ([`Attach::Always`]).
pub fn required() -> impl Iterator<Item = &'static Hook> {
    ALL.iter().filter(|hook| hook.attach == Attach::Always)
}

/// The name of a hook id as audit lines and metrics show it (`unknown` for
/// an id no hook has).
pub const fn name(id: u32) -> &'static str {
    match find(id) {
        Some(hook) => hook.name,
        None => "unknown",
    }
}

/// The kernel's part of a program name: its first 15 bytes.
const KERNEL_NAME_LEN: usize = 15;

// The table's own discipline: ids are positions, and the kernel's truncated
// program names still tell the programs apart (tests and `bpftool` see those).
const _: () = {
    let mut i = 0;
    while i < ALL.len() {
        assert!(ALL[i].id as usize == i + 1);
        i += 1;
    }
    assert!(distinct(&NAMES, KERNEL_NAME_LEN));
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_find_their_hooks_and_unknown_ids_have_a_name() {
        assert_eq!(get(FILE_OPEN).name, "file_open");
        assert_eq!(named("task_alloc").id, TASK_ALLOC);
        assert_eq!(get(PTRACE).btf_function, "bpf_lsm_ptrace_access_check");
        assert_eq!(get(INODE_CREATE).verdict_slot(), Some(3));
        assert_eq!(get(INODE_SETATTR).verdict_slot(), None);
        assert_eq!(get(D_INSTANTIATE).verdict_slot(), None);
        assert_eq!(find(0), None);
        assert_eq!(find(ALL.len() as u32 + 1), None);
        assert_eq!(name(0), "unknown");
        assert_eq!(name(INODE_REMOVE_ACL), "inode_remove_acl");
    }

    #[test]
    fn truncated_names_compare_by_their_kernel_part() {
        assert!(same_prefix("ptrace_access_check", "ptrace_access_c", 15));
        assert!(!same_prefix("inode_remove_acl", "inode_removexattr", 15));
        assert!(!same_prefix("file_ioctl", "file_ioctl_compat", 15));
        assert!(!same_prefix("bpf", "bpf_x", 15));
    }
}
