//! The grants every mission gets besides its own.

use pincer_common::ops;

use crate::vote::Extent;

/// Reading what a program reads of the system just to start.
const READ: u32 = ops::READ;
/// Running the system's programs and libraries.
const READ_EXEC: u32 = ops::READ | ops::EXEC;
/// The harmless devices.
const READ_WRITE: u32 = ops::READ | ops::WRITE;

/// The `runtime` baseline: what dynamically linked programs, shells and
/// language runtimes touch just to start, resolve names and print.
///
/// Each entry is resolved like a grant: symbolic links followed, and the
/// links on the way granted for reading. A `tree` entry that is a directory
/// covers everything below it (anything else is granted as a file); a
/// `file` entry is the object itself (for `/proc`: listing it, not what is
/// below). Entries that do not exist on the machine are skipped.
///
/// | Path | Operations |
/// |---|---|
/// | `/usr`, `/bin`, `/sbin`, `/lib`, `/lib32`, `/lib64`, `/libx32` (trees) | read, exec |
/// | `/proc` (listing it) | read |
/// | `/proc/cpuinfo`, `/proc/meminfo`, `/proc/stat`, `/proc/uptime`, `/proc/loadavg`, `/proc/version`, `/proc/filesystems`, `/proc/swaps`, `/proc/vmstat`, `/proc/cgroups`, `/proc/tty/drivers` | read |
/// | `/proc/sys`, `/proc/pressure` (trees) | read |
/// | `/etc/ld.so.cache`, `/etc/ld.so.conf`, `/etc/ld.so.conf.d` | read |
/// | `/etc/nsswitch.conf`, `/etc/passwd`, `/etc/group` | read |
/// | `/etc/hosts`, `/etc/host.conf`, `/etc/resolv.conf`, `/etc/gai.conf` | read |
/// | `/etc/localtime`, `/etc/timezone`, `/etc/os-release` | read |
/// | `/etc/ssl/certs`, `/etc/ca-certificates`, `/etc/alternatives` (trees) | read |
/// | `/etc/terminfo` (tree), `/etc/inputrc`, `/etc/mime.types` | read |
/// | `/etc/profile`, `/etc/bash.bashrc`, `/etc/environment` | read |
/// | `/dev/null`, `/dev/zero`, `/dev/full`, `/dev/tty` | read, write |
/// | `/dev/random`, `/dev/urandom` | read |
///
/// `/proc` beyond this list: every agent reads and writes its own
/// processes' `/proc/<pid>` entries (`/proc/self`, `/proc/mounts` and
/// `/proc/net` lead there), and never another process's, whatever its
/// grants; no grant lets it write anything else under `/proc` (see the
/// `objects` module of the programs). `kcore`, `kallsyms`, `kmsg`,
/// `sysrq-trigger`, `keys`, `sysvipc`, `cmdline` and the rest are not
/// listed: a mission that names one of them grants it, and the capability
/// rule still closes those that reach the kernel (`kcore` and `kmsg` need
/// capabilities no agent has; `kallsyms` shows no addresses without one).
pub const RUNTIME_BASELINE: &[(&str, u32, Extent)] = &[
    ("/usr", READ_EXEC, Extent::Tree),
    ("/bin", READ_EXEC, Extent::Tree),
    ("/sbin", READ_EXEC, Extent::Tree),
    ("/lib", READ_EXEC, Extent::Tree),
    ("/lib32", READ_EXEC, Extent::Tree),
    ("/lib64", READ_EXEC, Extent::Tree),
    ("/libx32", READ_EXEC, Extent::Tree),
    ("/proc", READ, Extent::File),
    ("/proc/cpuinfo", READ, Extent::File),
    ("/proc/meminfo", READ, Extent::File),
    ("/proc/stat", READ, Extent::File),
    ("/proc/uptime", READ, Extent::File),
    ("/proc/loadavg", READ, Extent::File),
    ("/proc/version", READ, Extent::File),
    ("/proc/filesystems", READ, Extent::File),
    ("/proc/swaps", READ, Extent::File),
    ("/proc/vmstat", READ, Extent::File),
    ("/proc/cgroups", READ, Extent::File),
    ("/proc/tty/drivers", READ, Extent::File),
    ("/proc/sys", READ, Extent::Tree),
    ("/proc/pressure", READ, Extent::Tree),
    ("/etc/ld.so.cache", READ, Extent::File),
    ("/etc/ld.so.conf", READ, Extent::File),
    ("/etc/ld.so.conf.d", READ, Extent::Tree),
    ("/etc/nsswitch.conf", READ, Extent::File),
    ("/etc/passwd", READ, Extent::File),
    ("/etc/group", READ, Extent::File),
    ("/etc/hosts", READ, Extent::File),
    ("/etc/host.conf", READ, Extent::File),
    ("/etc/resolv.conf", READ, Extent::File),
    ("/etc/gai.conf", READ, Extent::File),
    ("/etc/localtime", READ, Extent::File),
    ("/etc/timezone", READ, Extent::File),
    ("/etc/os-release", READ, Extent::File),
    ("/etc/ssl/certs", READ, Extent::Tree),
    ("/etc/ca-certificates", READ, Extent::Tree),
    ("/etc/alternatives", READ, Extent::Tree),
    ("/etc/terminfo", READ, Extent::Tree),
    ("/etc/inputrc", READ, Extent::File),
    ("/etc/mime.types", READ, Extent::File),
    ("/etc/profile", READ, Extent::File),
    ("/etc/bash.bashrc", READ, Extent::File),
    ("/etc/environment", READ, Extent::File),
    ("/dev/null", READ_WRITE, Extent::File),
    ("/dev/zero", READ_WRITE, Extent::File),
    ("/dev/full", READ_WRITE, Extent::File),
    ("/dev/tty", READ_WRITE, Extent::File),
    ("/dev/random", READ, Extent::File),
    ("/dev/urandom", READ, Extent::File),
];

