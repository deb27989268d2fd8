//! Limits: path components, tree depth, map sizes, the ring buffer.

/// Longest path component copied into an event (with its NUL).
pub const COMPONENT_LEN: usize = 64;
/// Path components copied into an event, leaf first.
pub const MAX_COMPONENTS: usize = 16;
/// Ancestors visited when looking for a tree grant: deeper than any path an
/// `open` can name (`PATH_MAX` is 4096 bytes, so at most 2048 components),
/// with room for trees reached by relative paths. The walk runs under
/// `bpf_loop`, so the limit costs nothing at load time; a walk that reaches
/// it is counted ([`crate::counter::WALK_LIMIT`]) and grants nothing above.
pub const MAX_TREE_DEPTH: u32 = 4096;
/// A file name with its NUL (`NAME_MAX` + 1).
pub const NAME_LEN: usize = 256;
/// The longest prefix a prefix grant may have ([`crate::PrefixName`]).
pub const MAX_PREFIX_LEN: usize = 63;

/// Labelled objects at once (the map is not preallocated: memory follows
/// use). A label that does not fit is counted ([`crate::counter::LABEL_FAILED`]).
pub const MAX_LABELS: u32 = 1 << 20;
/// Creations in flight at once, over all agents.
pub const MAX_MAKING: u32 = 4096;
/// Placeholder files in flight at once, over all agents
/// ([`crate::names::PLACEHOLDERS`]).
pub const MAX_PLACEHOLDERS: u32 = 1024;
/// Keys of each policy trie: every rule's bytes, with room for what
/// missions and configurations add.
pub const MAX_POLICY_KEYS: u32 = 4096;
/// Names a person's directory was moved away from, remembered at once (the
/// least recently used go first).
pub const MAX_VACATED: u32 = 4096;

/// Maximum number of agent cgroups.
pub const MAX_AGENTS: u32 = 4096;
/// Capacity of [`crate::names::ACTIONS`], for every agent together.
pub const MAX_ACTIONS: u32 = 4096;
/// Capacity of [`crate::names::REVOKED`]: sources ever revoked on the host.
pub const MAX_REVOKED: u32 = 4096;
/// Capacity of [`crate::names::WATCHED`]: cgroups below which new ones are held.
pub const MAX_WATCHED: u32 = 256;
/// Maximum number of inode grants over all agents.
pub const MAX_GRANTS: u32 = 65536;
/// Maximum number of name grants over all agents.
pub const MAX_NAME_GRANTS: u32 = 8192;
/// Guarded pincer processes at once.
pub const MAX_GUARDED: u32 = 256;
/// IPC objects and keys agents created that are remembered at once (the
/// least recently used are forgotten: their creators can no longer reach
/// them).
pub const MAX_OWNED: u32 = 16384;
/// Parked requests at once, over all agents.
pub const MAX_PENDING: u32 = 4096;

/// Entries of the grant cache (least recently used ones are evicted).
pub const MAX_CACHED_GRANTS: u32 = 16384;
/// Size of the event ring buffer in bytes (a power of two, a multiple of the
/// page size).
pub const EVENTS_BYTES: u32 = 256 * 1024;
