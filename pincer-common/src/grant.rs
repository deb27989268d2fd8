//! Grants: the keys and values of the maps that say what an agent may do.

use crate::{MAX_PREFIX_LEN, NAME_LEN};

/// Key of an inode grant: an object by identity, for one mission slot.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct GrantKey {
    /// Mission slot of the agent.
    pub slot: u32,
    /// Explicit padding; always zero.
    pub _pad: u32,
    /// Device of the object's filesystem in the kernel's encoding
    /// (`major << 20 | minor`, as in `super_block.s_dev`).
    pub dev: u64,
    /// Inode number.
    pub ino: u64,
}

/// Value of a grant: the operations it allows, by extent.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GrantValue {
    /// Operations allowed on this object itself.
    pub file_ops: u32,
    /// Operations allowed on this object and everything below it.
    pub tree_ops: u32,
}

/// What a walk found for an object: the value of [`crate::names::GRANT_CACHE`],
/// keyed by the object's [`GrantKey`].
///
/// Finding a tree grant walks the object's ancestors; the cache remembers
/// the result so the next open of the same object costs one lookup. An entry
/// is valid only while its `epoch` equals [`crate::names::EPOCH`], which is bumped
/// whenever the answer could change: userspace bumps it after removing
/// grants, and the programs bump it on every rename and hard link, which
/// change ancestry. Only granted operations are cached, never refusals, so a
/// new grant needs no invalidation.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CachedGrant {
    /// Operations the grants gave (a lower bound: walks stop early).
    pub ops: u32,
    /// Explicit padding; always zero.
    pub _pad: u32,
    /// The epoch the walk started in.
    pub epoch: u64,
}

/// The data of a prefix grant's key in the longest-prefix-match trie
/// [`crate::names::PREFIXES`]: a directory of a mission slot and the first bytes
/// of the names the grant covers, so that an agent may create and use the
/// temporary files a program names after one file (`.claude.json.tmp.*`)
/// without being granted the whole directory. A grant of `n` bytes matches
/// on [`PREFIX_HEADER_BITS`] + 8·`n` bits; a lookup is made with the name's
/// first [`MAX_PREFIX_LEN`] bytes (fewer for a shorter name), so the trie
/// answers with the longest prefix grant the name starts with. Its value
/// carries the ops of the shorter ones too: one lookup answers for all.
///
/// All bytes (native order), so that it has no padding and the trie's key
/// (a `u32` bit count, then this) has one layout on both sides.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PrefixName {
    /// Mission slot of the agent.
    pub slot: [u8; 4],
    /// Device of the directory (kernel encoding).
    pub dev: [u8; 8],
    /// Inode of the directory.
    pub ino: [u8; 8],
    /// The prefix (or, to look up, the name's first bytes), zero-padded.
    pub name: [u8; MAX_PREFIX_LEN + 1],
}

/// Bits of [`PrefixName`] before its name: slot, device and inode.
pub const PREFIX_HEADER_BITS: u32 = 8 * (4 + 8 + 8);

impl PrefixName {
    /// The key data of a prefix grant (or a lookup) in a directory.
    pub fn new(slot: u32, dev: u64, ino: u64, prefix: &[u8]) -> Self {
        let mut name = [0; MAX_PREFIX_LEN + 1];
        let len = prefix.len().min(MAX_PREFIX_LEN);
        name[..len].copy_from_slice(&prefix[..len]);
        Self {
            slot: slot.to_ne_bytes(),
            dev: dev.to_ne_bytes(),
            ino: ino.to_ne_bytes(),
            name,
        }
    }

    /// The trie's bit count for a prefix of `len` bytes.
    pub const fn bits(len: usize) -> u32 {
        PREFIX_HEADER_BITS + 8 * len as u32
    }
}

/// Key of a name grant: a file that did not exist when the mission was
/// loaded, named by its parent directory's identity and its name.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NameGrantKey {
    /// Mission slot of the agent.
    pub slot: u32,
    /// Length of `name` without its NUL.
    pub name_len: u32,
    /// Device of the parent directory (kernel encoding).
    pub parent_dev: u64,
    /// Inode of the parent directory.
    pub parent_ino: u64,
    /// The name, NUL-terminated and zero-padded.
    pub name: [u8; NAME_LEN],
}

impl NameGrantKey {
    /// An all-zero key.
    pub const fn zeroed() -> Self {
        Self {
            slot: 0,
            name_len: 0,
            parent_dev: 0,
            parent_ino: 0,
            name: [0; NAME_LEN],
        }
    }
}
