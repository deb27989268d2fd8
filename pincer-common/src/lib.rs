//! The ABI between pincer's BPF programs and its userspace.
//!
//! Every type here is `#[repr(C)]`, `Copy`, made of fixed-size integers and
//! arrays with explicit padding, so both sides agree on the layout byte for
//! byte. Flags are plain integers rather than Rust enums: a value written by one
//! side is never undefined behaviour for the other, and userspace decodes them
//! with `TryFrom`. Each type's size is checked at compile time.
//!
//! - Words: [`ops`] (operation bits), [`mode`] (an agent's mode),
//!   [`agent_flags`], [`verdict`] and [`event_flags`] (what an event says),
//!   [`counter`] (the kernel's counters), [`names`] (map names), [`caps`]
//!   (capabilities: the default set and those never given), and
//!   [`hook`], the one table of hooks (id, name, BTF function, argument
//!   count) the programs, the loader's BTF check and the event decoder read;
//!   labels: [`authority`] levels, [`label_flags`], [`policy_rule`],
//!   [`policy_entry`].
//! - Map keys and values: [`Agent`], [`GrantKey`], [`GrantValue`],
//!   [`CachedGrant`], [`NameGrantKey`], [`Pending`], [`Verdict`], [`Twin`],
//!   [`KernelOffsets`], [`ObjectKey`], [`Label`], [`PolicyNameKey`],
//!   [`PolicySuffixKey`], [`PolicyRules`], [`VacatedKey`],
//!   [`Making`]; the ring-buffer record [`AccessEvent`].
//! - Limits: path components, tree depth, map sizes, the ring buffer.
#![no_std]

/// Operation bits of a grant and of a request.
///
/// A request carries the operations the access needs; it is allowed when the
/// grants that cover the object hold every one of them.
pub mod ops {
    /// Open for reading (files) or listing (directories).
    pub const READ: u32 = 1 << 0;
    /// Open for writing, appending or truncating.
    pub const WRITE: u32 = 1 << 1;
    /// Create a file, a named pipe, a socket or a symbolic link
    /// (`open(O_CREAT)`, `creat`, `mknod`, `mkfifo`, `bind`, `symlink`).
    /// Device nodes are never created by agents.
    pub const CREATE: u32 = 1 << 2;
    /// Execute (the kernel opens the program and its interpreter for exec).
    pub const EXEC: u32 = 1 << 3;
    /// Remove a name: `unlink`, `rmdir`, or a rename that replaces an
    /// existing object.
    pub const DELETE: u32 = 1 << 4;
    /// Move or rename the object (its source end; the destination needs
    /// `create` in the new directory, or `delete` of the object it replaces).
    pub const RENAME: u32 = 1 << 5;
    /// Give the object another name with a hard link (the new name needs
    /// `create` in its directory).
    pub const LINK: u32 = 1 << 6;
    /// Change mode, owner or extended attributes (`chmod`, `chown`,
    /// `setxattr`, `removexattr`). Size and time changes are `write`.
    pub const SETATTR: u32 = 1 << 7;
    /// Create a directory.
    pub const MKDIR: u32 = 1 << 8;
    /// Every operation this version knows.
    pub const ALL: u32 = READ | WRITE | CREATE | EXEC | DELETE | RENAME | LINK | SETATTR | MKDIR;

    /// Names used in missions and audit lines, in bit order.
    pub const NAMES: [(u32, &str); 9] = [
        (READ, "read"),
        (WRITE, "write"),
        (CREATE, "create"),
        (EXEC, "exec"),
        (DELETE, "delete"),
        (RENAME, "rename"),
        (LINK, "link"),
        (SETATTR, "setattr"),
        (MKDIR, "mkdir"),
    ];
}

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

/// Values of [`names::WATCHED`]: what happens to a cgroup made below a
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

/// Verdicts carried by an [`AccessEvent`].
pub mod verdict {
    /// Granted by the mission.
    pub const ALLOWED: u32 = 1;
    /// Not granted: refused with `EACCES`.
    pub const DENIED: u32 = 2;
    /// Not granted, allowed because the agent runs in audit mode.
    pub const AUDITED: u32 = 3;
    /// Not granted: the task is stopped until the twin answers.
    pub const PARKED: u32 = 4;
    /// The task's cgroup is held ([`crate::mode::HELD`]): the task is
    /// stopped until the daemon has decided what the cgroup is.
    pub const HELD: u32 = 5;
}

pub mod caps;
pub mod hook;

/// Errno of the self-protection hooks (`kill`, `ptrace`, `bpf`, `mount`,
/// `clone3` into a cgroup), as the kernel itself answers them.
pub const EPERM: i32 = 1;
/// Errno of an access the grants do not cover.
pub const EACCES: i32 = 13;
/// Errno of the open that made a placeholder ([`names::PLACEHOLDERS`]):
/// the name exists now, and no descriptor that writes it is given.
pub const EEXIST: i32 = 17;

/// Bits of [`AccessEvent::flags`].
pub mod event_flags {
    /// The path components stop at the root of the object's filesystem.
    pub const ROOT_REACHED: u32 = 1 << 0;
    /// A component was longer than [`crate::COMPONENT_LEN`] and was cut.
    pub const NAME_TRUNCATED: u32 = 1 << 1;
    /// A kernel read failed while the event was filled.
    pub const READ_FAILED: u32 = 1 << 2;
    /// Denied instead of parked: no twin has a fresh heartbeat.
    pub const NO_TWIN: u32 = 1 << 3;
    /// Denied instead of parked: the task cannot be stopped (an io_uring
    /// worker, a kernel thread, an exiting task).
    pub const UNPARKABLE: u32 = 1 << 4;
    /// Denied instead of parked: the pending table is full.
    pub const PENDING_FULL: u32 = 1 << 5;
    /// The object does not exist yet: `dev`/`ino` are its directory and the
    /// leaf component is the name being made.
    pub const NEW_NAME: u32 = 1 << 6;
    /// Denied instead of parked: the task has an io_uring instance, and an
    /// open it submits may run inside `io_uring_enter`, where a restart would
    /// complete the request with an error instead of parking it.
    pub const IO_URING: u32 = 1 << 7;
    /// Denied whatever the grants: agents never create device nodes.
    pub const DEVICE_NODE: u32 = 1 << 8;
    /// Denied whatever the grants: pincer protects itself and the agent's
    /// confinement (`kill`/`ptrace` of pincer, `bpf`, mounts, leaving the
    /// cgroup, typing into a terminal). The object is a task (`ino` holds
    /// its process id, zero when there is none) and the path is empty; for
    /// `file_open` (a `/proc` entry of pincer's processes) it is the opened
    /// file; for `file_ioctl` and `file_ioctl_compat`, `ino` holds the
    /// refused command.
    pub const GUARD: u32 = 1 << 9;
    /// Denied instead of parked: this hook cannot restart its system call
    /// (a received descriptor, whose message is already consumed).
    pub const NOT_RESTARTABLE: u32 = 1 << 10;
    /// Denied instead of parked: neither end of a hard link or rename is
    /// granted (one end at a time can be asked about).
    pub const BOTH_ENDS: u32 = 1 << 11;
    /// Denied whatever the grants: agents never open block devices (a disk
    /// holds every file behind every grant).
    pub const BLOCK_DEVICE: u32 = 1 << 12;
    /// Denied whatever the grants: agents never open files of the kernel's
    /// debugging and tracing file systems (debugfs, tracefs).
    pub const KERNEL_FS: u32 = 1 << 13;
    /// Denied whatever the grants: a `/proc/<pid>` entry of a process outside
    /// the agent's cgroup.
    pub const OTHER_PROCESS: u32 = 1 << 14;
    /// Denied whatever the grants: a write to `/proc` outside the agent's own
    /// processes' entries (kernel settings: `/proc/sys`, `sysrq-trigger`,
    /// ...).
    pub const KERNEL_SETTING: u32 = 1 << 15;
    /// Denied whatever the grants: an IPC object or a key created outside the
    /// agent's cgroup. The path is empty and `ino` holds the object's id (the
    /// IPC identifier, the key's serial number).
    pub const NOT_OWNED: u32 = 1 << 16;
    /// The access changes a policy object (an agent's instructions or
    /// settings, a git hook, a shell start-up file, ...): only the owner
    /// may allow it, and only once ([`crate::label_flags`], [`crate::policy_rule`]).
    pub const POLICY: u32 = 1 << 17;
    /// The access is an action the mission reserves for untainted agents
    /// (`[[action]]`) and the agent's level is below the action's: only
    /// the owner may allow it ([`crate::Taint`]).
    pub const ACTION: u32 = 1 << 18;
    /// An allowed read that lowered the agent's level: the object is a
    /// source, or was derived from one, of lower authority ([`crate::Taint`]).
    pub const TAINT: u32 = 1 << 19;
    /// The object was derived from a source revoked since
    /// ([`crate::Origin::stamp`]): only the owner may allow it.
    pub const REVOKED: u32 = 1 << 20;
    /// Refused: the task's cgroup is held until the daemon decides what it
    /// is ([`crate::mode::HELD`]), and the task could not wait for that
    /// (the hook's caller cannot restart, no twin is alive, the task cannot
    /// be stopped).
    pub const HELD: u32 = 1 << 21;
    /// On a parked request: the agent had a level when it parked (its
    /// taint map entry existed), so the twin looks up what lowered it.
    /// Without it the twin reads no map for the request's taint.
    pub const TAINTED: u32 = 1 << 22;
    /// A change to a policy object the twin inspects before it answers
    /// ([`crate::policy_rule::INSPECT`]): parked in enforce mode too.
    pub const INSPECT: u32 = 1 << 23;
}

