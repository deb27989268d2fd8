//! Linux capabilities as agents use them.
//!
//! An agent's tasks may hold every capability in their credentials (an
//! agent often runs as root), yet a capability check made for one of them
//! succeeds only for a capability in its set ([`crate::Agent::capabilities`],
//! bit `n` for capability `n`): the `capable` program refuses every other one
//! with `EPERM`. The set is [`DEFAULT`] and what the mission adds
//! (`defaults.capabilities`), never one of [`NEVER`].
//!
//! One rule closes whole families at once: no module or kexec image can be
//! loaded (`CAP_SYS_MODULE`, `CAP_SYS_BOOT`), no raw memory, port or disk
//! I/O done (`CAP_SYS_RAWIO`: `/dev/mem`, `/dev/port`, `/proc/kcore`), no
//! mount, namespace, fanotify permission event or `trusted.*` attribute made
//! (`CAP_SYS_ADMIN`, including the new mount API's `fsopen`, `fspick`,
//! `open_tree(OPEN_TREE_CLONE)`, `mount_setattr` and `move_mount`), no
//! immutable or append-only flag lifted (`CAP_LINUX_IMMUTABLE`).

/// `CAP_CHOWN`.
pub const CHOWN: u32 = 0;
/// `CAP_DAC_OVERRIDE`.
pub const DAC_OVERRIDE: u32 = 1;
/// `CAP_DAC_READ_SEARCH`.
pub const DAC_READ_SEARCH: u32 = 2;
/// `CAP_FOWNER`.
pub const FOWNER: u32 = 3;
/// `CAP_FSETID`.
pub const FSETID: u32 = 4;
/// `CAP_KILL`.
pub const KILL: u32 = 5;
/// `CAP_SETGID`.
pub const SETGID: u32 = 6;
/// `CAP_SETUID`.
pub const SETUID: u32 = 7;
/// `CAP_SETPCAP`.
pub const SETPCAP: u32 = 8;
/// `CAP_LINUX_IMMUTABLE`.
pub const LINUX_IMMUTABLE: u32 = 9;
/// `CAP_NET_BIND_SERVICE`.
pub const NET_BIND_SERVICE: u32 = 10;
/// `CAP_NET_BROADCAST`.
pub const NET_BROADCAST: u32 = 11;
/// `CAP_NET_ADMIN`.
pub const NET_ADMIN: u32 = 12;
/// `CAP_NET_RAW`.
pub const NET_RAW: u32 = 13;
/// `CAP_IPC_LOCK`.
pub const IPC_LOCK: u32 = 14;
/// `CAP_IPC_OWNER`.
pub const IPC_OWNER: u32 = 15;
/// `CAP_SYS_MODULE`.
pub const SYS_MODULE: u32 = 16;
/// `CAP_SYS_RAWIO`.
pub const SYS_RAWIO: u32 = 17;
/// `CAP_SYS_CHROOT`.
pub const SYS_CHROOT: u32 = 18;
/// `CAP_SYS_PTRACE`.
pub const SYS_PTRACE: u32 = 19;
/// `CAP_SYS_PACCT`.
pub const SYS_PACCT: u32 = 20;
/// `CAP_SYS_ADMIN`.
pub const SYS_ADMIN: u32 = 21;
/// `CAP_SYS_BOOT`.
pub const SYS_BOOT: u32 = 22;
/// `CAP_SYS_NICE`.
pub const SYS_NICE: u32 = 23;
/// `CAP_SYS_RESOURCE`.
pub const SYS_RESOURCE: u32 = 24;
/// `CAP_SYS_TIME`.
pub const SYS_TIME: u32 = 25;
/// `CAP_SYS_TTY_CONFIG`.
pub const SYS_TTY_CONFIG: u32 = 26;
/// `CAP_MKNOD`.
pub const MKNOD: u32 = 27;
/// `CAP_LEASE`.
pub const LEASE: u32 = 28;
/// `CAP_AUDIT_WRITE`.
pub const AUDIT_WRITE: u32 = 29;
/// `CAP_AUDIT_CONTROL`.
pub const AUDIT_CONTROL: u32 = 30;
/// `CAP_SETFCAP`.
pub const SETFCAP: u32 = 31;
/// `CAP_MAC_OVERRIDE`.
pub const MAC_OVERRIDE: u32 = 32;
/// `CAP_MAC_ADMIN`.
pub const MAC_ADMIN: u32 = 33;
/// `CAP_SYSLOG`.
pub const SYSLOG: u32 = 34;
/// `CAP_WAKE_ALARM`.
pub const WAKE_ALARM: u32 = 35;
/// `CAP_BLOCK_SUSPEND`.
pub const BLOCK_SUSPEND: u32 = 36;
/// `CAP_AUDIT_READ`.
pub const AUDIT_READ: u32 = 37;
/// `CAP_PERFMON`.
pub const PERFMON: u32 = 38;
/// `CAP_BPF`.
pub const BPF: u32 = 39;
/// `CAP_CHECKPOINT_RESTORE`.
pub const CHECKPOINT_RESTORE: u32 = 40;

