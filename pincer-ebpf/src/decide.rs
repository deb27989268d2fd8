//! The decision: do the agent's grants cover this access, and what does the
//! agent's mode make of the answer?
//!
//! | the access                                                         | enforce  | audit          | ask             |
//! |--------------------------------------------------------------------|----------|----------------|-----------------|
//! | granted, or an anonymous pipe or socket                            | allow    | allow          | allow           |
//! | not granted                                                        | `EACCES` | allow + report | park ([`park`]) |
//! | not granted, the syscall cannot restart ([`decide_unrestartable`]) | `EACCES` | allow + report | `EACCES`        |
//! | given by a rule beside the grants ([`decide_with`])                | allow    | allow          | allow           |
//! | refused whatever the grants ([`decide_with`])                      | `EACCES` | allow + report | `EACCES`        |
//! | two ends ([`decide_pair`]), one not granted                        | `EACCES` | allow + report | park that end   |
//! | two ends, neither granted                                          | `EACCES` | allow + report | `EACCES`        |
//! | not identified (no offsets, a read failed)                         | `EACCES` | allow + report | `EACCES`        |
//!
//! A change to a **policy object** (an agent's instructions or settings, a
//! git hook, a shell start-up file: named by the policy names, or labelled
//! so) takes no change operation from a grant above the object's policy
//! place: only a grant that names the object, or a tree inside the policy
//! place, gives one (an owner's approval, a mission's explicit grant). An
//! ungranted change there is reported with `event_flags::POLICY`, for the
//! owner alone to answer. A place an agent made (its label says so) holds
//! no policy object by name: a repository it made is its own.
//!
//! A granted access is reported only for agents with `REPORT_ALLOWED`.
//! Every path ends in [`settle`], the one place that counts, parks and
//! reports; it and the lookup run as callbacks over a per-CPU entry (see
//! [`decide_entry`] for why). A full ring buffer is counted and changes nothing, except that
//! a request nobody would hear of is denied rather than parked.

use pincer_common::{
    Agent, CHANGE_OPS, CachedGrant, EACCES, ERESTARTNOINTR, GrantKey, Label, MAX_PREFIX_LEN,
    MAX_TREE_DEPTH, NO_OWN_NAMESPACES, PrefixName, agent_flags, counter, event_flags, hook,
    label_flags, mode, ops, policy_entry, policy_rule, verdict,
};

use aya_ebpf::{
    cty::c_void,
    helpers::{bpf_get_current_cgroup_id, bpf_get_current_pid_tgid, bpf_loop},
    maps::PerCpuArray,
};

use crate::{
    access::Access,
    kernel::{self, Failure, ReadFailed},
    labels,
    maps::{
        GRANT_CACHE, GRANTS, NAME_GRANTS, PLACEHOLDERS, PREFIX_SCRATCH, PREFIXES, count, epoch,
    },
    park,
    policy::{self, Place},
    report,
};

crate::maps::declare_maps! {
    /// Room for the checks of one program run: the access (both ends of a link
    /// or rename) and what the grants and labels say of it. Per CPU rather than
    /// on the 512-byte BPF stack, which the walks' callbacks share; one program
    /// runs at a time on a CPU.
    static CHECKS: PerCpuArray<Checked> = PerCpuArray::with_max_entries(2, 0);
}

/// The [`CHECKS`] entry of a single access, or of a link's or rename's
/// object.
const FIRST: u32 = 0;
/// The [`CHECKS`] entry of a link's or rename's new name.
const SECOND: u32 = 1;