/// Indices of the per-CPU counters in [`names::COUNTERS`].
pub mod counter {
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
}

pub mod names;

/// Authority levels of content (see [`Label`]), lowest first: what it may
/// justify. Zero is "not labelled": content pincer knows nothing of counts
/// as [`authority::USER`]'s (the host's own files).
pub mod authority {
    /// Read, never acted on: fetched pages, tool output, and everything an
    /// agent wrote (the model is a lowest-authority input).
    pub const EVIDENCE: u32 = 1;
    /// The user's own content and what the owner raised to it.
    pub const USER: u32 = 2;
    /// What the owner approved: instructions and settings agents obey.
    pub const POLICY: u32 = 3;

    /// Names in missions, audit lines and `pincer label`, by level.
    pub const NAMES: [(u32, &str); 3] =
        [(EVIDENCE, "evidence"), (USER, "user"), (POLICY, "policy")];

    /// The name of a level (`unlabelled` for zero or an unknown value).
    pub const fn name(level: u32) -> &'static str {
        match level {
            EVIDENCE => "evidence",
            USER => "user",
            POLICY => "policy",
            _ => "unlabelled",
        }
    }
}

/// Bits of [`Label::flags`].
pub mod label_flags {
    /// An agent created it, or last changed its content: it is evidence,
    /// and a name under it is never a policy object by its name alone (a
    /// repository the agent made is the agent's, hooks and all).
    pub const AGENT_MADE: u32 = 1 << 0;
    /// A policy object: only the owner changes it.
    pub const POLICY: u32 = 1 << 1;
    /// With [`POLICY`]: everything below the directory is policy too.
    pub const TREE: u32 = 1 << 2;
    /// A declared source (`[[source]]`): its content has the label's
    /// authority, and reading it lowers the reader to that level. With
    /// [`TREE`], an object made in the directory is a source too.
    pub const SOURCE: u32 = 1 << 3;
    /// The twin's copy of content it inspected (git configuration on its
    /// way in): it may be read, renamed and removed, never changed, so
    /// what lands is what was inspected.
    pub const SEALED: u32 = 1 << 4;
    /// With [`POLICY`]: a placeholder a sandbox of the agent's own made
    /// (empty, at a policy name). The agent whose label it is may remove
    /// it while it is still empty, as bubblewrap's users tidy up after it.
    pub const PLACEHOLDER: u32 = 1 << 5;
}

/// Bits of a policy rule ([`PolicyRules`]): what a name makes of an
/// object.
pub mod policy_rule {
    /// An existing object of that name: changing, renaming, removing or
    /// linking it needs the owner.
    pub const OBJECT: u32 = 1 << 0;
    /// Making an object of that name needs the owner.
    pub const NEW: u32 = 1 << 1;
    /// Everything below a directory of that name needs the owner to be
    /// changed or made.
    pub const TREE: u32 = 1 << 2;
    /// The agent's work, not configuration: rules met below a name of this
    /// rule do not hold (what a cache, a dependency tree or a virtual
    /// environment holds is what tools made there), and for a rule in a
    /// directory of a given name, neither does that directory's tree rule
    /// (`.git` / `objects` in a repository's `.git`).
    pub const WORK: u32 = 1 << 3;
    /// Holds in places an agent made too, and no work name lifts it: what
    /// an agent writes never becomes an agent's instructions.
    pub const ANYWHERE: u32 = 1 << 4;
    /// No work name lifts it, though in a place an agent made it does not
    /// hold (a start-up file in a virtual environment of the person's is
    /// still one; in the agent's own, it is the agent's).
    pub const UNLIFTED: u32 = 1 << 7;
    /// A change made by renaming another file over the object, or into its
    /// name (git writes its configuration through `config.lock`), is
    /// parked for the twin to inspect, in enforce mode too.
    pub const INSPECT: u32 = 1 << 5;
    /// Made as anything but a directory, an object of that name sends a
    /// tool elsewhere (git's `gitdir:` file): that is policy anywhere.
    pub const REDIRECT: u32 = 1 << 6;
    /// Every bit.
    pub const ALL: u32 = OBJECT | NEW | TREE | WORK | ANYWHERE | INSPECT | REDIRECT | UNLIFTED;
}

/// What the programs report as a change's policy place beside the rules'
/// own entries (`1..`, the twin's table of them): a label, or a rule of
/// theirs about a person's directories.
pub mod policy_entry {
    /// No policy place.
    pub const NONE: u32 = 0;
    /// The object, or a directory above it, is labelled policy by identity
    /// (a path of the policy set, the target of a policy link).
    pub const LABEL: u32 = u32::MAX;
    /// The name a person's directory was moved away from by an agent: a
    /// link or another directory put there would take its place.
    pub const VACATED: u32 = u32::MAX - 1;
    /// Replacing (or exchanging) a person's directory with another: what
    /// the person's tools read there would be the agent's.
    pub const SWAP: u32 = u32::MAX - 2;
}

/// Operations that change an object or make one, which policy objects take
/// only from the owner (everything but `read` and `exec`).
pub const CHANGE_OPS: u32 =
    ops::WRITE | ops::CREATE | ops::DELETE | ops::RENAME | ops::LINK | ops::SETATTR | ops::MKDIR;

/// Room for a name read by the programs, with its NUL: its first
/// [`POLICY_NAME_LEN`] bytes are what rules match.
pub const POLICY_NAME_BUF: usize = 40;
/// The bytes of a name that policy rules match: a name of up to 31 bytes
/// and its NUL, or the first 32 bytes of a longer one.
pub const POLICY_NAME_LEN: usize = 32;
/// The longest name a rule may match whole (with its NUL, it fills
/// [`POLICY_NAME_LEN`]); a rule on a name's first bytes may be longer
/// than nothing, shorter than this.
pub const MAX_POLICY_NAME: usize = POLICY_NAME_LEN - 1;
/// The longest end of a name a suffix rule matches (`*.pth`).
pub const POLICY_SUFFIX_LEN: usize = 8;
/// Rules in directories of given names, per name ([`PolicyRules::pairs`]).
pub const POLICY_PAIRS: usize = 6;

/// The hash a directory's name is compared by in a [`PolicyPair`]:
/// FNV-1a over the first 32 bytes of the name, zero-padded, by
/// little-endian words, never zero (zero means "no directory"). The
/// programs read a name with its NUL into a zeroed buffer, which pads it
/// the same way.
#[inline(always)]
pub fn policy_name_hash(padded: &[u8; POLICY_NAME_BUF]) -> u64 {
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    let mut i = 0;
    while i < 4 {
        let mut word = [0u8; 8];
        let mut j = 0;
        while j < 8 {
            word[j] = padded[i * 8 + j];
            j += 1;
        }
        hash ^= u64::from_le_bytes(word);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        i += 1;
    }
    hash | 1
}

/// The [`policy_name_hash`] of a name as userspace writes it; `None` for a
/// name longer than [`MAX_POLICY_NAME`] bytes or holding a NUL.
pub fn policy_name_hash_of(name: &[u8]) -> Option<u64> {
    if name.is_empty() || name.len() > MAX_POLICY_NAME || name.contains(&0) {
        return None;
    }
    let mut padded = [0u8; POLICY_NAME_BUF];
    padded[..name.len()].copy_from_slice(name);
    Some(policy_name_hash(&padded))
}

