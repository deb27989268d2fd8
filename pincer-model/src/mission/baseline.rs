//! The grants every mission gets besides its own.

use std::{
    fs,
    path::{Path, PathBuf},
    sync::LazyLock,
};

use pincer_common::ops;
use serde::Deserialize;

use crate::vote::Extent::{self, File, Tree};

/// One entry of the baseline: a path (whose last component may hold one
/// `*`, matching any run of characters in a name), what it grants, and
/// why a program needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaselineEntry {
    /// The absolute path.
    pub path: String,
    /// Bits of [`pincer_common::ops`].
    pub ops: u32,
    /// A `tree` entry that is a directory covers everything below it.
    pub extent: Extent,
    /// Why programs need it, for the documentation.
    pub why: String,
}

/// The `runtime` baseline: `baseline.toml` beside this file, whose header
/// says what it holds and what it never holds, with every entry's reason.
///
/// Each entry is resolved like a grant: symbolic links followed, and the
/// links on the way granted for reading. A `tree` entry that is a directory
/// covers everything below it (anything else is granted as a file); a
/// `file` entry is the object itself (for a directory: listing it, not what
/// is below). Entries that do not exist on the machine are skipped. The
/// table in docs/running.md, "Profiles of agent programs" is rendered from
/// this list (a test keeps them the same).
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
pub static RUNTIME_BASELINE: LazyLock<Vec<BaselineEntry>> =
    LazyLock::new(|| parse(include_str!("baseline.toml")).expect("baseline.toml is valid"));

/// An entry as `baseline.toml` writes it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntry {
    path: String,
    ops: Vec<String>,
    #[serde(default)]
    extent: Option<String>,
    why: String,
}

/// Reads the baseline's entries (a unit test proves the built-in list is
/// valid, so a bad one never ships).
fn parse(text: &str) -> Result<Vec<BaselineEntry>, String> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Raw {
        entry: Vec<RawEntry>,
    }
    let raw: Raw = toml::from_str(text).map_err(|e| e.to_string())?;
    raw.entry
        .into_iter()
        .map(|entry| {
            let mut bits = 0;
            for name in &entry.ops {
                let (bit, _) = ops::NAMES
                    .iter()
                    .find(|(_, known)| known == name)
                    .ok_or_else(|| format!("{}: unknown operation {name:?}", entry.path))?;
                bits |= bit;
            }
            let extent = match entry.extent.as_deref() {
                None | Some("file") => File,
                Some("tree") => Tree,
                Some(other) => return Err(format!("{}: unknown extent {other:?}", entry.path)),
            };
            Ok(BaselineEntry {
                path: entry.path,
                ops: bits,
                extent,
                why: entry.why,
            })
        })
        .collect()
}

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

/// The documentation's table of the baseline, one row per entry.
#[cfg(test)]
fn readme_table() -> String {
    let mut table = String::from("| path | ops | why |\n|------|-----|-----|\n");
    for entry in RUNTIME_BASELINE.iter() {
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
    use crate::mission::{
        Baseline,
        resolve::tests::{file_ops, grant, key_of, mission, tree_ops},
    };

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
                    .map(|entry| super::expand(&entry.path).len())
                    .sum::<usize>()
        );
        // /etc itself is not granted.
        let etc = key_of(1, Path::new("/etc"));
        assert!(resolved.inode.iter().all(|(key, _, _)| *key != etc));
    }

    #[test]
    fn every_entry_says_why_and_is_absolute() {
        for entry in RUNTIME_BASELINE.iter() {
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
    fn a_bad_entry_is_named() {
        let entry = |fields: &str| format!("[[entry]]\npath = \"/x\"\nwhy = \"w\"\n{fields}\n");
        assert_eq!(
            super::parse(&entry("ops = [\"rea\"]")),
            Err("/x: unknown operation \"rea\"".to_owned())
        );
        assert_eq!(
            super::parse(&entry("ops = [\"read\"]\nextent = \"forest\"")),
            Err("/x: unknown extent \"forest\"".to_owned())
        );
        assert!(super::parse(&entry("ops = [\"read\"]\nmode = 1")).is_err());
        let parsed = super::parse(&entry("ops = [\"read\", \"exec\"]\nextent = \"tree\"")).unwrap();
        assert_eq!(parsed[0].ops, ops::READ | ops::EXEC);
        assert_eq!(parsed[0].extent, super::Tree);
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
        crate::readme::check_table("baseline-table", &super::readme_table());
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
