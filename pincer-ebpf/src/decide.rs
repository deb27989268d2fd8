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

/// Whether a new name refused only by its policy place may be made as a
/// **placeholder**: bubblewrap, as agents' own sandboxes use it, makes an
/// empty file or directory at each name it binds something over, and the
/// names an agent's sandbox protects that way are policy names
/// (`.claude/settings.json`, `.git`).
///
/// It may when the grants would give the creation but for the policy place
/// (never outside the mission), the name is made from a mount namespace of
/// the agent's own sandbox ([`kernel::own_mount_namespace`]), it is a
/// directory or a file with no execute or set-id bit (`may_hold`), and it
/// is not a name that sends a tool elsewhere made as a file (an empty
/// `.git` file breaks git). A placeholder file's open is refused with
/// `EEXIST` (`hooks::file::file_open`), so no descriptor that writes it is
/// ever given: it stays empty. Either kind is labelled a policy object
/// (a directory a policy tree), not the agent's own: only the owner changes
/// or removes it, and in a placeholder directory the agent makes nothing
/// but placeholders, whatever the names (a `.git` it made so holds no
/// `HEAD` of its own).
#[inline(always)]
fn placeholder(checked: &Checked) -> bool {
    let access = &checked.access;
    let file = access.hook == hook::INODE_CREATE;
    if access.exists
        || (checked.granted | checked.masked) & access.ops != access.ops
        || checked.agent.userns_home == NO_OWN_NAMESPACES
        || (file && checked.place.bits & policy_rule::REDIRECT != 0)
        || !kernel::own_mount_namespace(kernel::off(), checked.agent.userns_home)
    {
        return false;
    }
    // Audit mode changes nothing a program sees: the open keeps its
    // descriptor (the placeholder is still made as one, unreported, as
    // enforce mode would allow it).
    if !file || checked.agent.mode == mode::AUDIT {
        return true;
    }
    // Recorded before it is made: a file whose open could not be refused
    // is not made at all.
    let tid = bpf_get_current_pid_tgid() as u32;
    PLACEHOLDERS.insert(tid, access.dentry as u64, 0).is_ok()
}

/// The callback that makes the new name of the entry its context holds a
/// placeholder when it may be one ([`placeholder`]).
extern "C" fn placeholder_step(_index: u64, ctx: *mut c_void) -> i64 {
    let Some(checked) = callback_entry(ctx) else {
        return 1;
    };
    if checked.identified != 0 && checked.revoked == 0 && placeholder(checked) {
        count(counter::PLACEHOLDERS);
        checked.placeholder = 1;
        checked.granted |= checked.access.ops & !checked.reserved;
    }
    1
}

/// Whether the access removes a placeholder file ([`placeholder`]) its
/// own agent made, still empty, where the grants would give the removal
/// but for the policy place: bubblewrap's users tidy up the placeholders
/// of a sandboxed command after it. (A placeholder directory is removed
/// like any directory: only an empty one is.) One the owner has written
/// since is the owner's. Asked only by [`decide_removal`], for an unlink
/// of an object labelled a placeholder.
#[inline(always)]
fn tidied(checked: &Checked) -> bool {
    // The label is read again, though `decide_removal` looked at it: without
    // this test the verifier checks inode_unlink's program 3.7 % longer on
    // 6.1 (250 454 instructions against 241 568).
    if checked.label.flags & label_flags::PLACEHOLDER == 0
        || (checked.granted | checked.masked) & ops::DELETE == 0
        || checked.label.agent != unsafe { bpf_get_current_cgroup_id() }
    {
        return false;
    }
    // `i_size` is a `loff_t`.
    kernel::read::<i64>(checked.access.inode, kernel::off().inode_i_size)
        .is_ok_and(|size| size == 0)
}

