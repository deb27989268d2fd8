// Part of the `decide` module (see the end of `decide.rs`): what the grants
// give on an object (`granted_ops`): the grant cache, and the walk up the
// object's ancestors to a granted tree, which also looks for a policy place
// on the way.

/// What the grants give on an access. The policy place met, if any, is
/// the policy search's ([`policy::result`]).
#[derive(Clone, Copy)]
struct Found {
    /// The operations.
    granted: u32,
    /// Whether a policy place was met before they covered the access.
    barrier: bool,
    /// The access makes a directory where a person's was moved away from.
    vacated: bool,
    /// Change operations tree grants above the policy place would have
    /// given.
    masked: u32,
}

impl Found {
    /// Nothing granted, no place.
    const NOTHING: Found = Found {
        granted: 0,
        barrier: false,
        vacated: false,
        masked: 0,
    };
}

/// Where the search for a policy place stands in a walk.
mod search {
    /// Not searched: the access changes nothing, or changes an object an
    /// agent made (the agent's own place).
    pub const NONE: u32 = 0;
    /// Looking at each component's name and label.
    pub const ON: u32 = 1;
    /// Met: the object is labelled policy; changes are taken from no grant
    /// further up.
    pub const MET: u32 = 2;
}

/// The operations the agent's grants give on the accessed object, from the
/// grant cache when an earlier walk already found them. `label` is the
/// object's own.
///
/// A walk for an access that changes nothing does not look for policy
/// places, so what it caches leaves out the change operations; a walk for a
/// change looks, and caches what it found. A policy object by its own label
/// is never answered from the cache (its entry may predate the label).
#[inline(always)]
fn granted_ops(slot: u32, access: &Access, label: &Label) -> Result<Found, ReadFailed> {
    // Removing a directory is not a change to a policy object: the kernel
    // removes only an empty one, and what a policy directory held is
    // protected itself (git tries `rmdir .git` as it tidies up after a
    // stash, which only fails as `ENOTEMPTY`). It is cached as a read is,
    // so no other change takes what its walk found.
    let change = access.ops & CHANGE_OPS != 0 && access.hook != hook::INODE_RMDIR;
    let search = if !change || labels::is_agent_made(label) {
        search::NONE
    } else if labels::is_policy(label) {
        search::MET
    } else {
        search::ON
    };
    let key = GrantKey {
        slot,
        _pad: 0,
        dev: access.dev,
        ino: access.ino,
    };
    // No place until a walk finds one.
    policy::set(policy_entry::NONE)?;
    // Read before the walk: an invalidation that lands during the walk makes
    // what it finds stale, and the entry written with this epoch says so.
    // New names are not cached: their key is their directory's.
    let epoch = epoch();
    let cached = match unsafe { GRANT_CACHE.get(key) } {
        Some(entry) if access.exists && entry.epoch == epoch && search != search::MET => entry.ops,
        _ => 0,
    };
    if access.exists && cached & access.ops == access.ops {
        return Ok(Found {
            granted: cached,
            ..Found::NOTHING
        });
    }
    let found = walk_grants(slot, access, search)?;
    if access.exists && found.granted != 0 {
        let ops = if change {
            found.granted
        } else {
            found.granted & !CHANGE_OPS
        };
        let entry = CachedGrant {
            ops: ops | cached,
            _pad: 0,
            epoch,
        };
        // A full cache evicts its least recently used entry; a failed insert
        // only costs a walk next time.
        let _ = GRANT_CACHE.insert(key, entry, 0);
    }
    Ok(Found {
        granted: found.granted | cached,
        ..found
    })
}

/// The operations the agent's grants give on the accessed object: its own
/// inode grant, tree grants on its ancestors, and a name grant on its name in
/// its directory. Stops looking as soon as every needed operation is covered.
///
/// With `search` on, it first finds the object's policy place
/// ([`policy::place`]): tree grants from there up give no change operation.
#[inline(always)]
fn walk_grants(slot: u32, access: &Access, search: u32) -> Result<Found, ReadFailed> {
    let needed = access.ops;
    let key = GrantKey {
        slot,
        _pad: 0,
        dev: access.dev,
        ino: access.ino,
    };
    let dentry = access.dentry()?;
    let mask_from = match search {
        search::ON => policy::place(dentry, access)?,
        search::MET => {
            policy::set(policy_entry::LABEL)?;
            1
        }
        _ => 0,
    };
    let barrier = mask_from != 0;
    let mut granted = 0;
    if access.exists
        && let Some(grant) = unsafe { GRANTS.get(key) }
    {
        granted |= grant.file_ops | grant.tree_ops;
    }
    if granted & needed == needed {
        return Ok(Found {
            granted,
            barrier,
            vacated: false,
            masked: 0,
        });
    }

    // Tree grants above the object (for a creation, from the directory it
    // happens in). Walking dentries keeps to one filesystem, so the device
    // stays the same; a tree grant does not reach across mount points and
    // bind mounts do not alias into a granted tree.
    let walk = crate::maps::room(&WALKS)?;
    *walk = TreeWalk {
        key,
        dentry: dentry as u64,
        granted,
        needed,
        state: WALKING,
        mask_from,
        masked: 0,
    };
    let ran = unsafe {
        bpf_loop(
            MAX_TREE_DEPTH,
            tree_step as *mut c_void,
            core::ptr::null_mut(),
            0,
        )
    };
    match walk.state {
        _ if ran < 0 => return Err(ReadFailed),
        COVERED => {
            return Ok(Found {
                granted: walk.granted,
                barrier,
                vacated: false,
                masked: walk.masked,
            });
        }
        READ_FAILED => return Err(ReadFailed),
        WALKING => count(counter::WALK_LIMIT),
        _ => {}
    }
    Ok(Found {
        granted: name_granted(slot, access, walk.granted)?,
        barrier,
        vacated: false,
        masked: walk.masked,
    })
}

