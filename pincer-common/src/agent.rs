//! Agents: the confined cgroups, and what the programs do with their accesses.

/// What the programs do with an access that no grant covers.
pub mod mode {
    /// Deny with `EACCES` and report.
    pub const ENFORCE: u32 = 1;
    /// Allow, and report what would have been denied.
    pub const AUDIT: u32 = 2;
    /// Park the task and ask the userspace twin; deny at once when no twin
    /// is alive or the request cannot be parked.
    pub const ASK: u32 = 3;
    /// Not an agent yet: the cgroup was made below a cgroup the daemon
    /// watches ([`crate::watch`]), and the daemon has not decided what it
    /// is. Every task of it stops at its first hook until the daemon has
    /// confined the cgroup (the hook then decides again under its mission)
    /// or let it go; with no twin alive it is refused instead.
    pub const HELD: u32 = 4;
}

/// Values of [`crate::names::WATCHED`]: what happens to a cgroup made below a
/// cgroup of that map. The nearest ancestor in the map decides.
pub mod watch {
    /// Hold it ([`crate::mode::HELD`]) until the daemon decides.
    pub const HOLD: u32 = 1;
    /// Leave it alone: a subtree someone else confines (`pincer run`'s own
    /// cgroups) below a held one.
    pub const EXEMPT: u32 = 2;
    /// How many ancestors of a new cgroup are looked up at most.
    pub const MAX_DEPTH: u32 = 16;
}

/// Bits of [`Agent::flags`].
pub mod agent_flags {
    /// Report granted accesses too, not only the ungranted ones.
    pub const REPORT_ALLOWED: u32 = 1 << 0;
    /// The mission reserves actions (`[[action]]`) for agents of a given
    /// level. Without it a granted access never looks up the agent's
    /// level: an untainted mission's opens cost no lookup for it.
    pub const ACTIONS: u32 = 1 << 1;
    /// Confinement starts at the first program a task of the cgroup
    /// executes: until then the agent's tasks are let through (a container
    /// runtime sets the container up in its cgroup before it executes the
    /// entrypoint, and that set-up is no agent's). The open of the first
    /// executed program clears the flag and is itself decided under the
    /// mission, like everything after it.
    pub const FROM_EXEC: u32 = 1 << 2;
}

/// A confined cgroup: the value of [`crate::names::AGENTS`], keyed by cgroup id.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Agent {
    /// Mission slot: the first field of every grant key of this agent.
    pub slot: u32,
    /// One of [`mode`].
    pub mode: u32,
    /// Bits of [`agent_flags`].
    pub flags: u32,
    /// The level of the user namespace the agent's tasks start in (0 for
    /// the initial one; [`NO_OWN_NAMESPACES`] for none). A user namespace
    /// deeper than this is one the agent made, a sandbox of its own: a
    /// capability checked against it is allowed, mounts in a mount
    /// namespace it owns are allowed, and a tmpfs mounted there holds only
    /// what the agent put in it.
    pub userns_home: u32,
    /// The capabilities the agent's tasks may use, bit `n` for capability
    /// `n` ([`crate::caps`]): [`crate::caps::DEFAULT`] and what the mission adds, never
    /// one of [`crate::caps::NEVER`]. Every other capability check fails with
    /// `EPERM`, whatever credentials the task holds.
    pub capabilities: u64,
}

/// [`Agent::userns_home`] of an agent that has no namespaces of its own:
/// no user namespace is deeper than this.
pub const NO_OWN_NAMESPACES: u32 = u32::MAX;
