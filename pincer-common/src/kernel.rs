//! The kernel's own numbers the programs read or answer with, and the
//! offsets of its structures on the running kernel.

/// Errno of the self-protection hooks (`kill`, `ptrace`, `bpf`, `mount`,
/// `clone3` into a cgroup), as the kernel itself answers them.
pub const EPERM: i32 = 1;
/// Errno of an access the grants do not cover.
pub const EACCES: i32 = 13;
/// Errno of the open that made a placeholder ([`crate::names::PLACEHOLDERS`]):
/// the name exists now, and no descriptor that writes it is given.
pub const EEXIST: i32 = 17;

/// `SIGSTOP`.
pub const SIGSTOP: u32 = 19;
/// `ERESTARTNOINTR`: the syscall restarts once the task runs again.
pub const ERESTARTNOINTR: i32 = 513;

/// Offsets of kernel struct members, read from the running kernel's BTF by the
/// loader and written into the program's [`crate::names::OFFSETS`] global: Rust BPF has
/// no CO-RE field relocation, and the layouts differ between kernels (for
/// example `file.f_inode` is at byte 32 on 6.1 and 40 on 6.12).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelOffsets {
    /// Non-zero once the loader has filled this struct; the programs deny
    /// every agent access while it is zero.
    pub loaded: u32,
    /// `file.f_inode`.
    pub file_f_inode: u32,
    /// `file.f_path.dentry`.
    pub file_f_path_dentry: u32,
    /// `file.f_mode`.
    pub file_f_mode: u32,
    /// `file.f_flags`.
    pub file_f_flags: u32,
    /// `inode.i_ino`.
    pub inode_i_ino: u32,
    /// `inode.i_sb`.
    pub inode_i_sb: u32,
    /// `super_block.s_dev`.
    pub super_block_s_dev: u32,
    /// `dentry.d_parent`.
    pub dentry_d_parent: u32,
    /// `dentry.d_name.name`.
    pub dentry_d_name_name: u32,
    /// `dentry.d_name.len`.
    pub dentry_d_name_len: u32,
    /// `dentry.d_inode`.
    pub dentry_d_inode: u32,
    /// `task_struct.flags`.
    pub task_struct_flags: u32,
    /// `task_struct.tgid`.
    pub task_struct_tgid: u32,
    /// `task_struct.io_uring`.
    pub task_struct_io_uring: u32,
    /// `task_struct.cgroups`.
    pub task_struct_cgroups: u32,
    /// `css_set.dfl_cgrp`.
    pub css_set_dfl_cgrp: u32,
    /// `cgroup.kn`.
    pub cgroup_kn: u32,
    /// `kernfs_node.id`.
    pub kernfs_node_id: u32,
    /// `inode.i_nlink`.
    pub inode_i_nlink: u32,
    /// `inode.i_mode`.
    pub inode_i_mode: u32,
    /// `iattr.ia_valid`.
    pub iattr_ia_valid: u32,
    /// Non-zero when the `inode_setattr` hook takes a `mnt_idmap` first
    /// (6.8 and later), so the dentry is its second argument.
    pub setattr_has_idmap: u32,
    /// `proc_inode.vfs_inode`.
    pub proc_inode_vfs_inode: u32,
    /// `proc_inode.pid`.
    pub proc_inode_pid: u32,
    /// `pid.numbers[0].nr`: the process id in the initial namespace.
    pub pid_nr: u32,
    /// Device (kernel encoding) of pipefs, where anonymous pipes live.
    pub pipe_dev: u32,
    /// Device (kernel encoding) of sockfs, where sockets live.
    pub sock_dev: u32,
    /// Device (kernel encoding) of the kernel's internal shmem mount, where
    /// memfds and System V shared memory live.
    pub shm_dev: u32,
    /// `super_block.s_magic`.
    pub super_block_s_magic: u32,
    /// `pid.tasks`: `tasks[PIDTYPE_PID].first` is the task's `pid_links[0]`.
    pub pid_tasks: u32,
    /// `task_struct.pid_links`.
    pub task_struct_pid_links: u32,
    /// `path.dentry`.
    pub path_dentry: u32,
    /// `kern_ipc_perm.id`.
    pub kern_ipc_perm_id: u32,
    /// `key.serial`.
    pub key_serial: u32,
    /// `task_struct.real_cred`.
    pub task_struct_real_cred: u32,
    /// `inode.i_generation`.
    pub inode_i_generation: u32,
    /// `kernfs_node.parent` (`__parent` from 6.15): a cgroup's parent, by
    /// its directory.
    pub kernfs_node_parent: u32,
    /// `task_struct.mm`.
    pub task_struct_mm: u32,
    /// `mm_struct.exe_file`.
    pub mm_struct_exe_file: u32,
    /// `vm_area_struct.vm_file`: the file a mapping maps, null for
    /// anonymous memory.
    pub vm_area_struct_vm_file: u32,
    /// `user_namespace.level`: 0 for the initial user namespace, one more
    /// for each namespace below it.
    pub user_namespace_level: u32,
    /// `super_block.s_user_ns`: the user namespace a filesystem was
    /// mounted in.
    pub super_block_s_user_ns: u32,
    /// `task_struct.nsproxy`.
    pub task_struct_nsproxy: u32,
    /// `nsproxy.mnt_ns`.
    pub nsproxy_mnt_ns: u32,
    /// `mnt_namespace.user_ns`: the user namespace that owns a mount
    /// namespace.
    pub mnt_namespace_user_ns: u32,
    /// The device (kernel encoding) of the procfs the loader sees at
    /// `/proc`, whose objects the baseline grants: another procfs (a
    /// sandbox's own `/proc`) is decided as this one.
    pub proc_dev: u32,
    /// `inode.i_size`: a placeholder is removed only while it is empty.
    pub inode_i_size: u32,
}

