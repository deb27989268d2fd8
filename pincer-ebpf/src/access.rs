//! What a hook asks for: the object, identified by (device, inode), and the
//! operations the access needs on it. The hooks build an [`Access`] with the
//! constructors here from their arguments; [`crate::decide`] checks it
//! against the grants.
//!
//! Every constructor first checks that the loader set the kernel offsets,
//! and sets every field on every path: the verifier refuses reads of
//! registers the compiler left unset.

use aya_ebpf::helpers::bpf_probe_read_kernel_str_bytes;
use pincer_common::{NAME_LEN, NameGrantKey, attr, fmode, ops};

use crate::{
    kernel::{self, Failure, ReadFailed},
    maps::SCRATCH,
};

/// An access to decide.
#[derive(Clone, Copy)]
pub struct Access {
    /// One of `pincer_common::hook`.
    pub hook: u32,
    /// Operations needed.
    pub ops: u32,
    /// Device of the object (for a creation: of its directory).
    pub dev: u64,
    /// Inode of the object (for a creation: of its directory).
    pub ino: u64,
    /// The object's dentry (for a creation: the new, still negative, one);
    /// null for an open until [`Access::dentry`] reads it from `file`, as
    /// only the slower paths need it.
    pub dentry: *const u8,
    /// The opened file (null unless the access is to an open file).
    pub file: *const u8,
    /// The object's inode (null for a creation).
    pub inode: *const u8,
    /// Whether the object exists (it does not yet for a creation).
    pub exists: bool,
}

impl Access {
    /// An access that could not be identified: every field defined, so no
    /// path through the program copies a register the compiler left unset.
    #[inline(always)]
    pub fn unidentified() -> Access {
        Access {
            hook: 0,
            ops: 0,
            dev: 0,
            ino: 0,
            dentry: core::ptr::null(),
            file: core::ptr::null(),
            inode: core::ptr::null(),
            exists: false,
        }
    }

    /// An access to an open file, needing what `ops` makes of its `f_mode`
    /// and `f_flags` (one of the `for_*` functions below).
    #[inline(always)]
    pub fn opened(
        hook: u32,
        file: *const u8,
        ops: impl FnOnce(u32, u32) -> u32,
    ) -> Result<Access, Failure> {
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
            inode,
            exists: true,
        })
    }

    /// An access needing `ops` on the existing object named by `dentry`.
    #[inline(always)]
    pub fn existing(hook: u32, ops: u32, dentry: *const u8) -> Result<Access, Failure> {
        kernel::loaded()?;
        let off = kernel::off();
        let inode = kernel::dentry_inode(off, dentry)?;
        let identity = kernel::identity(off, inode)?;
        Ok(Access::named(hook, ops, identity, dentry, inode))
    }

    /// An access needing `ops` to make the new name (the negative dentry
    /// `name`) in `dir`.
    #[inline(always)]
    pub fn new_name(
        hook: u32,
        ops: u32,
        dir: *const u8,
        name: *const u8,
    ) -> Result<Access, Failure> {
        kernel::loaded()?;
        let identity = kernel::identity(kernel::off(), dir)?;
        Ok(Access::named(hook, ops, identity, name, core::ptr::null()))
    }

    /// The destination end of a rename: `create` for a new name in
    /// `new_dir`, or `delete` of the object it replaces. One constructor for
    /// both keeps every field defined on every path.
    #[inline(always)]
    pub fn rename_target(
        hook: u32,
        new_dir: *const u8,
        new_dentry: *const u8,
    ) -> Result<Access, Failure> {
        kernel::loaded()?;
        let off = kernel::off();
        let replaced = kernel::dentry_inode(off, new_dentry)?;
        let exists = !replaced.is_null();
        let identity = kernel::identity(off, if exists { replaced } else { new_dir })?;
        let ops = if exists { ops::DELETE } else { ops::CREATE };
        Ok(Access::named(hook, ops, identity, new_dentry, replaced))
    }

    /// An access to the object named by `dentry` (whose inode is `inode`), or
    /// to the name itself when the object does not exist (`inode` is null;
    /// then `identity` is its directory's).
    #[inline(always)]
    fn named(
        hook: u32,
        ops: u32,
        identity: (u64, u64),
        dentry: *const u8,
        inode: *const u8,
    ) -> Access {
        let (dev, ino) = identity;
        Access {
            hook,
            ops,
            dev,
            ino,
            dentry,
            file: core::ptr::null(),
            inode,
            exists: !inode.is_null(),
        }
    }

    /// The object's dentry.
    #[inline(always)]
    pub fn dentry(&self) -> Result<*const u8, ReadFailed> {
        if self.dentry.is_null() {
            kernel::read(self.file, kernel::off().file_f_path_dentry)
        } else {
            Ok(self.dentry)
        }
    }

    /// Fills the per-CPU scratch key with (slot, directory, name) of the
    /// object; `None` for an object with no parent.
    #[inline(always)]
    pub fn name_key(&self, slot: u32) -> Result<Option<&'static mut NameGrantKey>, ReadFailed> {
        let off = kernel::off();
        let Ok(key) = crate::maps::room(&SCRATCH) else {
            return Ok(None);
        };
        let dentry = self.dentry()?;
        let Some(parent) = kernel::parent(off, dentry)? else {
            return Ok(None);
        };
        key.slot = slot;
        key.parent_dev = self.dev;
        key.parent_ino = if self.exists {
            kernel::dentry_ino(off, parent)?
        } else {
            self.ino
        };
        // Keys compare whole: clear what an earlier, longer name left behind.
        let words = key.name.as_mut_ptr().cast::<u64>();
        for i in 0..NAME_LEN / 8 {
            unsafe { words.add(i).write_unaligned(0) };
        }
        let name = kernel::name(off, dentry)?;
        let len = unsafe { bpf_probe_read_kernel_str_bytes(name, &mut key.name) }
            .map_err(|_| ReadFailed)?
            .len();
        key.name_len = len as u32;
        Ok(Some(key))
    }

    /// The object's name by its directory's inode and a hash (FNV-1a by
    /// words) of the name; `None` for an object with no parent. A verdict
    /// for one new name is never spent on another in the same directory
    /// (`Pending::name_hash`), and a name a person's directory left is
    /// found again by it.
    #[inline(always)]
    pub fn name_id(&self) -> Result<Option<(u64, u64)>, ReadFailed> {
        // The slot is no part of the name; any value fills the key.
        let Some(key) = self.name_key(0)? else {
            return Ok(None);
        };
        // FNV-1a over the zero-padded name in 8-byte words, with no exit
        // that depends on the data: the verifier then walks the loop once
        // per iteration instead of once per possible name length. Each
        // word is read from the map in place: a plain read lets the
        // compiler copy the whole name onto the small BPF stack first.
        let words = key.name.as_ptr().cast::<u64>();
        let mut hash = 0xcbf2_9ce4_8422_2325u64;
        for i in 0..NAME_LEN / 8 {
            // SAFETY: the name is 8-aligned in its key (after three 8-byte
            // fields) and `NAME_LEN` bytes long.
            hash ^= unsafe { core::ptr::read_volatile(words.add(i)) };
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
        Ok(Some((key.parent_ino, hash)))
    }
}

