//! The decision: do the agent's grants cover this access, and what does the
//! agent's mode make of the answer?
//!
//! | the access                                                         | enforce  | audit          | ask             |
//! |--------------------------------------------------------------------|----------|----------------|-----------------|
//! | granted, or an anonymous pipe or socket                            | allow    | allow          | allow           |
//! | not granted                                                        | `EACCES` | allow + report | park ([`park`]) |
//! | not granted, the syscall cannot restart ([`decide_unrestartable`]) | `EACCES` | allow + report | `EACCES`        |
//! | given by a rule beside the grants ([`decide_with`])                | allow    | allow          | allow           |
//! | refused whatever the grants ([`decide_with`])                      | `EACCES` | allow + report | `EACCES`        |
//! | two ends ([`decide_pair`]), one not granted                        | `EACCES` | allow + report | park that end   |
//! | two ends, neither granted                                          | `EACCES` | allow + report | `EACCES`        |
//! | not identified (no offsets, a read failed)                         | `EACCES` | allow + report | `EACCES`        |
//!
//! A granted access is reported only for agents with `REPORT_ALLOWED`.
//! Every path ends in [`settle`], the one place that counts, parks and
//! reports. A full ring buffer is counted and changes nothing, except that
//! a request nobody would hear of is denied rather than parked.

use pincer_common::{
    Agent, CachedGrant, EACCES, ERESTARTNOINTR, GrantKey, MAX_PREFIX_LEN, MAX_TREE_DEPTH,
    PrefixName, agent_flags, counter, event_flags, mode, verdict,
};

use aya_ebpf::{cty::c_void, helpers::bpf_loop};

use crate::{
    access::Access,
    kernel::{self, Failure, ReadFailed},
    maps::{GRANT_CACHE, GRANTS, NAME_GRANTS, PREFIX_SCRATCH, PREFIXES, count, epoch},
    park, report,
};

/// An access with what the grants give on it.
pub struct Checked {
    /// Operations the grants gave.
    granted: u32,
    /// Whether the access was identified; when not, `access` is
    /// [`Access::unidentified`] and the access is denied.
    identified: bool,
    /// The access.
    access: Access,
}

impl Checked {
    /// Whether the grants cover every operation the access needs.
    #[inline(always)]
    fn covered(&self) -> bool {
        self.identified && self.granted & self.access.ops == self.access.ops
    }

    /// The access, when it was identified.
    #[inline(always)]
    fn access(&self) -> Option<&Access> {
        if self.identified {
            Some(&self.access)
        } else {
            None
        }
    }
}

/// Looks up what the agent's grants give on an access.
#[inline(always)]
pub fn check(agent: &Agent, access: Result<Access, Failure>) -> Checked {
    check_also(agent, access, 0)
}

/// Looks up what the agent's grants give on an access, and adds `also`
/// (operations a rule gives whatever the grants); the grants are not looked
/// up when `also` covers the access.
#[inline(always)]
fn check_also(agent: &Agent, access: Result<Access, Failure>, also: u32) -> Checked {
    let (identified, access) = match access {
        Ok(access) => (true, access),
        Err(Failure::NoOffsets) => {
            count(counter::NO_OFFSETS);
            (false, Access::unidentified())
        }
        Err(Failure::Read) => {
            count(counter::READ_FAILED);
            (false, Access::unidentified())
        }
    };
    let granted = if !identified {
        0
    } else if kernel::is_pipe_or_socket(kernel::off(), access.dev) {
        access.ops
    } else if also & access.ops == access.ops {
        also
    } else {
        match granted_ops(agent.slot, &access) {
            Ok(granted) => granted | also,
            Err(ReadFailed) => {
                count(counter::READ_FAILED);
                also
            }
        }
    };
    Checked {
        granted,
        identified,
        access,
    }
}

/// Decides an agent's access and reports it; returns the hook's verdict.
#[inline(always)]
pub fn decide(agent: &Agent, access: Result<Access, Failure>) -> i32 {
    settle(agent, check(agent, access), 0, 0)
}

/// Decides an access by a rule beside the grants (see [`crate::objects`]):
/// `also` is given besides them, and a non-zero `forced` refuses whatever
/// they give, for the reason of that event flag. One call of [`settle`]
/// for every outcome, so the program holds one copy of it.
#[inline(always)]
pub fn decide_with(agent: &Agent, access: Result<Access, Failure>, also: u32, forced: u32) -> i32 {
    let checked = if forced == 0 {
        check_also(agent, access, also)
    } else {
        unchecked(agent, access, forced)
    };
    settle(agent, checked, forced, forced)
}

