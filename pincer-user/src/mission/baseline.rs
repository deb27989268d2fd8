//! The grants every mission gets besides its own.

use std::{
    fs,
    path::{Path, PathBuf},
};

use pincer_common::ops;

use crate::vote::Extent::{self, File, Tree};

/// Reading what a program reads of the system just to start.
const READ: u32 = ops::READ;
/// Running the system's programs and libraries.
const READ_EXEC: u32 = ops::READ | ops::EXEC;
/// The harmless devices.
const READ_WRITE: u32 = ops::READ | ops::WRITE;

/// One entry of the baseline: a path (whose last component may hold one
/// `*`, matching any run of characters in a name), what it grants, and
/// why a program needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BaselineEntry {
    /// The absolute path.
    pub path: &'static str,
    /// Bits of [`pincer_common::ops`].
    pub ops: u32,
    /// A `tree` entry that is a directory covers everything below it.
    pub extent: Extent,
    /// Why programs need it, for the documentation.
    pub why: &'static str,
}

const fn entry(path: &'static str, ops: u32, extent: Extent, why: &'static str) -> BaselineEntry {
    BaselineEntry {
        path,
        ops,
        extent,
        why,
    }
}

/// The `runtime` baseline: what dynamically linked programs, shells,
/// compilers and language runtimes touch just to start, resolve names,
/// print and use a terminal — found by running real tools (git, python3,
/// gcc, make, patch, tar, sed, node, npm, ps, df) in audit mode. Never a
/// place where a secret could hide: not `/etc` as a whole (`shadow`,
/// `ssl/private`), not `/tmp`, not a home directory, not another session's
/// terminal.
///
/// Each entry is resolved like a grant: symbolic links followed, and the
/// links on the way granted for reading. A `tree` entry that is a directory
/// covers everything below it (anything else is granted as a file); a
/// `file` entry is the object itself (for a directory: listing it, not what
/// is below). Entries that do not exist on the machine are skipped. The
/// README's table is rendered from this list (a test keeps them the same).
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
pub const RUNTIME_BASELINE: &[BaselineEntry] = &[
    entry(
        "/usr",
        READ_EXEC,
        Tree,
        "the system's programs, libraries, locale and `gconv` data, and language runtimes' standard libraries",
    ),
    entry(
        "/bin",
        READ_EXEC,
        Tree,
        "programs (a link into `/usr` on merged systems)",
    ),
    entry(
        "/sbin",
        READ_EXEC,
        Tree,
        "programs (a link into `/usr` on merged systems)",
    ),
    entry("/lib", READ_EXEC, Tree, "the dynamic loader and libraries"),
    entry("/lib32", READ_EXEC, Tree, "32-bit libraries"),
    entry("/lib64", READ_EXEC, Tree, "the 64-bit dynamic loader"),
    entry("/libx32", READ_EXEC, Tree, "x32 libraries"),
    entry(
        "/",
        READ,
        File,
        "listing the root directory (`df`, `find /`, shells completing paths): names only",
    ),
    entry(
        "/proc",
        READ,
        File,
        "listing `/proc` (`ps` finds the agent's own processes there)",
    ),
    entry("/proc/cpuinfo", READ, File, "runtimes sizing thread pools"),
    entry("/proc/meminfo", READ, File, "runtimes sizing heaps, `free`"),
    entry(
        "/proc/stat",
        READ,
        File,
        "`ps`, `top`: boot time and CPU counts",
    ),
    entry("/proc/uptime", READ, File, "`ps`, `uptime`"),
    entry(
        "/proc/loadavg",
        READ,
        File,
        "`uptime`, build tools choosing parallelism",
    ),
    entry(
        "/proc/version",
        READ,
        File,
        "tools printing the kernel version",
    ),
    entry(
        "/proc/filesystems",
        READ,
        File,
        "libraries checking for file systems (SELinux, `mount` helpers)",
    ),
    entry("/proc/swaps", READ, File, "`free`"),
    entry(
        "/proc/vmstat",
        READ,
        File,
        "`vmstat`, runtimes' memory pressure",
    ),
    entry(
        "/proc/cgroups",
        READ,
        File,
        "runtimes reading their cgroup limits",
    ),
    entry("/proc/tty/drivers", READ, File, "`ps` naming terminals"),
    entry(
        "/proc/sys",
        READ,
        Tree,
        "kernel settings runtimes read (`pid_max`, `overcommit`, ...); never written",
    ),
    entry(
        "/proc/pressure",
        READ,
        Tree,
        "runtimes reading memory pressure",
    ),
    entry(
        "/etc/ld.so.cache",
        READ,
        File,
        "the dynamic loader finding libraries",
    ),
    entry(
        "/etc/ld.so.conf",
        READ,
        File,
        "the dynamic loader's configuration",
    ),
    entry(
        "/etc/ld.so.conf.d",
        READ,
        Tree,
        "the dynamic loader's configuration",
    ),
    entry(
        "/etc/nsswitch.conf",
        READ,
        File,
        "the C library resolving users and hosts",
    ),
    entry(
        "/etc/passwd",
        READ,
        File,
        "user names and home directories (no passwords: those are in `shadow`)",
    ),
    entry("/etc/group", READ, File, "group names"),
    entry("/etc/hosts", READ, File, "resolving host names"),
    entry("/etc/host.conf", READ, File, "resolving host names"),
    entry("/etc/resolv.conf", READ, File, "resolving host names"),
    entry("/etc/gai.conf", READ, File, "ordering resolved addresses"),
    entry("/etc/localtime", READ, File, "the local time zone"),
    entry("/etc/timezone", READ, File, "the time zone's name"),
    entry("/etc/os-release", READ, File, "tools naming the system"),
    entry("/etc/debian_version", READ, File, "tools naming the system"),
    entry(
        "/etc/ssl/certs",
        READ,
        Tree,
        "trusted certificates for TLS (public)",
    ),
    entry(
        "/etc/ssl/openssl.cnf",
        READ,
        File,
        "OpenSSL's configuration (node, python, curl read it at start); not `/etc/ssl/private`",
    ),
    entry(
        "/etc/ca-certificates",
        READ,
        Tree,
        "trusted certificates for TLS (public)",
    ),
    entry(
        "/etc/alternatives",
        READ,
        Tree,
        "links choosing the system's default programs",
    ),
    entry("/etc/terminfo", READ, Tree, "terminal descriptions"),
    entry(
        "/etc/inputrc",
        READ,
        File,
        "line editing in shells and REPLs",
    ),
    entry("/etc/mime.types", READ, File, "file types by name"),
    entry(
        "/etc/xattr.conf",
        READ,
        File,
        "which extended attributes `cp -a` and `mv` carry over",
    ),
    entry("/etc/profile", READ, File, "login shells' start-up"),
    entry(
        "/etc/bash.bashrc",
        READ,
        File,
        "interactive bash's start-up",
    ),
    entry("/etc/environment", READ, File, "the system's environment"),
    entry("/etc/gitconfig", READ, File, "git's system configuration"),
    entry("/etc/python3", READ, Tree, "Python's system configuration"),
    entry(
        "/etc/python3.*",
        READ,
        Tree,
        "Python's `sitecustomize.py`, to which `/usr/lib/python3.*` links",
    ),
    entry("/dev/null", READ_WRITE, File, "discarding output"),
    entry("/dev/zero", READ_WRITE, File, "zeros"),
    entry(
        "/dev/full",
        READ_WRITE,
        File,
        "a device that is always full",
    ),
    entry(
        "/dev/tty",
        READ_WRITE,
        File,
        "the agent's own controlling terminal, whatever its name",
    ),
    entry(
        "/dev/ptmx",
        READ_WRITE,
        File,
        "allocating a pseudo-terminal",
    ),
    entry(
        "/dev/pts",
        READ,
        File,
        "listing the pseudo-terminals (`tty`, `ps`); opening one is not granted",
    ),
    entry("/dev/random", READ, File, "randomness"),
    entry("/dev/urandom", READ, File, "randomness"),
];

