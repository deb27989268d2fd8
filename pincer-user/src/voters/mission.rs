//! The mission voter: the mission's own `[[vote.rule]]` entries, first match
//! wins; no match abstains. Rules are decided on the canonical path the
//! kernel reported, never on anything the agent wrote.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use crate::{
    request::Request,
    vote::{Extent, Lifetime, Vote, VoteFuture, Voter},
};

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
        let covered = match self.extent {
            Extent::File => path == self.path,
            Extent::Tree => path.starts_with(&self.path),
        };
        covered && self.ops & ops != 0
    }
}

/// Votes by the mission's rules.
pub struct MissionVoter {
    rules: Arc<Vec<Rule>>,
}

impl MissionVoter {
    /// A voter over these rules.
    pub fn new(rules: Vec<Rule>) -> Self {
        Self {
            rules: Arc::new(rules),
        }
    }

    /// The vote on a request (synchronous: rules are local).
    pub fn decide(&self, request: &Request) -> Vote {
        let path = Path::new(&request.path);
        let Some(rule) = self.rules.iter().find(|r| r.matches(path, request.ops)) else {
            return Vote::Abstain {
                reason: "no rule of the mission matches".to_owned(),
            };
        };
        let because = rule
            .reason
            .clone()
            .unwrap_or_else(|| format!("mission rule at line {}", rule.line));
        match rule.verdict {
            RuleVerdict::Deny => Vote::Deny { reason: because },
            RuleVerdict::Allow(lifetime) => Vote::Allow {
                lifetime,
                extent: Extent::File,
            },
        }
    }
}

impl Voter for MissionVoter {
    fn name(&self) -> &'static str {
        "mission"
    }

    /// Always at once: the rules are the mission's own.
    fn vote_now(&self, request: &Request) -> Option<Vote> {
        Some(self.decide(request))
    }

    fn vote(&self, request: Arc<Request>) -> VoteFuture {
        let vote = self.decide(&request);
        Box::pin(async move { vote })
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
