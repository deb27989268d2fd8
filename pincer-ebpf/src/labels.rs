//! Labels: what pincer knows of an object's content, kept by identity
//! (device, inode) in [`LABELS`], one map for every pincer on the host.
//! The full descriptor (owner, scope, origins and their revocation
//! counters) is the twin's; the kernel keeps what it decides on at once.
//!
//! | an agent's allowed access                        | the object's label afterwards                      |
//! |--------------------------------------------------|----------------------------------------------------|
//! | makes an object (file, directory, link, fifo)    | its own: evidence, made by that agent              |
//! | makes one in a policy place (the owner allowed)  | evidence, not its own: its place decides           |
//! | makes a placeholder there from a sandbox of its own (`decide::placeholder`) | a policy object (a directory: a policy tree) |
//! | writes an existing regular file                  | evidence, changed by that agent; its own only if it made it (a policy object keeps its label) |
//! | renames or links an object into a policy place (the owner allowed) | evidence, not its own            |
//!
//! An object that is the agent's own (`AGENT_MADE`) is never a policy object
//! by its name or place: a repository the agent made is its own, hooks and
//! all. One the owner let it make or put in a policy place is not its own,
//! so the policy names and places protect it from then on like the user's.
//!
//! **Taint.** An agent's level ([`TAINTS`], per cgroup: its children and
//! the programs it executes read into the same context) starts at none and
//! only goes down: an allowed read of an object whose label carries a taint
//! (a declared source, or something derived from one) lowers it to that
//! taint. What the agent writes afterwards carries its level as taint, so
//! a later reader, another agent's run included, is lowered too; a write
//! keeps the lowest taint of the file's old content and the writer, and
//! what an agent makes in a source directory is tainted by the source. An object
//! made in a source directory is a source itself, whoever makes it (a
//! browser saving a page): the binding of its name labels it.
//!
//! A label is written before the access goes on; one that cannot be
//! written (the map full) refuses the write it was for and is counted
//! ([`counter::LABEL_FAILED`]). A new object is labelled when the kernel
//! binds its name to its inode (`d_instantiate`), which the creation's own
//! hook cannot see: the hook records the new dentry for its thread
//! ([`MAKING`]), and the binding of that dentry by that thread labels the
//! inode.

use aya_ebpf::helpers::{bpf_get_current_cgroup_id, bpf_get_current_pid_tgid};
use pincer_common::{
    GrantKey, Label, Making, ObjectKey, Origins, Taint, authority, counter, file_type, hook,
    label_flags, ops,
};

use crate::{
    access::Access,
    kernel::{self, ReadFailed},
    maps::{ACTIONS, LABELS, MAKING, REVOKED, TAINTS, count},
};

/// No label: every field zero. Labels are passed as values, never as an
/// `Option`: the compiler may copy an `Option`'s unset payload, and the
/// verifier refuses reads of registers nothing wrote.
#[inline(always)]
pub const fn none() -> Label {
    Label {
        authority: 0,
        flags: 0,
        generation: 0,
        taint: 0,
        agent: 0,
        origins: Origins::NONE,
    }
}

/// A taint with where it came from: the level (zero: none), and the
/// sources with their revocation counters then.
#[derive(Clone, Copy)]
struct Derived {
    taint: u32,
    origins: Origins,
}

impl Derived {
    const NONE: Derived = Derived {
        taint: 0,
        origins: Origins::NONE,
    };

    /// What is made now in a source directory: the source's content as of
    /// its counter now.
    #[inline(always)]
    fn arriving(source: &Label) -> Derived {
        let mut origins = source.origins;
        for origin in &mut origins.at {
            if origin.source != 0 {
                origin.stamp = counter(origin.source);
            }
        }
        Derived {
            taint: source.taint,
            origins,
        }
    }

    /// Content derived from `taint` and `origins` and written by the
    /// current agent: the lower level (zero is none, above every level)
    /// and every source of either. The agent's level is read in place
    /// (the verifier allows 512 bytes of stack for the whole call chain).
    #[inline(always)]
    fn with_agent(taint: u32, origins: &Origins) -> Derived {
        let agent = unsafe { bpf_get_current_cgroup_id() };
        match unsafe { TAINTS.get(agent) } {
            Some(level) => Derived {
                taint: if level.level != 0 && (taint == 0 || level.level < taint) {
                    level.level
                } else {
                    taint
                },
                origins: origins.union(&level.origins, counter),
            },
            None => Derived {
                taint,
                origins: *origins,
            },
        }
    }
}