/// The callback that gives the removal of the entry its context holds
/// when it tidies a placeholder away ([`tidied`]).
extern "C" fn tidied_step(_index: u64, ctx: *mut c_void) -> i64 {
    let Some(checked) = callback_entry(ctx) else {
        return 1;
    };
    if checked.identified != 0 && checked.revoked == 0 && tidied(checked) {
        checked.granted |= ops::DELETE & !checked.reserved;
    }
    1
}

/// The inode of the object, or for a creation of its directory (null when
/// it cannot be read).
#[inline(always)]
fn object_inode(access: &Access) -> *const u8 {
    if !access.inode.is_null() || access.dentry.is_null() {
        return access.inode;
    }
    let off = kernel::off();
    match kernel::parent(off, access.dentry) {
        Ok(Some(dir)) => kernel::dentry_inode(off, dir).unwrap_or(core::ptr::null()),
        _ => core::ptr::null(),
    }
}

/// The callback that decides the entry whose number its context holds
/// ([`settle`]) and leaves the hook's verdict in it.
extern "C" fn decide_step(_index: u64, ctx: *mut c_void) -> i64 {
    let Some(checked) = callback_entry(ctx) else {
        return 1;
    };
    checked.ret = settle(checked);
    1
}

/// Applies the agent's mode to a checked access and reports the result.
///
/// The entry's `no_park` is the event flag of the reason an ungranted
/// access cannot be parked in ask mode (zero when it can be); its `forced`
/// makes the access ungranted whatever the grants, with that flag. Every
/// path reaches the one reporting call at the end: each call site of
/// `report::fill` is a copy of the path walk the verifier checks again,
/// and the programs load faster with one.
///
/// What the access makes or changes is labelled before it goes on, on the
/// two ways an access is allowed: granted (or audit mode, which allows
/// everything), and a verdict that allows a parked one.
#[inline(always)]
fn settle(checked: &Checked) -> i32 {
    let agent = &checked.agent;
    // Each field the decision branches on is read once: the verifier does
    // not follow values in a map, so two reads of one field are two values
    // to it, and a choice the compiler makes from one read and relies on
    // at another would not hold for it.
    // SAFETY: plain values in this CPU's entry.
    let (identified, granted, barrier, ops, forced, no_park, reserved, revoked, inspect) = unsafe {
        (
            core::ptr::read_volatile(&checked.identified) != 0,
            core::ptr::read_volatile(&checked.granted),
            core::ptr::read_volatile(&checked.barrier) != 0,
            core::ptr::read_volatile(&checked.access.ops),
            core::ptr::read_volatile(&checked.forced),
            core::ptr::read_volatile(&checked.no_park),
            core::ptr::read_volatile(&checked.reserved),
            core::ptr::read_volatile(&checked.revoked) != 0,
            core::ptr::read_volatile(&checked.inspect) != 0,
        )
    };
    let covered = identified && granted & ops == ops;
    let allowed = (forced == 0 && covered) || agent.mode == mode::AUDIT;
    if allowed && label_allowed(checked).is_err() {
        count(counter::DENIED);
        return -EACCES;
    }
    let tainted = if allowed {
        match taint(checked) {
            Ok(flag) => flag,
            Err(()) => {
                count(counter::DENIED);
                return -EACCES;
            }
        }
    } else {
        0
    };
    // All three are the owner's alone to allow.
    let policy = if forced == 0 && revoked {
        count(counter::REVOKED);
        event_flags::REVOKED
    } else if forced == 0 && barrier && ops & CHANGE_OPS & !granted != 0 {
        count(counter::POLICY);
        if inspect {
            event_flags::POLICY | event_flags::INSPECT
        } else {
            event_flags::POLICY
        }
    } else if forced == 0 && reserved & ops != 0 {
        count(counter::ACTION);
        event_flags::ACTION
    } else {
        0
    };
    let access = &checked.access;
    let mut parked: Option<(u32, u64, u64)> = None;
    let (ret, verdict, flags) = if forced == 0 && covered {
        count(counter::ALLOWED);
        if agent.flags & agent_flags::REPORT_ALLOWED == 0 && tainted == 0 {
            return 0;
        }
        (0, verdict::ALLOWED, tainted)
    } else if agent.mode == mode::AUDIT {
        count(counter::AUDITED);
        (0, verdict::AUDITED, forced | policy | tainted)
    } else if (agent.mode == mode::ASK || policy & event_flags::INSPECT != 0)
        && no_park == 0
        && identified
    {
        // A change the twin inspects parks in enforce mode too: the twin
        // answers it from what is moved in, asking nobody.
        let moved = (checked.moved_dev, checked.moved_ino);
        match park::prepare(access, moved) {
            park::Prepared::Done(0) => {
                // A verdict allowed it.
                if label_allowed(checked).is_err() {
                    count(counter::DENIED);
                    return -EACCES;
                }
                if taint(checked).is_err() {
                    count(counter::DENIED);
                    return -EACCES;
                }
                return 0;
            }
            park::Prepared::Done(ret) => return ret,
            park::Prepared::New { tid, id, name_hash } => {
                parked = Some((tid, id, name_hash));
                (-ERESTARTNOINTR, verdict::PARKED, policy)
            }
            park::Prepared::Deny(why) => {
                count(counter::DENIED);
                (-EACCES, verdict::DENIED, why | policy)
            }
        }
    } else {
        count(counter::DENIED);
        let why = if agent.mode == mode::ASK {
            no_park
        } else {
            forced
        };
        (-EACCES, verdict::DENIED, why | forced | policy)
    };

    let Some(mut event) = report::reserve() else {
        count(counter::RINGBUF_FULL);
        if let Some((tid, _, _)) = parked {
            // A request nobody will hear of cannot wait: deny it.
            park::abandon(tid);
            count(counter::DENIED);
            return -EACCES;
        }
        return ret;
    };
    let (request_id, name_hash) = parked.map_or((0, 0), |(_, id, hash)| (id, hash));
    let place = if flags & event_flags::POLICY != 0 {
        checked.place
    } else {
        Place::NONE
    };
    let outcome = report::Outcome {
        granted,
        verdict,
        flags,
        request_id,
        name_hash,
        policy_entry: place.entry,
        policy_step: place.step,
    };
    report::fill(&mut event, agent, access, identified, outcome);
    if let Some((tid, _, _)) = parked {
        // Stop before the event is visible, so the twin never answers a
        // request whose task is still running.
        if !park::stop() {
            park::abandon(tid);
            count(counter::UNPARKABLE);
            count(counter::DENIED);
            report::mark_denied(&mut event, event_flags::UNPARKABLE);
            event.submit(0);
            return -EACCES;
        }
        count(counter::PARKED);
    }
    event.submit(0);
    ret
}

