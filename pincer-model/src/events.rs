//! Turning raw ring-buffer records into sanitized decisions.
//!
//! Nothing downstream sees kernel bytes: names are escaped (control
//! characters, backslashes and invalid UTF-8 become `\xNN`), lengths are
//! bounded, and flags are decoded into words.

use std::{borrow::Cow, collections::HashMap, fs};

use pincer_common::{
    AccessEvent, COMPONENT_LEN, MAX_COMPONENTS, caps, event_flags, hook, ioctl, ops, verdict,
};
use serde::Serialize;

use crate::{
    escape::{CUT, escape, unescape_mount_field},
    request::{OF_A_POLICY_OBJECT, PolicyReason, ProcessFacts, Request},
};

/// Longest escaped path kept in a decision.
pub const MAX_PATH_CHARS: usize = 4096;

/// A decision of the kernel, sanitized for people and voters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Decision {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Escaped `comm` of the task.
    pub comm: String,
    /// Operations requested, by name.
    pub operation: Vec<&'static str>,
    /// Escaped path of the object (for a creation, of the new name).
    pub path: String,
    /// `allow`, `deny`, or `audit` (allowed, would have been denied).
    pub verdict: &'static str,
    /// Why.
    pub reason: String,
    /// The hook that decided.
    pub hook: &'static str,
    /// The object's (for a creation, its directory's) device as `major:minor`.
    pub dev: String,
    /// The object's (for a creation, its directory's) inode.
    pub ino: u64,
    /// The agent's cgroup id.
    pub cgroup: u64,
    /// The agent's level after this read, when the read lowered it (the
    /// object is a source, or was derived from one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub taint: Option<&'static str>,
    /// What made the object a policy object, on a refused (or parked, or
    /// audited) change to one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<PolicyReason>,
}

impl Decision {
    /// Names the rule that made the object policy, in the reason too.
    pub fn name_policy(&mut self, reason: PolicyReason) {
        self.reason = reason.named_in(&self.reason);
        self.policy = Some(reason);
    }
}

/// Reads an [`AccessEvent`] from ring-buffer bytes.
pub fn parse(bytes: &[u8]) -> Option<AccessEvent> {
    if bytes.len() < size_of::<AccessEvent>() {
        return None;
    }
    // SAFETY: the length is checked and `AccessEvent` is plain old data, valid
    // for any bit pattern; the read is unaligned-safe.
    Some(unsafe { bytes.as_ptr().cast::<AccessEvent>().read_unaligned() })
}

/// Names of a set of operation bits.
pub fn op_names(bits: u32) -> Vec<&'static str> {
    ops::NAMES
        .iter()
        .filter(|(bit, _)| bits & bit != 0)
        .map(|(_, name)| *name)
        .collect()
}

/// Bytes of a NUL-terminated fixed buffer.
fn until_nul(buf: &[u8]) -> &[u8] {
    buf.split(|&b| b == 0).next().unwrap_or_default()
}

/// Mount points by device, to turn a path inside a filesystem (what the
/// kernel walk yields) into an absolute one.
#[derive(Debug, Default)]
pub struct Mounts {
    by_dev: HashMap<u64, String>,
}

impl Mounts {
    /// Reads `/proc/self/mountinfo`.
    pub fn load() -> Self {
        Self::parse(&fs::read_to_string("/proc/self/mountinfo").unwrap_or_default())
    }

    /// Parses mountinfo text. Only mounts of a filesystem's root are kept: a
    /// bind mount of a subdirectory would give the wrong prefix.
    pub fn parse(text: &str) -> Self {
        let mut by_dev = HashMap::new();
        for line in text.lines() {
            let fields: Vec<&str> = line.split(' ').collect();
            let (Some(devno), Some(root), Some(point)) =
                (fields.get(2), fields.get(3), fields.get(4))
            else {
                continue;
            };
            let Some((major, minor)) = devno.split_once(':') else {
                continue;
            };
            let (Ok(major), Ok(minor)) = (major.parse::<u64>(), minor.parse::<u64>()) else {
                continue;
            };
            if *root != "/" {
                continue;
            }
            // First one wins: the same filesystem mounted twice gives the
            // older, usually canonical, place. Escaped like every path part:
            // a mount point may hold control characters too.
            by_dev.entry((major << 20) | minor).or_insert_with(|| {
                escape(unescape_mount_field(point).as_os_str().as_encoded_bytes())
            });
        }
        Self { by_dev }
    }
}

