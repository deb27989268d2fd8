//! Policy objects reached through links.
//!
//! A policy name that is a symbolic link (`CLAUDE.md -> docs/agents.md`,
//! `.vscode -> ../shared/vscode`) makes what it points to a policy object
//! too: a tool that reads the name reads the target, so a write of the
//! target, by any of its names, is a write of the policy object. A policy
//! file with more than one hard link is labelled by identity likewise, so
//! its other names change nothing either. The programs decide on objects,
//! not on the names used to reach them: pincer finds these links in the
//! trees a mission lets an agent change, when the mission is loaded, and
//! labels their targets policy by identity.
//!
//! The scan is bounded ([`MAX_SCANNED`] entries, [`MAX_DEPTH`] levels); it
//! follows no link, and does not go into work directories (what tools make
//! and remake: `node_modules`, `.git/objects`, virtual environments).
//! Links a person makes while an agent runs are found when the next mission
//! is loaded.

use std::{
    os::unix::fs::{FileTypeExt, MetadataExt},
    path::{Path, PathBuf},
};

use pincer_common::{ObjectKey, label_flags, policy_rule};

use super::{
    PolicySet,
    rules::{Classifier, Placed},
};

/// The most directory entries one load looks at.
pub const MAX_SCANNED: usize = 200_000;
/// The deepest it goes below a tree's root.
pub const MAX_DEPTH: usize = 32;

/// An object made policy by a link to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Linked {
    /// The object.
    pub key: ObjectKey,
    /// Its label's flags: policy, and tree for a directory a tree rule's
    /// name points to.
    pub flags: u32,
    /// Where it is.
    pub path: PathBuf,
    /// The policy name that reaches it.
    pub through: PathBuf,
}

/// What a scan found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scan {
    /// The objects to label.
    pub linked: Vec<Linked>,
    /// Entries looked at.
    pub scanned: usize,
    /// Whether it stopped at [`MAX_SCANNED`] before the end.
    pub truncated: bool,
}

/// Finds the objects that links make policy objects, in the trees at
/// `roots` (directories; links resolved).
pub fn scan(set: &PolicySet, roots: &[PathBuf]) -> Scan {
    scan_within(set, roots, MAX_SCANNED)
}

/// [`scan`] with a bound of `limit` entries.
pub fn scan_within(set: &PolicySet, roots: &[PathBuf], limit: usize) -> Scan {
    let mut scan = Scan::default();
    let Ok(classifier) = set.classifier() else {
        return scan;
    };
    for root in roots {
        let entries = walkdir::WalkDir::new(root)
            .min_depth(1)
            .max_depth(MAX_DEPTH)
            .follow_links(false)
            .into_iter()
            // Work directories are what tools make: not looked into.
            .filter_entry(|entry| !(entry.file_type().is_dir() && classifier.is_work_dir(entry.path())));
        for entry in entries.flatten() {
            if scan.scanned >= limit {
                scan.truncated = true;
                return scan;
            }
            scan.scanned += 1;
            let path = entry.path();
            let kind = entry.file_type();
            // Only a place below the tree's root takes anything from its
            // grant: the root and what is above it are inside the grant.
            let below = |placed: &Placed| placed.at.starts_with(root) && placed.at != *root;
            if kind.is_symlink() {
                if let Some(linked) = through_link(&classifier, path, below) {
                    scan.linked.push(linked);
                }
                continue;
            }
            if kind.is_dir() || kind.is_block_device() {
                continue;
            }
            let Ok(meta) = entry.metadata() else {
                continue;
            };
            if meta.nlink() > 1
                && classifier
                    .place(path, true, false)
                    .is_some_and(|p| below(&p))
            {
                scan.linked.push(Linked {
                    key: key_of(&meta),
                    flags: label_flags::POLICY,
                    path: path.to_owned(),
                    through: path.to_owned(),
                });
            }
        }
    }
    scan
}

/// The object a link at `path` makes policy, when its name is a policy
/// name and it points to something.
fn through_link(
    classifier: &Classifier,
    path: &Path,
    below: impl Fn(&Placed) -> bool,
) -> Option<Linked> {
    let placed = classifier.place(path, true, false).filter(|p| below(p))?;
    let target = std::fs::canonicalize(path).ok()?;
    let meta = std::fs::metadata(&target).ok()?;
    let tree = placed.entry.pattern.protects.0 & policy_rule::TREE != 0 && meta.is_dir();
    Some(Linked {
        key: key_of(&meta),
        flags: label_flags::POLICY | if tree { label_flags::TREE } else { 0 },
        path: target,
        through: path.to_owned(),
    })
}

/// The kernel's identity of an object.
fn key_of(meta: &std::fs::Metadata) -> ObjectKey {
    ObjectKey {
        dev: pincer_common::kernel_dev(meta.dev()),
        ino: meta.ino(),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    #[test]
    fn a_policy_link_makes_its_target_policy_and_the_scan_stays_out_of_work() {
        let dir = tempfile::Builder::new().prefix("links-").tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("docs")).unwrap();
        std::fs::create_dir_all(root.join("shared/vscode")).unwrap();
        std::fs::create_dir_all(root.join("node_modules/pkg")).unwrap();
        std::fs::write(root.join("docs/guide.md"), "be careful").unwrap();
        std::fs::write(root.join("notes.md"), "mine").unwrap();
        symlink("docs/guide.md", root.join("CLAUDE.md")).unwrap();
        symlink("shared/vscode", root.join(".vscode")).unwrap();
        // A plain link changes nothing; one in a work directory is not
        // looked at.
        symlink("notes.md", root.join("latest.md")).unwrap();
        symlink("../../notes.md", root.join("node_modules/pkg/AGENTS.md")).unwrap();
        // A policy file with a second name is labelled by identity.
        std::fs::write(root.join(".envrc"), "use nix").unwrap();
        std::fs::hard_link(root.join(".envrc"), root.join("envrc-copy")).unwrap();

        let scan = scan(&PolicySet::with_defaults(&[]), std::slice::from_ref(&root));
        assert!(!scan.truncated);
        let mut found: Vec<(PathBuf, u32)> = scan
            .linked
            .iter()
            .map(|l| (l.path.strip_prefix(&root).unwrap().to_owned(), l.flags))
            .collect();
        found.sort();
        assert_eq!(
            found,
            vec![
                (PathBuf::from(".envrc"), label_flags::POLICY),
                (PathBuf::from("docs/guide.md"), label_flags::POLICY),
                (
                    PathBuf::from("shared/vscode"),
                    label_flags::POLICY | label_flags::TREE
                ),
            ]
        );
        let guide = scan
            .linked
            .iter()
            .find(|l| l.path.ends_with("guide.md"))
            .unwrap();
        assert_eq!(guide.through, root.join("CLAUDE.md"));
        let meta = std::fs::metadata(root.join("docs/guide.md")).unwrap();
        assert_eq!(guide.key.ino, meta.ino());
    }

    #[test]
    fn the_scan_stops_at_its_bound() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..10 {
            std::fs::write(dir.path().join(format!("f{i}")), "").unwrap();
        }
        let scan = scan_within(&PolicySet::with_defaults(&[]), &[dir.path().to_owned()], 4);
        assert!(scan.truncated);
        assert_eq!(scan.scanned, 4);
    }
}
