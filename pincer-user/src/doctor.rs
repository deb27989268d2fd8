//! `pincer doctor`: whether this machine can enforce missions, and for each
//! missing piece, how to get it.
//!
//! Every check reads files only (under `/proc` and `/sys`, or the directories
//! given in [`SystemPaths`]), so the checks are safe to run anywhere and
//! testable against fake trees.

use std::{
    fmt::Write as _,
    fs,
    path::{Path, PathBuf},
};

use crate::cgroup;

/// The outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Present.
    Ok,
    /// Absent, but `pincer run` works without it.
    Warn,
    /// Absent: pincer cannot enforce until it is fixed.
    Missing,
}

impl Status {
    /// The word that starts the check's line in [`render`].
    pub fn label(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Missing => "MISSING",
        }
    }
}

/// One requirement and what was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// What is checked, such as `BPF LSM`.
    pub name: &'static str,
    /// Whether it is there.
    pub status: Status,
    /// What was found.
    pub detail: String,
    /// What to do when it is not there.
    pub fix: Option<String>,
}

impl Check {
    /// What is there.
    pub fn ok(name: &'static str, detail: impl Into<String>) -> Check {
        Check {
            name,
            status: Status::Ok,
            detail: detail.into(),
            fix: None,
        }
    }

    /// What pincer cannot enforce without, and how to get it.
    pub fn missing(name: &'static str, detail: impl Into<String>, fix: Option<String>) -> Check {
        Check {
            name,
            status: Status::Missing,
            detail: detail.into(),
            fix,
        }
    }

    /// What pincer can do without, though some of it needs it.
    pub fn warn(name: &'static str, detail: impl Into<String>, fix: Option<String>) -> Check {
        Check {
            name,
            status: Status::Warn,
            detail: detail.into(),
            fix,
        }
    }
}

/// Where the checks look for the kernel's pseudo filesystems.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SystemPaths {
    /// procfs, normally `/proc`.
    pub proc: PathBuf,
    /// sysfs, normally `/sys`.
    pub sys: PathBuf,
}

impl Default for SystemPaths {
    fn default() -> Self {
        Self {
            proc: PathBuf::from("/proc"),
            sys: PathBuf::from("/sys"),
        }
    }
}

/// `CAP_SYS_ADMIN`: the BPF operations the finer capabilities do not cover.
/// (Capability numbers are those of `linux/capability.h`.)
pub const CAP_SYS_ADMIN: u32 = 21;
/// `CAP_PERFMON` (Linux 5.8): reading kernel memory from BPF programs.
pub const CAP_PERFMON: u32 = 38;
/// `CAP_BPF` (Linux 5.8): loading programs and creating maps.
pub const CAP_BPF: u32 = 39;

/// The capabilities pincer needs, by number and name.
const REQUIRED_CAPABILITIES: [(u32, &str); 3] = [
    (CAP_BPF, "CAP_BPF"),
    (CAP_PERFMON, "CAP_PERFMON"),
    (CAP_SYS_ADMIN, "CAP_SYS_ADMIN"),
];

/// The effective uid and effective capability set from the text of
/// `/proc/<pid>/status`.
pub fn parse_status(status: &str) -> (Option<u32>, Option<u64>) {
    let mut euid = None;
    let mut cap_eff = None;
    for line in status.lines() {
        if let Some(uids) = line.strip_prefix("Uid:") {
            // Real, effective, saved, filesystem.
            euid = uids
                .split_whitespace()
                .nth(1)
                .and_then(|uid| uid.parse().ok());
        } else if let Some(caps) = line.strip_prefix("CapEff:") {
            cap_eff = u64::from_str_radix(caps.trim(), 16).ok();
        }
    }
    (euid, cap_eff)
}

/// Names of the required capabilities missing from `cap_eff`.
pub fn missing_capabilities(cap_eff: u64) -> Vec<&'static str> {
    REQUIRED_CAPABILITIES
        .iter()
        .filter(|(bit, _)| cap_eff & (1 << bit) == 0)
        .map(|(_, name)| *name)
        .collect()
}