/// The escaped path of an event's object. Where pincer shortened it, it
/// says so with [`CUT`] (which an escaped name never contains): before a
/// path whose walk stopped short of its filesystem's root, after a name the
/// kernel cut to fit a component (when the event says a name was cut, each
/// one that fills its slot may be: its real name is longer or just as long),
/// and at the end of a path too long to show.
pub fn event_path(event: &AccessEvent, mounts: &Mounts) -> String {
    let depth = (event.depth as usize).min(MAX_COMPONENTS);
    let truncated = event.flags & event_flags::NAME_TRUNCATED != 0;
    let names = &event.components[..depth];
    let root_reached = event.flags & event_flags::ROOT_REACHED != 0;
    // The mount point goes first (none for the root's filesystem, or one
    // pincer does not know); a walk that stopped short says so first.
    let point = if root_reached {
        mounts.by_dev.get(&event.dev).filter(|p| *p != "/")
    } else {
        None
    };
    // Room for the names as they are (most need no escaping) and the rest,
    // so that the path is built in one string and rarely grown.
    let mut path = String::with_capacity(
        names
            .iter()
            .map(|c| until_nul(&c[..COMPONENT_LEN]).len() + 1)
            .sum::<usize>()
            + point.map_or(0, String::len)
            + CUT.len_utf8(),
    );
    if !root_reached {
        path.push(CUT);
    }
    if let Some(point) = point {
        path.push_str(point);
    }
    for component in names.iter().rev() {
        let name = until_nul(&component[..COMPONENT_LEN]);
        path.push('/');
        crate::escape::escape_into(&mut path, name);
        if truncated && name.len() + 1 >= COMPONENT_LEN {
            path.push(CUT);
        }
    }
    if names.is_empty() && point.is_none() {
        path.push('/');
    }
    if path.len() > MAX_PATH_CHARS {
        let mut cut = MAX_PATH_CHARS;
        while !path.is_char_boundary(cut) {
            cut -= 1;
        }
        path.truncate(cut);
        path.push(CUT);
    }
    path
}

/// Why an ungranted access was denied at once instead of parked, by the
/// flag the kernel set; the first flag set names the cause.
const DENIED_AT_ONCE: [(u32, &str); 6] = [
    (event_flags::NO_TWIN, "no live twin to ask"),
    (
        event_flags::IO_URING,
        "the task uses io_uring, whose requests cannot be parked",
    ),
    (
        event_flags::NOT_RESTARTABLE,
        "a received descriptor or a change of a mapping's protection cannot be asked about",
    ),
    (
        event_flags::BOTH_ENDS,
        "neither end of the link or rename is granted",
    ),
    (
        event_flags::UNPARKABLE,
        "the task cannot be parked (an io_uring worker, a kernel thread or an exiting task)",
    ),
    (event_flags::PENDING_FULL, "too many parked requests"),
];

/// What no grant gives, by the flag the kernel set: the first flag set names
/// the rule.
const REFUSED_ALWAYS: [(u32, &str); 6] = [
    (event_flags::DEVICE_NODE, "agents never create device nodes"),
    (event_flags::BLOCK_DEVICE, "agents never open block devices"),
    (
        event_flags::KERNEL_FS,
        "agents never open the kernel's debugging and tracing file systems",
    ),
    (
        event_flags::OTHER_PROCESS,
        "the /proc entries of processes outside the agent's cgroup are never open to it",
    ),
    (
        event_flags::KERNEL_SETTING,
        "agents never write to /proc outside their own processes' entries",
    ),
    (
        event_flags::NOT_OWNED,
        "IPC objects and keys created outside the agent's cgroup are never open to it",
    ),
];

/// The rule that refused an access whatever the grants, if one did.
fn refused_always(flags: u32) -> Option<&'static str> {
    REFUSED_ALWAYS
        .iter()
        .find(|(flag, _)| flags & flag != 0)
        .map(|(_, why)| *why)
}