/// Whether an agent has an entry in [`TAINTS`] (a level, or sources).
#[inline(always)]
pub fn has_level(agent: u64) -> bool {
    unsafe { TAINTS.get(agent) }.is_some()
}

/// The current agent's level: one of `authority`, or zero for none.
#[inline(always)]
pub fn level() -> u32 {
    let agent = unsafe { bpf_get_current_cgroup_id() };
    unsafe { TAINTS.get(agent) }.map_or(0, |taint| taint.level)
}

/// Whether a label's content was derived from a source revoked since (any
/// of its sources). A source directory itself is not revoked (its names
/// are not content, and what arrives in it after the revocation is not
/// revoked).
#[inline(always)]
pub fn revoked(label: &Label) -> bool {
    if label.flags & label_flags::TREE != 0 {
        return false;
    }
    label.origins.revoked(counter)
}

/// A source's revocation counter now.
#[inline(always)]
fn counter(origin: u32) -> u32 {
    unsafe { REVOKED.get(origin) }.map_or(0, |counter| *counter)
}

/// After an allowed access: when it read (or executed) an object whose
/// content is tainted below the agent's level, the agent drops to it; a
/// read of tainted content from a source the agent had not read yet adds
/// that source to its own, whatever its level, so what it writes next is
/// revoked with either. Returns whether it did either, so the read is
/// reported: the twin keeps the chain of what tainted each agent. `Err`
/// when the new level could not be written (counted): the read is then
/// refused, since the agent would otherwise act on the content at its old
/// level.
#[inline(always)]
pub fn read(access: &Access, own: &Label) -> Result<bool, ()> {
    let taint = own.taint;
    if taint == 0 || !access.exists || access.ops & (ops::READ | ops::EXEC) == 0 {
        return Ok(false);
    }
    let agent = unsafe { bpf_get_current_cgroup_id() };
    // Read in place: a copy of the agent's level is one more on a stack
    // the verifier allows 512 bytes for the whole call chain.
    let was = unsafe { TAINTS.get(agent) };
    let level = was.map_or(0, |was| was.level);
    let lowers = level == 0 || taint < level;
    let mut now = Taint {
        level: taint,
        _pad: 0,
        dev: access.dev,
        ino: access.ino,
        origins: own.origins,
    };
    if let Some(was) = was {
        now.origins = was.origins.union(&own.origins, counter);
        if !lowers {
            if now.origins == was.origins {
                return Ok(false);
            }
            now.level = was.level;
            now.dev = was.dev;
            now.ino = was.ino;
        }
    }
    // The map has room for every agent; should the insert fail anyway,
    // the read is refused and counted.
    if TAINTS.insert(agent, now, 0).is_err() {
        count(counter::LABEL_FAILED);
        return Err(());
    }
    count(counter::TAINTED);
    Ok(true)
}

/// The operations of an access that the mission reserves for agents of a
/// higher level than the current agent's (`[[action]]`): they are not
/// granted, and only the owner may allow them. Zero for an untainted
/// agent, and for objects no action names.
#[inline(always)]
pub fn reserved(slot: u32, access: &Access) -> u32 {
    if !access.exists {
        return 0;
    }
    let level = level();
    if level == 0 {
        return 0;
    }
    let key = GrantKey {
        slot,
        _pad: 0,
        dev: access.dev,
        ino: access.ino,
    };
    match unsafe { ACTIONS.get(key) } {
        Some(action) if level < action.authority => action.ops & access.ops,
        _ => 0,
    }
}

/// The label of an inode, if it has one that is still its own (the same
/// generation: not the label of an object deleted before its inode number
/// was reused); [`none`] otherwise.
#[inline(always)]
pub fn of_inode(dev: u64, ino: u64, inode: *const u8) -> Result<Label, ReadFailed> {
    let Some(label) = (unsafe { LABELS.get(ObjectKey { dev, ino }) }).copied() else {
        return Ok(none());
    };
    if label.generation != 0 && label.generation != kernel::generation(kernel::off(), inode)? {
        return Ok(none());
    }
    Ok(label)
}