/// Every capability this version knows, by number, with the name missions
/// and audit lines use (the kernel's, lower case, without `CAP_`).
pub const NAMES: [(u32, &str); 41] = [
    (CHOWN, "chown"),
    (DAC_OVERRIDE, "dac_override"),
    (DAC_READ_SEARCH, "dac_read_search"),
    (FOWNER, "fowner"),
    (FSETID, "fsetid"),
    (KILL, "kill"),
    (SETGID, "setgid"),
    (SETUID, "setuid"),
    (SETPCAP, "setpcap"),
    (LINUX_IMMUTABLE, "linux_immutable"),
    (NET_BIND_SERVICE, "net_bind_service"),
    (NET_BROADCAST, "net_broadcast"),
    (NET_ADMIN, "net_admin"),
    (NET_RAW, "net_raw"),
    (IPC_LOCK, "ipc_lock"),
    (IPC_OWNER, "ipc_owner"),
    (SYS_MODULE, "sys_module"),
    (SYS_RAWIO, "sys_rawio"),
    (SYS_CHROOT, "sys_chroot"),
    (SYS_PTRACE, "sys_ptrace"),
    (SYS_PACCT, "sys_pacct"),
    (SYS_ADMIN, "sys_admin"),
    (SYS_BOOT, "sys_boot"),
    (SYS_NICE, "sys_nice"),
    (SYS_RESOURCE, "sys_resource"),
    (SYS_TIME, "sys_time"),
    (SYS_TTY_CONFIG, "sys_tty_config"),
    (MKNOD, "mknod"),
    (LEASE, "lease"),
    (AUDIT_WRITE, "audit_write"),
    (AUDIT_CONTROL, "audit_control"),
    (SETFCAP, "setfcap"),
    (MAC_OVERRIDE, "mac_override"),
    (MAC_ADMIN, "mac_admin"),
    (SYSLOG, "syslog"),
    (WAKE_ALARM, "wake_alarm"),
    (BLOCK_SUSPEND, "block_suspend"),
    (AUDIT_READ, "audit_read"),
    (PERFMON, "perfmon"),
    (BPF, "bpf"),
    (CHECKPOINT_RESTORE, "checkpoint_restore"),
];

/// The bit of capability `cap` in a set.
pub const fn bit(cap: u32) -> u64 {
    1 << cap
}

/// The set of the capabilities listed.
pub const fn set(caps: &[u32]) -> u64 {
    let mut set = 0;
    let mut i = 0;
    while i < caps.len() {
        set |= bit(caps[i]);
        i += 1;
    }
    set
}

