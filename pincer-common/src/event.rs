//! The ring-buffer record of a decision, and what it says.

use crate::{COMPONENT_LEN, MAX_COMPONENTS};

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

/// One decision reported to userspace through [`crate::names::EVENTS`].
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
    /// One of [`crate::hook`].
    pub hook: u32,
    /// Number of filled entries of `components`.
    pub depth: u32,
    /// Bits of [`event_flags`].
    pub flags: u32,
    /// `i_generation` of the executable's inode, on a parked request.
    pub exe_generation: u32,
    /// With [`event_flags::POLICY`]: the rule that made the object policy
    /// (`1..`, the twin's table of rules; or one of [`crate::policy_entry`]).
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
