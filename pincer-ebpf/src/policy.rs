//! Policy places: where a change stops being the agent's work and becomes
//! the owner's to allow.
//!
//! A change to an object (or the making of a new name) looks up from the
//! object towards the root of its filesystem, one path component at a
//! time: the object's own name, then each directory it is in. Each
//! component's name is matched, by its first bytes and (for the object
//! itself) its last ones, against the rules userspace wrote
//! ([`POLICY_NAMES`], [`POLICY_SUFFIXES`]); a rule in a directory of a
//! given name (`.git` / `config`) wins over the name's own. The nearest
//! component a rule protects is the **policy place**: tree grants from
//! there up give no change operation ([`crate::decide`]).
//!
//! | the component is                                          | effect                                   |
//! |-----------------------------------------------------------|------------------------------------------|
//! | the object, and its rule protects an `object` (or `new` name) | a place at the object                    |
//! | a directory above, and its rule protects a `tree`         | a place there (grants on it are inside)  |
//! | a directory labelled a policy tree                        | a place there                            |
//! | a `work` name                                             | places met below it do not hold; for a directory's rule, neither does that directory's tree rule |
//! | in a directory an agent made                              | the walk stops: what lies below is the agent's, but for `anywhere` rules |
//! | an `unlifted` rule's                                      | a place that no work name lifts          |
//! | an `anywhere` rule's                                      | a place that no work name lifts, in the agent's own places too |
//! | a new name of a `redirect` rule made as no directory       | a place, anywhere                        |
//!
//! Beside the names, two rules keep a person's directories where the
//! person's tools look for them ([`forced`]): a directory of the agent's
//! may not replace one of the person's (a rename over it, or an exchange),
//! and once an agent moved a person's directory away, a link or a moved
//! directory may not take its name; a directory the agent makes there is
//! the person's place, not the agent's own.

use aya_ebpf::{
    cty::c_void,
    helpers::bpf_loop,
    maps::{PerCpuArray, lpm_trie::Key},
};
use pincer_common::{
    MAX_TREE_DEPTH, POLICY_NAME_BUF, POLICY_NAME_LEN, POLICY_SUFFIX_LEN, PolicyNameKey,
    PolicySuffixKey, VacatedKey, file_type, hook, label_flags, ops, policy_entry, policy_rule,
};

use crate::{
    access::Access,
    kernel::{self, ReadFailed},
    labels,
    maps::{POLICY_NAMES, POLICY_SUFFIXES, VACATED},
};

/// A change's policy place, or none (`mask_from` zero).
#[derive(Clone, Copy, Default)]
#[repr(C)]
pub struct Place {
    /// The step of the grants' walk from which tree grants give no change
    /// operation (1 looks at the object's directory); zero for none.
    pub mask_from: u32,
    /// The rule's entry (`1..`, or one of `policy_entry`).
    pub entry: u32,
    /// The path component it met (1: the object itself).
    pub step: u32,
    /// The rule's bits (`policy_rule`).
    pub bits: u32,
}

impl Place {
    /// No place.
    pub const NONE: Place = Place {
        mask_from: 0,
        entry: policy_entry::NONE,
        step: 0,
        bits: 0,
    };

    /// The object itself, by its label or by one of [`forced`]'s rules.
    #[inline(always)]
    pub const fn at_object(entry: u32) -> Place {
        Place {
            mask_from: 1,
            entry,
            step: 1,
            bits: policy_rule::OBJECT,
        }
    }

    /// Whether there is one.
    #[inline(always)]
    pub fn found(&self) -> bool {
        self.mask_from != 0
    }
}

/// Where the search stands.
const WALKING: u32 = 0;
/// Done: the root, or a directory an agent made.
const DONE: u32 = 1;
/// A kernel read failed.
const READ_FAILED: u32 = 2;

/// The bits of a key that a lookup compares: all of them.
const NAME_BITS: u32 = (POLICY_NAME_LEN * 8) as u32;
/// Likewise for a suffix.
const SUFFIX_BITS: u32 = (POLICY_SUFFIX_LEN * 8) as u32;

/// An LPM trie key as the kernel reads it: the bits to compare, then the
/// data (the layout of `aya_ebpf::maps::lpm_trie::Key`, without its
/// packing, so its fields can be written in place).
#[repr(C)]
struct TrieKey<const N: usize> {
    prefix_len: u32,
    data: [u8; N],
}