/// Why a task of a held cgroup was refused: it could not wait for the
/// daemon to decide what its cgroup is.
fn held_reason(flags: u32) -> String {
    // The kernel flags a held task's refusal as it flags a request it could
    // not park; only a hook that cannot restart has words of its own here
    // (the table's are a received descriptor's).
    let why = if flags & event_flags::NOT_RESTARTABLE != 0 {
        "this hook cannot wait"
    } else {
        DENIED_AT_ONCE
            .iter()
            .find(|(flag, _)| flags & flag != 0)
            .map_or("the task cannot be stopped", |(_, why)| *why)
    };
    format!("the cgroup is held until the daemon decides what it is; {why}: denied at once")
}

/// Why the kernel denied an access at once.
fn deny_reason(flags: u32, missing: u32) -> String {
    if let Some(why) = refused_always(flags) {
        return why.to_owned();
    }
    let not_granted = not_granted(flags, missing);
    match DENIED_AT_ONCE.iter().find(|(flag, _)| flags & flag != 0) {
        Some((_, why)) => format!("{not_granted}; {why}: denied at once"),
        None => not_granted,
    }
}

/// How the reason of an access that a grant would have allowed starts,
/// after what the mode adds before it (`audit mode: would be denied, `):
/// `pincer recommend` tells such accesses from those no grant allows by it.
pub const NO_GRANT_COVERS: &str = "no grant covers";

/// The reason of an access the grants allowed.
pub const GRANTED: &str = "granted by the mission";

/// What audit mode puts before the reason an access would have been
/// denied for.
pub const AUDIT_MODE: &str = "audit mode: would be denied, ";

/// What the grants left out: a change to a policy object, which no grant
/// above it gives, or operations no grant covers.
fn not_granted(flags: u32, missing: u32) -> String {
    let ops = op_names(missing).join(", ");
    if flags & event_flags::INSPECT != 0 {
        format!(
            "{ops} {OF_A_POLICY_OBJECT}, inspected: a change of keys that run nothing is the agent's, any other only the owner may allow"
        )
    } else if flags & event_flags::POLICY != 0 {
        format!("{ops} {OF_A_POLICY_OBJECT}: only the owner may allow it")
    } else if flags & event_flags::REVOKED != 0 {
        format!("{ops} of content derived from a revoked source: only the owner may allow it")
    } else if flags & event_flags::ACTION != 0 {
        format!(
            "{ops} of an action the mission reserves for agents of higher authority than this one's (it read content of lower authority): only the owner may allow it"
        )
    } else {
        format!("{NO_GRANT_COVERS} {ops}")
    }
}

/// Builds a request from an event and the process facts read for it.
pub fn sanitize(
    event: &AccessEvent,
    mounts: &Mounts,
    mission: &str,
    exe: Option<String>,
    parents: Vec<ProcessFacts>,
) -> Request {
    let missing = event.ops & !event.granted;
    Request {
        id: event.request_id,
        mission: mission.to_owned(),
        cgroup: event.cgroup_id,
        pid: event.tgid,
        tid: event.pid,
        comm: escape(until_nul(&event.comm)),
        exe,
        parents,
        operation: ops::NAMES
            .iter()
            .filter(|(bit, _)| event.ops & bit != 0)
            .map(|(_, name)| Cow::Borrowed(*name))
            .collect(),
        ops: event.ops,
        path: event_path(event, mounts),
        hook: Cow::Borrowed(hook_name(event.hook)),
        dev: event.dev,
        ino: event.ino,
        why: if event.flags & (event_flags::POLICY | event_flags::ACTION | event_flags::REVOKED)
            != 0
        {
            not_granted(event.flags, missing)
        } else {
            format!(
                "no grant of the mission covers {}",
                op_names(missing).join(", ")
            )
        },
        owner_only: if event.flags & event_flags::POLICY != 0 {
            Some(crate::request::OWNER_ONLY_POLICY.to_owned())
        } else if event.flags & event_flags::ACTION != 0 {
            Some(crate::request::OWNER_ONLY_ACTION.to_owned())
        } else if event.flags & event_flags::REVOKED != 0 {
            Some(crate::request::OWNER_ONLY_REVOKED.to_owned())
        } else {
            None
        },
        taint: Vec::new(),
        discovery: None,
        policy: None,
    }
}