/// Like [`decide`] for a hook whose system call cannot be restarted: an
/// ungranted access is denied in ask mode too.
#[inline(always)]
pub fn decide_unrestartable(agent: &Agent, access: Result<Access, Failure>) -> i32 {
    settle(agent, check(agent, access), event_flags::NOT_RESTARTABLE, 0)
}

/// An access refused whatever the grants, for the reason of event flag
/// `why`: nothing is looked up.
#[inline(always)]
fn unchecked(agent: &Agent, access: Result<Access, Failure>, why: u32) -> Checked {
    if why == event_flags::GUARD && agent.mode != mode::AUDIT {
        count(counter::GUARDED);
    }
    let (identified, access) = match access {
        Ok(access) => (true, access),
        Err(_) => (false, Access::unidentified()),
    };
    Checked {
        granted: 0,
        identified,
        access,
    }
}

/// Decides an operation with two ends (a hard link, a rename), allowed only
/// when the grants cover both. In ask mode one end at a time is parked, and
/// only when the other is granted: the restarted syscall then finds the
/// verdict for that end and the grant for the other, so a verdict given once
/// is never asked for again in a loop. Both ends ungranted is denied at once
/// (and only the first is reported).
#[inline(always)]
pub fn decide_pair(
    agent: &Agent,
    first: Result<Access, Failure>,
    second: Result<Access, Failure>,
) -> i32 {
    let first = check(agent, first);
    let second = check(agent, second);
    let (subject, no_park) = match (first.covered(), second.covered()) {
        (true, false) => (second, 0),
        (false, false) => (first, event_flags::BOTH_ENDS),
        _ => (first, 0),
    };
    settle(agent, subject, no_park, 0)
}

/// Applies the agent's mode to a checked access and reports the result.
///
/// `no_park` is the event flag of the reason an ungranted access cannot be
/// parked in ask mode (zero when it can be); `forced` makes the access
/// ungranted whatever the grants, with that flag. Every path reaches the one
/// reporting call at the end: each call site of `report::fill` is a copy of
/// the path walk the verifier checks again, and the programs load faster
/// with one.
#[inline(always)]
fn settle(agent: &Agent, checked: Checked, no_park: u32, forced: u32) -> i32 {
    let covered = checked.covered();
    let granted = checked.granted;
    let access = checked.access();
    let mut parked: Option<(u32, u64, u64)> = None;
    let (ret, verdict, flags) = if forced == 0 && covered {
        count(counter::ALLOWED);
        if agent.flags & agent_flags::REPORT_ALLOWED == 0 {
            return 0;
        }
        (0, verdict::ALLOWED, 0)
    } else if agent.mode == mode::AUDIT {
        count(counter::AUDITED);
        (0, verdict::AUDITED, forced)
    } else if agent.mode == mode::ASK && no_park == 0 && access.is_some() {
        match access.map(park::prepare) {
            Some(park::Prepared::Done(ret)) => return ret,
            Some(park::Prepared::New { tid, id, name_hash }) => {
                parked = Some((tid, id, name_hash));
                (-ERESTARTNOINTR, verdict::PARKED, 0)
            }
            Some(park::Prepared::Deny(why)) => {
                count(counter::DENIED);
                (-EACCES, verdict::DENIED, why)
            }
            None => {
                count(counter::DENIED);
                (-EACCES, verdict::DENIED, 0)
            }
        }
    } else {
        count(counter::DENIED);
        let why = if agent.mode == mode::ASK {
            no_park
        } else {
            forced
        };
        (-EACCES, verdict::DENIED, why | forced)
    };

    let Some(mut event) = report::reserve() else {
        count(counter::RINGBUF_FULL);
        if let Some((tid, _, _)) = parked {
            // A request nobody will hear of cannot wait: deny it.
            park::abandon(tid);
            count(counter::DENIED);
            return -EACCES;
        }
        return ret;
    };
    let (request_id, name_hash) = parked.map_or((0, 0), |(_, id, hash)| (id, hash));
    let outcome = report::Outcome {
        granted,
        verdict,
        flags,
        request_id,
        name_hash,
    };
    report::fill(&mut event, agent, access, outcome);
    if let Some((tid, _, _)) = parked {
        // Stop before the event is visible, so the twin never answers a
        // request whose task is still running.
        if !park::stop() {
            park::abandon(tid);
            count(counter::UNPARKABLE);
            count(counter::DENIED);
            report::mark_denied(&mut event, event_flags::UNPARKABLE);
            event.submit(0);
            return -EACCES;
        }
        count(counter::PARKED);
    }
    event.submit(0);
    ret
}