/// The state of the search for a policy place, per CPU while `bpf_loop`
/// runs [`policy_step`] (searches run one at a time on a CPU).
#[repr(C)]
pub struct PolicyWalk {
    /// The component the next step looks at.
    dentry: u64,
    /// What of the object itself a rule must protect: `OBJECT` for an
    /// existing one, `NEW` for a new name.
    own: u32,
    /// The hook of the access.
    hook: u32,
    /// [`WALKING`], [`DONE`] or [`READ_FAILED`].
    state: u32,
    /// Non-zero when the last component was a work name by its directory's
    /// rule: that directory's tree rule does not hold for it.
    skip_tree: u32,
    /// Non-zero when the component the next step looks at is labelled a
    /// policy tree.
    tree_label: u32,
    /// Explicit padding.
    _pad: u32,
    /// The nearest place that a work name above it lifts.
    near: Place,
    /// The nearest place of an `unlifted` rule.
    firm: Place,
    /// The nearest place of an `anywhere` rule or a label.
    anywhere: Place,
    /// What the last search found ([`place`]), or what the caller set in
    /// its stead ([`set`]).
    result: Place,
    /// The key the component's name is looked up by (its first bytes).
    name_key: TrieKey<POLICY_NAME_LEN>,
    /// The key the object's own name is looked up by (its last bytes).
    suffix_key: TrieKey<POLICY_SUFFIX_LEN>,
    /// Room to read the directory's name into.
    parent: [u8; POLICY_NAME_BUF],
}

crate::maps::declare_maps! {
    /// Room for one search, per CPU.
    static POLICY_WALK: PerCpuArray<PolicyWalk> = PerCpuArray::with_max_entries(1, 0);
}

/// Sets what [`result`] answers without a search: a place at the object
/// by `entry` (its label), or none (`entry` zero).
#[inline(always)]
pub fn set(entry: u32) -> Result<(), ReadFailed> {
    crate::maps::room(&POLICY_WALK)?.result = if entry == policy_entry::NONE {
        Place::NONE
    } else {
        Place::at_object(entry)
    };
    Ok(())
}

/// Copies what the last search found (or [`set`] said) into `to`: map
/// memory to map memory, field by field (a whole copy between two maps
/// becomes a call of `memmove`, a frame of its own on the BPF stack).
#[inline(always)]
pub fn result(to: &mut Place) -> Result<(), ReadFailed> {
    let from = &crate::maps::room(&POLICY_WALK)?.result;
    // SAFETY: plain values in per-CPU entries.
    unsafe {
        core::ptr::write_volatile(&mut to.mask_from, core::ptr::read_volatile(&from.mask_from));
        core::ptr::write_volatile(&mut to.entry, core::ptr::read_volatile(&from.entry));
        core::ptr::write_volatile(&mut to.step, core::ptr::read_volatile(&from.step));
        core::ptr::write_volatile(&mut to.bits, core::ptr::read_volatile(&from.bits));
    }
    Ok(())
}

/// Finds the policy place of a change to the object (or new name) of
/// `access`, whose dentry is `dentry`; returns the step of the grants'
/// walk from which tree grants give no change (zero for none), and keeps
/// the rest for [`result`]. The place stays in per-CPU memory: the hooks'
/// callbacks share the 512-byte BPF stack.
#[inline(always)]
pub fn place(dentry: *const u8, access: &Access) -> Result<u32, ReadFailed> {
    let off = kernel::off();
    let walk = crate::maps::room(&POLICY_WALK)?;
    walk.dentry = dentry as u64;
    walk.own = if access.exists {
        policy_rule::OBJECT
    } else {
        policy_rule::NEW
    };
    walk.hook = access.hook;
    walk.state = WALKING;
    walk.skip_tree = 0;
    walk.tree_label = 0;
    walk.near = Place::NONE;
    walk.firm = Place::NONE;
    walk.anywhere = Place::NONE;
    walk.result = Place::NONE;
    // The object's own name: its first bytes, and its last ones.
    kernel::name_hash(off, dentry, &mut walk.parent)?;
    copy_name(walk);
    walk.suffix_key.prefix_len = SUFFIX_BITS;
    walk.suffix_key.data = tail(off, dentry, &walk.parent)?;
    let ran = unsafe {
        bpf_loop(
            MAX_TREE_DEPTH,
            policy_step as *mut c_void,
            core::ptr::null_mut(),
            0,
        )
    };
    if ran < 0 || walk.state == READ_FAILED {
        return Err(ReadFailed);
    }
    walk.result = nearest(&walk.near, &walk.firm);
    walk.result = nearest(&walk.result, &walk.anywhere);
    Ok(walk.result.mask_from)
}