/// The new name of an event for an object that does not exist yet, when it
/// was copied whole: the kernel ends a whole name with a NUL inside its
/// slot, so a slot filled to the end holds at most the start of one, even
/// when the record does not say it was cut.
pub fn created_name(event: &AccessEvent) -> Option<Vec<u8>> {
    if event.flags & event_flags::NEW_NAME == 0
        || event.depth == 0
        || event.flags & event_flags::NAME_TRUNCATED != 0
    {
        return None;
    }
    let slot = &event.components[0];
    let end = slot.iter().position(|&b| b == 0)?;
    Some(slot[..end].to_vec())
}

/// The name of a hook number, as audit lines and metrics show it (from the
/// hook table; `unknown` for a number no hook has).
pub fn hook_name(hook: u32) -> &'static str {
    hook::name(hook)
}

/// What a self-protection refusal stopped.
fn guard_reason(event: &AccessEvent) -> String {
    if event.hook == hook::CAPABLE {
        return capability_reason(event.ino);
    }
    let what = match event.hook {
        hook::TASK_KILL => format!("a signal to pincer's process {}", event.ino),
        hook::PTRACE => format!(
            "tracing process {} outside the agent's cgroup (ptrace, or its /proc entries)",
            event.ino
        ),
        _ if reads_a_file(event.hook) => {
            "reading the /proc entries of pincer's processes".to_owned()
        }
        hook::BPF => "the bpf system call".to_owned(),
        hook::SB_MOUNT | hook::MOVE_MOUNT => {
            "mounting outside a sandbox of the agent's own".to_owned()
        }
        hook::SB_UMOUNT => "unmounting outside a sandbox of the agent's own".to_owned(),
        hook::TASK_ALLOC => "starting a process in another cgroup".to_owned(),
        hook::KERNEL_LOAD_DATA | hook::KERNEL_READ_FILE => {
            format!("loading {} into the kernel", kernel_data(event.ino))
        }
        hook::FILE_IOCTL | hook::FILE_IOCTL_COMPAT => refused_ioctl(event.ino),
        _ => "an action".to_owned(),
    };
    format!("pincer protects itself and the confinement: {what} is never allowed to agents")
}

/// Whether a hook opens or reads an existing file, and so names it even when
/// it refuses whatever the grants (a `/proc` entry of pincer's processes).
fn reads_a_file(id: u32) -> bool {
    matches!(
        id,
        hook::FILE_OPEN
            | hook::INODE_GETXATTR
            | hook::INODE_LISTXATTR
            | hook::INODE_GET_ACL
            | hook::INODE_READLINK
            | hook::PATH_NOTIFY
    )
}

/// Why a capability was refused (`cap` is its number).
fn capability_reason(cap: u64) -> String {
    let Some(name) = u32::try_from(cap).ok().and_then(caps::name) else {
        return format!("capability {cap} is unknown to pincer: refused to agents");
    };
    if caps::NEVER & caps::bit(cap as u32) != 0 {
        format!("the capability {name} is never given to agents: it reaches the kernel or pincer")
    } else {
        format!(
            "the capability {name} is not among the agent's (a mission may add it: defaults.capabilities)"
        )
    }
}

/// What the kernel was asked to load, by its `kernel_read_file_id` or
/// `kernel_load_data_id` (the two enumerations agree).
fn kernel_data(id: u64) -> &'static str {
    match id {
        1 => "firmware",
        2 => "a module",
        3 | 4 => "a kexec image",
        5 => "a security policy",
        6 => "a certificate",
        _ => "code or data",
    }
}

/// What a refused ioctl command does, and its name.
fn refused_ioctl(cmd: u64) -> String {
    let cmd = cmd as u32;
    let what = match cmd {
        ioctl::TIOCSTI | ioctl::TIOCLINUX => "typing into a terminal",
        _ => "changing a whole filesystem",
    };
    match ioctl::name(cmd) {
        Some(name) => format!("{what} ({name})"),
        None => format!("ioctl {cmd:#x}"),
    }
}

