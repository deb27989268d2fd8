//! The mission voter: the mission's own `[[vote.rule]]` entries, first match
//! wins; no match abstains. Rules are decided on the canonical path the
//! kernel reported, never on anything the agent wrote.

use std::{path::Path, sync::Arc};

use crate::{
    mission::{Rule, RuleVerdict},
    request::Request,
    vote::{Scope, Vote, VoteFuture, Voter},
};

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
                extent: Scope::File,
            },
        }
    }
}

impl Voter for MissionVoter {
    fn name(&self) -> &'static str {
        "mission"
    }

    fn vote(&self, request: Arc<Request>) -> VoteFuture {
        let vote = self.decide(&request);
        Box::pin(async move { vote })
    }
}