/// The nearer of two places (the one that takes more from the grants).
#[inline(always)]
fn nearest(one: &Place, other: &Place) -> Place {
    if one.found() && (!other.found() || one.mask_from <= other.mask_from) {
        *one
    } else {
        *other
    }
}

/// Puts the name read into the walk's `parent` room into the name key.
#[inline(always)]
fn copy_name(walk: &mut PolicyWalk) {
    walk.name_key.prefix_len = NAME_BITS;
    let from = walk.parent.as_ptr().cast::<u64>();
    let to = walk.name_key.data.as_mut_ptr().cast::<u64>();
    for i in 0..POLICY_NAME_LEN / 8 {
        // SAFETY: both are arrays of at least `POLICY_NAME_LEN` bytes.
        unsafe { to.add(i).write_unaligned(from.add(i).read_unaligned()) };
    }
}

/// A name's last bytes, last first, zero-padded past the start of a
/// shorter name; `first` holds its first bytes, zero-padded.
#[inline(always)]
fn tail(
    off: &pincer_common::KernelOffsets,
    dentry: *const u8,
    first: &[u8; POLICY_NAME_BUF],
) -> Result<[u8; POLICY_SUFFIX_LEN], ReadFailed> {
    let len: u32 = kernel::read(dentry, off.dentry_d_name_len)?;
    let word = if len as usize >= POLICY_SUFFIX_LEN {
        let name = kernel::name(off, dentry)?;
        let end = name.wrapping_add(len as usize - POLICY_SUFFIX_LEN);
        u64::from_le_bytes(kernel::read::<[u8; POLICY_SUFFIX_LEN]>(end, 0)?)
    } else {
        // The whole name is in `first`, then zeros: shifted up, its last
        // byte is the word's highest, which the swap puts first.
        // SAFETY: `first` has at least 8 bytes.
        let start = u64::from_le_bytes(unsafe { first.as_ptr().cast::<[u8; 8]>().read() });
        let shift = ((POLICY_SUFFIX_LEN as u32).saturating_sub(len) & 7) * 8;
        start << shift
    };
    Ok(word.swap_bytes().to_le_bytes())
}

/// One step of the search. Returns 1 to stop.
extern "C" fn policy_step(index: u64, _ctx: *mut c_void) -> i64 {
    let Ok(walk) = crate::maps::room(&POLICY_WALK) else {
        return 1;
    };
    match step_at(walk, index as u32 + 1) {
        Ok(true) => 0,
        Ok(false) => {
            walk.state = DONE;
            1
        }
        Err(ReadFailed) => {
            walk.state = READ_FAILED;
            1
        }
    }
}

/// Forgets a place, field by field: a whole store of zeros in map memory
/// becomes a call of `memset`, a frame of its own on the BPF stack.
#[inline(always)]
fn clear(place: &mut Place) {
    // SAFETY: plain values in this CPU's entry.
    unsafe {
        core::ptr::write_volatile(&mut place.mask_from, 0);
        core::ptr::write_volatile(&mut place.entry, 0);
        core::ptr::write_volatile(&mut place.step, 0);
        core::ptr::write_volatile(&mut place.bits, 0);
    }
}

/// Records a place met at `step` in `slot` (the walk's `near`, `firm` or
/// `anywhere`), unless a nearer one was met there.
#[inline(always)]
fn record(slot: &mut Place, step: u32, entry: u32, bits: u32) {
    if !slot.found() {
        *slot = Place {
            mask_from: step,
            entry,
            step,
            bits,
        };
    }
}

