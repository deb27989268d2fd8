//! The grants every mission gets besides its own.

use pincer_common::ops;

/// The `runtime` baseline: what dynamically linked programs, shells and
/// language runtimes touch just to start, resolve names and print.
///
/// Each entry is resolved like a grant (symbolic links followed); a
/// directory is granted as a tree, anything else as a file. Entries that do
/// not exist on the machine are skipped.
///
/// | Path | Operations |
/// |---|---|
/// | `/usr`, `/bin`, `/sbin`, `/lib`, `/lib32`, `/lib64`, `/libx32` | read, exec |
/// | `/proc` | read (runtimes read `/proc/self/*`; nothing under `/proc` is writable) |
/// | `/etc/ld.so.cache`, `/etc/ld.so.conf`, `/etc/ld.so.conf.d` | read |
/// | `/etc/nsswitch.conf`, `/etc/passwd`, `/etc/group` | read |
/// | `/etc/hosts`, `/etc/host.conf`, `/etc/resolv.conf`, `/etc/gai.conf` | read |
/// | `/etc/localtime`, `/etc/timezone`, `/etc/os-release` | read |
/// | `/etc/ssl/certs`, `/etc/ca-certificates`, `/etc/alternatives` | read |
/// | `/etc/terminfo`, `/etc/inputrc`, `/etc/mime.types` | read |
/// | `/etc/profile`, `/etc/bash.bashrc`, `/etc/environment` | read |
/// | `/dev/null`, `/dev/zero`, `/dev/full`, `/dev/tty` | read, write |
/// | `/dev/random`, `/dev/urandom` | read |
pub const RUNTIME_BASELINE: &[(&str, u32)] = &[
    ("/usr", ops::READ | ops::EXEC),
    ("/bin", ops::READ | ops::EXEC),
    ("/sbin", ops::READ | ops::EXEC),
    ("/lib", ops::READ | ops::EXEC),
    ("/lib32", ops::READ | ops::EXEC),
    ("/lib64", ops::READ | ops::EXEC),
    ("/libx32", ops::READ | ops::EXEC),
    ("/proc", ops::READ),
    ("/etc/ld.so.cache", ops::READ),
    ("/etc/ld.so.conf", ops::READ),
    ("/etc/ld.so.conf.d", ops::READ),
    ("/etc/nsswitch.conf", ops::READ),
    ("/etc/passwd", ops::READ),
    ("/etc/group", ops::READ),
    ("/etc/hosts", ops::READ),
    ("/etc/host.conf", ops::READ),
    ("/etc/resolv.conf", ops::READ),
    ("/etc/gai.conf", ops::READ),
    ("/etc/localtime", ops::READ),
    ("/etc/timezone", ops::READ),
    ("/etc/os-release", ops::READ),
    ("/etc/ssl/certs", ops::READ),
    ("/etc/ca-certificates", ops::READ),
    ("/etc/alternatives", ops::READ),
    ("/etc/terminfo", ops::READ),
    ("/etc/inputrc", ops::READ),
    ("/etc/mime.types", ops::READ),
    ("/etc/profile", ops::READ),
    ("/etc/bash.bashrc", ops::READ),
    ("/etc/environment", ops::READ),
    ("/dev/null", ops::READ | ops::WRITE),
    ("/dev/zero", ops::READ | ops::WRITE),
    ("/dev/full", ops::READ | ops::WRITE),
    ("/dev/tty", ops::READ | ops::WRITE),
    ("/dev/random", ops::READ),
    ("/dev/urandom", ops::READ),
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
        assert_eq!(value_of("/proc").0, tree_ops(ops::READ));
        assert_eq!(value_of("/dev/null").0, file_ops(ops::READ | ops::WRITE));
        assert_eq!(value_of("/dev/urandom").0, file_ops(ops::READ));
        assert_eq!(value_of("/etc/passwd").0, file_ops(ops::READ));
        // Never more than the list, whatever exists on this machine.
        assert!(resolved.inode.len() <= RUNTIME_BASELINE.len());
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