/// An access, the rules beside the grants, and what the grants and labels
/// say of it: the entry both callbacks ([`check_step`], [`decide_step`])
/// work on.
#[repr(C)]
pub struct Checked {
    /// The agent.
    agent: Agent,
    /// Operations the grants gave.
    granted: u32,
    /// The walk met a policy place.
    barrier: u32,
    /// The policy place met ([`Place::NONE`] when none).
    place: Place,
    /// Non-zero when the change is one the twin inspects before it answers
    /// (a rename into a name whose rule says so): parked in enforce mode
    /// too.
    inspect: u32,
    /// Non-zero when the access makes a directory where a person's was
    /// moved away from: the new one is the person's place, not the
    /// agent's own.
    vacated: u32,
    /// For a rename's name end: the object it moves (device, inode), which
    /// a pinned verdict must name.
    moved_dev: u64,
    /// See `moved_dev`.
    moved_ino: u64,
    /// Operations the mission reserves for agents of a higher level than
    /// this one's ([`labels::reserved`]): taken from what the grants gave.
    reserved: u32,
    /// Non-zero when the object was derived from a source revoked since
    /// ([`labels::revoked`]): nothing is granted on it.
    revoked: u32,
    /// The object's label (`labels::none()` for a new name).
    label: Label,
    /// Non-zero when the access is to an object labels are for: not a pipe
    /// or socket, not one a rule beside the grants gave (`/proc`, pidfs).
    labelled: u32,
    /// Its own number in [`CHECKS`].
    which: u32,
    /// Operations a rule gives whatever the grants.
    also: u32,
    /// Non-zero when a rule refuses the access whatever the grants: the
    /// event flag of its reason (nothing is looked up).
    forced: u32,
    /// The event flag of the reason an ungranted access cannot be parked
    /// (zero when it can be).
    no_park: u32,
    /// Non-zero when the access makes a placeholder.
    placeholder: u32,
    /// The change operations the policy place met took from the tree
    /// grants above it (the walk's `masked`): what the grants would give
    /// but for that place.
    masked: u32,
    /// The hook's verdict, as [`decide_step`] leaves it.
    ret: i32,
    /// Non-zero when the access was identified; when not, `access` is
    /// [`Access::unidentified`] and the access is denied.
    identified: u32,
    /// The access.
    access: Access,
}

// SAFETY: a `Checked` lives only in the per-CPU `CHECKS`, where one program
// at a time on its CPU reads and writes it; its kernel pointers are only
// handed to the kernel's probe reads.
unsafe impl Sync for Checked {}

/// What decides an access besides the grants: operations a rule gives
/// (`also`), a rule's refusal whatever the grants (`forced`, the event
/// flag of its reason), and why it could not be parked (`no_park`).
#[derive(Clone, Copy, Default)]
pub struct Rules {
    also: u32,
    forced: u32,
    no_park: u32,
}

/// This CPU's entry `which` of [`CHECKS`].
#[inline(always)]
fn entry(which: u32) -> Option<&'static mut Checked> {
    let checked = CHECKS.get_ptr_mut(which)?;
    // SAFETY: per-CPU room, used by one program at a time on this CPU.
    Some(unsafe { &mut *checked })
}

/// The entry whose number a callback's context holds ([`run`]).
#[inline(always)]
fn callback_entry(ctx: *mut c_void) -> Option<&'static mut Checked> {
    // SAFETY: `ctx` is the entry number on the caller's stack, for the
    // duration of `bpf_loop`.
    entry(unsafe { *ctx.cast::<u32>() })
}

/// Fills the [`CHECKS`] entry `which` with an access as its hook built it,
/// and the rules beside the grants: not looked up yet.
#[inline(always)]
fn prepare(
    which: u32,
    agent: &Agent,
    access: Result<Access, Failure>,
    rules: Rules,
) -> Option<&'static mut Checked> {
    let checked = entry(which)?;
    match access {
        Ok(access) => {
            checked.identified = 1;
            checked.access = access;
        }
        Err(failure) => {
            count(match failure {
                Failure::NoOffsets => counter::NO_OFFSETS,
                Failure::Read => counter::READ_FAILED,
            });
            checked.identified = 0;
            checked.access = Access::unidentified();
        }
    }
    checked.agent = *agent;
    checked.granted = 0;
    checked.barrier = 0;
    checked.place = Place::NONE;
    checked.inspect = 0;
    checked.vacated = 0;
    checked.moved_dev = 0;
    checked.moved_ino = 0;
    checked.reserved = 0;
    checked.revoked = 0;
    checked.label = labels::none();
    checked.labelled = 0;
    checked.which = which;
    checked.also = rules.also;
    checked.forced = rules.forced;
    checked.no_park = rules.no_park;
    checked.placeholder = 0;
    checked.masked = 0;
    checked.ret = -EACCES;
    Some(checked)
}

/// Runs `callback` as a one-step `bpf_loop` on the entry `which`: false
/// when it could not run.
#[inline(always)]
fn run(callback: extern "C" fn(u64, *mut c_void) -> i64, which: u32) -> bool {
    let mut which = which;
    let ran = unsafe { bpf_loop(1, callback as *mut c_void, (&raw mut which).cast(), 0) };
    ran >= 0
}

/// Checks an access and decides it: fills the entry `which`, looks up
/// what the grants and labels say ([`check_step`]), decides and reports
/// ([`decide_step`]); returns the hook's verdict.
///
/// Both run as callbacks of one-step `bpf_loop`s, on the entry rather than
/// on the program's stack: the verifier checks a callback's instructions
/// once and prunes a later call whose state it has seen, and does not
/// follow values in a map, so the many ways through a hook (its rules, its
/// two ends, the few constants its operations can be) meet again at each
/// callback instead of each being checked down to the report. The 512-byte
/// BPF stack is left to the callbacks and the walks they run.
#[inline(always)]
fn decide_entry(which: u32, agent: &Agent, access: Result<Access, Failure>, rules: Rules) -> i32 {
    let Some(checked) = prepare(which, agent, access, rules) else {
        return unroomed();
    };
    look_up(checked);
    finish(which)
}