/// What every agent may use: what ordinary root tools need to work on files
/// (owners, modes, permission overrides, which the file hooks still decide
/// object by object), to change user (`su`, `sudo`: set-id, `setgroups`,
/// audit records of logins), to `chroot`, to bind ports below 1024, and to
/// drop capabilities. It is the default set of container runtimes less
/// `CAP_KILL` (processes of other users), `CAP_NET_RAW` (raw and packet
/// sockets see the host's traffic) and `CAP_SETFCAP` (file capabilities
/// others would run with), plus `CAP_DAC_READ_SEARCH`, which the kernel
/// tries before `CAP_DAC_OVERRIDE` on every read of a directory or file the
/// task's user may not read: refusing it would change nothing but report
/// every such lookup (it also lets `open_by_handle_at` reach a file without
/// a path, and the file hooks decide that open on the file itself).
/// `CAP_MKNOD` changes nothing either: `inode_mknod` refuses device nodes.
pub const DEFAULT: u64 = set(&[
    CHOWN,
    DAC_OVERRIDE,
    DAC_READ_SEARCH,
    FOWNER,
    FSETID,
    SETGID,
    SETUID,
    SETPCAP,
    NET_BIND_SERVICE,
    SYS_CHROOT,
    MKNOD,
    AUDIT_WRITE,
]);

/// What no mission can give: each reaches the kernel's code or memory, the
/// host's other processes, or pincer itself.
///
/// | capability | why |
/// |---|---|
/// | `sys_module` | loads kernel code |
/// | `sys_boot` | `kexec` loads a new kernel; `reboot` |
/// | `sys_rawio` | `/dev/mem`, `/dev/port`, `/proc/kcore`, I/O ports, raw SCSI commands |
/// | `sys_admin` | mounts (every mount API), namespaces, `bpf`, fanotify permission events, `trusted.*` attributes, and most else that reconfigures the kernel |
/// | `sys_ptrace` | traces and reads any process, pincer's included |
/// | `bpf`, `perfmon` | pincer's programs and maps; kernel tracing and memory |
/// | `mac_admin`, `mac_override` | the security modules' policy |
/// | `syslog` | the kernel log and kernel addresses |
/// | `linux_immutable` | lifts the immutable and append-only flags that protect files |
/// | `audit_control`, `audit_read` | the kernel's audit rules and every process's audit records |
/// | `sys_pacct` | accounts for every process of the host into a file |
pub const NEVER: u64 = set(&[
    SYS_MODULE,
    SYS_BOOT,
    SYS_RAWIO,
    SYS_ADMIN,
    SYS_PTRACE,
    BPF,
    PERFMON,
    MAC_ADMIN,
    MAC_OVERRIDE,
    SYSLOG,
    LINUX_IMMUTABLE,
    AUDIT_CONTROL,
    AUDIT_READ,
    SYS_PACCT,
]);

/// `CAP_OPT_NOAUDIT` in the options of `security_capable`: the kernel asks
/// whether the task has the capability to choose a path (`kallsyms`
/// showing addresses, a `trusted.*` name listed or not), not because the
/// task attempted something that needs it. Refused like any other check,
/// but not reported.
pub const OPT_NOAUDIT: u32 = 1 << 1;

/// The name of a capability number (`None` for one this version does not
/// know).
pub const fn name(cap: u32) -> Option<&'static str> {
    let mut i = 0;
    while i < NAMES.len() {
        if NAMES[i].0 == cap {
            return Some(NAMES[i].1);
        }
        i += 1;
    }
    None
}

const _: () = {
    // Names are listed by number, and the two sets never meet.
    let mut i = 0;
    while i < NAMES.len() {
        assert!(NAMES[i].0 as usize == i);
        i += 1;
    }
    assert!(DEFAULT & NEVER == 0);
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_sets() {
        assert_eq!(name(SYS_ADMIN), Some("sys_admin"));
        assert_eq!(name(CHECKPOINT_RESTORE), Some("checkpoint_restore"));
        assert_eq!(name(41), None);
        assert_eq!(DEFAULT & bit(SYS_MODULE), 0);
        assert_ne!(DEFAULT & bit(CHOWN), 0);
        assert_ne!(NEVER & bit(BPF), 0);
        assert_eq!(NEVER & bit(NET_ADMIN), 0);
    }
}
