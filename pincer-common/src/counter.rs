//! Indices of the per-CPU counters in [`names::COUNTERS`].

// What the documentation links to.
#[cfg(doc)]
use crate::names;

/// Accesses allowed by a grant.
pub const ALLOWED: u32 = 0;
/// Accesses denied because no grant covered them.
pub const DENIED: u32 = 1;
/// Ungranted accesses allowed in audit mode.
pub const AUDITED: u32 = 2;
/// Events lost because the ring buffer was full (the access was still
/// decided as if the event had been sent: denied in enforce mode).
pub const RINGBUF_FULL: u32 = 3;
/// Accesses denied because a kernel structure could not be read.
pub const READ_FAILED: u32 = 4;
/// Tree walks that stopped at [`crate::MAX_TREE_DEPTH`] before the root.
pub const WALK_LIMIT: u32 = 5;
/// Accesses denied because the loader never set the kernel offsets.
pub const NO_OFFSETS: u32 = 6;
// 7 is reserved: a granted open counts once, in `ALLOWED`.
/// Tasks parked (one per request, not per re-park).
pub const PARKED: u32 = 8;
/// Denied instead of parked: no live twin.
pub const NO_TWIN: u32 = 9;
/// Denied instead of parked: the pending table was full.
pub const PENDING_FULL: u32 = 10;
/// Denied instead of parked: the task could not be stopped.
pub const UNPARKABLE: u32 = 11;
/// Parked requests the twin allowed once.
pub const VERDICT_ALLOW: u32 = 12;
/// Parked requests the twin denied.
pub const VERDICT_DENY: u32 = 13;
/// Stray wake-ups that re-parked a request without a new event.
pub const REPARKED: u32 = 14;
/// Denied by a self-protection hook (see `event_flags::GUARD`).
pub const GUARDED: u32 = 15;
/// Labels that could not be written (the labels map full): the access
/// that would have made them was refused where it still could be.
pub const LABEL_FAILED: u32 = 16;
/// Changes to policy objects refused or parked for the owner.
pub const POLICY: u32 = 17;
/// Reads that lowered an agent's level ([`crate::Taint`]).
pub const TAINTED: u32 = 18;
/// Actions refused or parked for the owner because the agent's level
/// was below theirs.
pub const ACTION: u32 = 19;
/// Accesses to revoked content refused or parked for the owner.
pub const REVOKED: u32 = 20;
/// New cgroups held below a watched one ([`crate::mode::HELD`]).
pub const HELD: u32 = 21;
/// New cgroups below a watched one that could not be held (the agents
/// map full, a kernel read failed): they run unconfined until the
/// daemon's scan finds them.
pub const HOLD_FAILED: u32 = 22;
/// Placeholders made by a sandbox of an agent's own at a policy name
/// (an empty file or directory it may not fill).
pub const PLACEHOLDERS: u32 = 23;
/// Number of counters.
pub const COUNT: u32 = 24;

/// Names for metrics and `pincer` output, by index.
pub const NAMES: [&str; COUNT as usize] = [
    "allowed",
    "denied",
    "audited",
    "ringbuf_full",
    "read_failed",
    "walk_limit",
    "no_offsets",
    "reserved",
    "parked",
    "no_twin",
    "pending_full",
    "unparkable",
    "verdict_allow",
    "verdict_deny",
    "reparked",
    "guarded",
    "label_failed",
    "policy",
    "tainted",
    "action",
    "revoked",
    "held",
    "hold_failed",
    "placeholders",
];