/// Looks up what the grants and labels say of a prepared entry
/// ([`check_step`]); nothing is granted when that cannot run.
#[inline(always)]
fn look_up(checked: &mut Checked) {
    if !run(check_step, checked.which) {
        count(counter::READ_FAILED);
        checked.granted = 0;
        checked.labelled = 0;
    }
}

/// Decides the entry `which`, looked up already ([`decide_step`]).
#[inline(always)]
fn finish(which: u32) -> i32 {
    if !run(decide_step, which) {
        return unroomed();
    }
    let Some(checked) = entry(which) else {
        return unroomed();
    };
    // SAFETY: a plain value in this CPU's entry.
    let ret = unsafe { core::ptr::read_volatile(&checked.ret) };
    // Back to the constants the decision returns: read from a map, the
    // verdict is any value to the verifier, which (6.x) wants an LSM
    // program's return to be a known errno or zero.
    if ret == 0 {
        0
    } else if ret == -ERESTARTNOINTR {
        -ERESTARTNOINTR
    } else {
        -EACCES
    }
}

/// The verdict when the entry cannot be had or its callback not run
/// (never): denied, counted.
#[inline(always)]
fn unroomed() -> i32 {
    count(counter::READ_FAILED);
    count(counter::DENIED);
    -EACCES
}

/// Decides an agent's access and reports it; returns the hook's verdict.
#[inline(always)]
pub fn decide(agent: &Agent, access: Result<Access, Failure>) -> i32 {
    decide_entry(FIRST, agent, access, Rules::default())
}

/// Decides the making of a new name, which a sandbox of the agent's own
/// may make as a placeholder at a policy name when `may_hold` (only for a
/// directory, or a file made with no execute or set-id bit; see
/// [`placeholder`]).
///
/// The placeholder's rule runs in a callback of its own, and only when
/// the grants did not cover the name and a policy place was met: the
/// programs of the other hooks never verify it.
#[inline(always)]
pub fn decide_new(agent: &Agent, access: Result<Access, Failure>, may_hold: bool) -> i32 {
    let Some(checked) = prepare(FIRST, agent, access, Rules::default()) else {
        return unroomed();
    };
    look_up(checked);
    if may_hold && checked.barrier != 0 && !checked.covered() {
        run(placeholder_step, FIRST);
    }
    finish(FIRST)
}

/// Decides the removal of a name (`unlink`), which the agent that made a
/// placeholder file may make while it is still empty ([`tidied`]), in a
/// callback of its own as for [`decide_new`].
#[inline(always)]
pub fn decide_removal(agent: &Agent, access: Result<Access, Failure>) -> i32 {
    let Some(checked) = prepare(FIRST, agent, access, Rules::default()) else {
        return unroomed();
    };
    look_up(checked);
    if checked.barrier != 0
        && !checked.covered()
        && checked.label.flags & label_flags::PLACEHOLDER != 0
    {
        run(tidied_step, FIRST);
    }
    finish(FIRST)
}

/// Decides an access by a rule beside the grants (see [`crate::objects`]):
/// `also` is given besides them, and a non-zero `forced` refuses whatever
/// they give, for the reason of that event flag.
#[inline(always)]
pub fn decide_with(agent: &Agent, access: Result<Access, Failure>, also: u32, forced: u32) -> i32 {
    let Some(checked) = ruled(agent, access, also, forced) else {
        return unroomed();
    };
    look_up(checked);
    finish(FIRST)
}

/// [`decide_with`] for an existing object, where a refused global `/proc`
/// write (`KERNEL_SETTING`, [`crate::objects::rule`]) that is a limit of a
/// sandbox of the agent's own is lifted ([`limit_step`]).
///
/// That callback runs for every access decided here and returns at once
/// for all but those writes. Run only for them, its branch would have the
/// compiler copy the lookup that follows, and the verifier would check
/// that copy too (file_open's instructions verified on 6.1: 334 658 so,
/// 260 835 as it is).
#[inline(always)]
pub fn decide_object(
    agent: &Agent,
    access: Result<Access, Failure>,
    also: u32,
    forced: u32,
) -> i32 {
    let Some(checked) = ruled(agent, access, also, forced) else {
        return unroomed();
    };
    run(limit_step, FIRST);
    look_up(checked);
    finish(FIRST)
}