impl KernelOffsets {
    /// All zero: not loaded.
    pub const fn zeroed() -> Self {
        Self {
            loaded: 0,
            file_f_inode: 0,
            file_f_path_dentry: 0,
            file_f_mode: 0,
            file_f_flags: 0,
            inode_i_ino: 0,
            inode_i_sb: 0,
            super_block_s_dev: 0,
            dentry_d_parent: 0,
            dentry_d_name_name: 0,
            dentry_d_name_len: 0,
            dentry_d_inode: 0,
            task_struct_flags: 0,
            task_struct_tgid: 0,
            task_struct_io_uring: 0,
            task_struct_cgroups: 0,
            css_set_dfl_cgrp: 0,
            cgroup_kn: 0,
            kernfs_node_id: 0,
            inode_i_nlink: 0,
            inode_i_mode: 0,
            iattr_ia_valid: 0,
            setattr_has_idmap: 0,
            proc_inode_vfs_inode: 0,
            proc_inode_pid: 0,
            pid_nr: 0,
            pipe_dev: 0,
            sock_dev: 0,
            shm_dev: 0,
            super_block_s_magic: 0,
            pid_tasks: 0,
            task_struct_pid_links: 0,
            path_dentry: 0,
            kern_ipc_perm_id: 0,
            key_serial: 0,
            task_struct_real_cred: 0,
            inode_i_generation: 0,
            kernfs_node_parent: 0,
            task_struct_mm: 0,
            mm_struct_exe_file: 0,
            vm_area_struct_vm_file: 0,
            user_namespace_level: 0,
            super_block_s_user_ns: 0,
            task_struct_nsproxy: 0,
            nsproxy_mnt_ns: 0,
            mnt_namespace_user_ns: 0,
            proc_dev: 0,
            inode_i_size: 0,
        }
    }
}

/// `task_struct.flags` bits (stable for many releases).
pub mod task_flags {
    /// `PF_EXITING`.
    pub const EXITING: u32 = 0x0000_0004;
    /// `PF_IO_WORKER`: an io_uring worker thread.
    pub const IO_WORKER: u32 = 0x0000_0010;
    /// `PF_KTHREAD`.
    pub const KTHREAD: u32 = 0x0020_0000;
}

