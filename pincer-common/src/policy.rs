//! Policy objects by name: the rules the programs look names up in.

use crate::ops;

/// Bits of a policy rule ([`PolicyRules`]): what a name makes of an
/// object.
pub mod policy_rule {
    named! {
        /// The rules' words, as `policy.toml` and the documentation write them.
        NAMES;

        /// An existing object of that name: changing, renaming, removing or
        /// linking it needs the owner.
        OBJECT = 1 << 0 => "object";
        /// Making an object of that name needs the owner.
        NEW = 1 << 1 => "new";
        /// Everything below a directory of that name needs the owner to be
        /// changed or made.
        TREE = 1 << 2 => "tree";
        /// The agent's work, not configuration: rules met below a name of this
        /// rule do not hold (what a cache, a dependency tree or a virtual
        /// environment holds is what tools made there), and for a rule in a
        /// directory of a given name, neither does that directory's tree rule
        /// (`.git` / `objects` in a repository's `.git`).
        WORK = 1 << 3 => "work";
        /// Holds in places an agent made too, and no work name lifts it: what
        /// an agent writes never becomes an agent's instructions.
        ANYWHERE = 1 << 4 => "anywhere";
        /// No work name lifts it, though in a place an agent made it does not
        /// hold (a start-up file in a virtual environment of the person's is
        /// still one; in the agent's own, it is the agent's).
        UNLIFTED = 1 << 7 => "unlifted";
        /// A change made by renaming another file over the object, or into its
        /// name (git writes its configuration through `config.lock`), is
        /// parked for the twin to inspect, in enforce mode too.
        INSPECT = 1 << 5 => "inspect";
        /// Made as anything but a directory, an object of that name sends a
        /// tool elsewhere (git's `gitdir:` file): that is policy anywhere.
        REDIRECT = 1 << 6 => "redirect";
    }

    /// Every bit.
    pub const ALL: u32 = crate::text::union(&NAMES);
}

/// What the programs report as a change's policy place beside the rules'
/// own entries (`1..`, the twin's table of them): a label, or a rule of
/// theirs about a person's directories.
pub mod policy_entry {
    /// No policy place.
    pub const NONE: u32 = 0;
    /// The object, or a directory above it, is labelled policy by identity
    /// (a path of the policy set, the target of a policy link).
    pub const LABEL: u32 = u32::MAX;
    /// The name a person's directory was moved away from by an agent: a
    /// link or another directory put there would take its place.
    pub const VACATED: u32 = u32::MAX - 1;
    /// Replacing (or exchanging) a person's directory with another: what
    /// the person's tools read there would be the agent's.
    pub const SWAP: u32 = u32::MAX - 2;
}

/// Operations that change an object or make one, which policy objects take
/// only from the owner (everything but `read` and `exec`).
pub const CHANGE_OPS: u32 =
    ops::WRITE | ops::CREATE | ops::DELETE | ops::RENAME | ops::LINK | ops::SETATTR | ops::MKDIR;

/// Room for a name read by the programs, with its NUL: its first
/// [`POLICY_NAME_LEN`] bytes are what rules match.
pub const POLICY_NAME_BUF: usize = 40;
/// The bytes of a name that policy rules match: a name of up to 31 bytes
/// and its NUL, or the first 32 bytes of a longer one.
pub const POLICY_NAME_LEN: usize = 32;
/// The longest name a rule may match whole (with its NUL, it fills
/// [`POLICY_NAME_LEN`]); a rule on a name's first bytes may be longer
/// than nothing, shorter than this.
pub const MAX_POLICY_NAME: usize = POLICY_NAME_LEN - 1;
/// The longest end of a name a suffix rule matches (`*.pth`).
pub const POLICY_SUFFIX_LEN: usize = 8;
/// Rules in directories of given names, per name ([`PolicyRules::pairs`]).
pub const POLICY_PAIRS: usize = 6;

