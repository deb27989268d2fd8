//! Labels: what pincer knows of an object's content, kept by identity
//! (device, inode) in [`LABELS`], one map for every pincer on the host.
//! The full descriptor (owner, scope, origins and their revocation
//! counters) is the twin's; the kernel keeps what it decides on at once.
//!
//! | an agent's allowed access                        | the object's label afterwards                      |
//! |--------------------------------------------------|----------------------------------------------------|
//! | makes an object (file, directory, link, fifo)    | its own: evidence, made by that agent              |
//! | makes one in a policy place (the owner allowed)  | evidence, not its own: its place decides           |
//! | writes an existing regular file                  | evidence, changed by that agent; its own only if it made it (a policy object keeps its label) |
//! | renames or links an object into a policy place (the owner allowed) | evidence, not its own            |
//!
//! An object that is the agent's own (`AGENT_MADE`) is never a policy object
//! by its name or place: a repository the agent made is its own, hooks and
//! all. One the owner let it make or put in a policy place is not its own,
//! so the policy names and places protect it from then on like the user's.
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
    Label, Making, ObjectKey, authority, counter, file_type, hook, label_flags, ops,
};

use crate::{
    access::Access,
    kernel::{self, ReadFailed},
    maps::{LABELS, MAKING, count},
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
        _pad: 0,
        agent: 0,
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
/// its binding (the agent's own object, or, when it was allowed in a policy
/// place (`barrier`), evidence that is not its own), and a write of an
/// existing regular file makes its content evidence the agent changed,
/// without making the object the agent's: only what it made is its own, so
/// the user's `CLAUDE.md` stays a policy object by its name once the owner
/// let the agent write it. `Err` when the label could not be written: the
/// access is then refused.
#[inline(always)]
pub fn allowed(access: &Access, own: &Label, barrier: bool) -> Result<(), ()> {
    let makes = matches!(
        access.hook,
        hook::INODE_CREATE | hook::INODE_MKDIR | hook::INODE_SYMLINK | hook::INODE_MKNOD
    );
    if makes {
        let tid = bpf_get_current_pid_tgid() as u32;
        let making = Making {
            dentry: access.dentry as u64,
            flags: if barrier { 0 } else { label_flags::AGENT_MADE },
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
    if own.authority == authority::EVIDENCE && own.agent == agent {
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
    write(access.dev, access.ino, access.inode, made, agent)
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
        write(self.dev, self.ino, self.inode, 0, agent)
    }
}

/// The kernel binds `dentry` to `inode`: when the current thread was
/// allowed to make that dentry, the new object gets its label.
#[inline(always)]
pub fn instantiated(dentry: *const u8, inode: *const u8) {
    let tid = bpf_get_current_pid_tgid() as u32;
    let Some(making) = (unsafe { MAKING.get(tid) }).copied() else {
        return;
    };
    if making.dentry != dentry as u64 || inode.is_null() {
        return;
    }
    let _ = MAKING.remove(tid);
    let off = kernel::off();
    let Ok((dev, ino)) = kernel::identity(off, inode) else {
        count(counter::LABEL_FAILED);
        return;
    };
    let agent = unsafe { bpf_get_current_cgroup_id() };
    // Counted when it fails; the object exists already, nothing to refuse.
    let _ = write(dev, ino, inode, making.flags, agent);
}

/// Writes the label of an agent's object: evidence (its content is the
/// agent's), with `flags`.
#[inline(always)]
fn write(dev: u64, ino: u64, inode: *const u8, flags: u32, agent: u64) -> Result<(), ()> {
    let Ok(generation) = kernel::generation(kernel::off(), inode) else {
        count(counter::LABEL_FAILED);
        return Err(());
    };
    let label = Label {
        authority: authority::EVIDENCE,
        flags,
        generation,
        _pad: 0,
        agent,
    };
    if LABELS.insert(ObjectKey { dev, ino }, label, 0).is_err() {
        count(counter::LABEL_FAILED);
        return Err(());
    }
    Ok(())
}