/// `f_mode` bits the programs read (stable kernel ABI since 2.6).
pub mod fmode {
    /// `FMODE_READ`.
    pub const READ: u32 = 0x1;
    /// `FMODE_WRITE`.
    pub const WRITE: u32 = 0x2;
    /// `__FMODE_EXEC`: set in `f_flags` (not `f_mode`) by the kernel's
    /// open for exec (`execve`, `execveat`, interpreters, `uselib`).
    pub const EXEC: u32 = 0x20;
    /// `FMODE_CREATED`: this open created the file (6.1 and 6.12 alike).
    pub const CREATED: u32 = 0x10_0000;
}

/// `iattr.ia_valid` bits (stable kernel ABI).
pub mod attr {
    /// `ATTR_MODE`.
    pub const MODE: u32 = 1 << 0;
    /// `ATTR_UID`.
    pub const UID: u32 = 1 << 1;
    /// `ATTR_GID`.
    pub const GID: u32 = 1 << 2;
    /// `ATTR_SIZE`.
    pub const SIZE: u32 = 1 << 3;
    /// `ATTR_ATIME`, `ATTR_MTIME`, `ATTR_CTIME`, `ATTR_ATIME_SET`,
    /// `ATTR_MTIME_SET`, `ATTR_TOUCH`.
    pub const TIMES: u32 = (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8) | (1 << 17);
    /// `ATTR_FORCE`: the kernel adds it when a change drops set-id bits or
    /// file capabilities (a write, or a truncation, of such a file); it
    /// says nothing about what else changes.
    pub const FORCE: u32 = 1 << 9;
    /// `ATTR_KILL_SUID`: drop the set-user-id bit (the kernel turns it into
    /// `ATTR_MODE` before the hook runs).
    pub const KILL_SUID: u32 = 1 << 11;
    /// `ATTR_KILL_SGID`: drop the set-group-id bit (likewise).
    pub const KILL_SGID: u32 = 1 << 12;
    /// `ATTR_OPEN`: the truncation of `open(O_TRUNC)`, decided at the open.
    pub const OPEN: u32 = 1 << 15;

    /// The operations a change with these `ia_valid` bits needs, decided on
    /// what it changes: the size needs `write`, a mode or owner `setattr`,
    /// times alone `write` (with a mode or owner change, the ctime update
    /// is part of it).
    ///
    /// Two changes need nothing more: the truncation of `open(O_TRUNC)`
    /// (`OPEN`), which the open decided, and the kernel's own dropping of
    /// set-id bits and file capabilities when such a file is written or
    /// truncated. The kernel turns `KILL_SUID`/`KILL_SGID` into a mode
    /// change before the hook runs, and never takes a mode from a caller
    /// together with them, so a mode that comes with them is the kernel's;
    /// `ATTR_KILL_PRIV` changes no attribute here. `FORCE`, which the
    /// kernel adds to those drops, changes nothing either way: a truncation
    /// that drops them still changes the size.
    pub const fn needs(valid: u32) -> u32 {
        if valid & OPEN != 0 {
            return 0;
        }
        let mode_asked = valid & MODE != 0 && valid & (KILL_SUID | KILL_SGID) == 0;
        let mut need = 0;
        if mode_asked || valid & (UID | GID) != 0 {
            need |= crate::ops::SETATTR;
        }
        if valid & SIZE != 0 {
            need |= crate::ops::WRITE;
        }
        if need == 0 && valid & TIMES != 0 {
            need = crate::ops::WRITE;
        }
        need
    }
}

/// `i_mode` file type bits.
pub mod file_type {
    /// `S_IFMT`.
    pub const MASK: u32 = 0o170000;
    /// `S_IFCHR`.
    pub const CHAR: u32 = 0o020000;
    /// `S_IFBLK`.
    pub const BLOCK: u32 = 0o060000;
    /// `S_IFREG`.
    pub const REGULAR: u32 = 0o100000;
    /// `S_IFDIR`.
    pub const DIRECTORY: u32 = 0o040000;
}