/// Data of a [`names::POLICY_NAMES`] key: a name's first bytes,
/// zero-padded. A short name is followed by its NUL, so a rule whose bytes
/// end with the NUL matches that name only, and one without it every name
/// that starts with its bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PolicyNameKey {
    /// The bytes.
    pub name: [u8; POLICY_NAME_LEN],
}

/// Data of a [`names::POLICY_SUFFIXES`] key: a name's last bytes, last
/// first, zero-padded past the start of a shorter name.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PolicySuffixKey {
    /// The bytes, reversed.
    pub tail: [u8; POLICY_SUFFIX_LEN],
}

/// A rule in a directory of a given name.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PolicyPair {
    /// The directory's [`policy_name_hash`]; zero for an unused slot.
    pub parent: u64,
    /// Bits of [`policy_rule`].
    pub bits: u32,
    /// The rule's entry (`1..`: the twin's table), for reports.
    pub entry: u32,
}

/// What the names a key matches make of an object: the value of
/// [`names::POLICY_NAMES`] and [`names::POLICY_SUFFIXES`]. Userspace gives
/// each key what its shorter prefixes say too, so the longest match is the
/// whole answer. A rule in the object's directory's name wins over the rule
/// of the name alone; of a rule by the name's start and one by its end, a
/// rule in the directory wins, then the one with the longer key.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PolicyRules {
    /// Bits of [`policy_rule`] for the name in any directory.
    pub bits: u32,
    /// That rule's entry (`1..`), or zero.
    pub entry: u32,
    /// The length in bytes of that rule's key: where a rule by a name's
    /// start and one by its end both match alone, the longer wins
    /// (`.a.txt.swp`: `*.swp` over `.*`).
    pub len: u32,
    /// Explicit padding; always zero.
    pub _pad: u32,
    /// Rules for the name in directories of given names.
    pub pairs: [PolicyPair; POLICY_PAIRS],
}

impl PolicyRules {
    /// The rule for the name in a directory whose [`policy_name_hash`] is
    /// `parent` (zero: a name too long to have one): bits, entry, and
    /// whether it is a directory's rule.
    #[inline(always)]
    pub fn resolve(&self, parent: u64) -> (u32, u32, bool) {
        let mut i = 0;
        while i < POLICY_PAIRS {
            let pair = &self.pairs[i];
            if parent != 0 && pair.parent == parent {
                return (pair.bits, pair.entry, true);
            }
            i += 1;
        }
        (self.bits, self.entry, false)
    }
}

/// Key of [`names::VACATED`]: a name in a directory, by the directory's
/// identity and the FNV-1a of the name (as [`Pending::name_hash`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct VacatedKey {
    /// The directory's device (kernel encoding).
    pub dev: u64,
    /// The directory's inode.
    pub dir: u64,
    /// FNV-1a of the name.
    pub name_hash: u64,
}

/// An object by identity, for [`names::LABELS`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// Device (kernel encoding).
    pub dev: u64,
    /// Inode number.
    pub ino: u64,
}

/// What pincer knows of an object's content: the value of
/// [`names::LABELS`]. The full descriptor (owner, scope, origins, their
/// revocation counters) is the twin's; the kernel keeps what it decides on.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Label {
    /// One of [`authority`] (zero: none given, the object's own).
    pub authority: u32,
    /// Bits of [`label_flags`].
    pub flags: u32,
    /// The inode's generation when it was labelled: a label whose object
    /// was deleted and whose inode number was reused does not carry over
    /// (zero matches any generation, for file systems that keep none).
    pub generation: u32,
    /// The lowest authority of what the content was derived from (zero:
    /// nothing below the reader's own): reading the object lowers the
    /// reader's level to it. A source's is its authority; an agent's write
    /// leaves the writer's level.
    pub taint: u32,
    /// The cgroup id of the agent that made or last changed it (zero: no
    /// agent).
    pub agent: u64,
    /// The sources the content was derived from, with their counters then
    /// ([`Origins`]): a later revocation of any of them revokes the object.
    pub origins: Origins,
}

/// The id of a source by its path (absolute, links resolved): FNV-1a over
/// its bytes, never zero and never [`ANY_SOURCE`]. Revocation counters are
/// kept by it.
pub fn source_id(path: &[u8]) -> u32 {
    let mut hash = 0x811c_9dc5u32;
    for byte in path {
        hash ^= u32::from(*byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    let id = hash | 1;
    if id == ANY_SOURCE { ANY_SOURCE - 2 } else { id }
}

/// How many sources a label or an agent's level records by name.
pub const MAX_ORIGINS: usize = 4;

/// Stands for every source in an [`Origins`] position where two sources
/// met: its counter in [`names::REVOKED`] counts every revocation on the
/// host, so content derived from more sources than a position can name is
/// revoked by a revocation of any source (never by none).
pub const ANY_SOURCE: u32 = u32::MAX;

/// One source content was derived from: its id ([`source_id`], zero for
/// none) and its revocation counter when the content was derived from it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Origin {
    /// [`source_id`] of the source, [`ANY_SOURCE`], or zero for none.
    pub source: u32,
    /// Its counter then: a higher one in [`names::REVOKED`] revokes.
    pub stamp: u32,
}

/// The sources content was derived from (or an agent has read), one per
/// position: a source always takes the position [`Origins::position`]
/// gives it, so the union of two sets is taken position by position
/// without searching (which keeps the programs' verification small).
/// Two sources that meet in one position become [`ANY_SOURCE`] there.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Origins {
    /// By position.
    pub at: [Origin; MAX_ORIGINS],
}

impl Origins {
    /// No source.
    pub const NONE: Origins = Origins {
        at: [Origin {
            source: 0,
            stamp: 0,
        }; MAX_ORIGINS],
    };

    /// The position of a source (ids are odd: their lowest bit says
    /// nothing).
    pub const fn position(source: u32) -> usize {
        ((source >> 1) as usize) % MAX_ORIGINS
    }

    /// One source with its counter.
    pub fn one(source: u32, stamp: u32) -> Origins {
        let mut origins = Origins::NONE;
        if source != 0 {
            origins.at[Origins::position(source)] = Origin { source, stamp };
        }
        origins
    }

    /// Whether a source with the counters `counter` gives revoked any of
    /// these.
    #[inline(always)]
    pub fn revoked(&self, counter: impl Fn(u32) -> u32) -> bool {
        let mut revoked = false;
        for origin in &self.at {
            revoked |= origin.source != 0 && origin.stamp < counter(origin.source);
        }
        revoked
    }

    /// The union of two sets, `counter` giving the counters now: a source
    /// in both keeps the earlier stamp (revoked by more, never by less);
    /// two sources in one position become [`ANY_SOURCE`], stamped with
    /// the count of revocations now, or zero (revoked already) when either
    /// was revoked already.
    #[inline(always)]
    pub fn union(&self, other: &Origins, counter: impl Fn(u32) -> u32) -> Origins {
        let mut union = *self;
        for (mine, theirs) in union.at.iter_mut().zip(other.at.iter()) {
            if theirs.source == 0 {
                continue;
            }
            if mine.source == 0 {
                *mine = *theirs;
            } else if mine.source == theirs.source {
                if theirs.stamp < mine.stamp {
                    mine.stamp = theirs.stamp;
                }
            } else {
                let revoked =
                    mine.stamp < counter(mine.source) || theirs.stamp < counter(theirs.source);
                *mine = Origin {
                    source: ANY_SOURCE,
                    stamp: if revoked { 0 } else { counter(ANY_SOURCE) },
                };
            }
        }
        union
    }

    /// The sources named, ids other than zero.
    pub fn sources(&self) -> impl Iterator<Item = &Origin> {
        self.at.iter().filter(|origin| origin.source != 0)
    }

    /// Whether no source is named.
    pub fn is_empty(&self) -> bool {
        self.at.iter().all(|origin| origin.source == 0)
    }
}

