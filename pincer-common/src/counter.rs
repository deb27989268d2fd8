//! Indices of the per-CPU counters in [`crate::names::COUNTERS`].

named! {
    /// The counters' names for metrics and `pincer` output, by index.
    NAMES;

    /// Accesses allowed by a grant.
    ALLOWED = 0 => "allowed";
    /// Accesses denied because no grant covered them.
    DENIED = 1 => "denied";
    /// Ungranted accesses allowed in audit mode.
    AUDITED = 2 => "audited";
    /// Events lost because the ring buffer was full (the access was still
    /// decided as if the event had been sent: denied in enforce mode).
    RINGBUF_FULL = 3 => "ringbuf_full";
    /// Accesses denied because a kernel structure could not be read.
    READ_FAILED = 4 => "read_failed";
    /// Tree walks that stopped at [`crate::MAX_TREE_DEPTH`] before the root.
    WALK_LIMIT = 5 => "walk_limit";
    /// Accesses denied because the loader never set the kernel offsets.
    NO_OFFSETS = 6 => "no_offsets";
    /// Never counted: a granted open counts once, in [`ALLOWED`].
    RESERVED = 7 => "reserved";
    /// Tasks parked (one per request, not per re-park).
    PARKED = 8 => "parked";
    /// Denied instead of parked: no live twin.
    NO_TWIN = 9 => "no_twin";
    /// Denied instead of parked: the pending table was full.
    PENDING_FULL = 10 => "pending_full";
    /// Denied instead of parked: the task could not be stopped.
    UNPARKABLE = 11 => "unparkable";
    /// Parked requests the twin allowed once.
    VERDICT_ALLOW = 12 => "verdict_allow";
    /// Parked requests the twin denied.
    VERDICT_DENY = 13 => "verdict_deny";
    /// Stray wake-ups that re-parked a request without a new event.
    REPARKED = 14 => "reparked";
    /// Denied by a self-protection hook (see `event_flags::GUARD`).
    GUARDED = 15 => "guarded";
    /// Labels that could not be written (the labels map full): the access
    /// that would have made them was refused where it still could be.
    LABEL_FAILED = 16 => "label_failed";
    /// Changes to policy objects refused or parked for the owner.
    POLICY = 17 => "policy";
    /// Reads that lowered an agent's level ([`crate::Taint`]).
    TAINTED = 18 => "tainted";
    /// Actions refused or parked for the owner because the agent's level
    /// was below theirs.
    ACTION = 19 => "action";
    /// Accesses to revoked content refused or parked for the owner.
    REVOKED = 20 => "revoked";
    /// New cgroups held below a watched one ([`crate::mode::HELD`]).
    HELD = 21 => "held";
    /// New cgroups below a watched one that could not be held (the agents
    /// map full, a kernel read failed): they run unconfined until the
    /// daemon's scan finds them.
    HOLD_FAILED = 22 => "hold_failed";
    /// Placeholders made by a sandbox of an agent's own at a policy name
    /// (an empty file or directory it may not fill).
    PLACEHOLDERS = 23 => "placeholders";
}

/// Number of counters.
pub const COUNT: u32 = NAMES.len() as u32;

// A counter's index is its place in the list.
const _: () = assert!(crate::text::by_index(&NAMES));