/// Labels what an allowed access makes or changes ([`labels::allowed`]).
#[inline(always)]
fn label_allowed(checked: &Checked) -> Result<(), ()> {
    if checked.labelled == 0 {
        return Ok(());
    }
    // What an agent makes in a policy place (the owner allowed it) or where
    // a person's directory was is not its own; a placeholder is a policy
    // object by its label too, and below a placeholder directory
    // everything is policy, work names included.
    let made = if checked.placeholder != 0 {
        if checked.access.hook == hook::INODE_MKDIR {
            label_flags::POLICY | label_flags::PLACEHOLDER | label_flags::TREE
        } else {
            label_flags::POLICY | label_flags::PLACEHOLDER
        }
    } else if checked.barrier != 0 || checked.vacated != 0 {
        0
    } else {
        label_flags::AGENT_MADE
    };
    labels::allowed(&checked.access, &checked.label, made)
}

/// Lowers the agent's level when an allowed access read tainted content
/// ([`labels::read`]): the event flag to report it with, or zero; `Err`
/// when the level could not be written, and the read is then refused.
#[inline(always)]
fn taint(checked: &Checked) -> Result<u32, ()> {
    if checked.labelled == 0 {
        return Ok(0);
    }
    Ok(if labels::read(&checked.access, &checked.label)? {
        event_flags::TAINT
    } else {
        0
    })
}