/// An agent's level: the value of [`names::TAINTS`]. An agent starts with
/// none (zero: nothing it read was below the user's own content); each
/// read of content of lower authority lowers it for the whole cgroup,
/// children and programs it executes included (the low-water mark), and
/// only a new run raises it again.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Taint {
    /// One of [`authority`], or zero for none.
    pub level: u32,
    /// Explicit padding; always zero.
    pub _pad: u32,
    /// The object whose read brought the agent to `level`.
    pub dev: u64,
    /// Its inode number.
    pub ino: u64,
    /// Every source the agent has read content of, with their counters
    /// then ([`Label::origins`]): what it writes is derived from them all.
    pub origins: Origins,
}

/// What a mission reserves for agents at or above a level: the value of
/// [`names::ACTIONS`], keyed like a grant.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Action {
    /// The operations on the object that are the action (`exec` for a
    /// program, `write`/`create` for a destination).
    pub ops: u32,
    /// The lowest level that may take it without the owner: one of
    /// [`authority`].
    pub authority: u32,
}

/// An object a thread is making: the value of [`names::MAKING`], set when
/// the creation is allowed and spent when the kernel binds the new name to
/// its inode (`d_instantiate`), where the new object is labelled.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Making {
    /// The new (still negative) dentry.
    pub dentry: u64,
    /// The label's [`label_flags`]: `AGENT_MADE` for the agent's own
    /// object, none for one the owner let it make in a policy place.
    pub flags: u32,
    /// Explicit padding; always zero.
    pub _pad: u32,
}

/// Longest path component copied into an event (with its NUL).
pub const COMPONENT_LEN: usize = 64;
/// Path components copied into an event, leaf first.
pub const MAX_COMPONENTS: usize = 16;
/// Ancestors visited when looking for a tree grant: deeper than any path an
/// `open` can name (`PATH_MAX` is 4096 bytes, so at most 2048 components),
/// with room for trees reached by relative paths. The walk runs under
/// `bpf_loop`, so the limit costs nothing at load time; a walk that reaches
/// it is counted ([`counter::WALK_LIMIT`]) and grants nothing above.
pub const MAX_TREE_DEPTH: u32 = 4096;
/// A file name with its NUL (`NAME_MAX` + 1).
pub const NAME_LEN: usize = 256;
/// The longest prefix a prefix grant may have ([`PrefixName`]).
pub const MAX_PREFIX_LEN: usize = 63;

/// Labelled objects at once (the map is not preallocated: memory follows
/// use). A label that does not fit is counted ([`counter::LABEL_FAILED`]).
pub const MAX_LABELS: u32 = 1 << 20;
/// Creations in flight at once, over all agents.
pub const MAX_MAKING: u32 = 4096;
/// Placeholder files in flight at once, over all agents
/// ([`names::PLACEHOLDERS`]).
pub const MAX_PLACEHOLDERS: u32 = 1024;
/// Keys of each policy trie: every rule's bytes, with room for what
/// missions and configurations add.
pub const MAX_POLICY_KEYS: u32 = 4096;
/// Names a person's directory was moved away from, remembered at once (the
/// least recently used go first).
pub const MAX_VACATED: u32 = 4096;

/// Maximum number of agent cgroups.
pub const MAX_AGENTS: u32 = 4096;
/// Capacity of [`names::ACTIONS`], for every agent together.
pub const MAX_ACTIONS: u32 = 4096;
/// Capacity of [`names::REVOKED`]: sources ever revoked on the host.
pub const MAX_REVOKED: u32 = 4096;
/// Capacity of [`names::WATCHED`]: cgroups below which new ones are held.
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
/// `SIGSTOP`.
pub const SIGSTOP: u32 = 19;
/// `ERESTARTNOINTR`: the syscall restarts once the task runs again.
pub const ERESTARTNOINTR: i32 = 513;

/// Entries of the grant cache (least recently used ones are evicted).
pub const MAX_CACHED_GRANTS: u32 = 16384;
/// Size of the event ring buffer in bytes (a power of two, a multiple of the
/// page size).
pub const EVENTS_BYTES: u32 = 256 * 1024;

/// A confined cgroup: the value of [`names::AGENTS`], keyed by cgroup id.
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
    /// `n` ([`caps`]): [`caps::DEFAULT`] and what the mission adds, never
    /// one of [`caps::NEVER`]. Every other capability check fails with
    /// `EPERM`, whatever credentials the task holds.
    pub capabilities: u64,
}

/// [`Agent::userns_home`] of an agent that has no namespaces of its own:
/// no user namespace is deeper than this.
pub const NO_OWN_NAMESPACES: u32 = u32::MAX;

/// Key of an inode grant: an object by identity, for one mission slot.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct GrantKey {
    /// Mission slot of the agent.
    pub slot: u32,
    /// Explicit padding; always zero.
    pub _pad: u32,
    /// Device of the object's filesystem in the kernel's encoding
    /// (`major << 20 | minor`, as in `super_block.s_dev`).
    pub dev: u64,
    /// Inode number.
    pub ino: u64,
}

/// Value of a grant: the operations it allows, by extent.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GrantValue {
    /// Operations allowed on this object itself.
    pub file_ops: u32,
    /// Operations allowed on this object and everything below it.
    pub tree_ops: u32,
}

/// What a walk found for an object: the value of [`names::GRANT_CACHE`],
/// keyed by the object's [`GrantKey`].
///
/// Finding a tree grant walks the object's ancestors; the cache remembers
/// the result so the next open of the same object costs one lookup. An entry
/// is valid only while its `epoch` equals [`names::EPOCH`], which is bumped
/// whenever the answer could change: userspace bumps it after removing
/// grants, and the programs bump it on every rename and hard link, which
/// change ancestry. Only granted operations are cached, never refusals, so a
/// new grant needs no invalidation.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CachedGrant {
    /// Operations the grants gave (a lower bound: walks stop early).
    pub ops: u32,
    /// Explicit padding; always zero.
    pub _pad: u32,
    /// The epoch the walk started in.
    pub epoch: u64,
}

/// The data of a prefix grant's key in the longest-prefix-match trie
/// [`names::PREFIXES`]: a directory of a mission slot and the first bytes
/// of the names the grant covers, so that an agent may create and use the
/// temporary files a program names after one file (`.claude.json.tmp.*`)
/// without being granted the whole directory. A grant of `n` bytes matches
/// on [`PREFIX_HEADER_BITS`] + 8·`n` bits; a lookup is made with the name's
/// first [`MAX_PREFIX_LEN`] bytes (fewer for a shorter name), so the trie
/// answers with the longest prefix grant the name starts with. Its value
/// carries the ops of the shorter ones too: one lookup answers for all.
///
/// All bytes (native order), so that it has no padding and the trie's key
/// (a `u32` bit count, then this) has one layout on both sides.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PrefixName {
    /// Mission slot of the agent.
    pub slot: [u8; 4],
    /// Device of the directory (kernel encoding).
    pub dev: [u8; 8],
    /// Inode of the directory.
    pub ino: [u8; 8],
    /// The prefix (or, to look up, the name's first bytes), zero-padded.
    pub name: [u8; MAX_PREFIX_LEN + 1],
}

/// Bits of [`PrefixName`] before its name: slot, device and inode.
pub const PREFIX_HEADER_BITS: u32 = 8 * (4 + 8 + 8);

impl PrefixName {
    /// The key data of a prefix grant (or a lookup) in a directory.
    pub fn new(slot: u32, dev: u64, ino: u64, prefix: &[u8]) -> Self {
        let mut name = [0; MAX_PREFIX_LEN + 1];
        let len = prefix.len().min(MAX_PREFIX_LEN);
        name[..len].copy_from_slice(&prefix[..len]);
        Self {
            slot: slot.to_ne_bytes(),
            dev: dev.to_ne_bytes(),
            ino: ino.to_ne_bytes(),
            name,
        }
    }

    /// The trie's bit count for a prefix of `len` bytes.
    pub const fn bits(len: usize) -> u32 {
        PREFIX_HEADER_BITS + 8 * len as u32
    }
}

/// Key of a name grant: a file that did not exist when the mission was
/// loaded, named by its parent directory's identity and its name.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NameGrantKey {
    /// Mission slot of the agent.
    pub slot: u32,
    /// Length of `name` without its NUL.
    pub name_len: u32,
    /// Device of the parent directory (kernel encoding).
    pub parent_dev: u64,
    /// Inode of the parent directory.
    pub parent_ino: u64,
    /// The name, NUL-terminated and zero-padded.
    pub name: [u8; NAME_LEN],
}