/// The flags of an inode's label, if it has one that is still its own
/// (see [`of_inode`]); zero otherwise. Read in place: the label is not
/// copied onto the stack.
#[inline(always)]
pub fn flags_of_inode(dev: u64, ino: u64, inode: *const u8) -> Result<u32, ReadFailed> {
    let Some(label) = (unsafe { LABELS.get(ObjectKey { dev, ino }) }) else {
        return Ok(0);
    };
    // SAFETY: plain values in a map entry.
    let (generation, flags) = unsafe {
        (
            core::ptr::read_volatile(&label.generation),
            core::ptr::read_volatile(&label.flags),
        )
    };
    if generation != 0 && generation != kernel::generation(kernel::off(), inode)? {
        return Ok(0);
    }
    Ok(flags)
}

/// The label of the object an access is to ([`none`] for a creation, whose
/// object does not exist yet).
#[inline(always)]
pub fn own(access: &Access) -> Result<Label, ReadFailed> {
    if !access.exists || access.inode.is_null() {
        return Ok(none());
    }
    of_inode(access.dev, access.ino, access.inode)
}

/// Whether a label makes its object a policy object.
#[inline(always)]
pub fn is_policy(label: &Label) -> bool {
    label.flags & label_flags::POLICY != 0
}

/// Whether a label says an agent made the object.
#[inline(always)]
pub fn is_agent_made(label: &Label) -> bool {
    label.flags & label_flags::AGENT_MADE != 0
}

/// Labels after an agent's access was allowed: a creation is recorded for
/// its binding, to be labelled with `made` (`AGENT_MADE` for the agent's
/// own object; none for one allowed in a policy place, evidence that is
/// not its own; `POLICY | PLACEHOLDER` for a placeholder, with `TREE` for
/// a directory), and a write of an existing regular file makes its
/// content evidence the agent changed, without making the object the
/// agent's: only what it made is its own, so the user's `CLAUDE.md` stays
/// a policy object by its name once the owner let the agent write it.
/// `Err` when the label could not be written: the access is then refused.
#[inline(always)]
pub fn allowed(access: &Access, own: &Label, made: u32) -> Result<(), ()> {
    let makes = matches!(
        access.hook,
        hook::INODE_CREATE | hook::INODE_MKDIR | hook::INODE_SYMLINK | hook::INODE_MKNOD
    );
    if makes {
        let tid = bpf_get_current_pid_tgid() as u32;
        let making = Making {
            dentry: access.dentry as u64,
            flags: made,
            _pad: 0,
        };
        // Least recently used entries go first: an insert does not fail
        // for want of room.
        if MAKING.insert(tid, making, 0).is_err() {
            count(counter::LABEL_FAILED);
            return Err(());
        }
        return Ok(());
    }
    if !access.exists
        || access.ops & ops::WRITE == 0
        || access.hook == hook::FILE_RECEIVE
        || is_policy(own)
    {
        return Ok(());
    }
    let agent = unsafe { bpf_get_current_cgroup_id() };
    // What the file held stays in what it holds now: a write keeps the
    // lowest taint of the two, so appending to a page (or to what a
    // tainted agent summarised) launders nothing.
    let derived = Derived::with_agent(own.taint, &own.origins);
    if own.authority == authority::EVIDENCE
        && own.agent == agent
        && own.taint == derived.taint
        && own.origins == derived.origins
    {
        return Ok(());
    }
    let off = kernel::off();
    let Ok(kind) = kernel::file_kind(off, access.inode) else {
        count(counter::LABEL_FAILED);
        return Err(());
    };
    if kind != file_type::REGULAR {
        return Ok(());
    }
    // Only what it made is its own.
    let made = own.flags & label_flags::AGENT_MADE;
    write(access.dev, access.ino, access.inode, made, agent, derived)
}

/// The label of the directory a dentry is in, when it is a source tree
/// (what is made there is a source too).
#[inline(always)]
fn source_dir(off: &pincer_common::KernelOffsets, dentry: *const u8) -> Option<Label> {
    let parent = kernel::parent(off, dentry).ok()??;
    let dir = kernel::dentry_inode(off, parent).ok()?;
    if dir.is_null() {
        return None;
    }
    let (dev, ino) = kernel::identity(off, dir).ok()?;
    let label = of_inode(dev, ino, dir).ok()?;
    let wanted = label_flags::SOURCE | label_flags::TREE;
    (label.flags & wanted == wanted).then_some(label)
}

