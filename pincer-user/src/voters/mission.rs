//! The mission voter: the mission's own `[[vote.rule]]` entries, first match
//! wins; no match abstains.

use std::{os::unix::ffi::OsStrExt, path::Path, sync::Arc};

use pincer_model::{
    request::Request,
    vote::{
        Extent, Vote,
        rules::{Rule, RuleVerdict, plain},
    },
};

use crate::vote::{VoteFuture, Voter};

/// Votes by the mission's rules.
pub struct MissionVoter {
    /// Each rule, and whether its path is [`plain`].
    rules: Arc<[(Rule, bool)]>,
}

impl MissionVoter {
    /// A voter over these rules.
    pub fn new(rules: Vec<Rule>) -> Self {
        Self {
            rules: rules
                .into_iter()
                .map(|rule| {
                    let plain = plain(rule.path.as_os_str().as_bytes());
                    (rule, plain)
                })
                .collect(),
        }
    }

    /// The vote on a request (synchronous: rules are local).
    pub fn decide(&self, request: &Request) -> Vote {
        let path = Path::new(&request.path);
        let path_plain = plain(request.path.as_bytes());
        let Some((rule, _)) = self
            .rules
            .iter()
            .find(|(rule, rule_plain)| rule.covers(path, path_plain && *rule_plain, request.ops))
        else {
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
