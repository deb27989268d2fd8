//! A mission's `[[vote.rule]]` entries, which the mission voter answers
//! by: first match wins. Rules are decided on the canonical path the
//! kernel reported, never on anything the agent wrote.

use std::{
    os::unix::ffi::OsStrExt,
    path::{Path, PathBuf},
};

use super::{Extent, Lifetime};

/// What a `[[vote.rule]]` entry answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleVerdict {
    /// Allow, for this long (still capped by `vote.max_lifetime`).
    Allow(Lifetime),
    /// Refuse.
    Deny,
}

/// One `[[vote.rule]]` entry: how the mission voter answers requests for a
/// path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// Absolute path, with a leading `~` expanded, otherwise as written. It
    /// is compared with the path of a request, which names the real object:
    /// a rule on a symbolic link does not cover what the link points to.
    pub path: PathBuf,
    /// Whether the rule covers `path` only or everything below it too.
    pub extent: Extent,
    /// Bits of [`pincer_common::ops`] the rule covers.
    pub ops: u32,
    /// The answer.
    pub verdict: RuleVerdict,
    /// Why, for the audit log and whoever reads the verdict.
    pub reason: Option<String>,
    /// 1-based line of the entry's `path` in the mission file.
    pub line: usize,
}

impl Rule {
    /// Whether the rule decides a request for `ops` on `path`: the path is
    /// the rule's (or, for a tree, below it, compared component by component
    /// so that `/a/bc` is not below `/a/b`) and the rule covers at least one
    /// of the operations.
    pub fn matches(&self, path: &Path, ops: u32) -> bool {
        let bytewise =
            plain(path.as_os_str().as_bytes()) && plain(self.path.as_os_str().as_bytes());
        self.covers(path, bytewise, ops)
    }

    /// [`Rule::matches`], told whether both `path` and the rule's are
    /// [`plain`] (the voter looks at a request's path once, and at its
    /// rules' once, when it is made).
    pub fn covers(&self, path: &Path, bytewise: bool, ops: u32) -> bool {
        if self.ops & ops == 0 {
            return false;
        }
        let (p, r) = (
            path.as_os_str().as_bytes(),
            self.path.as_os_str().as_bytes(),
        );
        match self.extent {
            Extent::File if bytewise => p == r,
            Extent::File => path == self.path,
            Extent::Tree if bytewise => {
                r == b"/" || (p.starts_with(r) && matches!(p.get(r.len()), None | Some(b'/')))
            }
            Extent::Tree => path.starts_with(&self.path),
        }
    }
}

/// Whether a path is plain: absolute, with no empty or `.` component and no
/// trailing slash (or `/` itself). Joining components with `/` is one-to-one
/// on plain paths, so on them comparing components (as [`Path`] does, so
/// that `/a/bc` is not below `/a/b`) is comparing bytes, ten times cheaper
/// while a task waits for the vote. The paths of requests, built from the
/// kernel's names, are plain; a rule written otherwise is compared by
/// components.
pub fn plain(path: &[u8]) -> bool {
    match path {
        [b'/'] => true,
        [b'/', rest @ ..] => rest
            .split(|&b| b == b'/')
            .all(|name| !name.is_empty() && name != b"."),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use pincer_common::ops;

    use super::*;

    fn rule(path: &str, extent: Extent, bits: u32) -> Rule {
        Rule {
            path: PathBuf::from(path),
            extent,
            ops: bits,
            verdict: RuleVerdict::Deny,
            reason: None,
            line: 1,
        }
    }

    #[test]
    fn bytes_and_components_agree_on_every_short_path() {
        // Every path of up to six of `/`, `a` and `.`, against every other:
        // what a rule answers is what `Path` answers, plain or not (doubled
        // slashes, `.` components, trailing slashes, relative paths).
        let mut paths = vec![String::new()];
        let mut last = vec![String::new()];
        for _ in 0..6 {
            last = last
                .iter()
                .flat_map(|p| ['/', 'a', '.'].map(|c| format!("{p}{c}")))
                .collect();
            paths.extend(last.iter().cloned());
        }
        for r in &paths {
            let (file, tree) = (rule(r, Extent::File, 1), rule(r, Extent::Tree, 1));
            for p in &paths {
                let (p, r) = (Path::new(p), Path::new(r));
                assert_eq!(file.matches(p, 1), p == r, "{p:?} == {r:?}");
                assert_eq!(tree.matches(p, 1), p.starts_with(r), "{p:?} below {r:?}");
            }
        }
    }

    #[test]
    fn rules_match_files() {
        let file = rule("/home/me/.netrc", Extent::File, ops::READ | ops::WRITE);
        assert!(file.matches(Path::new("/home/me/.netrc"), ops::READ));
        assert!(file.matches(Path::new("/home/me/.netrc/"), ops::WRITE));
        // One covered operation is enough.
        assert!(file.matches(Path::new("/home/me/.netrc"), ops::WRITE | ops::EXEC));
        assert!(!file.matches(Path::new("/home/me/.netrc"), ops::EXEC));
        assert!(!file.matches(Path::new("/home/me/.netrc"), 0));
        assert!(!file.matches(Path::new("/home/me/.netrc2"), ops::READ));
        assert!(!file.matches(Path::new("/home/me/.netrc/x"), ops::READ));
        assert!(!file.matches(Path::new("/home/me"), ops::READ));
    }

    #[test]
    fn rules_match_trees() {
        let tree = rule("/home/me/.ssh", Extent::Tree, ops::READ);
        assert!(tree.matches(Path::new("/home/me/.ssh"), ops::READ));
        assert!(tree.matches(Path::new("/home/me/.ssh/id_ed25519"), ops::READ));
        assert!(tree.matches(Path::new("/home/me/.ssh/a/b/c"), ops::READ | ops::CREATE));
        // Component by component: a longer name is not below the tree.
        assert!(!tree.matches(Path::new("/home/me/.ssh2/key"), ops::READ));
        assert!(!tree.matches(Path::new("/home/me"), ops::READ));
        assert!(!tree.matches(Path::new("/home/me/.ssh/id_ed25519"), ops::WRITE));
        let everything = rule("/", Extent::Tree, ops::ALL);
        assert!(everything.matches(Path::new("/etc/shadow"), ops::EXEC));
    }
}
