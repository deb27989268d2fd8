//! Reading kernel structures at the offsets the loader found in the running
//! kernel's BTF (Rust BPF has no CO-RE field relocation).

use aya_ebpf::helpers::bpf_probe_read_kernel;
use pincer_common::{KernelOffsets, fs_magic};

/// Set by the loader before the programs are loaded; all zero means it never
/// was, and every agent access is then refused. Its symbol is
/// `pincer_common::names::OFFSETS`, the name the loader sets it by.
#[unsafe(export_name = pincer_common::global_name!(OFFSETS))]
static OFFSETS: KernelOffsets = KernelOffsets::zeroed();

/// A kernel read failed; the access is treated as ungranted.
pub struct ReadFailed;

/// The kernel offsets as the loader set them. Check [`loaded`] once per
/// decision first: all zero means they were never set.
#[inline(always)]
pub fn off() -> &'static KernelOffsets {
    // The value is patched into the object after compilation: the address
    // goes through a volatile read so the compiler cannot fold the zeros it
    // sees in the initializer, and the fields are then read from the map in
    // place rather than copied onto the small BPF stack. Callers take the
    // reference afresh instead of storing it, which keeps the map pointer out
    // of the enums the compiler may pack into one register with a tag.
    let address = &raw const OFFSETS;
    unsafe { &*core::ptr::read_volatile(&address) }
}

/// Whether the loader set the offsets.
#[inline(always)]
pub fn loaded() -> Result<(), Failure> {
    if off().loaded == 0 {
        return Err(Failure::NoOffsets);
    }
    Ok(())
}

/// Why an access could not be identified.
pub enum Failure {
    /// The loader never set [`OFFSETS`].
    NoOffsets,
    /// A kernel read failed.
    Read,
}

impl From<ReadFailed> for Failure {
    fn from(_: ReadFailed) -> Self {
        Failure::Read
    }
}

/// Reads a `T` at `base + off` from kernel memory.
#[inline(always)]
pub fn read<T>(base: *const u8, off: u32) -> Result<T, ReadFailed> {
    if base.is_null() {
        return Err(ReadFailed);
    }
    let field = base.wrapping_add(off as usize).cast::<T>();
    unsafe { bpf_probe_read_kernel(field) }.map_err(|_| ReadFailed)
}

/// (device in the kernel's encoding, inode number) of an inode.
#[inline(always)]
pub fn identity(off: &KernelOffsets, inode: *const u8) -> Result<(u64, u64), ReadFailed> {
    let ino: u64 = read(inode, off.inode_i_ino)?;
    let sb: *const u8 = read(inode, off.inode_i_sb)?;
    let dev: u32 = read(sb, off.super_block_s_dev)?;
    Ok((u64::from(dev), ino))
}

/// (device, inode, inode generation) of the current process's executable
/// (`mm.exe_file`): which file it runs, exactly enough for the twin to
/// reuse the path it read for that process and file.
#[inline(always)]
pub fn current_exe(off: &KernelOffsets) -> Result<(u64, u64, u32), ReadFailed> {
    let task = unsafe { aya_ebpf::helpers::bpf_get_current_task() } as *const u8;
    // A kernel thread or an exiting task has no `mm`: `read` fails on it.
    let mm: *const u8 = read(task, off.task_struct_mm)?;
    let exe: *const u8 = read(mm, off.mm_struct_exe_file)?;
    let inode: *const u8 = read(exe, off.file_f_inode)?;
    let (dev, ino) = identity(off, inode)?;
    let generation: u32 = read(inode, off.inode_i_generation)?;
    Ok((dev, ino, generation))
}

/// The magic number of the file system an inode belongs to
/// (`super_block.s_magic`).
#[inline(always)]
pub fn fs_magic(off: &KernelOffsets, inode: *const u8) -> Result<u32, ReadFailed> {
    let sb: *const u8 = read(inode, off.inode_i_sb)?;
    // `s_magic` is an `unsigned long`; every magic number fits its low half.
    read(sb, off.super_block_s_magic)
}

