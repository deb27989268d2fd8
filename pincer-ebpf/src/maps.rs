//! The maps shared with userspace (names and value types in `pincer-common`).

use aya_ebpf::{
    helpers::bpf_get_current_cgroup_id,
    macros::map,
    maps::{HashMap, PerCpuArray, RingBuf},
};
use pincer_common::{
    Agent, EVENTS_BYTES, GrantKey, GrantValue, MAX_AGENTS, MAX_GRANTS, MAX_NAME_GRANTS,
    NameGrantKey, counter,
};

/// Agent cgroups: cgroup id → slot and mode.
#[map(name = "PINCER_AGENTS")]
pub static AGENTS: HashMap<u64, Agent> = HashMap::with_max_entries(MAX_AGENTS, 0);

/// Grants on existing objects.
#[map(name = "PINCER_GRANTS")]
pub static GRANTS: HashMap<GrantKey, GrantValue> = HashMap::with_max_entries(MAX_GRANTS, 0);

/// Grants on names whose objects did not exist when the mission was loaded.
#[map(name = "PINCER_NGRANTS")]
pub static NAME_GRANTS: HashMap<NameGrantKey, GrantValue> =
    HashMap::with_max_entries(MAX_NAME_GRANTS, 0);

/// Decisions for userspace.
#[map(name = "PINCER_EVENTS")]
pub static EVENTS: RingBuf = RingBuf::with_byte_size(EVENTS_BYTES, 0);

/// Per-CPU counters, indexed by `pincer_common::counter`.
#[map(name = "PINCER_COUNTERS")]
pub static COUNTERS: PerCpuArray<u64> = PerCpuArray::with_max_entries(counter::COUNT, 0);

/// Room for a [`NameGrantKey`], which does not fit the 512-byte BPF stack
/// next to everything else.
#[map(name = "PINCER_SCRATCH")]
pub static SCRATCH: PerCpuArray<NameGrantKey> = PerCpuArray::with_max_entries(1, 0);

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