/// [`policy_step`] at `step` (1 looks at the object's own name, in its
/// directory): whether to go on.
#[inline(always)]
fn step_at(walk: &mut PolicyWalk, step: u32) -> Result<bool, ReadFailed> {
    let off = kernel::off();
    let child = walk.dentry as *const u8;
    let Some(parent) = kernel::parent(off, child)? else {
        return Ok(false);
    };
    let inode = kernel::dentry_inode(off, parent)?;
    let (dev, ino) = kernel::identity(off, inode)?;
    let flags = labels::flags_of_inode(dev, ino, inode)?;
    let parent_hash = kernel::name_hash(off, parent, &mut walk.parent)?;

    // What the component's name makes of it, in this directory.
    // SAFETY: the key has the layout of the trie's (`TrieKey`).
    let key = unsafe { &*(&raw const walk.name_key).cast::<Key<PolicyNameKey>>() };
    let (mut bits, mut entry, pair, len) = match POLICY_NAMES.get(key) {
        Some(rules) => {
            let (bits, entry, pair) = rules.resolve(parent_hash);
            (bits, entry, pair, rules.len)
        }
        None => (0, 0, false, 0),
    };
    if step == 1 && !pair {
        // The object's own name by its end: a rule in the directory, or
        // one alone whose key is longer than the start's that matched.
        // SAFETY: as above.
        let key = unsafe { &*(&raw const walk.suffix_key).cast::<Key<PolicySuffixKey>>() };
        if let Some(rules) = POLICY_SUFFIXES.get(key) {
            let (by_end, of, in_dir) = rules.resolve(parent_hash);
            if in_dir || (by_end != 0 && rules.len > len) {
                bits = by_end;
                entry = of;
            }
        }
    }
    let want = if step == 1 {
        walk.own
    } else {
        policy_rule::TREE
    };
    let mut matched = bits & want != 0 && (step == 1 || walk.skip_tree == 0);
    if step == 1
        && walk.own == policy_rule::NEW
        && bits & policy_rule::REDIRECT != 0
        && walk.hook != hook::INODE_MKDIR
    {
        record(&mut walk.anywhere, step, entry, bits);
    }
    if matched && bits & policy_rule::ANYWHERE != 0 {
        record(&mut walk.anywhere, step, entry, bits);
        matched = false;
    }
    if walk.tree_label != 0 {
        record(
            &mut walk.anywhere,
            step,
            policy_entry::LABEL,
            policy_rule::TREE,
        );
    }
    if flags & label_flags::AGENT_MADE != 0 {
        // A place an agent made: what lies below is its own, but for the
        // rules that hold anywhere.
        clear(&mut walk.near);
        clear(&mut walk.firm);
        return Ok(false);
    }
    if matched && bits & policy_rule::UNLIFTED != 0 {
        record(&mut walk.firm, step, entry, bits);
        matched = false;
    }
    if bits & policy_rule::WORK != 0 {
        clear(&mut walk.near);
        walk.skip_tree = u32::from(pair);
    } else {
        walk.skip_tree = 0;
        if matched {
            record(&mut walk.near, step, entry, bits);
        }
    }
    let tree = label_flags::POLICY | label_flags::TREE;
    walk.tree_label = u32::from(flags & tree == tree);
    copy_name(walk);
    walk.dentry = parent as u64;
    Ok(true)
}

/// The entry of a rule about a person's directories that makes this access
/// a change to a policy place whatever its names ([`policy_entry::SWAP`],
/// [`policy_entry::VACATED`]), or zero; and whether the access makes a
/// directory where a person's was moved away from, which is then the
/// person's place rather than the agent's own. `label` is the object's.
#[inline(always)]
pub fn forced(access: &Access, label: &pincer_common::Label) -> Result<(u32, bool), ReadFailed> {
    if access.hook == hook::INODE_RENAME && access.exists && access.ops & ops::RENAME == 0 {
        // The name end of a rename, over an existing object.
        if labels::is_agent_made(label) {
            return Ok((0, false));
        }
        let kind = kernel::file_kind(kernel::off(), access.inode)?;
        return Ok((
            if kind == file_type::DIRECTORY {
                policy_entry::SWAP
            } else {
                0
            },
            false,
        ));
    }
    let made = matches!(
        access.hook,
        hook::INODE_MKDIR | hook::INODE_SYMLINK | hook::INODE_RENAME
    );
    if access.exists || !made {
        return Ok((0, false));
    }
    let Some((dir, name_hash)) = access.name_id()? else {
        return Ok((0, false));
    };
    let key = VacatedKey {
        dev: access.dev,
        dir,
        name_hash,
    };
    if unsafe { VACATED.get(key) }.is_none() {
        return Ok((0, false));
    }
    Ok(if access.hook == hook::INODE_MKDIR {
        (0, true)
    } else {
        (policy_entry::VACATED, false)
    })
}

/// After an allowed rename of `object`: when it moved a person's directory
/// away, its old name is remembered ([`forced`]). A failed write is no
/// refusal: the rename happened.
#[inline(always)]
pub fn vacate(object: &Access, label: &pincer_common::Label) {
    if !object.exists || labels::is_agent_made(label) {
        return;
    }
    let Ok(kind) = kernel::file_kind(kernel::off(), object.inode) else {
        return;
    };
    if kind != file_type::DIRECTORY {
        return;
    }
    let Ok(Some((dir, name_hash))) = object.name_id() else {
        return;
    };
    let key = VacatedKey {
        dev: object.dev,
        dir,
        name_hash,
    };
    let _ = VACATED.insert(key, 1, 0);
}