/// `super_block.s_magic` of the file systems agents never open.
pub mod fs_magic {
    /// `DEBUGFS_MAGIC`.
    pub const DEBUGFS: u32 = 0x6462_6720;
    /// `TRACEFS_MAGIC`.
    pub const TRACEFS: u32 = 0x7472_6163;
    /// `PID_FS_MAGIC`: since 6.9, a pidfd is a file of pidfs, and
    /// `pidfd_open` opens it.
    pub const PIDFS: u32 = 0x5049_4446;
    /// `TMPFS_MAGIC`.
    pub const TMPFS: u32 = 0x0102_1994;
    /// `RAMFS_MAGIC`.
    pub const RAMFS: u32 = 0x8584_58f6;
}

/// `CLONE_INTO_CGROUP`: `clone3` places the child in another cgroup.
pub const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// `PTRACE_MODE_NOAUDIT` in the mode of `security_ptrace_access_check`: the
/// kernel asks whether the task could trace another to choose what to show
/// (the wait channel and addresses in `/proc/<pid>/stat`, which `ps` reads
/// for every process), not because the task tries to trace it. Refused
/// like any other check, but not reported.
pub const PTRACE_MODE_NOAUDIT: u32 = 0x04;

/// Converts a userspace device number (`stat.st_dev`, glibc's encoding) to the
/// kernel's internal `dev_t` encoding used in `super_block.s_dev`.
pub const fn kernel_dev(st_dev: u64) -> u64 {
    let major = ((st_dev >> 8) & 0xfff) | ((st_dev >> 32) & !0xfff);
    let minor = (st_dev & 0xff) | ((st_dev >> 12) & !0xff);
    (major << 20) | minor
}

#[cfg(test)]
mod tests {
    use super::{attr, kernel_dev};
    use crate::ops;

    #[test]
    fn a_change_needs_what_it_changes_whatever_the_kernel_adds() {
        // `ATTR_CTIME`, which chmod, chown and truncate set with the rest.
        const CTIME: u32 = 1 << 6;
        // `ATTR_KILL_PRIV`, `ATTR_FILE`.
        const KILL_PRIV: u32 = 1 << 14;
        const FILE: u32 = 1 << 13;
        let drop_privileges = attr::FORCE | attr::KILL_SUID | attr::KILL_SGID | KILL_PRIV;
        for (valid, need) in [
            // chmod, chown.
            (attr::MODE | CTIME, ops::SETATTR),
            (
                attr::UID | attr::GID | CTIME | attr::KILL_SUID | KILL_PRIV,
                ops::SETATTR,
            ),
            // truncate(2), ftruncate(2), touch.
            (attr::SIZE | CTIME, ops::WRITE),
            (attr::SIZE | CTIME | FILE, ops::WRITE),
            (attr::TIMES, ops::WRITE),
            // Truncating a set-id file or one with file capabilities: the
            // kernel adds the drop (and the mode it makes of it).
            (
                attr::SIZE | CTIME | drop_privileges | attr::MODE,
                ops::WRITE,
            ),
            (attr::SIZE | attr::FORCE | KILL_PRIV, ops::WRITE),
            // Writing such a file: only the kernel's drop.
            (attr::FORCE | attr::KILL_SUID | attr::MODE, 0),
            (attr::FORCE | KILL_PRIV, 0),
            // open(O_TRUNC), decided by the open, with or without the drop.
            (attr::SIZE | CTIME | attr::OPEN | FILE, 0),
            (attr::SIZE | attr::OPEN | drop_privileges | attr::MODE, 0),
        ] {
            assert_eq!(attr::needs(valid), need, "ia_valid {valid:#x}");
        }
    }

    #[test]
    fn kernel_dev_matches_kernel_encoding() {
        // 8:1 (sda1): st_dev 0x801 → (8 << 20) | 1.
        assert_eq!(kernel_dev(0x801), (8 << 20) | 1);
        // 0:26 (a tmpfs): st_dev 0x1a → 26.
        assert_eq!(kernel_dev(0x1a), 26);
        // 259:70000 (large minor): glibc splits the minor across two fields.
        let st = (259u64 << 8) | (70000 & 0xff) | ((70000u64 & !0xff) << 12);
        assert_eq!(kernel_dev(st), (259 << 20) | 70000);
    }
}