/// Sanitizes an event into a decision.
pub fn decision(event: &AccessEvent, mounts: &Mounts) -> Decision {
    let missing = event.ops & !event.granted;
    let (verdict, reason) = match event.verdict {
        verdict::ALLOWED => ("allow", GRANTED.to_owned()),
        verdict::AUDITED if event.flags & event_flags::GUARD != 0 => {
            ("audit", format!("{AUDIT_MODE}{}", guard_reason(event)))
        }
        verdict::AUDITED if refused_always(event.flags).is_some() => (
            "audit",
            format!("{AUDIT_MODE}{}", deny_reason(event.flags, missing)),
        ),
        verdict::AUDITED => (
            "audit",
            format!("{AUDIT_MODE}{}", not_granted(event.flags, missing)),
        ),
        verdict::PARKED => (
            "park",
            format!("{}: asking", not_granted(event.flags, missing)),
        ),
        _ if event.flags & event_flags::GUARD != 0 => ("deny", guard_reason(event)),
        _ if event.flags & event_flags::HELD != 0 => ("deny", held_reason(event.flags)),
        _ if event.flags & event_flags::READ_FAILED != 0 && event.ops == 0 => (
            "deny",
            "the object could not be identified; denied".to_owned(),
        ),
        _ => ("deny", deny_reason(event.flags, missing)),
    };
    // Refusals that name no file: a task, a capability, an IPC object, a key.
    let path = if event.flags & event_flags::HELD != 0
        || event.flags & (event_flags::GUARD | event_flags::NOT_OWNED) != 0
            && !reads_a_file(event.hook)
    {
        String::new()
    } else {
        event_path(event, mounts)
    };
    Decision {
        pid: event.tgid,
        tid: event.pid,
        comm: escape(until_nul(&event.comm)),
        operation: op_names(event.ops),
        path,
        verdict,
        reason,
        hook: hook_name(event.hook),
        dev: format!("{}:{}", event.dev >> 20, event.dev & 0xf_ffff),
        ino: event.ino,
        cgroup: event.cgroup_id,
        taint: None,
        policy: None,
    }
}

#[cfg(test)]
impl Decision {
    /// A decision for unit tests: `cat` denied reading `path`.
    pub(crate) fn example(path: &str) -> Decision {
        Decision {
            pid: 1,
            tid: 2,
            comm: "cat".into(),
            operation: vec!["read"],
            path: path.into(),
            verdict: "deny",
            reason: "no grant covers read".into(),
            hook: "file_open",
            dev: "0:1".into(),
            ino: 5,
            cgroup: 9,
            taint: None,
            policy: None,
        }
    }
}