impl NameGrantKey {
    /// An all-zero key.
    pub const fn zeroed() -> Self {
        Self {
            slot: 0,
            name_len: 0,
            parent_dev: 0,
            parent_ino: 0,
            name: [0; NAME_LEN],
        }
    }
}

/// A parked request: the value of [`names::PENDING`], keyed by thread id.
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
    /// One of [`hook`].
    pub hook: u32,
}

/// A one-shot answer to a parked request: the value of [`names::VERDICTS`],
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
    /// the twin put in place ([`label_flags::SEALED`]).
    pub pin_dev: u64,
    /// The pinned object's inode, or zero for none.
    pub pin_ino: u64,
}

/// The twin's liveness: the single value of [`names::TWIN`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Twin {
    /// `CLOCK_BOOTTIME` in ns of the twin's last heartbeat; zero when no twin
    /// ever started or a watchdog declared it dead.
    pub heartbeat_ns: u64,
    /// How old a heartbeat may be before the twin counts as dead.
    pub timeout_ns: u64,
}

/// One decision reported to userspace through [`names::EVENTS`].
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct AccessEvent {
    /// Cgroup of the task.
    pub cgroup_id: u64,
    /// Device (kernel encoding) of the object; for a creation, of its parent.
    pub dev: u64,
    /// Inode of the object; for a creation, of its parent directory.
    pub ino: u64,
    /// Request id of a parked request (zero for other verdicts).
    pub request_id: u64,
    /// Inode of the object's parent directory (zero when unknown).
    pub parent_ino: u64,
    /// FNV-1a of the created name (creations only).
    pub name_hash: u64,
    /// `CLOCK_BOOTTIME` (ns) when the event was made: a parked request's
    /// round trip is timed from here.
    pub at_ns: u64,
    /// Device (kernel encoding) of the process's executable, on a parked
    /// request (zero otherwise, or when it could not be read).
    pub exe_dev: u64,
    /// Inode of the process's executable, on a parked request: with
    /// `exe_dev` and `exe_generation` it tells the twin whether the
    /// executable is one whose path it read already for this process.
    pub exe_ino: u64,
    /// Thread id.
    pub pid: u32,
    /// Process id.
    pub tgid: u32,
    /// Mission slot of the agent.
    pub slot: u32,
    /// Operations requested.
    pub ops: u32,
    /// Operations the grants gave.
    pub granted: u32,
    /// One of [`verdict`].
    pub verdict: u32,
    /// One of [`hook`].
    pub hook: u32,
    /// Number of filled entries of `components`.
    pub depth: u32,
    /// Bits of [`event_flags`].
    pub flags: u32,
    /// `i_generation` of the executable's inode, on a parked request.
    pub exe_generation: u32,
    /// With [`event_flags::POLICY`]: the rule that made the object policy
    /// (`1..`, the twin's table of rules; or one of [`policy_entry`]).
    pub policy_entry: u32,
    /// With `policy_entry`: the path component it met, 1 for the object
    /// itself, 2 for its directory, and so on.
    pub policy_step: u32,
    /// `comm` of the task.
    pub comm: [u8; 16],
    /// Path components, leaf first, each NUL-terminated. For a creation the
    /// leaf is the name being created.
    pub components: [[u8; COMPONENT_LEN]; MAX_COMPONENTS],
}

/// Offsets of kernel struct members, read from the running kernel's BTF by the
/// loader and written into the program's [`names::OFFSETS`] global: Rust BPF has
/// no CO-RE field relocation, and the layouts differ between kernels (for
/// example `file.f_inode` is at byte 32 on 6.1 and 40 on 6.12).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelOffsets {
    /// Non-zero once the loader has filled this struct; the programs deny
    /// every agent access while it is zero.
    pub loaded: u32,
    /// `file.f_inode`.
    pub file_f_inode: u32,
    /// `file.f_path.dentry`.
    pub file_f_path_dentry: u32,
    /// `file.f_mode`.
    pub file_f_mode: u32,
    /// `file.f_flags`.
    pub file_f_flags: u32,
    /// `inode.i_ino`.
    pub inode_i_ino: u32,
    /// `inode.i_sb`.
    pub inode_i_sb: u32,
    /// `super_block.s_dev`.
    pub super_block_s_dev: u32,
    /// `dentry.d_parent`.
    pub dentry_d_parent: u32,
    /// `dentry.d_name.name`.
    pub dentry_d_name_name: u32,
    /// `dentry.d_name.len`.
    pub dentry_d_name_len: u32,
    /// `dentry.d_inode`.
    pub dentry_d_inode: u32,
    /// `task_struct.flags`.
    pub task_struct_flags: u32,
    /// `task_struct.tgid`.
    pub task_struct_tgid: u32,
    /// `task_struct.io_uring`.
    pub task_struct_io_uring: u32,
    /// `task_struct.cgroups`.
    pub task_struct_cgroups: u32,
    /// `css_set.dfl_cgrp`.
    pub css_set_dfl_cgrp: u32,
    /// `cgroup.kn`.
    pub cgroup_kn: u32,
    /// `kernfs_node.id`.
    pub kernfs_node_id: u32,
    /// `inode.i_nlink`.
    pub inode_i_nlink: u32,
    /// `inode.i_mode`.
    pub inode_i_mode: u32,
    /// `iattr.ia_valid`.
    pub iattr_ia_valid: u32,
    /// Non-zero when the `inode_setattr` hook takes a `mnt_idmap` first
    /// (6.8 and later), so the dentry is its second argument.
    pub setattr_has_idmap: u32,
    /// `proc_inode.vfs_inode`.
    pub proc_inode_vfs_inode: u32,
    /// `proc_inode.pid`.
    pub proc_inode_pid: u32,
    /// `pid.numbers[0].nr`: the process id in the initial namespace.
    pub pid_nr: u32,
    /// Device (kernel encoding) of pipefs, where anonymous pipes live.
    pub pipe_dev: u32,
    /// Device (kernel encoding) of sockfs, where sockets live.
    pub sock_dev: u32,
    /// Device (kernel encoding) of the kernel's internal shmem mount, where
    /// memfds and System V shared memory live.
    pub shm_dev: u32,
    /// `super_block.s_magic`.
    pub super_block_s_magic: u32,
    /// `pid.tasks`: `tasks[PIDTYPE_PID].first` is the task's `pid_links[0]`.
    pub pid_tasks: u32,
    /// `task_struct.pid_links`.
    pub task_struct_pid_links: u32,
    /// `path.dentry`.
    pub path_dentry: u32,
    /// `kern_ipc_perm.id`.
    pub kern_ipc_perm_id: u32,
    /// `key.serial`.
    pub key_serial: u32,
    /// `task_struct.real_cred`.
    pub task_struct_real_cred: u32,
    /// `inode.i_generation`.
    pub inode_i_generation: u32,
    /// `kernfs_node.parent` (`__parent` from 6.15): a cgroup's parent, by
    /// its directory.
    pub kernfs_node_parent: u32,
    /// `task_struct.mm`.
    pub task_struct_mm: u32,
    /// `mm_struct.exe_file`.
    pub mm_struct_exe_file: u32,
    /// `vm_area_struct.vm_file`: the file a mapping maps, null for
    /// anonymous memory.
    pub vm_area_struct_vm_file: u32,
    /// `user_namespace.level`: 0 for the initial user namespace, one more
    /// for each namespace below it.
    pub user_namespace_level: u32,
    /// `super_block.s_user_ns`: the user namespace a filesystem was
    /// mounted in.
    pub super_block_s_user_ns: u32,
    /// `task_struct.nsproxy`.
    pub task_struct_nsproxy: u32,
    /// `nsproxy.mnt_ns`.
    pub nsproxy_mnt_ns: u32,
    /// `mnt_namespace.user_ns`: the user namespace that owns a mount
    /// namespace.
    pub mnt_namespace_user_ns: u32,
    /// The device (kernel encoding) of the procfs the loader sees at
    /// `/proc`, whose objects the baseline grants: another procfs (a
    /// sandbox's own `/proc`) is decided as this one.
    pub proc_dev: u32,
    /// `inode.i_size`: a placeholder is removed only while it is empty.
    pub inode_i_size: u32,
}