/// The hash a directory's name is compared by in a [`PolicyPair`]:
/// FNV-1a over the first 32 bytes of the name, zero-padded, by
/// little-endian words, never zero (zero means "no directory"). The
/// programs read a name with its NUL into a zeroed buffer, which pads it
/// the same way.
#[inline(always)]
pub fn policy_name_hash(padded: &[u8; POLICY_NAME_BUF]) -> u64 {
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    let mut i = 0;
    while i < 4 {
        let mut word = [0u8; 8];
        let mut j = 0;
        while j < 8 {
            word[j] = padded[i * 8 + j];
            j += 1;
        }
        hash ^= u64::from_le_bytes(word);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        i += 1;
    }
    hash | 1
}

/// The [`policy_name_hash`] of a name as userspace writes it; `None` for a
/// name longer than [`MAX_POLICY_NAME`] bytes or holding a NUL.
pub fn policy_name_hash_of(name: &[u8]) -> Option<u64> {
    if name.is_empty() || name.len() > MAX_POLICY_NAME || name.contains(&0) {
        return None;
    }
    let mut padded = [0u8; POLICY_NAME_BUF];
    padded[..name.len()].copy_from_slice(name);
    Some(policy_name_hash(&padded))
}

/// Data of a [`crate::names::POLICY_NAMES`] key: a name's first bytes,
/// zero-padded. A short name is followed by its NUL, so a rule whose bytes
/// end with the NUL matches that name only, and one without it every name
/// that starts with its bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PolicyNameKey {
    /// The bytes.
    pub name: [u8; POLICY_NAME_LEN],
}

/// Data of a [`crate::names::POLICY_SUFFIXES`] key: a name's last bytes, last
/// first, zero-padded past the start of a shorter name.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PolicySuffixKey {
    /// The bytes, reversed.
    pub tail: [u8; POLICY_SUFFIX_LEN],
}

/// A rule in a directory of a given name.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PolicyPair {
    /// The directory's [`policy_name_hash`]; zero for an unused slot.
    pub parent: u64,
    /// Bits of [`policy_rule`].
    pub bits: u32,
    /// The rule's entry (`1..`: the twin's table), for reports.
    pub entry: u32,
}

/// What the names a key matches make of an object: the value of
/// [`crate::names::POLICY_NAMES`] and [`crate::names::POLICY_SUFFIXES`]. Userspace gives
/// each key what its shorter prefixes say too, so the longest match is the
/// whole answer. A rule in the object's directory's name wins over the rule
/// of the name alone; of a rule by the name's start and one by its end, a
/// rule in the directory wins, then the one with the longer key.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PolicyRules {
    /// Bits of [`policy_rule`] for the name in any directory.
    pub bits: u32,
    /// That rule's entry (`1..`), or zero.
    pub entry: u32,
    /// The length in bytes of that rule's key: where a rule by a name's
    /// start and one by its end both match alone, the longer wins
    /// (`.a.txt.swp`: `*.swp` over `.*`).
    pub len: u32,
    /// Explicit padding; always zero.
    pub _pad: u32,
    /// Rules for the name in directories of given names.
    pub pairs: [PolicyPair; POLICY_PAIRS],
}

impl PolicyRules {
    /// The rule for the name in a directory whose [`policy_name_hash`] is
    /// `parent` (zero: a name too long to have one): bits, entry, and
    /// whether it is a directory's rule.
    #[inline(always)]
    pub fn resolve(&self, parent: u64) -> (u32, u32, bool) {
        let mut i = 0;
        while i < POLICY_PAIRS {
            let pair = &self.pairs[i];
            if parent != 0 && pair.parent == parent {
                return (pair.bits, pair.entry, true);
            }
            i += 1;
        }
        (self.bits, self.entry, false)
    }
}

/// Key of [`crate::names::VACATED`]: a name in a directory, by the directory's
/// identity and the FNV-1a of the name (as [`crate::Pending::name_hash`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct VacatedKey {
    /// The directory's device (kernel encoding).
    pub dev: u64,
    /// The directory's inode.
    pub dir: u64,
    /// FNV-1a of the name.
    pub name_hash: u64,
}