/// Whether the user namespace `ns` is one the agent made: deeper than the
/// one its tasks start in (`home`, [`pincer_common::Agent::userns_home`]).
/// The initial namespace never is; an unreadable one is not.
#[inline(always)]
pub fn own_userns(off: &KernelOffsets, ns: *const u8, home: u32) -> bool {
    // `level` is an `int`, never negative.
    match read::<u32>(ns, off.user_namespace_level) {
        Ok(level) => level > 0 && level <= 32 && level > home,
        Err(ReadFailed) => false,
    }
}

/// Whether the current task's mount namespace is owned by a user namespace
/// the agent made ([`own_userns`]): mounts there change the view of the
/// agent's own sandbox, nobody else's.
#[inline(always)]
pub fn own_mount_namespace(off: &KernelOffsets, home: u32) -> bool {
    let task = unsafe { aya_ebpf::helpers::bpf_get_current_task() } as *const u8;
    let owner = read::<*const u8>(task, off.task_struct_nsproxy)
        .and_then(|nsproxy| read::<*const u8>(nsproxy, off.nsproxy_mnt_ns))
        .and_then(|mnt_ns| read::<*const u8>(mnt_ns, off.mnt_namespace_user_ns));
    owner.is_ok_and(|owner| own_userns(off, owner, home))
}

/// Whether an inode is on a tmpfs (or ramfs) mounted in a user namespace
/// the agent made: a filesystem that began empty in its own sandbox, so
/// everything in it is what the agent put there.
#[inline(always)]
pub fn on_own_tmpfs(off: &KernelOffsets, inode: *const u8, home: u32) -> bool {
    let Ok(sb) = read::<*const u8>(inode, off.inode_i_sb) else {
        return false;
    };
    let Ok(magic) = read::<u32>(sb, off.super_block_s_magic) else {
        return false;
    };
    if magic != fs_magic::TMPFS && magic != fs_magic::RAMFS {
        return false;
    }
    read::<*const u8>(sb, off.super_block_s_user_ns).is_ok_and(|ns| own_userns(off, ns, home))
}

/// The parent of a dentry, or `None` at the root of its filesystem.
#[inline(always)]
pub fn parent(off: &KernelOffsets, dentry: *const u8) -> Result<Option<*const u8>, ReadFailed> {
    let parent: *const u8 = read(dentry, off.dentry_d_parent)?;
    if parent.is_null() || parent == dentry {
        Ok(None)
    } else {
        Ok(Some(parent))
    }
}

/// The inode number of a (positive) dentry.
#[inline(always)]
pub fn dentry_ino(off: &KernelOffsets, dentry: *const u8) -> Result<u64, ReadFailed> {
    let inode: *const u8 = read(dentry, off.dentry_d_inode)?;
    read(inode, off.inode_i_ino)
}

/// The name of a dentry (a pointer to kernel memory).
#[inline(always)]
pub fn name(off: &KernelOffsets, dentry: *const u8) -> Result<*const u8, ReadFailed> {
    read(dentry, off.dentry_d_name_name)
}

/// The inode of a dentry (null for a negative dentry).
#[inline(always)]
pub fn dentry_inode(off: &KernelOffsets, dentry: *const u8) -> Result<*const u8, ReadFailed> {
    read(dentry, off.dentry_d_inode)
}

/// The id of a task's cgroup on the unified hierarchy, as
/// `bpf_get_current_cgroup_id` gives it for the current task.
#[inline(always)]
pub fn task_cgroup_id(off: &KernelOffsets, task: *const u8) -> Result<u64, ReadFailed> {
    let css_set: *const u8 = read(task, off.task_struct_cgroups)?;
    let cgroup: *const u8 = read(css_set, off.css_set_dfl_cgrp)?;
    let kn: *const u8 = read(cgroup, off.cgroup_kn)?;
    read(kn, off.kernfs_node_id)
}