/// The first entry prepared for an access with a rule beside the grants
/// ([`decide_with`]); a refusal by the guard is counted.
#[inline(always)]
fn ruled(
    agent: &Agent,
    access: Result<Access, Failure>,
    also: u32,
    forced: u32,
) -> Option<&'static mut Checked> {
    if forced == event_flags::GUARD && agent.mode != mode::AUDIT {
        count(counter::GUARDED);
    }
    let rules = Rules {
        also,
        forced,
        no_park: forced,
    };
    prepare(FIRST, agent, access, rules)
}

/// The callback that lifts the refusal of a global `/proc` write for a
/// limit of the writer's own user namespace, written from a sandbox of
/// the agent's own ([`crate::objects::own_limit`]): the write is given as
/// a rule gives it. A callback of its own, run before the lookup only by
/// the programs that decide existing objects ([`decide_object`]).
extern "C" fn limit_step(_index: u64, ctx: *mut c_void) -> i64 {
    let Some(checked) = callback_entry(ctx) else {
        return 1;
    };
    if checked.identified != 0
        && checked.forced == event_flags::KERNEL_SETTING
        && matches!(
            crate::objects::own_limit(&checked.access, checked.agent.userns_home),
            Ok(true)
        )
    {
        checked.forced = 0;
        checked.no_park = 0;
        checked.also = checked.access.ops;
    }
    1
}

/// Like [`decide`] for a hook whose system call cannot be restarted: an
/// ungranted access is denied in ask mode too.
#[inline(always)]
pub fn decide_unrestartable(agent: &Agent, access: Result<Access, Failure>) -> i32 {
    let rules = Rules {
        no_park: event_flags::NOT_RESTARTABLE,
        ..Rules::default()
    };
    decide_entry(FIRST, agent, access, rules)
}

/// Decides an operation with two ends (a hard link, a rename), allowed only
/// when the grants cover both. In ask mode one end at a time is parked, and
/// only when the other is granted: the restarted syscall then finds the
/// verdict for that end and the grant for the other, so a verdict given once
/// is never asked for again in a loop. Both ends ungranted is denied at once
/// (and only the first is reported).
#[inline(always)]
pub fn decide_pair(
    agent: &Agent,
    first: Result<Access, Failure>,
    second: impl FnOnce() -> Result<Access, Failure>,
) -> i32 {
    // Each end is copied into its entry as it is checked: two accesses
    // never hold the stack at once.
    let Some(object) = prepare(FIRST, agent, first, Rules::default()) else {
        return unroomed();
    };
    look_up(object);
    let Some(name) = prepare(SECOND, agent, second(), Rules::default()) else {
        return unroomed();
    };
    name.moved_dev = object.access.dev;
    name.moved_ino = object.access.ino;
    look_up(name);
    let object_covered = object.covered();
    let name_covered = name.covered();
    // The object placed in a policy place (the owner allowed it) is no
    // longer the agent's own there.
    let placed = name.barrier != 0 && object.identified != 0;
    let which = match (object_covered, name_covered) {
        (true, false) => SECOND,
        (false, false) => {
            object.no_park = event_flags::BOTH_ENDS;
            FIRST
        }
        _ => FIRST,
    };
    let ret = finish(which);
    if ret == 0 && placed && (!run(place_step, FIRST) || entry(FIRST).is_none_or(|o| o.ret != 0)) {
        return -EACCES;
    }
    if ret == 0 && object.access.hook == hook::INODE_RENAME {
        // A person's directory moved away: its name is remembered.
        run(vacate_step, FIRST);
    }
    ret
}

/// The callback that remembers the name a person's directory was moved
/// away from ([`policy::vacate`]), for the entry its context holds: a
/// callback of its own, like [`place_step`].
extern "C" fn vacate_step(_index: u64, ctx: *mut c_void) -> i64 {
    if let Some(checked) = callback_entry(ctx) {
        policy::vacate(&checked.access, &checked.label);
    }
    1
}

/// The callback that labels the object of the entry its context holds as
/// placed in a policy place ([`labels::Placed::in_policy`]), leaving
/// `-EACCES` in the entry's `ret` when that label cannot be written. A
/// callback of its own: the label it builds stays off the hook's stack,
/// which the verifier adds to every callback's.
extern "C" fn place_step(_index: u64, ctx: *mut c_void) -> i64 {
    let Some(checked) = callback_entry(ctx) else {
        return 1;
    };
    checked.ret = if labels::Placed::of(&checked.access).in_policy().is_err() {
        -EACCES
    } else {
        0
    };
    1
}