/// A record for tests and benchmarks: `comm` (pid 100 of process 99, in
/// cgroup 7) was refused reading, for want of writing, the object whose
/// names are `components`, the leaf first.
#[doc(hidden)]
pub fn example(comm: &[u8], components: &[&[u8]]) -> AccessEvent {
    let mut event = AccessEvent {
        request_id: 0,
        parent_ino: 0,
        name_hash: 0,
        at_ns: 0,
        cgroup_id: 7,
        dev: (8 << 20) | 1,
        ino: 42,
        pid: 100,
        tgid: 99,
        slot: 1,
        ops: ops::READ | ops::WRITE,
        granted: ops::READ,
        verdict: verdict::DENIED,
        hook: hook::FILE_OPEN,
        depth: components.len() as u32,
        flags: 0,
        exe_dev: 0,
        exe_ino: 0,
        exe_generation: 0,
        policy_entry: 0,
        policy_step: 0,
        comm: [0; 16],
        components: [[0; COMPONENT_LEN]; MAX_COMPONENTS],
    };
    event.comm[..comm.len()].copy_from_slice(comm);
    for (slot, name) in event.components.iter_mut().zip(components) {
        slot[..name.len()].copy_from_slice(name);
    }
    event
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(components: &[&[u8]], flags: u32) -> AccessEvent {
        AccessEvent {
            flags,
            ..example(b"cat", components)
        }
    }

    /// The decision on `event` with no mount known.
    fn decided(event: &AccessEvent) -> Decision {
        decision(event, &Mounts::default())
    }

    #[test]
    fn path_is_joined_leaf_last_and_prefixed_by_mount() {
        let mounts = Mounts::parse(
            "22 1 0:21 / / rw - rootfs rootfs rw\n\
             30 22 8:1 / /mnt/my\\040disk rw - ext4 /dev/sda1 rw\n\
             31 22 8:1 /sub /bound rw - ext4 /dev/sda1 rw\n",
        );
        let e = event(&[b"id_rsa", b".ssh", b"root"], event_flags::ROOT_REACHED);
        assert_eq!(event_path(&e, &mounts), "/mnt/my disk/root/.ssh/id_rsa");
        let mut e = e;
        e.dev = 21;
        assert_eq!(event_path(&e, &mounts), "/root/.ssh/id_rsa");
        e.flags = 0;
        assert_eq!(event_path(&e, &mounts), "…/root/.ssh/id_rsa");
    }

    #[test]
    fn a_cut_name_is_marked_and_cannot_be_imitated() {
        let long = [b'a'; COMPONENT_LEN - 1];
        let e = event(
            &[b"key", &long, b"home"],
            event_flags::ROOT_REACHED | event_flags::NAME_TRUNCATED,
        );
        let shown = event_path(&e, &Mounts::default());
        assert_eq!(
            shown,
            format!("/home/{}…/key", "a".repeat(COMPONENT_LEN - 1))
        );
        // A name that ends in an ellipsis of its own shows it escaped.
        let e = event(&["ab…".as_bytes()], event_flags::ROOT_REACHED);
        assert_eq!(event_path(&e, &Mounts::default()), "/ab\\xe2\\x80\\xa6");
    }

    #[test]
    fn hostile_mount_points_are_decoded_and_escaped() {
        // A backslash before a multi-byte character, and a newline and a
        // trailing space escaped the kernel's way.
        let mounts = Mounts::parse(
            "30 22 0:40 / /mnt/\\\u{e9}x rw - tmpfs t rw\n\
             31 22 0:41 / /mnt/a\\012b\\040 rw - tmpfs t rw\n",
        );
        let on = |dev: u64, names: &[&[u8]], flags: u32| {
            let mut e = event(names, flags);
            e.dev = dev;
            event_path(&e, &mounts)
        };
        assert_eq!(
            on(40, &[b"f"], event_flags::ROOT_REACHED),
            "/mnt/\\\\\u{e9}x/f"
        );
        assert_eq!(
            on(41, &[b"f"], event_flags::ROOT_REACHED),
            "/mnt/a\\x0ab /f"
        );
        // The mount's root itself, a filesystem pincer knows no mount of,
        // and walks that stopped short (a mount point is not guessed).
        assert_eq!(on(41, &[], event_flags::ROOT_REACHED), "/mnt/a\\x0ab ");
        assert_eq!(on(42, &[b"f"], event_flags::ROOT_REACHED), "/f");
        assert_eq!(on(42, &[], event_flags::ROOT_REACHED), "/");
        assert_eq!(on(40, &[b"f", b"d"], 0), "\u{2026}/d/f");
        assert_eq!(on(40, &[], 0), "\u{2026}/");
    }

    #[test]
    fn decision_names_missing_ops() {
        let d = decision(
            &event(&[b"key\x07"], event_flags::ROOT_REACHED),
            &Mounts::default(),
        );
        assert_eq!(d.verdict, "deny");
        assert_eq!(d.reason, "no grant covers write");
        assert_eq!(d.operation, ["read", "write"]);
        assert_eq!(d.path, "/key\\x07");
        assert_eq!(d.comm, "cat");
        assert_eq!(d.dev, "8:1");
        assert_eq!((d.pid, d.tid), (99, 100));
    }

    #[test]
    fn a_policy_objects_reason_names_its_rule_and_an_inspected_one_says_so() {
        let mut e = event(
            &[b"config", b".git"],
            event_flags::ROOT_REACHED | event_flags::POLICY,
        );
        e.ops = ops::DELETE;
        e.hook = hook::INODE_RENAME;
        e.verdict = verdict::AUDITED;
        let mut d = decided(&e);
        assert_eq!(
            d.reason,
            "audit mode: would be denied, delete of a policy object: only the owner may allow it"
        );
        d.name_policy(PolicyReason {
            class: "git".into(),
            rule: ".git/config".into(),
            at: "/.git/config".into(),
            why: "a repository's configuration".into(),
        });
        assert_eq!(
            d.reason,
            "audit mode: would be denied, delete of a policy object (git: `.git/config` at /.git/config): only the owner may allow it"
        );
        e.flags |= event_flags::INSPECT;
        assert!(decided(&e).reason.contains(
            "of a policy object, inspected: a change of keys that run nothing is the agent's"
        ),);
    }

    #[test]
    fn a_held_task_that_could_not_wait_is_refused_with_no_path() {
        let mut e = event(&[b"secret"], event_flags::HELD | event_flags::NO_TWIN);
        e.hook = hook::FILE_OPEN;
        e.ops = 0;
        e.granted = 0;
        let d = decided(&e);
        assert_eq!(d.verdict, "deny");
        assert_eq!(d.path, "");
        assert_eq!(
            d.reason,
            "the cgroup is held until the daemon decides what it is; no live twin to ask: denied at once"
        );
        e.flags = event_flags::HELD | event_flags::PENDING_FULL;
        assert!(
            decided(&e)
                .reason
                .ends_with("too many parked requests: denied at once")
        );
        e.flags = event_flags::HELD | event_flags::NOT_RESTARTABLE;
        e.hook = hook::CAPABLE;
        assert!(
            decided(&e)
                .reason
                .ends_with("this hook cannot wait: denied at once")
        );
    }

    #[test]
    fn guard_refusals_name_what_was_stopped_and_have_no_path() {
        let mut e = event(&[], event_flags::GUARD);
        e.hook = hook::TASK_KILL;
        e.ino = 4242;
        e.ops = 0;
        e.granted = 0;
        let d = decided(&e);
        assert_eq!(d.verdict, "deny");
        assert_eq!(d.hook, "task_kill");
        assert_eq!(d.path, "");
        assert_eq!(
            d.reason,
            "pincer protects itself and the confinement: a signal to pincer's process 4242 is never allowed to agents"
        );
        e.verdict = verdict::AUDITED;
        e.hook = hook::SB_MOUNT;
        let d = decided(&e);
        assert_eq!(d.verdict, "audit");
        assert!(
            d.reason
                .starts_with("audit mode: would be denied, pincer protects itself")
        );
        assert!(d.reason.contains("mounting"));
        e.verdict = verdict::DENIED;
        e.hook = hook::FILE_IOCTL;
        e.ino = u64::from(ioctl::TIOCSTI);
        let d = decided(&e);
        assert_eq!(
            d.reason,
            "pincer protects itself and the confinement: typing into a terminal (TIOCSTI) is never allowed to agents"
        );
        e.hook = hook::FILE_IOCTL_COMPAT;
        e.ino = u64::from(ioctl::FIFREEZE);
        let d = decided(&e);
        assert!(d.reason.contains("changing a whole filesystem (FIFREEZE)"));
    }

    #[test]
    fn capability_and_kernel_load_refusals_say_which() {
        let mut e = event(&[], event_flags::GUARD);
        for (hook, ino, reason) in [
            (
                hook::CAPABLE,
                caps::SYS_MODULE,
                "the capability sys_module is never given to agents: it reaches the kernel or pincer",
            ),
            (
                hook::CAPABLE,
                caps::NET_RAW,
                "the capability net_raw is not among the agent's (a mission may add it: defaults.capabilities)",
            ),
            (
                hook::CAPABLE,
                63,
                "capability 63 is unknown to pincer: refused to agents",
            ),
            (
                hook::KERNEL_READ_FILE,
                2,
                "pincer protects itself and the confinement: loading a module into the kernel is never allowed to agents",
            ),
        ] {
            e.hook = hook;
            e.ino = u64::from(ino);
            let d = decided(&e);
            assert_eq!(d.hook, hook::name(hook));
            assert_eq!(d.path, "");
            assert_eq!(d.reason, reason);
        }
    }

    #[test]
    fn rules_beside_the_grants_name_themselves() {
        let mounts = Mounts::default();
        let mut e = event(&[b"1", b"proc"], event_flags::OTHER_PROCESS);
        assert_eq!(
            decision(&e, &mounts).reason,
            "the /proc entries of processes outside the agent's cgroup are never open to it"
        );
        e.verdict = verdict::AUDITED;
        e.flags = event_flags::KERNEL_SETTING;
        assert_eq!(
            decision(&e, &mounts).reason,
            "audit mode: would be denied, agents never write to /proc outside their own processes' entries"
        );
        let mut e = event(&[], event_flags::NOT_OWNED);
        e.hook = hook::IPC_PERMISSION;
        e.ino = 32768;
        let d = decision(&e, &mounts);
        assert_eq!(d.path, "");
        assert_eq!(d.ino, 32768);
        assert_eq!(
            d.reason,
            "IPC objects and keys created outside the agent's cgroup are never open to it"
        );
        // A guarded /proc entry read through an attribute names the file.
        let mut e = event(&[b"environ", b"7"], event_flags::GUARD);
        e.hook = hook::INODE_GETXATTR;
        let d = decision(&e, &mounts);
        assert_eq!(d.path, "…/7/environ");
        assert_eq!(
            d.reason,
            "pincer protects itself and the confinement: reading the /proc entries of pincer's processes is never allowed to agents"
        );
    }

    #[test]
    fn denials_say_why_they_were_not_asked() {
        let mounts = Mounts::default();
        let reason = |flags, hook| {
            let mut e = event(&[b"key"], event_flags::ROOT_REACHED | flags);
            e.hook = hook;
            decision(&e, &mounts).reason
        };
        assert_eq!(
            reason(
                event_flags::UNPARKABLE | event_flags::IO_URING,
                hook::FILE_OPEN
            ),
            "no grant covers write; the task uses io_uring, whose requests cannot be parked: denied at once"
        );
        assert_eq!(
            reason(event_flags::NOT_RESTARTABLE, hook::FILE_RECEIVE),
            "no grant covers write; a received descriptor or a change of a mapping's protection cannot be asked about: denied at once"
        );
        assert_eq!(
            reason(event_flags::BOTH_ENDS, hook::INODE_RENAME),
            "no grant covers write; neither end of the link or rename is granted: denied at once"
        );
        assert_eq!(
            reason(
                event_flags::DEVICE_NODE | event_flags::NEW_NAME,
                hook::INODE_MKNOD
            ),
            "agents never create device nodes"
        );
    }

    #[test]
    fn only_new_names_have_a_created_name() {
        let mut e = event(&[b"new.txt", b"dir"], event_flags::NEW_NAME);
        e.hook = hook::INODE_MKDIR;
        assert_eq!(created_name(&e).as_deref(), Some(&b"new.txt"[..]));
        e.flags = 0;
        assert_eq!(created_name(&e), None);
        e.flags = event_flags::NEW_NAME | event_flags::NAME_TRUNCATED;
        assert_eq!(created_name(&e), None);
    }

    #[test]
    fn a_name_without_its_nul_is_not_whole() {
        // Found by the ring_record fuzz target: a slot filled to its end was
        // taken for a whole name, which a name grant would then cover.
        let longest = [b'a'; COMPONENT_LEN - 1];
        let e = event(&[&longest, b"dir"], event_flags::NEW_NAME);
        assert_eq!(created_name(&e).as_deref(), Some(&longest[..]));
        let mut e = event(&[b"dir"], event_flags::NEW_NAME);
        e.components[0] = [b'a'; COMPONENT_LEN];
        assert_eq!(created_name(&e), None);
    }

    #[test]
    fn hooks_are_named_as_the_kernel_names_them() {
        assert_eq!(hook_name(hook::FILE_OPEN), "file_open");
        assert_eq!(hook_name(hook::PTRACE), "ptrace_access_check");
        assert_eq!(hook_name(hook::INODE_REMOVE_ACL), "inode_remove_acl");
        assert_eq!(hook_name(0), "unknown");
        assert_eq!(hook_name(99), "unknown");
    }

    #[test]
    fn short_record_is_rejected() {
        assert!(parse(&[0u8; 16]).is_none());
    }
}
