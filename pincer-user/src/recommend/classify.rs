//! What each decision of the log is to the recommended mission: an access
//! to grant, a capability to add, an access never granted, or one the
//! mission allows anyway.

use std::{
    path::{Component, Path, PathBuf},
    sync::LazyLock,
};

use pincer_common::{CHANGE_OPS, caps, hook};
use pincer_model::{
    escape::{CUT, for_terminal},
    events::{AUDIT_MODE, NO_GRANT_COVERS},
    mission::RUNTIME_BASELINE,
    paths::PRIVATE_TMP_PREFIX,
    vote::Extent,
};

use super::{
    Context,
    log::Decision,
    secrets::{glob, names},
};

/// What one decision is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Class {
    /// An access a grant would allow, on this object.
    Use(PathBuf),
    /// A capability outside the default set, by number.
    Capability(u32),
    /// An access no recommended grant gives.
    NotGranted {
        /// The object, or what the refusal was about when it names no file
        /// (the hook).
        what: String,
        /// Why.
        why: String,
        /// The object, when it is one no tree may hold: a secret, or one
        /// of pincer's own files.
        blocks: Option<PathBuf>,
    },
    /// An access the recommended mission allows without a grant of its
    /// own.
    Omitted(Omitted),
}

/// Why an access needs no grant of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Omitted {
    /// The runtime baseline grants it, or the default capability set.
    Defaults,
    /// The run's own: its private temporary directory, its terminal, its
    /// processes' `/proc` entries (each run gets its own).
    RunOwn,
}

/// Classifies one decision.
pub(super) fn classify(decision: &Decision, context: &Context) -> Class {
    let allowed = decision.verdict == "allow";
    let why_refused = || {
        for_terminal(
            decision
                .reason
                .strip_prefix(AUDIT_MODE)
                .unwrap_or(&decision.reason),
        )
    };
    let not_granted = |what: String, why: String| Class::NotGranted {
        what,
        why,
        blocks: None,
    };
    if decision.hook == hook::name(hook::CAPABLE) {
        let cap = u32::try_from(decision.ino).ok();
        return match cap.and_then(|cap| caps::name(cap).map(|name| (cap, name))) {
            Some((cap, _)) if caps::DEFAULT & caps::bit(cap) != 0 => {
                Class::Omitted(Omitted::Defaults)
            }
            Some((cap, _)) if caps::NEVER & caps::bit(cap) == 0 => Class::Capability(cap),
            Some((_, name)) => not_granted(format!("capability {name}"), why_refused()),
            None => not_granted(format!("capability {}", decision.ino), why_refused()),
        };
    }
    let what = || {
        if decision.path.is_empty() {
            for_terminal(&decision.hook)
        } else {
            for_terminal(&decision.path)
        }
    };
    if !allowed && !decision.reason.contains(NO_GRANT_COVERS) {
        return not_granted(what(), why_refused());
    }
    if decision.ops == 0 || decision.path.is_empty() {
        return not_granted(what(), "no operation a grant gives".to_owned());
    }
    let Some(path) = grantable_path(&decision.path) else {
        return not_granted(
            what(),
            "the log shows its path shortened or escaped: grant it by hand if it is needed"
                .to_owned(),
        );
    };
    if let Some(own) = run_own(&path) {
        return if allowed {
            Class::Omitted(Omitted::RunOwn)
        } else {
            not_granted(what(), own.to_owned())
        };
    }
    if baseline_covers(&path, decision.ops) {
        return Class::Omitted(Omitted::Defaults);
    }
    if let Some(why) = context.excluded(&path) {
        return Class::NotGranted {
            what: what(),
            why,
            blocks: Some(path),
        };
    }
    // A policy object is read like any file; a change to one is the
    // owner's, and a tree above it gives none.
    if decision.ops & CHANGE_OPS != 0
        && let Some(why) = context.owners(&path)
    {
        return not_granted(what(), why);
    }
    Class::Use(path)
}

/// The path a grant can name: absolute, whole (not shortened by the
/// kernel or pincer), nothing escaped, no `*` (which would make a prefix
/// grant), no `.` or `..`.
fn grantable_path(path: &str) -> Option<PathBuf> {
    let whole = path.starts_with('/')
        && !path.contains(['\\', '*', CUT])
        && for_terminal(path) == path
        && Path::new(path)
            .components()
            .all(|part| matches!(part, Component::RootDir | Component::Normal(_)));
    // Normal as well: no `//`, no `/` at the end (the kernel writes none).
    let normal: PathBuf = Path::new(path).components().collect();
    (whole && normal.as_os_str() == path).then_some(normal)
}