impl Checked {
    /// Whether the grants cover every operation the access needs.
    #[inline(always)]
    fn covered(&self) -> bool {
        self.identified != 0 && self.granted & self.access.ops == self.access.ops
    }
}

/// The callback that looks up what the grants and labels say of the entry
/// whose number its context holds (nothing for an unidentified access or
/// one a rule refused).
extern "C" fn check_step(_index: u64, ctx: *mut c_void) -> i64 {
    let Some(checked) = callback_entry(ctx) else {
        return 1;
    };
    if checked.identified == 0 || checked.forced != 0 {
        return 1;
    }
    let also = checked.also;
    let access = &checked.access;
    if kernel::is_pipe_or_socket(kernel::off(), access.dev) {
        checked.granted = access.ops;
        return 1;
    }
    // A memfd or System V shared memory is memory the agent made (or was
    // handed), not a file anyone named: sizing and reading it is the
    // agent's, as for a pipe. Executing it stays undecided here, so
    // `fexecve` of a memfd is refused (or asked about) as before.
    if kernel::is_internal_shm(kernel::off(), access.dev) && access.ops & ops::EXEC == 0 {
        checked.granted = access.ops;
        return 1;
    }
    // A tmpfs the agent mounted in a sandbox of its own began empty: what
    // is in it is the agent's, as in a memfd. Running it stays undecided
    // here, as for a memfd.
    if access.ops & ops::EXEC == 0
        && checked.agent.userns_home != NO_OWN_NAMESPACES
        && kernel::on_own_tmpfs(
            kernel::off(),
            object_inode(access),
            checked.agent.userns_home,
        )
    {
        checked.granted = access.ops;
        return 1;
    }
    if also & access.ops == access.ops {
        checked.granted = also;
        return 1;
    }
    // A restarted parked access its verdict allows needs no walk: the
    // verdict is applied whatever the grants give (`park::prepare`), and
    // only the label, which the allowed access may change, is wanted.
    let verdict_allows =
        checked.agent.mode == mode::ASK && checked.no_park == 0 && park::allowed_by_verdict(access);
    let found = labels::own(access).and_then(|label| {
        if verdict_allows {
            return Ok((label, Found::NOTHING));
        }
        let mut found = granted_ops(checked.agent.slot, access, &label)?;
        // The rules about a person's directories hold whatever the walk
        // or the cache found.
        let (entry, vacated) = policy::forced(access, &label)?;
        if entry != policy_entry::NONE {
            found.granted &= !CHANGE_OPS;
            found.barrier = true;
            policy::set(entry)?;
        }
        found.vacated = vacated;
        if label.flags & label_flags::SEALED != 0 {
            // The twin's copy of what it inspected: moved, never changed.
            found.granted &= !(ops::WRITE | ops::SETATTR | ops::LINK);
        }
        Ok((label, found))
    });
    checked.labelled = 1;
    match found {
        Ok((label, found)) => {
            let reserved = if checked.agent.flags & agent_flags::ACTIONS == 0 {
                0
            } else {
                labels::reserved(checked.agent.slot, access)
            };
            let revoked = labels::revoked(&label);
            checked.label = label;
            checked.granted = if revoked {
                0
            } else {
                (found.granted | also) & !reserved
            };
            checked.barrier = u32::from(found.barrier);
            if found.barrier && policy::result(&mut checked.place).is_err() {
                checked.place = Place::NONE;
            }
            checked.masked = found.masked;
            checked.vacated = u32::from(found.vacated);
            // Only the name end of a rename can be inspected: the twin
            // reads what is moved in before it answers.
            checked.inspect = u32::from(
                checked.place.bits & policy_rule::INSPECT != 0
                    && access.hook == hook::INODE_RENAME
                    && access.ops & ops::RENAME == 0,
            );
            checked.reserved = reserved;
            checked.revoked = u32::from(revoked);
        }
        Err(ReadFailed) => {
            count(counter::READ_FAILED);
            checked.granted = also;
        }
    }
    1
}

// The rest of this module is in two files by concern: `settle.rs`, what the
// agent's mode makes of the grants' answer (and a sandbox's placeholders),
// and `walk.rs`, what the grants give (the grant cache and the walk up the
// ancestors). They are included rather than made submodules: as
// submodules, the same source compiled to other instructions (the
// compiler's back end arranges a module's items differently) that the 6.1
// verifier took 19 % longer to check (7.50 million instructions over all
// programs against 6.32 million; `inode_link` and `inode_rename` 900 000
// each, near the million it allows, against 757 000 and 766 000). Included,
// the object is byte for byte the one a single file makes.
include!("decide/settle.rs");
include!("decide/walk.rs");