/// What the grants give on an access. The policy place met, if any, is
/// the policy search's ([`policy::result`]).
#[derive(Clone, Copy)]
struct Found {
    /// The operations.
    granted: u32,
    /// Whether a policy place was met before they covered the access.
    barrier: bool,
    /// The access makes a directory where a person's was moved away from.
    vacated: bool,
    /// Change operations tree grants above the policy place would have
    /// given.
    masked: u32,
}

impl Found {
    /// Nothing granted, no place.
    const NOTHING: Found = Found {
        granted: 0,
        barrier: false,
        vacated: false,
        masked: 0,
    };
}

/// Where the search for a policy place stands in a walk.
mod search {
    /// Not searched: the access changes nothing, or changes an object an
    /// agent made (the agent's own place).
    pub const NONE: u32 = 0;
    /// Looking at each component's name and label.
    pub const ON: u32 = 1;
    /// Met: the object is labelled policy; changes are taken from no grant
    /// further up.
    pub const MET: u32 = 2;
}

/// The operations the agent's grants give on the accessed object, from the
/// grant cache when an earlier walk already found them. `label` is the
/// object's own.
///
/// A walk for an access that changes nothing does not look for policy
/// places, so what it caches leaves out the change operations; a walk for a
/// change looks, and caches what it found. A policy object by its own label
/// is never answered from the cache (its entry may predate the label).
#[inline(always)]
fn granted_ops(slot: u32, access: &Access, label: &Label) -> Result<Found, ReadFailed> {
    // Removing a directory is not a change to a policy object: the kernel
    // removes only an empty one, and what a policy directory held is
    // protected itself (git tries `rmdir .git` as it tidies up after a
    // stash, which only fails as `ENOTEMPTY`). It is cached as a read is,
    // so no other change takes what its walk found.
    let change = access.ops & CHANGE_OPS != 0 && access.hook != hook::INODE_RMDIR;
    let search = if !change || labels::is_agent_made(label) {
        search::NONE
    } else if labels::is_policy(label) {
        search::MET
    } else {
        search::ON
    };
    let key = GrantKey {
        slot,
        _pad: 0,
        dev: access.dev,
        ino: access.ino,
    };
    // No place until a walk finds one.
    policy::set(policy_entry::NONE)?;
    // Read before the walk: an invalidation that lands during the walk makes
    // what it finds stale, and the entry written with this epoch says so.
    // New names are not cached: their key is their directory's.
    let epoch = epoch();
    let cached = match unsafe { GRANT_CACHE.get(key) } {
        Some(entry) if access.exists && entry.epoch == epoch && search != search::MET => entry.ops,
        _ => 0,
    };
    if access.exists && cached & access.ops == access.ops {
        return Ok(Found {
            granted: cached,
            ..Found::NOTHING
        });
    }
    let found = walk_grants(slot, access, search)?;
    if access.exists && found.granted != 0 {
        let ops = if change {
            found.granted
        } else {
            found.granted & !CHANGE_OPS
        };
        let entry = CachedGrant {
            ops: ops | cached,
            _pad: 0,
            epoch,
        };
        // A full cache evicts its least recently used entry; a failed insert
        // only costs a walk next time.
        let _ = GRANT_CACHE.insert(key, entry, 0);
    }
    Ok(Found {
        granted: found.granted | cached,
        ..found
    })
}