/// The paths an entry names on this machine: itself, or for a pattern
/// (`/etc/python3.*`) every name in its directory that matches, in order.
pub fn expand(path: &str) -> Vec<PathBuf> {
    let path = Path::new(path);
    let (Some(dir), Some(pattern)) = (path.parent(), path.file_name().and_then(|n| n.to_str()))
    else {
        return vec![path.to_owned()];
    };
    let Some((prefix, suffix)) = pattern.split_once('*') else {
        return vec![path.to_owned()];
    };
    let mut found: Vec<PathBuf> = fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|name| {
                    name.len() >= prefix.len() + suffix.len()
                        && name.starts_with(prefix)
                        && name.ends_with(suffix)
                })
                .map(|name| dir.join(name))
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found
}

/// The README's table of the baseline, one row per entry.
#[cfg(test)]
fn readme_table() -> String {
    let mut table = String::from("| path | ops | why |\n|------|-----|-----|\n");
    for entry in RUNTIME_BASELINE {
        let extent = match entry.extent {
            Tree => " (tree)",
            File => "",
        };
        table.push_str(&format!(
            "| `{}`{extent} | {} | {} |\n",
            entry.path,
            super::resolve::format_ops(entry.ops),
            entry.why
        ));
    }
    table
}

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
                <= RUNTIME_BASELINE
                    .iter()
                    .map(|entry| super::expand(entry.path).len())
                    .sum::<usize>()
        );
        // /etc itself is not granted.
        let etc = key_of(1, Path::new("/etc"));
        assert!(resolved.inode.iter().all(|(key, _, _)| *key != etc));
    }

    #[test]
    fn every_entry_says_why_and_is_absolute() {
        for entry in RUNTIME_BASELINE {
            assert!(entry.path.starts_with('/'), "{}", entry.path);
            assert!(!entry.why.is_empty(), "{}", entry.path);
            assert!(entry.path.matches('*').count() <= 1, "{}", entry.path);
        }
        // Never where a secret could hide.
        for never in [
            "/etc",
            "/etc/ssl",
            "/etc/shadow",
            "/tmp",
            "/root",
            "/home",
            "/dev/pts/0",
        ] {
            assert!(RUNTIME_BASELINE.iter().all(|e| e.path != never), "{never}");
        }
    }

    #[test]
    fn a_pattern_names_what_matches_in_its_directory() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            "python3.11",
            "python3.12",
            "python3",
            "python2.7",
            "apython3.1",
        ] {
            std::fs::create_dir(dir.path().join(name)).unwrap();
        }
        let pattern = format!("{}/python3.*", dir.path().display());
        let names: Vec<String> = super::expand(&pattern)
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["python3.11", "python3.12"]);
        assert_eq!(super::expand("/usr"), [Path::new("/usr")]);
        assert!(super::expand("/no/such/dir/x*").is_empty());
    }

    #[test]
    fn the_readme_table_is_the_baseline() {
        const BEGIN: &str = "<!-- baseline-table: start -->\n";
        const END: &str = "<!-- baseline-table: end -->";
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md");
        let readme = std::fs::read_to_string(&path).unwrap();
        let (Some(begin), Some(end)) = (readme.find(BEGIN), readme.find(END)) else {
            panic!("README.md has no `{BEGIN}` ... `{END}`");
        };
        let start = begin + BEGIN.len();
        let table = super::readme_table();
        if std::env::var_os("PINCER_WRITE_README").is_some() {
            let mut updated = readme.clone();
            updated.replace_range(start..end, &table);
            std::fs::write(&path, updated).unwrap();
            return;
        }
        assert!(
            readme[start..end] == table,
            "README.md's baseline table differs from the baseline: run `cargo xtask readme-tables`"
        );
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