impl KernelOffsets {
    /// All zero: not loaded.
    pub const fn zeroed() -> Self {
        Self {
            loaded: 0,
            file_f_inode: 0,
            file_f_path_dentry: 0,
            file_f_mode: 0,
            file_f_flags: 0,
            inode_i_ino: 0,
            inode_i_sb: 0,
            super_block_s_dev: 0,
            dentry_d_parent: 0,
            dentry_d_name_name: 0,
            dentry_d_name_len: 0,
            dentry_d_inode: 0,
            task_struct_flags: 0,
            task_struct_tgid: 0,
            task_struct_io_uring: 0,
            task_struct_cgroups: 0,
            css_set_dfl_cgrp: 0,
            cgroup_kn: 0,
            kernfs_node_id: 0,
            inode_i_nlink: 0,
            inode_i_mode: 0,
            iattr_ia_valid: 0,
            setattr_has_idmap: 0,
            proc_inode_vfs_inode: 0,
            proc_inode_pid: 0,
            pid_nr: 0,
            pipe_dev: 0,
            sock_dev: 0,
            shm_dev: 0,
            super_block_s_magic: 0,
            pid_tasks: 0,
            task_struct_pid_links: 0,
            path_dentry: 0,
            kern_ipc_perm_id: 0,
            key_serial: 0,
            task_struct_real_cred: 0,
            inode_i_generation: 0,
            kernfs_node_parent: 0,
            task_struct_mm: 0,
            mm_struct_exe_file: 0,
            vm_area_struct_vm_file: 0,
            user_namespace_level: 0,
            super_block_s_user_ns: 0,
            task_struct_nsproxy: 0,
            nsproxy_mnt_ns: 0,
            mnt_namespace_user_ns: 0,
            proc_dev: 0,
            inode_i_size: 0,
        }
    }
}

/// `task_struct.flags` bits (stable for many releases).
pub mod task_flags {
    /// `PF_EXITING`.
    pub const EXITING: u32 = 0x0000_0004;
    /// `PF_IO_WORKER`: an io_uring worker thread.
    pub const IO_WORKER: u32 = 0x0000_0010;
    /// `PF_KTHREAD`.
    pub const KTHREAD: u32 = 0x0020_0000;
}

/// `f_mode` bits the programs read (stable kernel ABI since 2.6).
pub mod fmode {
    /// `FMODE_READ`.
    pub const READ: u32 = 0x1;
    /// `FMODE_WRITE`.
    pub const WRITE: u32 = 0x2;
    /// `__FMODE_EXEC`: set in `f_flags` (not `f_mode`) by the kernel's
    /// open for exec (`execve`, `execveat`, interpreters, `uselib`).
    pub const EXEC: u32 = 0x20;
    /// `FMODE_CREATED`: this open created the file (6.1 and 6.12 alike).
    pub const CREATED: u32 = 0x10_0000;
}

/// `iattr.ia_valid` bits (stable kernel ABI).
pub mod attr {
    /// `ATTR_MODE`.
    pub const MODE: u32 = 1 << 0;
    /// `ATTR_UID`.
    pub const UID: u32 = 1 << 1;
    /// `ATTR_GID`.
    pub const GID: u32 = 1 << 2;
    /// `ATTR_SIZE`.
    pub const SIZE: u32 = 1 << 3;
    /// `ATTR_ATIME`, `ATTR_MTIME`, `ATTR_CTIME`, `ATTR_ATIME_SET`,
    /// `ATTR_MTIME_SET`, `ATTR_TOUCH`.
    pub const TIMES: u32 = (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8) | (1 << 17);
    /// `ATTR_FORCE`: the kernel adds it when a change drops set-id bits or
    /// file capabilities (a write, or a truncation, of such a file); it
    /// says nothing about what else changes.
    pub const FORCE: u32 = 1 << 9;
    /// `ATTR_KILL_SUID`: drop the set-user-id bit (the kernel turns it into
    /// `ATTR_MODE` before the hook runs).
    pub const KILL_SUID: u32 = 1 << 11;
    /// `ATTR_KILL_SGID`: drop the set-group-id bit (likewise).
    pub const KILL_SGID: u32 = 1 << 12;
    /// `ATTR_OPEN`: the truncation of `open(O_TRUNC)`, decided at the open.
    pub const OPEN: u32 = 1 << 15;

    /// The operations a change with these `ia_valid` bits needs, decided on
    /// what it changes: the size needs `write`, a mode or owner `setattr`,
    /// times alone `write` (with a mode or owner change, the ctime update
    /// is part of it).
    ///
    /// Two changes need nothing more: the truncation of `open(O_TRUNC)`
    /// (`OPEN`), which the open decided, and the kernel's own dropping of
    /// set-id bits and file capabilities when such a file is written or
    /// truncated. The kernel turns `KILL_SUID`/`KILL_SGID` into a mode
    /// change before the hook runs, and never takes a mode from a caller
    /// together with them, so a mode that comes with them is the kernel's;
    /// `ATTR_KILL_PRIV` changes no attribute here. `FORCE`, which the
    /// kernel adds to those drops, changes nothing either way: a truncation
    /// that drops them still changes the size.
    pub const fn needs(valid: u32) -> u32 {
        if valid & OPEN != 0 {
            return 0;
        }
        let mode_asked = valid & MODE != 0 && valid & (KILL_SUID | KILL_SGID) == 0;
        let mut need = 0;
        if mode_asked || valid & (UID | GID) != 0 {
            need |= crate::ops::SETATTR;
        }
        if valid & SIZE != 0 {
            need |= crate::ops::WRITE;
        }
        if need == 0 && valid & TIMES != 0 {
            need = crate::ops::WRITE;
        }
        need
    }
}

/// `ioctl(2)` commands, and what each asks of an agent (the `file_ioctl`
/// programs decide by [`ioctl::need`]). Numbers are x86-64's; where a 32-bit
/// process passes another number for the same command (`FS_IOC32_*`), both
/// are listed, as the compat path may hand either to the hooks.
pub mod ioctl {
    use crate::ops;