/// Where a tree walk stands.
const WALKING: u32 = 0;
/// Every needed operation is granted.
const COVERED: u32 = 1;
/// The root of the filesystem was reached.
const ROOT: u32 = 2;
/// A kernel read failed.
const READ_FAILED: u32 = 3;

crate::maps::declare_maps! {
    /// Room for the grants' walk of one check, per CPU rather than on the BPF
    /// stack (which the program and its nested callbacks share). Checks run one
    /// after the other.
    static WALKS: PerCpuArray<TreeWalk> = PerCpuArray::with_max_entries(1, 0);
}

/// The state of a tree walk, in [`WALKS`] while `bpf_loop` runs
/// [`tree_step`].
#[repr(C)]
struct TreeWalk {
    /// The slot and device of the grants looked up; `ino` is set per step.
    key: GrantKey,
    /// The dentry whose parent the next step looks at.
    dentry: u64,
    /// Tree operations granted so far.
    granted: u32,
    /// What the access needs.
    needed: u32,
    /// [`WALKING`], [`COVERED`], [`ROOT`] or [`READ_FAILED`].
    state: u32,
    /// The step from which tree grants give no change operation (the
    /// object's policy place; step 1 looks at the object's parent); zero
    /// when it has none.
    mask_from: u32,
    /// The change operations tree grants gave from `mask_from` up, which
    /// the policy place took away.
    masked: u32,
}

/// One step of the tree walk: looks up a tree grant on the parent of
/// `walk.dentry` and moves up to it. Returns 1 to stop.
///
/// The walk runs under `bpf_loop`, whose callback the verifier checks once,
/// so the walk can follow a path as deep as a path can be
/// ([`MAX_TREE_DEPTH`]) without making the programs slower to load; each
/// step costs two kernel reads and a hash lookup, and only the first access
/// to an object walks (the grant cache answers the next).
extern "C" fn tree_step(index: u64, _ctx: *mut c_void) -> i64 {
    let Ok(walk) = crate::maps::room(&WALKS) else {
        return 1;
    };
    let off = kernel::off();
    let parent = match kernel::parent(off, walk.dentry as *const u8) {
        Ok(Some(parent)) => parent,
        Ok(None) => {
            walk.state = ROOT;
            return 1;
        }
        Err(ReadFailed) => {
            walk.state = READ_FAILED;
            return 1;
        }
    };
    let Ok(ino) = kernel::dentry_ino(off, parent) else {
        walk.state = READ_FAILED;
        return 1;
    };
    walk.key.ino = ino;
    if let Some(grant) = unsafe { GRANTS.get(walk.key) } {
        // The step from the loop's index, not a counter in `walk`: a
        // counter the verifier sees as a new constant at each call would
        // have it check the callback again for every step.
        let step = index + 1;
        let masked = if walk.mask_from != 0 && step >= u64::from(walk.mask_from) {
            CHANGE_OPS
        } else {
            0
        };
        walk.granted |= grant.tree_ops & !masked;
        walk.masked |= grant.tree_ops & masked;
        if walk.granted & walk.needed == walk.needed {
            walk.state = COVERED;
            return 1;
        }
    }
    walk.dentry = parent as u64;
    0
}

/// Adds the ops of a name grant on (directory, name) of the object, and of
/// the prefix grants in its directory whose prefix its name starts with.
///
/// Two lookups and no loop: the prefix grants sit in a longest-prefix-match
/// trie whose entries carry the ops of the shorter prefixes too. (A loop
/// over prefix lengths under `bpf_loop`, verified once per path into it,
/// took the two-ended hooks past the 6.1 verifier's million instructions.)
#[inline(always)]
fn name_granted(slot: u32, access: &Access, granted: u32) -> Result<u32, ReadFailed> {
    let Some(key) = access.name_key(slot)? else {
        return Ok(granted);
    };
    #[expect(
        clippy::needless_borrows_for_generic_args,
        reason = "by value would copy the 280-byte key onto the 512-byte BPF stack"
    )]
    let grant = unsafe { NAME_GRANTS.get(&*key) };
    let granted = match grant {
        Some(grant) => granted | grant.file_ops,
        None => granted,
    };
    let Some(prefix) = PREFIX_SCRATCH.get_ptr_mut(0) else {
        return Ok(granted);
    };
    // SAFETY: per-CPU scratch, used by one program at a time on this CPU.
    let prefix = unsafe { &mut *prefix };
    prefix.data.slot = key.slot.to_ne_bytes();
    prefix.data.dev = key.parent_dev.to_ne_bytes();
    prefix.data.ino = key.parent_ino.to_ne_bytes();
    // The name's first bytes, word by word with no exit that depends on
    // the data; beyond the name they are zero, and beyond the bit count
    // the trie does not look.
    let from = key.name.as_ptr().cast::<u64>();
    let to = prefix.data.name.as_mut_ptr().cast::<u64>();
    for i in 0..(MAX_PREFIX_LEN + 1) / 8 {
        unsafe { to.add(i).write_unaligned(from.add(i).read_unaligned()) };
    }
    let len = if key.name_len as usize > MAX_PREFIX_LEN {
        MAX_PREFIX_LEN
    } else {
        key.name_len as usize
    };
    prefix.prefix_len = PrefixName::bits(len);
    let grant = PREFIXES.get(&*prefix);
    Ok(match grant {
        Some(grant) => granted | grant.file_ops,
        None => granted,
    })
}
