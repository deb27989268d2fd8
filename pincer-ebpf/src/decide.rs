//! The decision: do the agent's grants cover this access?

use aya_ebpf::helpers::bpf_probe_read_kernel_str_bytes;
use pincer_common::{
    Agent, CachedGrant, GrantKey, KernelOffsets, MAX_TREE_DEPTH, NAME_LEN, NameGrantKey,
    agent_flags, counter, mode, verdict,
};

use crate::{
    kernel::{self, Failure, ReadFailed},
    maps::{GRANT_CACHE, GRANTS, NAME_GRANTS, SCRATCH, count, epoch},
    park, report,
};

/// `EACCES`, returned negated to refuse an access.
pub const EACCES: i32 = 13;

/// An access to decide.
pub struct Access {
    /// Offsets of the running kernel.
    pub off: KernelOffsets,
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
    /// The opened file (null for a creation).
    pub file: *const u8,
    /// Whether the object exists (it does not yet for a creation).
    pub exists: bool,
}

impl Access {
    /// The object's dentry.
    #[inline(always)]
    pub fn dentry(&self) -> Result<*const u8, ReadFailed> {
        if self.dentry.is_null() {
            kernel::read(self.file, self.off.file_f_path_dentry)
        } else {
            Ok(self.dentry)
        }
    }
}

/// Decides an agent's access and reports it; returns the hook's verdict.
#[inline(always)]
pub fn decide(agent: &Agent, access: Result<Access, Failure>) -> i32 {
    let (granted, access) = match access {
        Ok(access) => match granted_ops(agent.slot, &access) {
            Ok(granted) => (granted, Some(access)),
            Err(ReadFailed) => {
                count(counter::READ_FAILED);
                (0, Some(access))
            }
        },
        Err(Failure::NoOffsets) => {
            count(counter::NO_OFFSETS);
            (0, None)
        }
        Err(Failure::Read) => {
            count(counter::READ_FAILED);
            (0, None)
        }
    };
    let needed = access.as_ref().map_or(u32::MAX, |a| a.ops);
    if granted & needed == needed {
        count(counter::ALLOWED);
        if agent.flags & agent_flags::REPORT_ALLOWED != 0 {
            report::send(
                agent,
                access.as_ref(),
                outcome(granted, verdict::ALLOWED, 0),
            );
        }
        return 0;
    }
    match (agent.mode, access) {
        (mode::AUDIT, access) => {
            count(counter::AUDITED);
            report::send(
                agent,
                access.as_ref(),
                outcome(granted, verdict::AUDITED, 0),
            );
            0
        }
        (mode::ASK, Some(access)) => park::park(agent, &access, granted),
        // Enforce, an access that could not be identified, and any mode value
        // this version does not know: deny.
        (_, access) => deny(agent, access.as_ref(), granted, 0),
    }
}

/// Denies an access and reports why.
#[inline(always)]
pub fn deny(agent: &Agent, access: Option<&Access>, granted: u32, flags: u32) -> i32 {
    count(counter::DENIED);
    report::send(agent, access, outcome(granted, verdict::DENIED, flags));
    -EACCES
}

/// An outcome with no request id.
#[inline(always)]
pub fn outcome(granted: u32, verdict: u32, flags: u32) -> report::Outcome {
    report::Outcome {
        granted,
        verdict,
        flags,
        request_id: 0,
        name_hash: 0,
    }
}

/// The operations the agent's grants give on the accessed object, from the
/// grant cache when an earlier walk already found them.
#[inline(always)]
fn granted_ops(slot: u32, access: &Access) -> Result<u32, ReadFailed> {
    if !access.exists {
        return walk_grants(slot, access);
    }
    let key = GrantKey {
        slot,
        _pad: 0,
        dev: access.dev,
        ino: access.ino,
    };
    // Read before the walk: an invalidation that lands during the walk makes
    // what it finds stale, and the entry written with this epoch says so.
    let epoch = epoch();
    let cached = match unsafe { GRANT_CACHE.get(key) } {
        Some(entry) if entry.epoch == epoch => entry.ops,
        _ => 0,
    };
    if cached & access.ops == access.ops {
        return Ok(cached);
    }
    let granted = walk_grants(slot, access)?;
    if granted != 0 {
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
    let mut key = GrantKey {
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
    let off = &access.off;
    let mut dentry = access.dentry()?;
    if !access.exists {
        // The directory was looked up above already.
        match kernel::parent(off, dentry)? {
            Some(parent) => dentry = parent,
            None => return name_granted(slot, access, granted),
        }
    }
    let mut reached_root = false;
    for _ in 0..MAX_TREE_DEPTH {
        let Some(parent) = kernel::parent(off, dentry)? else {
            reached_root = true;
            break;
        };
        key.ino = kernel::dentry_ino(off, parent)?;
        if let Some(grant) = unsafe { GRANTS.get(key) } {
            granted |= grant.tree_ops;
            if granted & needed == needed {
                return Ok(granted);
            }
        }
        dentry = parent;
    }
    if !reached_root {
        count(counter::WALK_LIMIT);
    }
    name_granted(slot, access, granted)
}

/// Adds the ops of a name grant on (directory, name) of the object.
#[inline(always)]
fn name_granted(slot: u32, access: &Access, granted: u32) -> Result<u32, ReadFailed> {
    let Some(key) = name_key(slot, access)? else {
        return Ok(granted);
    };
    #[expect(
        clippy::needless_borrows_for_generic_args,
        reason = "by value would copy the 280-byte key onto the 512-byte BPF stack"
    )]
    let grant = unsafe { NAME_GRANTS.get(&*key) };
    match grant {
        Some(grant) => Ok(granted | grant.file_ops),
        None => Ok(granted),
    }
}

/// Fills the per-CPU scratch key with (slot, directory, name) of the
/// object; `None` for an object with no parent.
#[inline(always)]
pub fn name_key(
    slot: u32,
    access: &Access,
) -> Result<Option<&'static mut NameGrantKey>, ReadFailed> {
    let off = &access.off;
    let Some(scratch) = SCRATCH.get_ptr_mut(0) else {
        return Ok(None);
    };
    // SAFETY: per-CPU scratch, used by one program at a time on this CPU.
    let key = unsafe { &mut *scratch };
    let dentry = access.dentry()?;
    let Some(parent) = kernel::parent(off, dentry)? else {
        return Ok(None);
    };
    key.slot = slot;
    key.parent_dev = access.dev;
    key.parent_ino = if access.exists {
        kernel::dentry_ino(off, parent)?
    } else {
        access.ino
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