/// What of the run's own `path` is, if it is: every run gets its own, so
/// a grant of this one's would be of no use to the next.
fn run_own(path: &Path) -> Option<&'static str> {
    let names = names(path);
    let private = names.iter().any(|name| {
        name.strip_prefix(PRIVATE_TMP_PREFIX)
            .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
    });
    if private {
        return Some("a run's private temporary directory: every run gets its own");
    }
    match names.as_slice() {
        ["dev", "pts", _] | ["dev", "console"] => {
            Some("a terminal: pincer run grants the one it was started on")
        }
        ["dev", tty] if tty.starts_with("tty") && tty.len() > 3 => {
            Some("a terminal: pincer run grants the one it was started on")
        }
        ["proc", "self" | "thread-self", ..] => {
            Some("a process's /proc entries: an agent reaches its own whatever its grants")
        }
        ["proc", pid, ..] if pid.bytes().all(|b| b.is_ascii_digit()) => {
            Some("a process's /proc entries: an agent reaches its own whatever its grants")
        }
        _ => None,
    }
}

/// An entry of the runtime baseline, as [`baseline_covers`] compares it.
struct BaselinePlace {
    /// Its directory, without the trailing `/` (empty for `/` itself).
    dir: String,
    /// Its last name, which may hold `*` (`None` for `/`).
    name: Option<String>,
    ops: u32,
    tree: bool,
}

/// The runtime baseline's entries, split once.
static BASELINE: LazyLock<Vec<BaselinePlace>> = LazyLock::new(|| {
    RUNTIME_BASELINE
        .iter()
        .map(|entry| {
            let (dir, name) = match entry.path.rsplit_once('/') {
                Some((dir, name)) if !name.is_empty() => (dir.to_owned(), Some(name.to_owned())),
                _ => (String::new(), None),
            };
            BaselinePlace {
                dir,
                name,
                ops: entry.ops,
                tree: entry.extent == Extent::Tree,
            }
        })
        .collect()
});

/// Whether the runtime baseline grants `ops` on `path` (by path: an entry
/// names the object a path has, and the log's paths are the kernel's,
/// links resolved; `path` is absolute and normal, as [`grantable_path`]
/// makes it). Compared as text: this runs for every decision of a log.
pub(super) fn baseline_covers(path: &Path, ops: u32) -> bool {
    let Some(path) = path.to_str() else {
        return false;
    };
    BASELINE.iter().any(|place| {
        if place.ops & ops != ops {
            return false;
        }
        let Some(name) = &place.name else {
            return path == "/";
        };
        let Some(rest) = path
            .strip_prefix(place.dir.as_str())
            .and_then(|rest| rest.strip_prefix('/'))
        else {
            return false;
        };
        let (first, below) = rest
            .split_once('/')
            .map_or((rest, false), |(first, _)| (first, true));
        glob(name, first) && (place.tree || !below)
    })
}

#[cfg(test)]
mod tests {
    use pincer_common::ops;

    use super::*;

    #[test]
    fn the_baseline_covers_by_path_extent_and_operations() {
        assert!(baseline_covers(Path::new("/usr/lib/libc.so.6"), ops::READ));
        assert!(baseline_covers(
            Path::new("/usr/bin/python3"),
            ops::READ | ops::EXEC
        ));
        assert!(!baseline_covers(Path::new("/usr/bin/python3"), ops::WRITE));
        assert!(baseline_covers(Path::new("/etc/passwd"), ops::READ));
        assert!(!baseline_covers(Path::new("/etc/shadow"), ops::READ));
        // A file entry is the object, not what is below it.
        assert!(baseline_covers(Path::new("/proc"), ops::READ));
        assert!(!baseline_covers(Path::new("/proc/kcore"), ops::READ));
        assert!(baseline_covers(Path::new("/"), ops::READ));
        assert!(!baseline_covers(Path::new("/home"), ops::READ));
        // A pattern's matches, as trees.
        assert!(baseline_covers(
            Path::new("/etc/python3.11/sitecustomize.py"),
            ops::READ
        ));
        assert!(!baseline_covers(Path::new("/etc/python2.7/x"), ops::READ));
    }

    #[test]
    fn paths_a_grant_cannot_name_are_refused() {
        assert_eq!(grantable_path("/p/a.txt"), Some(PathBuf::from("/p/a.txt")));
        for bad in [
            "p/a.txt",
            "\u{2026}/a.txt",
            "/p/\\x1b[2J",
            "/p/a*",
            "/p/../etc",
            "/p/a\nb",
            "/p/long\u{2026}",
            "/p//a",
            "/p/a/",
        ] {
            assert_eq!(grantable_path(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn what_every_run_has_of_its_own() {
        for own in [
            "/tmp/pincer-run-4242-abc/x.o",
            "/dev/pts/3",
            "/dev/tty1",
            "/proc/4242/status",
            "/proc/self/maps",
        ] {
            assert!(run_own(Path::new(own)).is_some(), "{own}");
        }
        for not in [
            "/tmp/pincer-runner/x",
            "/dev/tty",
            "/proc/meminfo",
            "/home/u/pincer-run-notes",
        ] {
            assert_eq!(run_own(Path::new(not)), None, "{not}");
        }
    }
}