/// The `struct pid` a `/proc/<pid>/...` inode belongs to, null for other
/// `/proc` inodes. Only for inodes of procfs, whose inodes are embedded in a
/// `struct proc_inode`.
#[inline(always)]
pub fn proc_pid_struct(off: &KernelOffsets, inode: *const u8) -> Result<*const u8, ReadFailed> {
    let proc_inode = inode.wrapping_sub(off.proc_inode_vfs_inode as usize);
    read(proc_inode, off.proc_inode_pid)
}

/// The process id (in the initial namespace) of a `struct pid`.
#[inline(always)]
pub fn pid_nr(off: &KernelOffsets, pid: *const u8) -> Result<u32, ReadFailed> {
    read(pid, off.pid_nr)
}

/// Whether `dev` is pipefs or sockfs: an anonymous pipe or a socket the task
/// already holds (inherited, received, or reopened through
/// `/proc/self/fd`) is no file of anyone's to protect. Named pipes and
/// sockets on a filesystem are on that filesystem's device, and decided.
#[inline(always)]
pub fn is_pipe_or_socket(off: &KernelOffsets, dev: u64) -> bool {
    dev != 0 && (dev == u64::from(off.pipe_dev) || dev == u64::from(off.sock_dev))
}

/// Whether `dev` is the kernel's internal shmem mount, where memfds and
/// System V shared memory live: memory, not a file anyone named.
#[inline(always)]
pub fn is_internal_shm(off: &KernelOffsets, dev: u64) -> bool {
    dev != 0 && dev == u64::from(off.shm_dev)
}

/// The task a `struct pid` names (its `PIDTYPE_PID` task), null once that
/// task is gone.
#[inline(always)]
pub fn pid_task(off: &KernelOffsets, pid: *const u8) -> Result<*const u8, ReadFailed> {
    // `tasks[PIDTYPE_PID].first` points into the task's `pid_links[0]`.
    let link: *const u8 = read(pid, off.pid_tasks)?;
    if link.is_null() {
        return Ok(core::ptr::null());
    }
    Ok(link.wrapping_sub(off.task_struct_pid_links as usize))
}

/// The inode's generation (`i_generation`), which tells a reused inode
/// number from the object that had it before.
#[inline(always)]
pub fn generation(off: &KernelOffsets, inode: *const u8) -> Result<u32, ReadFailed> {
    read(inode, off.inode_i_generation)
}

/// The file type bits of an inode's mode (`i_mode & S_IFMT`).
#[inline(always)]
pub fn file_kind(off: &KernelOffsets, inode: *const u8) -> Result<u32, ReadFailed> {
    let mode: u16 = read(inode, off.inode_i_mode)?;
    Ok(u32::from(mode) & pincer_common::file_type::MASK)
}

/// The [`pincer_common::policy_name_hash`] of a dentry's name, or zero
/// for a name too long to be a policy name (which then matches none).
/// `buf` is room to read the name into (out of the BPF stack).
#[inline(always)]
pub fn name_hash(
    off: &KernelOffsets,
    dentry: *const u8,
    buf: &mut [u8; pincer_common::POLICY_NAME_BUF],
) -> Result<u64, ReadFailed> {
    let name = self::name(off, dentry)?;
    // Cleared word by word: a plain `*buf = [0; N]` becomes a call of
    // `memset`, a function of its own whose frame the verifier adds to
    // the callback's (6.1 refuses the sum past 512 bytes).
    let words = buf.as_mut_ptr().cast::<[u8; 8]>();
    for i in 0..pincer_common::POLICY_NAME_BUF / 8 {
        // SAFETY: `buf` holds `POLICY_NAME_BUF` bytes, a multiple of 8.
        unsafe { core::ptr::write_volatile(words.add(i), [0; 8]) };
    }
    let len = unsafe { aya_ebpf::helpers::bpf_probe_read_kernel_str_bytes(name, buf) }
        .map_err(|_| ReadFailed)?
        .len();
    if len > pincer_common::MAX_POLICY_NAME {
        return Ok(0);
    }
    Ok(pincer_common::policy_name_hash(buf))
}