    /// What an ioctl command needs of an agent.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Need {
        /// Nothing: the command reads (`FIONREAD`, `TCGETS`,
        /// `FS_IOC_GETFLAGS`, ...) or changes no file.
        Nothing,
        /// These operations on the object of the open file.
        Ops(u32),
        /// Refused whatever the grants: typing into a terminal, or changing
        /// a whole filesystem.
        Refused,
    }

    /// `TIOCSTI`: pushes a byte into a terminal's input, as if typed.
    pub const TIOCSTI: u32 = 0x5412;
    /// `TIOCLINUX`: virtual console requests, among them pasting the
    /// selection into a terminal's input.
    pub const TIOCLINUX: u32 = 0x541c;
    /// `FIFREEZE`: stops every write to the filesystem.
    pub const FIFREEZE: u32 = 0xc004_5877;
    /// `FITHAW`: lets a frozen filesystem be written again.
    pub const FITHAW: u32 = 0xc004_5878;
    /// `FS_IOC_SETFSLABEL`: renames the filesystem.
    pub const FS_IOC_SETFSLABEL: u32 = 0x4100_9432;
    /// `EXT4_IOC_SETFSUUID`: changes an ext4 filesystem's UUID.
    pub const EXT4_IOC_SETFSUUID: u32 = 0x4008_662c;
    /// `EXT4_IOC_SHUTDOWN` (`XFS_IOC_GOINGDOWN`): shuts the filesystem down.
    pub const EXT4_IOC_SHUTDOWN: u32 = 0x8004_587d;

    /// `FS_IOC_SETFLAGS`: inode flags (immutable, append-only, ...).
    pub const FS_IOC_SETFLAGS: u32 = 0x4008_6602;
    /// `FS_IOC32_SETFLAGS`.
    pub const FS_IOC32_SETFLAGS: u32 = 0x4004_6602;
    /// `FS_IOC_FSSETXATTR`: extended inode flags, project id, extent size.
    pub const FS_IOC_FSSETXATTR: u32 = 0x401c_5820;
    /// `FS_IOC_SETVERSION`: the inode's generation number.
    pub const FS_IOC_SETVERSION: u32 = 0x4008_7602;
    /// `FS_IOC32_SETVERSION`.
    pub const FS_IOC32_SETVERSION: u32 = 0x4004_7602;
    /// `EXT4_IOC_SETVERSION`.
    pub const EXT4_IOC_SETVERSION: u32 = 0x4008_6604;
    /// `EXT4_IOC32_SETVERSION`.
    pub const EXT4_IOC32_SETVERSION: u32 = 0x4004_6604;
    /// `FS_IOC_ENABLE_VERITY`: makes the file read-only for good.
    pub const FS_IOC_ENABLE_VERITY: u32 = 0x4080_6685;
    /// `FS_IOC_SET_ENCRYPTION_POLICY`: encrypts what an empty directory
    /// will hold.
    pub const FS_IOC_SET_ENCRYPTION_POLICY: u32 = 0x800c_6613;

    /// `FICLONE`: the file's data becomes another file's.
    pub const FICLONE: u32 = 0x4004_9409;
    /// `FICLONERANGE`: a range of the file's data becomes another file's.
    pub const FICLONERANGE: u32 = 0x4020_940d;
    /// `FIDEDUPERANGE`: ranges of other files that hold the same bytes as
    /// this one are made to share its storage.
    pub const FIDEDUPERANGE: u32 = 0xc018_9436;

    /// What `cmd` needs of an agent.
    #[inline(always)]
    pub const fn need(cmd: u32) -> Need {
        match cmd {
            TIOCSTI | TIOCLINUX | FIFREEZE | FITHAW | FS_IOC_SETFSLABEL | EXT4_IOC_SETFSUUID
            | EXT4_IOC_SHUTDOWN => Need::Refused,
            FS_IOC_SETFLAGS
            | FS_IOC32_SETFLAGS
            | FS_IOC_FSSETXATTR
            | FS_IOC_SETVERSION
            | FS_IOC32_SETVERSION
            | EXT4_IOC_SETVERSION
            | EXT4_IOC32_SETVERSION
            | FS_IOC_ENABLE_VERITY
            | FS_IOC_SET_ENCRYPTION_POLICY => Need::Ops(ops::SETATTR),
            FICLONE | FICLONERANGE | FIDEDUPERANGE => Need::Ops(ops::WRITE),
            _ => Need::Nothing,
        }
    }

    /// The name of a command [`need`] refuses or asks operations for.
    pub const fn name(cmd: u32) -> Option<&'static str> {
        Some(match cmd {
            TIOCSTI => "TIOCSTI",
            TIOCLINUX => "TIOCLINUX",
            FIFREEZE => "FIFREEZE",
            FITHAW => "FITHAW",
            FS_IOC_SETFSLABEL => "FS_IOC_SETFSLABEL",
            EXT4_IOC_SETFSUUID => "EXT4_IOC_SETFSUUID",
            EXT4_IOC_SHUTDOWN => "EXT4_IOC_SHUTDOWN",
            FS_IOC_SETFLAGS | FS_IOC32_SETFLAGS => "FS_IOC_SETFLAGS",
            FS_IOC_FSSETXATTR => "FS_IOC_FSSETXATTR",
            FS_IOC_SETVERSION | FS_IOC32_SETVERSION => "FS_IOC_SETVERSION",
            EXT4_IOC_SETVERSION | EXT4_IOC32_SETVERSION => "EXT4_IOC_SETVERSION",
            FS_IOC_ENABLE_VERITY => "FS_IOC_ENABLE_VERITY",
            FS_IOC_SET_ENCRYPTION_POLICY => "FS_IOC_SET_ENCRYPTION_POLICY",
            FICLONE => "FICLONE",
            FICLONERANGE => "FICLONERANGE",
            FIDEDUPERANGE => "FIDEDUPERANGE",
            _ => return None,
        })
    }
}

/// `i_mode` file type bits.
pub mod file_type {
    /// `S_IFMT`.
    pub const MASK: u32 = 0o170000;
    /// `S_IFCHR`.
    pub const CHAR: u32 = 0o020000;
    /// `S_IFBLK`.
    pub const BLOCK: u32 = 0o060000;
    /// `S_IFREG`.
    pub const REGULAR: u32 = 0o100000;
    /// `S_IFDIR`.
    pub const DIRECTORY: u32 = 0o040000;
}

/// `super_block.s_magic` of the file systems agents never open.
pub mod fs_magic {
    /// `DEBUGFS_MAGIC`.
    pub const DEBUGFS: u32 = 0x6462_6720;
    /// `TRACEFS_MAGIC`.
    pub const TRACEFS: u32 = 0x7472_6163;
    /// `PID_FS_MAGIC`: since 6.9, a pidfd is a file of pidfs, and
    /// `pidfd_open` opens it.
    pub const PIDFS: u32 = 0x5049_4446;
    /// `TMPFS_MAGIC`.
    pub const TMPFS: u32 = 0x0102_1994;
    /// `RAMFS_MAGIC`.
    pub const RAMFS: u32 = 0x8584_58f6;
}

/// `CLONE_INTO_CGROUP`: `clone3` places the child in another cgroup.
pub const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// `PTRACE_MODE_NOAUDIT` in the mode of `security_ptrace_access_check`: the
/// kernel asks whether the task could trace another to choose what to show
/// (the wait channel and addresses in `/proc/<pid>/stat`, which `ps` reads
/// for every process), not because the task tries to trace it. Refused
/// like any other check, but not reported.
pub const PTRACE_MODE_NOAUDIT: u32 = 0x04;

const _: () = {
    assert!(core::mem::size_of::<Agent>() == 24);
    assert!(core::mem::size_of::<GrantKey>() == 24);
    assert!(core::mem::size_of::<GrantValue>() == 8);
    assert!(core::mem::size_of::<CachedGrant>() == 16);
    assert!(core::mem::size_of::<NameGrantKey>() == 24 + NAME_LEN);
    assert!(core::mem::size_of::<AccessEvent>() == 136 + COMPONENT_LEN * MAX_COMPONENTS);
    assert!(core::mem::size_of::<KernelOffsets>() == 192);
    assert!(core::mem::size_of::<ObjectKey>() == 16);
    assert!(core::mem::size_of::<Label>() == 24 + 8 * MAX_ORIGINS);
    assert!(core::mem::size_of::<PolicyNameKey>() == POLICY_NAME_LEN);
    assert!(core::mem::size_of::<PolicySuffixKey>() == POLICY_SUFFIX_LEN);
    assert!(core::mem::size_of::<PolicyPair>() == 16);
    assert!(core::mem::size_of::<PolicyRules>() == 16 + 16 * POLICY_PAIRS);
    assert!(core::mem::size_of::<VacatedKey>() == 24);
    assert!(core::mem::size_of::<Making>() == 16);
    assert!(core::mem::size_of::<Taint>() == 24 + 8 * MAX_ORIGINS);
    assert!(core::mem::size_of::<Action>() == 8);
    assert!(core::mem::size_of::<Pending>() == 40);
    assert!(core::mem::size_of::<Verdict>() == 32);
    assert!(core::mem::size_of::<Twin>() == 16);
};

#[cfg(feature = "user")]
mod pod {
    // SAFETY: each type is `repr(C)`, `Copy`, made only of integers and integer
    // arrays with explicit padding fields, so every bit pattern is valid.
    unsafe impl aya::Pod for super::Agent {}
    unsafe impl aya::Pod for super::GrantKey {}
    unsafe impl aya::Pod for super::GrantValue {}
    unsafe impl aya::Pod for super::CachedGrant {}
    unsafe impl aya::Pod for super::NameGrantKey {}
    unsafe impl aya::Pod for super::PrefixName {}
    unsafe impl aya::Pod for super::AccessEvent {}
    unsafe impl aya::Pod for super::KernelOffsets {}
    unsafe impl aya::Pod for super::Pending {}
    unsafe impl aya::Pod for super::Verdict {}
    unsafe impl aya::Pod for super::Twin {}
    unsafe impl aya::Pod for super::ObjectKey {}
    unsafe impl aya::Pod for super::Label {}
    unsafe impl aya::Pod for super::PolicyNameKey {}
    unsafe impl aya::Pod for super::PolicySuffixKey {}
    unsafe impl aya::Pod for super::PolicyRules {}
    unsafe impl aya::Pod for super::VacatedKey {}
    unsafe impl aya::Pod for super::Making {}
    unsafe impl aya::Pod for super::Taint {}
    unsafe impl aya::Pod for super::Action {}
}

