//! Parked requests and the twin that answers them.

/// A parked request: the value of [`crate::names::PENDING`], keyed by thread id.
///
/// The restarted syscall finds it and looks for a [`Verdict`] with the same
/// id. It matches only the same access (object, operations, hook and, for a
/// creation, name), so a signal handler that runs during the restart cannot
/// spend another access's verdict.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pending {
    /// The request id, as sent in the event.
    pub id: u64,
    /// Device of the object (for a creation, of its directory).
    pub dev: u64,
    /// Inode of the object (for a creation, of its directory).
    pub ino: u64,
    /// FNV-1a of the created name (creations only; zero otherwise).
    pub name_hash: u64,
    /// Operations requested.
    pub ops: u32,
    /// One of [`crate::hook`].
    pub hook: u32,
}

/// A one-shot answer to a parked request: the value of [`crate::names::VERDICTS`],
/// keyed by thread id.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// The request id it answers.
    pub id: u64,
    /// Non-zero to allow this one access, zero to deny it.
    pub allow: u32,
    /// Explicit padding; always zero.
    pub _pad: u32,
    /// With `pin_ino` non-zero, a rename is allowed only when it moves
    /// this object (device, kernel encoding): the copy of inspected content
    /// the twin put in place ([`crate::label_flags::SEALED`]).
    pub pin_dev: u64,
    /// The pinned object's inode, or zero for none.
    pub pin_ino: u64,
}

/// The twin's liveness: the single value of [`crate::names::TWIN`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Twin {
    /// `CLOCK_BOOTTIME` in ns of the twin's last heartbeat; zero when no twin
    /// ever started or a watchdog declared it dead.
    pub heartbeat_ns: u64,
    /// How old a heartbeat may be before the twin counts as dead.
    pub timeout_ns: u64,
}
