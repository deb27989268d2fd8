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

named! {
    /// Every capability this version knows, by number, with the name missions
    /// and audit lines use (the kernel's, lower case, without `CAP_`).
    NAMES;

    /// `CAP_CHOWN`.
    CHOWN = 0 => "chown";
    /// `CAP_DAC_OVERRIDE`.
    DAC_OVERRIDE = 1 => "dac_override";
    /// `CAP_DAC_READ_SEARCH`.
    DAC_READ_SEARCH = 2 => "dac_read_search";
    /// `CAP_FOWNER`.
    FOWNER = 3 => "fowner";
    /// `CAP_FSETID`.
    FSETID = 4 => "fsetid";
    /// `CAP_KILL`.
    KILL = 5 => "kill";
    /// `CAP_SETGID`.
    SETGID = 6 => "setgid";
    /// `CAP_SETUID`.
    SETUID = 7 => "setuid";
    /// `CAP_SETPCAP`.
    SETPCAP = 8 => "setpcap";
    /// `CAP_LINUX_IMMUTABLE`.
    LINUX_IMMUTABLE = 9 => "linux_immutable";
    /// `CAP_NET_BIND_SERVICE`.
    NET_BIND_SERVICE = 10 => "net_bind_service";
    /// `CAP_NET_BROADCAST`.
    NET_BROADCAST = 11 => "net_broadcast";
    /// `CAP_NET_ADMIN`.
    NET_ADMIN = 12 => "net_admin";
    /// `CAP_NET_RAW`.
    NET_RAW = 13 => "net_raw";
    /// `CAP_IPC_LOCK`.
    IPC_LOCK = 14 => "ipc_lock";
    /// `CAP_IPC_OWNER`.
    IPC_OWNER = 15 => "ipc_owner";
    /// `CAP_SYS_MODULE`.
    SYS_MODULE = 16 => "sys_module";
    /// `CAP_SYS_RAWIO`.
    SYS_RAWIO = 17 => "sys_rawio";
    /// `CAP_SYS_CHROOT`.
    SYS_CHROOT = 18 => "sys_chroot";
    /// `CAP_SYS_PTRACE`.
    SYS_PTRACE = 19 => "sys_ptrace";
    /// `CAP_SYS_PACCT`.
    SYS_PACCT = 20 => "sys_pacct";
    /// `CAP_SYS_ADMIN`.
    SYS_ADMIN = 21 => "sys_admin";
    /// `CAP_SYS_BOOT`.
    SYS_BOOT = 22 => "sys_boot";
    /// `CAP_SYS_NICE`.
    SYS_NICE = 23 => "sys_nice";
    /// `CAP_SYS_RESOURCE`.
    SYS_RESOURCE = 24 => "sys_resource";
    /// `CAP_SYS_TIME`.
    SYS_TIME = 25 => "sys_time";
    /// `CAP_SYS_TTY_CONFIG`.
    SYS_TTY_CONFIG = 26 => "sys_tty_config";
    /// `CAP_MKNOD`.
    MKNOD = 27 => "mknod";
    /// `CAP_LEASE`.
    LEASE = 28 => "lease";
    /// `CAP_AUDIT_WRITE`.
    AUDIT_WRITE = 29 => "audit_write";
    /// `CAP_AUDIT_CONTROL`.
    AUDIT_CONTROL = 30 => "audit_control";
    /// `CAP_SETFCAP`.
    SETFCAP = 31 => "setfcap";
    /// `CAP_MAC_OVERRIDE`.
    MAC_OVERRIDE = 32 => "mac_override";
    /// `CAP_MAC_ADMIN`.
    MAC_ADMIN = 33 => "mac_admin";
    /// `CAP_SYSLOG`.
    SYSLOG = 34 => "syslog";
    /// `CAP_WAKE_ALARM`.
    WAKE_ALARM = 35 => "wake_alarm";
    /// `CAP_BLOCK_SUSPEND`.
    BLOCK_SUSPEND = 36 => "block_suspend";
    /// `CAP_AUDIT_READ`.
    AUDIT_READ = 37 => "audit_read";
    /// `CAP_PERFMON`.
    PERFMON = 38 => "perfmon";
    /// `CAP_BPF`.
    BPF = 39 => "bpf";
    /// `CAP_CHECKPOINT_RESTORE`.
    CHECKPOINT_RESTORE = 40 => "checkpoint_restore";
}

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
    crate::text::name_of(&NAMES, cap)
}

const _: () = {
    // Names are listed by number, and the two sets never meet.
    assert!(crate::text::by_index(&NAMES));
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