/// Converts a userspace device number (`stat.st_dev`, glibc's encoding) to the
/// kernel's internal `dev_t` encoding used in `super_block.s_dev`.
pub const fn kernel_dev(st_dev: u64) -> u64 {
    let major = ((st_dev >> 8) & 0xfff) | ((st_dev >> 32) & !0xfff);
    let minor = (st_dev & 0xff) | ((st_dev >> 12) & !0xff);
    (major << 20) | minor
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::{format, vec::Vec};

    use super::{ANY_SOURCE, Origin, Origins, attr, ioctl, kernel_dev, ops, source_id};

    /// Two source ids that take different positions, and one that meets
    /// the first.
    fn sources() -> (u32, u32, u32) {
        let ids: Vec<u32> = (0..64u32)
            .map(|n| source_id(format!("/srv/s{n}").as_bytes()))
            .collect();
        let a = ids[0];
        let b = *ids
            .iter()
            .find(|id| Origins::position(**id) != Origins::position(a))
            .unwrap();
        let c = *ids[1..]
            .iter()
            .find(|id| **id != a && Origins::position(**id) == Origins::position(a))
            .unwrap();
        (a, b, c)
    }

    #[test]
    fn a_union_names_every_source_and_is_revoked_by_any_of_them() {
        let (a, b, _) = sources();
        let none = |_: u32| 0;
        let union = Origins::one(a, 0).union(&Origins::one(b, 0), none);
        let named: Vec<u32> = union.sources().map(|o| o.source).collect();
        assert_eq!(named.len(), 2);
        assert!(named.contains(&a) && named.contains(&b));
        assert!(!union.revoked(none));
        for revoked in [a, b] {
            assert!(union.revoked(|s| u32::from(s == revoked)), "{revoked}");
        }
        assert!(!union.revoked(|s| u32::from(s == 12345)));
        // The same source twice keeps the earlier stamp.
        let twice = Origins::one(a, 3).union(&Origins::one(a, 1), none);
        assert_eq!(twice, Origins::one(a, 1));
        assert_eq!(Origins::NONE.union(&twice, none), twice);
        assert!(Origins::NONE.is_empty() && !twice.is_empty());
    }

    #[test]
    fn sources_that_meet_in_a_position_are_revoked_by_any_revocation() {
        let (a, _, c) = sources();
        // Two revocations on the host so far, of other sources.
        let counters = |s: u32| if s == ANY_SOURCE { 2 } else { 0 };
        let met = Origins::one(a, 0).union(&Origins::one(c, 0), counters);
        assert_eq!(
            met.at[Origins::position(a)],
            Origin {
                source: ANY_SOURCE,
                stamp: 2
            }
        );
        assert!(!met.revoked(counters));
        // A third revocation, of anything, revokes it.
        assert!(met.revoked(|s| if s == ANY_SOURCE { 3 } else { 0 }));
        // One already revoked when they met: revoked from then on.
        let counters = |s: u32| match s {
            ANY_SOURCE => 2,
            s if s == c => 1,
            _ => 0,
        };
        let met = Origins::one(a, 0).union(&Origins::one(c, 0), counters);
        assert!(met.revoked(counters));
    }

    #[test]
    fn no_path_is_the_id_of_every_source() {
        for n in 0..10_000u32 {
            let id = source_id(&n.to_le_bytes());
            assert!(id != 0 && id != ANY_SOURCE && id & 1 == 1);
        }
    }

    #[test]
    fn a_change_needs_what_it_changes_whatever_the_kernel_adds() {
        // `ATTR_CTIME`, which chmod, chown and truncate set with the rest.
        const CTIME: u32 = 1 << 6;
        // `ATTR_KILL_PRIV`, `ATTR_FILE`.
        const KILL_PRIV: u32 = 1 << 14;
        const FILE: u32 = 1 << 13;
        let drop_privileges = attr::FORCE | attr::KILL_SUID | attr::KILL_SGID | KILL_PRIV;
        for (valid, need) in [
            // chmod, chown.
            (attr::MODE | CTIME, ops::SETATTR),
            (
                attr::UID | attr::GID | CTIME | attr::KILL_SUID | KILL_PRIV,
                ops::SETATTR,
            ),
            // truncate(2), ftruncate(2), touch.
            (attr::SIZE | CTIME, ops::WRITE),
            (attr::SIZE | CTIME | FILE, ops::WRITE),
            (attr::TIMES, ops::WRITE),
            // Truncating a set-id file or one with file capabilities: the
            // kernel adds the drop (and the mode it makes of it).
            (
                attr::SIZE | CTIME | drop_privileges | attr::MODE,
                ops::WRITE,
            ),
            (attr::SIZE | attr::FORCE | KILL_PRIV, ops::WRITE),
            // Writing such a file: only the kernel's drop.
            (attr::FORCE | attr::KILL_SUID | attr::MODE, 0),
            (attr::FORCE | KILL_PRIV, 0),
            // open(O_TRUNC), decided by the open, with or without the drop.
            (attr::SIZE | CTIME | attr::OPEN | FILE, 0),
            (attr::SIZE | attr::OPEN | drop_privileges | attr::MODE, 0),
        ] {
            assert_eq!(attr::needs(valid), need, "ia_valid {valid:#x}");
        }
    }

    #[test]
    fn ioctls_that_change_a_file_need_operations_and_injection_is_refused() {
        use ioctl::{Need, need};
        assert_eq!(need(ioctl::TIOCSTI), Need::Refused);
        assert_eq!(need(ioctl::TIOCLINUX), Need::Refused);
        assert_eq!(need(ioctl::FIFREEZE), Need::Refused);
        for cmd in [
            ioctl::FS_IOC_SETFLAGS,
            ioctl::FS_IOC32_SETFLAGS,
            ioctl::FS_IOC_FSSETXATTR,
            ioctl::FS_IOC_SETVERSION,
            ioctl::EXT4_IOC32_SETVERSION,
            ioctl::FS_IOC_ENABLE_VERITY,
        ] {
            assert_eq!(need(cmd), Need::Ops(ops::SETATTR), "{cmd:#x}");
        }
        for cmd in [ioctl::FICLONE, ioctl::FICLONERANGE, ioctl::FIDEDUPERANGE] {
            assert_eq!(need(cmd), Need::Ops(ops::WRITE), "{cmd:#x}");
        }
        // FIONREAD, TCGETS, FS_IOC_GETFLAGS, FS_IOC_FSGETXATTR, FS_IOC_FIEMAP.
        for cmd in [0x541b, 0x5401, 0x8008_6601, 0x801c_581f, 0xc020_660b] {
            assert_eq!(need(cmd), Need::Nothing, "{cmd:#x}");
            assert_eq!(ioctl::name(cmd), None);
        }
        assert_eq!(
            ioctl::name(ioctl::FS_IOC32_SETFLAGS),
            Some("FS_IOC_SETFLAGS")
        );
        // Every command with a rule has a name for the audit log.
        for cmd in [
            ioctl::TIOCSTI,
            ioctl::TIOCLINUX,
            ioctl::FIFREEZE,
            ioctl::FITHAW,
            ioctl::FS_IOC_SETFSLABEL,
            ioctl::EXT4_IOC_SETFSUUID,
            ioctl::EXT4_IOC_SHUTDOWN,
            ioctl::FS_IOC_SETFLAGS,
            ioctl::FS_IOC32_SETFLAGS,
            ioctl::FS_IOC_FSSETXATTR,
            ioctl::FS_IOC_SETVERSION,
            ioctl::FS_IOC32_SETVERSION,
            ioctl::EXT4_IOC_SETVERSION,
            ioctl::EXT4_IOC32_SETVERSION,
            ioctl::FS_IOC_ENABLE_VERITY,
            ioctl::FS_IOC_SET_ENCRYPTION_POLICY,
            ioctl::FICLONE,
            ioctl::FICLONERANGE,
            ioctl::FIDEDUPERANGE,
        ] {
            assert_ne!(need(cmd), Need::Nothing, "{cmd:#x}");
            assert!(ioctl::name(cmd).is_some(), "{cmd:#x}");
        }
    }

    #[test]
    fn kernel_dev_matches_kernel_encoding() {
        // 8:1 (sda1): st_dev 0x801 → (8 << 20) | 1.
        assert_eq!(kernel_dev(0x801), (8 << 20) | 1);
        // 0:26 (a tmpfs): st_dev 0x1a → 26.
        assert_eq!(kernel_dev(0x1a), 26);
        // 259:70000 (large minor): glibc splits the minor across two fields.
        let st = (259u64 << 8) | (70000 & 0xff) | ((70000u64 & !0xff) << 12);
        assert_eq!(kernel_dev(st), (259 << 20) | 70000);
    }
}
