//! The maps shared with userspace (names and value types in `pincer-common`).

use aya_ebpf::{
    helpers::bpf_get_current_cgroup_id,
    maps::{Array, HashMap, LpmTrie, LruHashMap, PerCpuArray, RingBuf, lpm_trie::Key},
};
use pincer_common::{
    Action, Agent, COMPONENT_LEN, CachedGrant, EVENTS_BYTES, GrantKey, GrantValue, Label,
    MAX_ACTIONS, MAX_AGENTS, MAX_CACHED_GRANTS, MAX_COMPONENTS, MAX_GRANTS, MAX_GUARDED,
    MAX_LABELS, MAX_MAKING, MAX_NAME_GRANTS, MAX_OWNED, MAX_PENDING, MAX_PLACEHOLDERS,
    MAX_POLICY_KEYS, MAX_REVOKED, MAX_VACATED, MAX_WATCHED, Making, NameGrantKey, ObjectKey,
    Pending, PolicyNameKey, PolicyRules, PolicySuffixKey, PrefixName, Taint, Twin, VacatedKey,
    Verdict, counter,
};

use crate::kernel::ReadFailed;

/// `BPF_F_NO_PREALLOC`: entries are allocated as they are inserted.
const NO_PREALLOC: u32 = 1;

/// Declares maps, each named by the entry of `pincer_common::names` that
/// has the static's own name (`AGENTS` is `names::AGENTS`, whose map is
/// `PINCER_AGENTS`): no map's name is written in this crate, and a static
/// whose name is not a map of the list does not compile. `cargo xtask
/// build-ebpf` checks that the object's maps are the list's, no more.
macro_rules! declare_maps {
    ($($(#[$attr:meta])* $vis:vis static $name:ident: $ty:ty = $init:expr;)*) => {$(
        pincer_common::map_name!($name => ($crate::maps::declare_maps) {
            $(#[$attr])* $vis static $name: $ty = $init;
        });
    )*};
    // Called back with the name the list gives.
    ($map:literal $(#[$attr:meta])* $vis:vis static $name:ident: $ty:ty = $init:expr;) => {
        $(#[$attr])*
        #[aya_ebpf::macros::map(name = $map)]
        $vis static $name: $ty = $init;
    };
}
pub(crate) use declare_maps;

declare_maps! {
    /// Agent cgroups: cgroup id → slot and mode.
    pub static AGENTS: HashMap<u64, Agent> = HashMap::with_max_entries(MAX_AGENTS, 0);

    /// Grants on existing objects.
    pub static GRANTS: HashMap<GrantKey, GrantValue> = HashMap::with_max_entries(MAX_GRANTS, 0);

    /// Grants on names whose objects did not exist when the mission was loaded.
    pub static NAME_GRANTS: HashMap<NameGrantKey, GrantValue> =
        HashMap::with_max_entries(MAX_NAME_GRANTS, 0);

    /// Grants on every name in a directory that starts with given bytes.
    pub static PREFIXES: LpmTrie<PrefixName, GrantValue> =
        LpmTrie::with_max_entries(MAX_NAME_GRANTS, 0);

    /// What earlier tree walks found (see `pincer_common::CachedGrant`).
    pub static GRANT_CACHE: LruHashMap<GrantKey, CachedGrant> =
        LruHashMap::with_max_entries(MAX_CACHED_GRANTS, 0);

    /// The generation of [`GRANT_CACHE`].
    pub static EPOCH: Array<u64> = Array::with_max_entries(1, 0);

    /// Parked requests by thread id.
    pub static PENDING: HashMap<u32, Pending> = HashMap::with_max_entries(MAX_PENDING, 0);

    /// One-shot verdicts by thread id.
    pub static VERDICTS: HashMap<u32, Verdict> = HashMap::with_max_entries(MAX_PENDING, 0);

    /// The twin's heartbeat.
    pub static TWIN: Array<Twin> = Array::with_max_entries(1, 0);

    /// The last request id handed out.
    pub static REQUEST_IDS: Array<u64> = Array::with_max_entries(1, 0);

    /// Decisions for userspace.
    pub static EVENTS: RingBuf = RingBuf::with_byte_size(EVENTS_BYTES, 0);

    /// Per-CPU counters, indexed by `pincer_common::counter`.
    pub static COUNTERS: PerCpuArray<u64> = PerCpuArray::with_max_entries(counter::COUNT, 0);

    /// Room for a [`NameGrantKey`], which does not fit the 512-byte BPF stack
    /// next to everything else.
    pub static SCRATCH: PerCpuArray<NameGrantKey> = PerCpuArray::with_max_entries(1, 0);

    /// Room for the key a prefix grant is looked up with, for the same reason.
    pub static PREFIX_SCRATCH: PerCpuArray<Key<PrefixName>> = PerCpuArray::with_max_entries(1, 0);

    /// Room for the path components of one event, filled by the path walk's
    /// `bpf_loop` callback and copied into the event.
    pub static PATHS: PerCpuArray<[[u8; COMPONENT_LEN]; MAX_COMPONENTS]> =
        PerCpuArray::with_max_entries(1, 0);

    /// Pincer's own processes by process id (see `pincer_common::names::GUARDED`).
    pub static GUARDED: HashMap<u32, u32> = HashMap::with_max_entries(MAX_GUARDED, 0);

    /// Who created an IPC object or a key, by its kernel address (see
    /// `hooks::owned`). Least recently used entries go first when it is full:
    /// their objects become nobody's.
    pub static OWNERS: LruHashMap<u64, u64> = LruHashMap::with_max_entries(MAX_OWNED, 0);

    /// What pincer knows of objects' content (see `pincer_common::Label`),
    /// shared by every pincer on the host. Not preallocated: a million labels
    /// would otherwise hold their memory from the start.
    pub static LABELS: HashMap<ObjectKey, Label> =
        HashMap::with_max_entries(MAX_LABELS, NO_PREALLOC);

    /// What names make of objects, by their first bytes (see
    /// `pincer_common::PolicyRules`).
    pub static POLICY_NAMES: LpmTrie<PolicyNameKey, PolicyRules> =
        LpmTrie::with_max_entries(MAX_POLICY_KEYS, NO_PREALLOC);

    /// The same by their last bytes.
    pub static POLICY_SUFFIXES: LpmTrie<PolicySuffixKey, PolicyRules> =
        LpmTrie::with_max_entries(MAX_POLICY_KEYS, NO_PREALLOC);

    /// Names a person's directory was moved away from by an agent (see
    /// `pincer_common::VacatedKey`).
    pub static VACATED: LruHashMap<VacatedKey, u32> = LruHashMap::with_max_entries(MAX_VACATED, 0);

    /// Creations allowed and not yet bound to their inode, by thread id. A
    /// creation that fails after its hook leaves its entry behind until the
    /// thread makes another or the entry is evicted.
    pub static MAKING: LruHashMap<u32, Making> = LruHashMap::with_max_entries(MAX_MAKING, 0);

    /// Placeholder files being made, by thread id: the new dentry, whose open
    /// is refused with `EEXIST` (see `pincer_common::names::PLACEHOLDERS`). A
    /// plain hash map: an entry evicted before its open would hand out a
    /// descriptor that writes a policy object.
    pub static PLACEHOLDERS: HashMap<u32, u64> = HashMap::with_max_entries(MAX_PLACEHOLDERS, 0);

    /// Agents' levels (see `pincer_common::Taint`), by cgroup id: written by
    /// the programs as agents read, removed by the twin when a run ends.
    pub static TAINTS: HashMap<u64, Taint> = HashMap::with_max_entries(MAX_AGENTS, 0);

    /// What missions reserve for agents at or above a level (`[[action]]`),
    /// keyed like grants.
    pub static ACTIONS: HashMap<GrantKey, Action> = HashMap::with_max_entries(MAX_ACTIONS, 0);

    /// Revocation counters of sources (see `pincer_common::Origin::stamp`),
    /// shared by every pincer on the host.
    pub static REVOKED: HashMap<u32, u32> = HashMap::with_max_entries(MAX_REVOKED, 0);

    /// Cgroups below which new cgroups are held (see `crate::held`): cgroup id
    /// → one of `pincer_common::watch`.
    pub static WATCHED: HashMap<u64, u32> = HashMap::with_max_entries(MAX_WATCHED, 0);
}

/// The agent the current task belongs to, if any: the one lookup every task
/// outside agent cgroups pays.
#[inline(always)]
pub fn current_agent() -> Option<Agent> {
    let cgroup = unsafe { bpf_get_current_cgroup_id() };
    unsafe { AGENTS.get(cgroup) }.copied()
}

/// Adds one to a counter.
#[inline(always)]
pub fn count(index: u32) {
    if let Some(slot) = COUNTERS.get_ptr_mut(index) {
        // Per-CPU: no other CPU writes this slot, and the program is not
        // preempted by itself on this one.
        unsafe { *slot += 1 };
    }
}

/// The current cache generation.
#[inline(always)]
pub fn epoch() -> u64 {
    EPOCH.get(0).copied().unwrap_or(0)
}

/// This CPU's entry of a one-entry per-CPU map: room a program works in
/// rather than on the BPF stack, which it shares with its nested callbacks.
#[inline(always)]
pub fn room<T>(map: &PerCpuArray<T>) -> Result<&'static mut T, ReadFailed> {
    let room = map.get_ptr_mut(0).ok_or(ReadFailed)?;
    // SAFETY: per-CPU room, used by one program at a time on this CPU.
    Ok(unsafe { &mut *room })
}

/// Invalidates every cached grant.
#[inline(always)]
pub fn bump_epoch() {
    if let Some(epoch) = EPOCH.get_ptr_mut(0) {
        // Atomic, as renames on every CPU bump it concurrently: a lost
        // increment could leave a walk cached under an epoch that a later
        // rename should have ended. The BPF target has atomic add but no
        // compare-and-swap, so Rust offers no `fetch_add`; this is the
        // instruction `__sync_fetch_and_add` compiles to.
        #[cfg(target_arch = "bpf")]
        unsafe {
            core::arch::asm!("lock *(u64 *)({0} + 0) += {1}", in(reg) epoch, in(reg) 1u64)
        };
        // The host build exists only for linting.
        #[cfg(not(target_arch = "bpf"))]
        unsafe {
            *epoch += 1;
        };
    }
}

/// Whether a twin has sent a heartbeat recently enough to answer.
#[inline(always)]
pub fn twin_alive() -> bool {
    let Some(twin) = TWIN.get(0) else {
        return false;
    };
    let now = unsafe { aya_ebpf::helpers::bpf_ktime_get_boot_ns() };
    twin.heartbeat_ns != 0 && now.saturating_sub(twin.heartbeat_ns) <= twin.timeout_ns
}

/// A fresh request id (never zero).
#[inline(always)]
pub fn next_request_id() -> u64 {
    let Some(last) = REQUEST_IDS.get_ptr_mut(0) else {
        return 0;
    };
    #[cfg(target_arch = "bpf")]
    {
        let mut id: u64 = 1;
        // Atomic fetch-and-add (kernel 5.12+): parks on every CPU draw ids
        // concurrently and each must be unique.
        unsafe {
            core::arch::asm!(
                "{0} = atomic_fetch_add((u64 *)({1} + 0), {0})",
                inout(reg) id,
                in(reg) last,
            )
        };
        id + 1
    }
    #[cfg(not(target_arch = "bpf"))]
    unsafe {
        *last += 1;
        *last
    }
}