/// The operations an open with `f_mode` and `f_flags` asks for
/// (`file_open`).
#[inline(always)]
pub fn for_open(f_mode: u32, f_flags: u32) -> u32 {
    if f_mode & fmode::CREATED != 0 {
        return 0;
    }
    if f_flags & fmode::EXEC != 0 {
        return ops::EXEC;
    }
    // An open with neither mode (`O_WRONLY|O_RDWR`, ioctl-only) still hands
    // out a descriptor to the object: treat it as a read.
    for_mode(f_mode)
}

/// The operations a descriptor with `f_mode` gives (read when it gives
/// neither, as for `O_PATH`: it still names the object).
#[inline(always)]
pub fn for_mode(f_mode: u32) -> u32 {
    let mut need = 0;
    if f_mode & fmode::READ != 0 {
        need |= ops::READ;
    }
    if f_mode & fmode::WRITE != 0 {
        need |= ops::WRITE;
    }
    if need == 0 { ops::READ } else { need }
}

/// The operations an executable mapping of a file opened with `f_flags`
/// asks for (`mmap_file`, `file_mprotect`): `exec`, or nothing for a file
/// the kernel opened for exec, whose open was decided as one.
#[inline(always)]
pub fn for_exec_mapping(_f_mode: u32, f_flags: u32) -> u32 {
    if f_flags & fmode::EXEC != 0 {
        0
    } else {
        ops::EXEC
    }
}

/// The operations a received descriptor asks for (`file_receive`): what it
/// gives, whatever flags it was opened with.
#[inline(always)]
pub fn for_received(f_mode: u32, _f_flags: u32) -> u32 {
    for_mode(f_mode)
}

/// The operations a change of attributes asks for (`inode_setattr`): what
/// its `ia_valid` bits change ([`attr::needs`]); zero for the truncation of
/// `open(O_TRUNC)` and the kernel's own dropping of set-id bits and file
/// capabilities.
#[inline(always)]
pub fn for_setattr(valid: u32) -> u32 {
    attr::needs(valid)
}

/// The operations an ioctl that needs `need` ([`pincer_common::ioctl::need`]) asks for on
/// a file opened with `f_mode`: a change of its data (`write`) needs nothing
/// more on the descriptor whose open created the file, which may write it
/// (as [`for_open`] says); a change of its attributes always needs `setattr`.
#[inline(always)]
pub fn for_ioctl(need: u32, f_mode: u32) -> u32 {
    if need == ops::WRITE && f_mode & fmode::CREATED != 0 {
        return 0;
    }
    need
}