/// The operations the agent's grants give on the accessed object, from the
/// grant cache when an earlier walk already found them.
#[inline(always)]
fn granted_ops(slot: u32, access: &Access) -> Result<u32, ReadFailed> {
    let key = GrantKey {
        slot,
        _pad: 0,
        dev: access.dev,
        ino: access.ino,
    };
    // Read before the walk: an invalidation that lands during the walk makes
    // what it finds stale, and the entry written with this epoch says so.
    // New names are not cached: their key is their directory's.
    let epoch = epoch();
    let cached = match unsafe { GRANT_CACHE.get(key) } {
        Some(entry) if access.exists && entry.epoch == epoch => entry.ops,
        _ => 0,
    };
    if access.exists && cached & access.ops == access.ops {
        return Ok(cached);
    }
    let granted = walk_grants(slot, access)?;
    if access.exists && granted != 0 {
        let entry = CachedGrant {
            ops: granted | cached,
            _pad: 0,
            epoch,
        };
        // A full cache evicts its least recently used entry; a failed insert
        // only costs a walk next time.
        let _ = GRANT_CACHE.insert(key, entry, 0);
    }
    Ok(granted | cached)
}

/// The operations the agent's grants give on the accessed object: its own
/// inode grant, tree grants on its ancestors, and a name grant on its name in
/// its directory. Stops looking as soon as every needed operation is covered.
#[inline(always)]
fn walk_grants(slot: u32, access: &Access) -> Result<u32, ReadFailed> {
    let needed = access.ops;
    let key = GrantKey {
        slot,
        _pad: 0,
        dev: access.dev,
        ino: access.ino,
    };
    let mut granted = 0;
    if access.exists {
        if let Some(grant) = unsafe { GRANTS.get(key) } {
            granted |= grant.file_ops | grant.tree_ops;
        }
    } else if let Some(grant) = unsafe { GRANTS.get(key) } {
        // A creation: the directory it happens in is the first ancestor.
        granted |= grant.tree_ops;
    }
    if granted & needed == needed {
        return Ok(granted);
    }

    // Tree grants above the object. Walking dentries keeps to one filesystem,
    // so the device stays the same; a tree grant does not reach across mount
    // points and bind mounts do not alias into a granted tree.
    let off = kernel::off();
    let mut dentry = access.dentry()?;
    if !access.exists {
        // The directory was looked up above already.
        match kernel::parent(off, dentry)? {
            Some(parent) => dentry = parent,
            None => return name_granted(slot, access, granted),
        }
    }
    let mut walk = TreeWalk {
        key,
        dentry: dentry as u64,
        granted,
        needed,
        state: WALKING,
    };
    let ran = unsafe {
        bpf_loop(
            MAX_TREE_DEPTH,
            tree_step as *mut c_void,
            (&raw mut walk).cast(),
            0,
        )
    };
    match walk.state {
        _ if ran < 0 => return Err(ReadFailed),
        COVERED => return Ok(walk.granted),
        READ_FAILED => return Err(ReadFailed),
        WALKING => count(counter::WALK_LIMIT),
        _ => {}
    }
    name_granted(slot, access, walk.granted)
}

/// Where a tree walk stands.
const WALKING: u32 = 0;
/// Every needed operation is granted.
const COVERED: u32 = 1;
/// The root of the filesystem was reached.
const ROOT: u32 = 2;
/// A kernel read failed.
const READ_FAILED: u32 = 3;

/// The state of a tree walk, on the program's stack while `bpf_loop` runs
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
}

/// One step of the tree walk: looks up a tree grant on the parent of
/// `walk.dentry` and moves up to it. Returns 1 to stop.
///
/// The walk runs under `bpf_loop`, whose callback the verifier checks once,
/// so the walk can follow a path as deep as a path can be
/// ([`MAX_TREE_DEPTH`]) without making the programs slower to load; each
/// step costs two kernel reads and a hash lookup, and only the first access
/// to an object walks (the grant cache answers the next).
extern "C" fn tree_step(_index: u64, ctx: *mut c_void) -> i64 {
    // SAFETY: `ctx` is the `TreeWalk` on the caller's stack, for the
    // duration of `bpf_loop`.
    let walk = unsafe { &mut *ctx.cast::<TreeWalk>() };
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
        walk.granted |= grant.tree_ops;
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