/// The object of a rename or hard link, which may be placed in a policy
/// place.
pub struct Placed {
    dev: u64,
    ino: u64,
    inode: *const u8,
}

impl Placed {
    /// The object of the access at the object's end.
    #[inline(always)]
    pub fn of(object: &Access) -> Self {
        Self {
            dev: object.dev,
            ino: object.ino,
            inode: if object.exists {
                object.inode
            } else {
                core::ptr::null()
            },
        }
    }

    /// The owner allowed it into a policy place: it is no longer the
    /// agent's own there (its own copy would otherwise stay its to change).
    #[inline(always)]
    pub fn in_policy(&self) -> Result<(), ()> {
        if self.inode.is_null() {
            return Ok(());
        }
        let agent = unsafe { bpf_get_current_cgroup_id() };
        let Ok(own) = of_inode(self.dev, self.ino, self.inode) else {
            count(counter::LABEL_FAILED);
            return Err(());
        };
        write(
            self.dev,
            self.ino,
            self.inode,
            0,
            agent,
            Derived::with_agent(own.taint, &own.origins),
        )
    }
}

/// The kernel binds `dentry` to `inode`, for any task: an object in a
/// source directory that has no label yet is a source too (made by a
/// browser, or looked up after its directory was declared).
#[inline(always)]
pub fn bound(dentry: *const u8, inode: *const u8) {
    if inode.is_null() {
        return;
    }
    let off = kernel::off();
    let Some(source) = source_dir(off, dentry) else {
        return;
    };
    let Ok((dev, ino)) = kernel::identity(off, inode) else {
        return;
    };
    let key = ObjectKey { dev, ino };
    if unsafe { LABELS.get(key) }.is_some() {
        return;
    }
    let (Ok(generation), Ok(kind)) = (
        kernel::generation(off, inode),
        kernel::file_kind(off, inode),
    ) else {
        return;
    };
    // A directory made there is a source tree too; a file is content,
    // which a revocation reaches.
    let tree = if kind == file_type::DIRECTORY {
        label_flags::TREE
    } else {
        0
    };
    let label = Label {
        authority: source.authority,
        flags: label_flags::SOURCE | tree,
        generation,
        taint: source.taint,
        agent: 0,
        origins: Derived::arriving(&source).origins,
    };
    if LABELS.insert(key, label, 0).is_err() {
        count(counter::LABEL_FAILED);
    }
}

/// The kernel binds `dentry` to `inode`: when the current thread was
/// allowed to make that dentry, the new object gets its label. Returns
/// whether it did.
#[inline(always)]
pub fn instantiated(dentry: *const u8, inode: *const u8) -> bool {
    let tid = bpf_get_current_pid_tgid() as u32;
    let Some(making) = (unsafe { MAKING.get(tid) }).copied() else {
        return false;
    };
    if making.dentry != dentry as u64 || inode.is_null() {
        return false;
    }
    let _ = MAKING.remove(tid);
    let off = kernel::off();
    let Ok((dev, ino)) = kernel::identity(off, inode) else {
        count(counter::LABEL_FAILED);
        return true;
    };
    let agent = unsafe { bpf_get_current_cgroup_id() };
    // Made in a source directory (a download, a fetched page saved there),
    // its content is the source's as well as the agent's.
    let arriving =
        source_dir(off, dentry).map_or(Derived::NONE, |source| Derived::arriving(&source));
    let derived = Derived::with_agent(arriving.taint, &arriving.origins);
    // Counted when it fails; the object exists already, nothing to refuse.
    let _ = write(dev, ino, inode, making.flags, agent, derived);
    true
}

/// Writes the label of an agent's object: evidence (its content is the
/// agent's), with `flags`, and `taint`: the lowest of the writer's level
/// and what the content was derived from.
#[inline(always)]
fn write(
    dev: u64,
    ino: u64,
    inode: *const u8,
    flags: u32,
    agent: u64,
    derived: Derived,
) -> Result<(), ()> {
    let Ok(generation) = kernel::generation(kernel::off(), inode) else {
        count(counter::LABEL_FAILED);
        return Err(());
    };
    let label = Label {
        authority: authority::EVIDENCE,
        flags,
        generation,
        taint: derived.taint,
        agent,
        origins: derived.origins,
    };
    if LABELS.insert(ObjectKey { dev, ino }, label, 0).is_err() {
        count(counter::LABEL_FAILED);
        return Err(());
    }
    Ok(())
}