/// The operations the agent's grants give on the accessed object: its own
/// inode grant, tree grants on its ancestors, and a name grant on its name in
/// its directory. Stops looking as soon as every needed operation is covered.
///
/// With `search` on, it first finds the object's policy place
/// ([`policy::place`]): tree grants from there up give no change operation.
#[inline(always)]
fn walk_grants(slot: u32, access: &Access, search: u32) -> Result<Found, ReadFailed> {
    let needed = access.ops;
    let key = GrantKey {
        slot,
        _pad: 0,
        dev: access.dev,
        ino: access.ino,
    };
    let dentry = access.dentry()?;
    let mask_from = match search {
        search::ON => policy::place(dentry, access)?,
        search::MET => {
            policy::set(policy_entry::LABEL)?;
            1
        }
        _ => 0,
    };
    let barrier = mask_from != 0;
    let mut granted = 0;
    if access.exists
        && let Some(grant) = unsafe { GRANTS.get(key) }
    {
        granted |= grant.file_ops | grant.tree_ops;
    }
    if granted & needed == needed {
        return Ok(Found {
            granted,
            barrier,
            vacated: false,
            masked: 0,
        });
    }

    // Tree grants above the object (for a creation, from the directory it
    // happens in). Walking dentries keeps to one filesystem, so the device
    // stays the same; a tree grant does not reach across mount points and
    // bind mounts do not alias into a granted tree.
    let walk = walks()?;
    *walk = TreeWalk {
        key,
        dentry: dentry as u64,
        granted,
        needed,
        state: WALKING,
        mask_from,
        masked: 0,
    };
    let ran = unsafe {
        bpf_loop(
            MAX_TREE_DEPTH,
            tree_step as *mut c_void,
            core::ptr::null_mut(),
            0,
        )
    };
    match walk.state {
        _ if ran < 0 => return Err(ReadFailed),
        COVERED => {
            return Ok(Found {
                granted: walk.granted,
                barrier,
                vacated: false,
                masked: walk.masked,
            });
        }
        READ_FAILED => return Err(ReadFailed),
        WALKING => count(counter::WALK_LIMIT),
        _ => {}
    }
    Ok(Found {
        granted: name_granted(slot, access, walk.granted)?,
        barrier,
        vacated: false,
        masked: walk.masked,
    })
}

/// Where a tree walk stands.
const WALKING: u32 = 0;
/// Every needed operation is granted.
const COVERED: u32 = 1;
/// The root of the filesystem was reached.
const ROOT: u32 = 2;
/// A kernel read failed.
const READ_FAILED: u32 = 3;

crate::maps::declare_maps! {
    /// Room for the grants' walk of one check, per CPU rather than on the BPF
    /// stack (which the program and its nested callbacks share). Checks run one
    /// after the other.
    static WALKS: PerCpuArray<TreeWalk> = PerCpuArray::with_max_entries(1, 0);
}

/// This CPU's [`TreeWalk`].
#[inline(always)]
fn walks() -> Result<&'static mut TreeWalk, ReadFailed> {
    let walks = WALKS.get_ptr_mut(0).ok_or(ReadFailed)?;
    // SAFETY: per-CPU room, used by one program at a time on this CPU.
    Ok(unsafe { &mut *walks })
}

/// The state of a tree walk, in [`WALKS`] while `bpf_loop` runs
/// [`tree_step`].
#[repr(C)]
struct TreeWalk {
    /// The slot and device of the grants looked up; `ino` is set per step.
    key: GrantKey,
    /// The dentry whose parent the next step looks at.
    dentry: u64,
    /// Tree operations granted so far.
    granted: u32,
    /// What the access needs.
    needed: u32,
    /// [`WALKING`], [`COVERED`], [`ROOT`] or [`READ_FAILED`].
    state: u32,
    /// The step from which tree grants give no change operation (the
    /// object's policy place; step 1 looks at the object's parent); zero
    /// when it has none.
    mask_from: u32,
    /// The change operations tree grants gave from `mask_from` up, which
    /// the policy place took away.
    masked: u32,
}