#[cfg(test)]
mod tests {
    use std::path::Path;

    use pincer_common::ops;

    use super::RUNTIME_BASELINE;
    use crate::mission::Baseline;
    use crate::mission::resolve::tests::{file_ops, grant, key_of, mission, tree_ops};

    #[test]
    fn the_runtime_baseline() {
        let mut mission = mission("");
        assert!(mission.resolve(1).unwrap().inode.is_empty());

        mission.baseline = Baseline::Runtime;
        let resolved = mission.resolve(1).unwrap();
        assert!(resolved.names.is_empty());
        let value_of = |path: &str| {
            let key = key_of(1, Path::new(path));
            resolved
                .inode
                .iter()
                .find(|(candidate, _, _)| *candidate == key)
                .map(|(_, value, reason)| (*value, reason.0.clone()))
                .unwrap()
        };
        assert_eq!(
            value_of("/usr"),
            (
                tree_ops(ops::READ | ops::EXEC),
                "baseline runtime: /usr".to_owned()
            )
        );
        // /proc itself is listed, not granted as a tree: the rest of it is
        // decided by the kernel's rule and the files named here.
        assert_eq!(value_of("/proc").0, file_ops(ops::READ));
        assert_eq!(value_of("/proc/meminfo").0, file_ops(ops::READ));
        assert_eq!(value_of("/proc/sys").0, tree_ops(ops::READ));
        for never in [
            "/proc/kcore",
            "/proc/kallsyms",
            "/proc/kmsg",
            "/proc/sysrq-trigger",
        ] {
            if let Ok(metadata) = std::fs::symlink_metadata(never) {
                let key = crate::mission::resolve::grant_key(1, &metadata);
                assert!(resolved.inode.iter().all(|(k, _, _)| *k != key), "{never}");
            }
        }
        assert_eq!(value_of("/dev/null").0, file_ops(ops::READ | ops::WRITE));
        assert_eq!(value_of("/dev/urandom").0, file_ops(ops::READ));
        assert_eq!(value_of("/etc/passwd").0, file_ops(ops::READ));
        // Never more than the list and the links on the way to it, whatever
        // exists on this machine.
        assert!(
            resolved
                .inode
                .iter()
                .filter(|(_, _, reason)| !reason.0.contains("symbolic link"))
                .count()
                <= RUNTIME_BASELINE.len()
        );
        // /etc itself is not granted.
        let etc = key_of(1, Path::new("/etc"));
        assert!(resolved.inode.iter().all(|(key, _, _)| *key != etc));
    }

    #[test]
    fn baseline_and_mission_merge() {
        let mut mission = mission(&grant(Path::new("/dev/null"), "\"exec\"", "file"));
        mission.baseline = Baseline::Runtime;
        let resolved = mission.resolve(1).unwrap();
        let key = key_of(1, Path::new("/dev/null"));
        let (_, value, reason) = resolved.inode.iter().find(|(k, _, _)| *k == key).unwrap();
        assert_eq!(*value, file_ops(ops::READ | ops::WRITE | ops::EXEC));
        assert_eq!(
            reason.0,
            "mission line 6: /dev/null (file: exec); baseline runtime: /dev/null"
        );
    }
}