/// `a, b and c`.
fn and_list(items: &[&str]) -> String {
    match items {
        [] => String::new(),
        [one] => (*one).to_owned(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// Runs every check, in the order a user would fix them.
pub fn run_checks(paths: &SystemPaths) -> Vec<Check> {
    let security = paths.sys.join("kernel/security");
    let lsm_file = security.join("lsm");
    let lsm = fs::read_to_string(&lsm_file);
    let mounts_file = paths.proc.join("self/mounts");
    let mounts = fs::read_to_string(&mounts_file).ok();
    vec![
        privileges(&paths.proc.join("self/status")),
        securityfs(&security, &lsm_file, lsm.is_ok()),
        bpf_lsm(lsm.ok().as_deref()),
        kernel_btf(&paths.sys.join("kernel/btf/vmlinux")),
        cgroup2(&mounts_file, mounts.as_deref()),
        bpffs(&paths.sys.join("fs/bpf"), mounts.as_deref()),
    ]
}

fn privileges(status_file: &Path) -> Check {
    let name = "privileges";
    let fix = Some(format!(
        "run pincer as root, or give it {}",
        and_list(&REQUIRED_CAPABILITIES.map(|(_, name)| name))
    ));
    let (euid, cap_eff) = match fs::read_to_string(status_file) {
        Ok(status) => parse_status(&status),
        Err(error) => {
            return Check::missing(
                name,
                format!("cannot read {}: {error}", status_file.display()),
                fix,
            );
        }
    };
    let who = match euid {
        Some(uid) => format!("uid {uid}"),
        None => "this process".to_owned(),
    };
    let Some(cap_eff) = cap_eff else {
        return Check::missing(
            name,
            format!("no CapEff line in {}", status_file.display()),
            fix,
        );
    };
    // Root without these capabilities (a container, a dropped bounding set)
    // cannot load programs either: the capabilities decide, not the uid.
    let missing = missing_capabilities(cap_eff);
    if missing.is_empty() {
        Check::ok(
            name,
            format!(
                "{who} has {}",
                and_list(&REQUIRED_CAPABILITIES.map(|(_, name)| name))
            ),
        )
    } else {
        Check::missing(name, format!("{who} lacks {}", and_list(&missing)), fix)
    }
}

fn securityfs(security: &Path, lsm_file: &Path, readable: bool) -> Check {
    let name = "securityfs";
    if readable {
        Check::ok(name, format!("mounted at {}", security.display()))
    } else {
        Check::missing(
            name,
            format!("{} is not readable", lsm_file.display()),
            Some(format!(
                "mount -t securityfs securityfs {}",
                security.display()
            )),
        )
    }
}

fn bpf_lsm(lsm: Option<&str>) -> Check {
    let name = "BPF LSM";
    let Some(lsm) = lsm else {
        return Check::missing(
            name,
            "unknown: the active LSMs are listed in securityfs".to_owned(),
            Some("mount securityfs, then run pincer doctor again".to_owned()),
        );
    };
    let active: Vec<&str> = lsm
        .trim()
        .split(',')
        .filter(|module| !module.is_empty())
        .collect();
    if active.contains(&"bpf") {
        return Check::ok(name, format!("active LSMs: {}", active.join(",")));
    }
    // `lsm=` replaces the whole list: keep every module active now.
    let mut wanted = active.clone();
    wanted.push("bpf");
    Check::missing(
        name,
        if active.is_empty() {
            "no LSM is active".to_owned()
        } else {
            format!("active LSMs: {} (no bpf)", active.join(","))
        },
        Some(format!(
            "add lsm={} to the kernel command line and reboot; \
             the kernel must be built with CONFIG_BPF_LSM=y",
            wanted.join(",")
        )),
    )
}

fn kernel_btf(vmlinux: &Path) -> Check {
    let name = "kernel BTF";
    let path = vmlinux.display();
    if vmlinux.is_file() {
        Check::ok(name, format!("{path} exists"))
    } else {
        Check::missing(
            name,
            format!("{path} does not exist: pincer reads kernel struct layouts from it"),
            Some("use a kernel built with CONFIG_DEBUG_INFO_BTF=y".to_owned()),
        )
    }
}

fn cgroup2(mounts_file: &Path, mounts: Option<&str>) -> Check {
    let name = "cgroup v2";
    let detail = match mounts {
        None => format!("cannot read {}", mounts_file.display()),
        Some(mounts) => match cgroup::parse_cgroup2_mount(mounts) {
            Some(point) => {
                return Check::ok(name, format!("mounted at {}", point.display()));
            }
            None => "no cgroup2 filesystem is mounted".to_owned(),
        },
    };
    Check::missing(
        name,
        detail,
        Some(
            "mount -t cgroup2 cgroup2 /sys/fs/cgroup \
             (beside cgroup v1: at /sys/fs/cgroup/unified)"
                .to_owned(),
        ),
    )
}

fn bpffs(point: &Path, mounts: Option<&str>) -> Check {
    let name = "bpffs";
    let mounted = mounts.is_some_and(|mounts| {
        cgroup::mount_points(mounts, "bpf")
            .iter()
            .any(|mounted| mounted == point)
    });
    let point = point.display();
    if mounted {
        Check::ok(name, format!("mounted at {point}"))
    } else {
        Check::warn(
            name,
            format!("not mounted at {point}; pincer run works without it, the daemon needs it"),
            Some(format!("mount -t bpf bpf {point}")),
        )
    }
}

/// The first missing piece among `checks`, with its fix, as one line; `None`
/// when nothing is missing.
pub fn diagnosis(checks: &[Check]) -> Option<String> {
    let check = checks.iter().find(|c| c.status == Status::Missing)?;
    Some(match &check.fix {
        Some(fix) => format!("{}: {} ({fix})", check.name, check.detail),
        None => format!("{}: {}", check.name, check.detail),
    })
}

/// Whether nothing pincer needs to enforce is missing.
pub fn can_enforce(checks: &[Check]) -> bool {
    checks.iter().all(|check| check.status != Status::Missing)
}

/// The checks as text, one line each, with the fix under every check that
/// did not pass:
///
/// ```text
/// ok      kernel BTF: /sys/kernel/btf/vmlinux exists
/// MISSING BPF LSM: active LSMs: lockdown,capability (no bpf)
///         fix: add lsm=lockdown,capability,bpf to the kernel command line ...
/// ```
pub fn render(checks: &[Check]) -> String {
    let mut out = String::new();
    for check in checks {
        let _ = writeln!(
            out,
            "{:<7} {}: {}",
            check.status.label(),
            check.name,
            check.detail
        );
        if let (Status::Warn | Status::Missing, Some(fix)) = (check.status, &check.fix) {
            let _ = writeln!(out, "{:<7} fix: {fix}", "");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Root's status on Linux 5.8 and later: capabilities 0 to 40.
    const ROOT_CAPS: &str = "000001ffffffffff";

    /// A fake `/proc` and `/sys` that pass every check.
    struct Fake {
        dir: tempfile::TempDir,
        paths: SystemPaths,
    }

    impl Fake {
        fn good() -> Self {
            let dir = tempfile::tempdir().unwrap();
            let paths = SystemPaths {
                proc: dir.path().join("proc"),
                sys: dir.path().join("sys"),
            };
            let fake = Self { dir, paths };
            fake.status("0", ROOT_CAPS);
            fake.write(
                "sys/kernel/security/lsm",
                "lockdown,capability,landlock,yama,bpf",
            );
            fake.write("sys/kernel/btf/vmlinux", "\u{9f}\u{eb}");
            let bpf = fake.paths.sys.join("fs/bpf");
            fake.write(
                "proc/self/mounts",
                &format!(
                    "proc /proc proc rw 0 0\n\
                     cgroup2 /sys/fs/cgroup cgroup2 rw,nsdelegate 0 0\n\
                     bpf {} bpf rw,mode=700 0 0\n",
                    bpf.display()
                ),
            );
            fake
        }

        fn write(&self, relative: &str, text: &str) {
            let path = self.dir.path().join(relative);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, text).unwrap();
        }

        fn remove(&self, relative: &str) {
            fs::remove_file(self.dir.path().join(relative)).unwrap();
        }

        fn status(&self, uid: &str, cap_eff: &str) {
            self.write(
                "proc/self/status",
                &format!(
                    "Name:\tpincer\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\nGid:\t0\t0\t0\t0\n\
                     CapInh:\t0000000000000000\nCapPrm:\t{cap_eff}\nCapEff:\t{cap_eff}\n"
                ),
            );
        }

        fn check(&self, name: &str) -> Check {
            run_checks(&self.paths)
                .into_iter()
                .find(|check| check.name == name)
                .unwrap()
        }
    }

    #[test]
    fn everything_present_can_enforce() {
        let fake = Fake::good();
        let checks = run_checks(&fake.paths);
        let names: Vec<&str> = checks.iter().map(|check| check.name).collect();
        assert_eq!(
            names,
            [
                "privileges",
                "securityfs",
                "BPF LSM",
                "kernel BTF",
                "cgroup v2",
                "bpffs"
            ]
        );
        for check in &checks {
            assert_eq!(check.status, Status::Ok, "{check:?}");
            assert_eq!(check.fix, None);
        }
        assert!(can_enforce(&checks));
        assert_eq!(
            fake.check("privileges").detail,
            "uid 0 has CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN"
        );
        assert_eq!(fake.check("cgroup v2").detail, "mounted at /sys/fs/cgroup");
    }

    #[test]
    fn lsm_list_without_bpf() {
        let fake = Fake::good();
        fake.write(
            "sys/kernel/security/lsm",
            "lockdown,capability,landlock,yama,apparmor\n",
        );
        assert_eq!(
            fake.check("BPF LSM"),
            Check::missing(
                "BPF LSM",
                "active LSMs: lockdown,capability,landlock,yama,apparmor (no bpf)",
                Some(
                    "add lsm=lockdown,capability,landlock,yama,apparmor,bpf to the kernel command \
                 line and reboot; the kernel must be built with CONFIG_BPF_LSM=y"
                        .into()
                )
            )
        );
        assert_eq!(fake.check("securityfs").status, Status::Ok);
        assert!(!can_enforce(&run_checks(&fake.paths)));
    }

    #[test]
    fn a_load_failure_is_explained_by_what_is_missing() {
        use crate::loader::{LoadError, explain};
        let said = |error: LoadError| format!("{:#}", anyhow::Error::new(error));
        let fake = Fake::good();
        fake.write("sys/kernel/security/lsm", "lockdown,capability\n");
        let checks = run_checks(&fake.paths);
        assert_eq!(
            said(explain(LoadError::MissingProgram("file_open"), &checks)),
            "this machine cannot enforce missions: BPF LSM: active LSMs: lockdown,capability \
             (no bpf) (add lsm=lockdown,capability,bpf to the kernel command line and reboot; \
             the kernel must be built with CONFIG_BPF_LSM=y); run `pincer doctor` for every \
             check: the BPF object has no program `file_open`"
        );
        let fake = Fake::good();
        fake.status("1000", "0000000000000000");
        let checks = run_checks(&fake.paths);
        let message = said(explain(LoadError::MissingProgram("file_open"), &checks));
        assert!(
            message.contains(
                "(run pincer as root, or give it CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN)"
            ),
            "{message}"
        );
        // Nothing missing: the error as it was.
        let good = run_checks(&Fake::good().paths);
        assert!(matches!(
            explain(LoadError::MissingProgram("x"), &good),
            LoadError::MissingProgram("x")
        ));
    }

    #[test]
    fn empty_lsm_list() {
        let fake = Fake::good();
        fake.write("sys/kernel/security/lsm", "");
        let check = fake.check("BPF LSM");
        assert_eq!(
            (check.status, check.detail.as_str()),
            (Status::Missing, "no LSM is active")
        );
        assert!(check.fix.unwrap().starts_with("add lsm=bpf "));
    }

    #[test]
    fn securityfs_not_mounted() {
        let fake = Fake::good();
        fake.remove("sys/kernel/security/lsm");
        let security = fake.paths.sys.join("kernel/security");
        let check = fake.check("securityfs");
        assert_eq!(check.status, Status::Missing);
        assert_eq!(
            check.fix,
            Some(format!(
                "mount -t securityfs securityfs {}",
                security.display()
            ))
        );
        let lsm = fake.check("BPF LSM");
        assert_eq!(lsm.status, Status::Missing);
        assert!(lsm.detail.starts_with("unknown"), "{}", lsm.detail);
        assert!(!can_enforce(&run_checks(&fake.paths)));
    }

    #[test]
    fn no_kernel_btf() {
        let fake = Fake::good();
        fake.remove("sys/kernel/btf/vmlinux");
        let check = fake.check("kernel BTF");
        assert_eq!(check.status, Status::Missing);
        assert!(check.fix.unwrap().contains("CONFIG_DEBUG_INFO_BTF=y"));
        assert!(!can_enforce(&run_checks(&fake.paths)));
    }

    #[test]
    fn no_cgroup2() {
        let fake = Fake::good();
        let bpf = fake.paths.sys.join("fs/bpf");
        fake.write(
            "proc/self/mounts",
            &format!(
                "cgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0\nbpf {} bpf rw 0 0\n",
                bpf.display()
            ),
        );
        let check = fake.check("cgroup v2");
        assert_eq!(
            (check.status, check.detail.as_str()),
            (Status::Missing, "no cgroup2 filesystem is mounted")
        );
        assert!(check.fix.unwrap().starts_with("mount -t cgroup2 "));
        assert!(!can_enforce(&run_checks(&fake.paths)));
    }

    #[test]
    fn hybrid_cgroup2() {
        let fake = Fake::good();
        fake.write(
            "proc/self/mounts",
            "cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n",
        );
        assert_eq!(
            fake.check("cgroup v2").detail,
            "mounted at /sys/fs/cgroup/unified"
        );
    }

    #[test]
    fn no_bpffs_is_only_a_warning() {
        let fake = Fake::good();
        fake.write(
            "proc/self/mounts",
            "cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\nbpf /elsewhere bpf rw 0 0\n",
        );
        let bpf = fake.paths.sys.join("fs/bpf");
        let check = fake.check("bpffs");
        assert_eq!(check.status, Status::Warn);
        assert_eq!(
            check.fix,
            Some(format!("mount -t bpf bpf {}", bpf.display()))
        );
        assert!(can_enforce(&run_checks(&fake.paths)));
    }

    #[test]
    fn unreadable_mounts() {
        let fake = Fake::good();
        fake.remove("proc/self/mounts");
        assert_eq!(fake.check("cgroup v2").status, Status::Missing);
        assert_eq!(fake.check("bpffs").status, Status::Warn);
    }

    #[test]
    fn parses_status() {
        let status = "Name:\tbash\nUid:\t1000\t0\t1000\t0\nCapEff:\t000001ffffffffff\n";
        assert_eq!(parse_status(status), (Some(0), Some(0x1ff_ffff_ffff)));
        assert_eq!(parse_status("Name:\tx\n"), (None, None));
        assert_eq!(parse_status("CapEff:\tzz\n"), (None, None));
    }

    #[test]
    fn names_missing_capabilities() {
        assert!(missing_capabilities(0x1ff_ffff_ffff).is_empty());
        assert_eq!(
            missing_capabilities(0),
            ["CAP_BPF", "CAP_PERFMON", "CAP_SYS_ADMIN"]
        );
        // A kernel before 5.8: CAP_SYS_ADMIN only.
        assert_eq!(
            missing_capabilities(0x3f_ffff_ffff),
            ["CAP_BPF", "CAP_PERFMON"]
        );
        assert_eq!(
            missing_capabilities(1 << CAP_BPF | 1 << CAP_PERFMON),
            ["CAP_SYS_ADMIN"]
        );
    }

    #[test]
    fn unprivileged_user() {
        let fake = Fake::good();
        fake.status("1000", "0000000000000000");
        assert_eq!(
            fake.check("privileges"),
            Check::missing(
                "privileges",
                "uid 1000 lacks CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN",
                Some(
                    "run pincer as root, or give it CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN".into()
                )
            )
        );
    }

    #[test]
    fn root_without_capabilities_is_not_enough() {
        let fake = Fake::good();
        // CAP_SYS_ADMIN dropped, as in a default container.
        fake.status(
            "0",
            &format!("{:016x}", 0x1ff_ffff_ffffu64 & !(1 << CAP_SYS_ADMIN)),
        );
        assert_eq!(
            fake.check("privileges"),
            Check::missing(
                "privileges",
                "uid 0 lacks CAP_SYS_ADMIN",
                Some(
                    "run pincer as root, or give it CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN".into()
                )
            )
        );
    }

    #[test]
    fn capabilities_without_root_are_enough() {
        let fake = Fake::good();
        let caps = 1u64 << CAP_BPF | 1 << CAP_PERFMON | 1 << CAP_SYS_ADMIN;
        fake.status("1000", &format!("{caps:016x}"));
        assert_eq!(fake.check("privileges").status, Status::Ok);
    }

    #[test]
    fn renders_one_line_per_check_and_fixes() {
        let checks = [
            Check::ok("kernel BTF", "/sys/kernel/btf/vmlinux exists".to_owned()),
            Check::missing(
                "BPF LSM",
                "active LSMs: lockdown,capability (no bpf)".to_owned(),
                Some("add lsm=lockdown,capability,bpf".to_owned()),
            ),
            Check::warn(
                "bpffs",
                "not mounted".to_owned(),
                Some("mount -t bpf bpf /sys/fs/bpf".to_owned()),
            ),
        ];
        assert_eq!(
            render(&checks),
            "ok      kernel BTF: /sys/kernel/btf/vmlinux exists\n\
             MISSING BPF LSM: active LSMs: lockdown,capability (no bpf)\n\
             \x20       fix: add lsm=lockdown,capability,bpf\n\
             warn    bpffs: not mounted\n\
             \x20       fix: mount -t bpf bpf /sys/fs/bpf\n"
        );
        assert!(!can_enforce(&checks));
        assert!(can_enforce(&checks[..1]));
        assert!(can_enforce(&[checks[0].clone(), checks[2].clone()]));
    }
}