/// One step of the tree walk: looks up a tree grant on the parent of
/// `walk.dentry` and moves up to it. Returns 1 to stop.
///
/// The walk runs under `bpf_loop`, whose callback the verifier checks once,
/// so the walk can follow a path as deep as a path can be
/// ([`MAX_TREE_DEPTH`]) without making the programs slower to load; each
/// step costs two kernel reads and a hash lookup, and only the first access
/// to an object walks (the grant cache answers the next).
extern "C" fn tree_step(index: u64, _ctx: *mut c_void) -> i64 {
    let Ok(walk) = walks() else {
        return 1;
    };
    let off = kernel::off();
    let parent = match kernel::parent(off, walk.dentry as *const u8) {
        Ok(Some(parent)) => parent,
        Ok(None) => {
            walk.state = ROOT;
            return 1;
        }
        Err(ReadFailed) => {
            walk.state = READ_FAILED;
            return 1;
        }
    };
    let Ok(ino) = kernel::dentry_ino(off, parent) else {
        walk.state = READ_FAILED;
        return 1;
    };
    walk.key.ino = ino;
    if let Some(grant) = unsafe { GRANTS.get(walk.key) } {
        // The step from the loop's index, not a counter in `walk`: a
        // counter the verifier sees as a new constant at each call would
        // have it check the callback again for every step.
        let step = index + 1;
        let masked = if walk.mask_from != 0 && step >= u64::from(walk.mask_from) {
            CHANGE_OPS
        } else {
            0
        };
        walk.granted |= grant.tree_ops & !masked;
        walk.masked |= grant.tree_ops & masked;
        if walk.granted & walk.needed == walk.needed {
            walk.state = COVERED;
            return 1;
        }
    }
    walk.dentry = parent as u64;
    0
}

/// Adds the ops of a name grant on (directory, name) of the object, and of
/// the prefix grants in its directory whose prefix its name starts with.
///
/// Two lookups and no loop: the prefix grants sit in a longest-prefix-match
/// trie whose entries carry the ops of the shorter prefixes too. (A loop
/// over prefix lengths under `bpf_loop`, verified once per path into it,
/// took the two-ended hooks past the 6.1 verifier's million instructions.)
#[inline(always)]
fn name_granted(slot: u32, access: &Access, granted: u32) -> Result<u32, ReadFailed> {
    let Some(key) = access.name_key(slot)? else {
        return Ok(granted);
    };
    #[expect(
        clippy::needless_borrows_for_generic_args,
        reason = "by value would copy the 280-byte key onto the 512-byte BPF stack"
    )]
    let grant = unsafe { NAME_GRANTS.get(&*key) };
    let granted = match grant {
        Some(grant) => granted | grant.file_ops,
        None => granted,
    };
    let Some(prefix) = PREFIX_SCRATCH.get_ptr_mut(0) else {
        return Ok(granted);
    };
    // SAFETY: per-CPU scratch, used by one program at a time on this CPU.
    let prefix = unsafe { &mut *prefix };
    prefix.data.slot = key.slot.to_ne_bytes();
    prefix.data.dev = key.parent_dev.to_ne_bytes();
    prefix.data.ino = key.parent_ino.to_ne_bytes();
    // The name's first bytes, word by word with no exit that depends on
    // the data; beyond the name they are zero, and beyond the bit count
    // the trie does not look.
    let from = key.name.as_ptr().cast::<u64>();
    let to = prefix.data.name.as_mut_ptr().cast::<u64>();
    for i in 0..(MAX_PREFIX_LEN + 1) / 8 {
        unsafe { to.add(i).write_unaligned(from.add(i).read_unaligned()) };
    }
    let len = if key.name_len as usize > MAX_PREFIX_LEN {
        MAX_PREFIX_LEN
    } else {
        key.name_len as usize
    };
    prefix.prefix_len = PrefixName::bits(len);
    let grant = PREFIXES.get(&*prefix);
    Ok(match grant {
        Some(grant) => granted | grant.file_ops,
        None => granted,
    })
}
