//! The voters that decide parked requests, one file each, and a mission's
//! `[vote]` section ([`Voting`]): who votes, by what [`Policy`], with the
//! mission voter's rules and the webhook's endpoint. Each voter owns its
//! configuration; the mission parser fills it in.

pub mod mission;
pub mod prompt;
pub mod webhook;

use std::sync::Arc;

use self::{
    mission::{MissionVoter, Rule},
    prompt::{PromptBoard, PromptVoter},
    webhook::{WebhookConfig, WebhookError, WebhookVoter},
};
use crate::{
    toml_file::{Named, named},
    vote::{Policy, Voter},
};

/// Something that votes on parked requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum VoterKind {
    /// The mission's own `[[vote.rule]]` entries.
    Mission,
    /// A person, asked interactively.
    Prompt,
    /// An HTTP endpoint, configured in `[vote.webhook]`.
    Webhook,
}

impl VoterKind {
    /// Every voter, in the order the mission file lists them as choices.
    pub const ALL: [VoterKind; 3] = [VoterKind::Mission, VoterKind::Prompt, VoterKind::Webhook];

    /// The voter's name in missions and audit lines.
    pub fn name(self) -> &'static str {
        <Self as Named>::name(self)
    }
}

named!(VoterKind: "mission" => Mission, "prompt" => Prompt, "webhook" => Webhook);

/// `[vote]`: who decides parked requests, and by what policy (how fast, what
/// silence means, how much they may grant).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Voting {
    /// The voters, in the order written.
    pub voters: Vec<VoterKind>,
    /// Deadline, default verdict and caps.
    pub policy: Policy,
    /// `[vote.webhook]`, present whenever `voters` includes the webhook.
    pub webhook: Option<WebhookConfig>,
    /// The mission voter's rules, in file order: the first that matches
    /// decides.
    pub rules: Vec<Rule>,
}

impl Default for Voting {
    fn default() -> Self {
        Self {
            voters: vec![VoterKind::Mission, VoterKind::Prompt],
            policy: Policy::default(),
            webhook: None,
            rules: Vec::new(),
        }
    }
}

/// The voters a mission's `[vote]` names, in its order; its prompts go to
/// `board`. Without the prompt among them, a prompt that asks only about
/// what is the owner's alone (changes to policy objects) is added: the
/// owner can always answer those, from outside the agent.
pub fn for_mission(
    voting: &Voting,
    board: &Arc<PromptBoard>,
) -> Result<Vec<Arc<dyn Voter>>, WebhookError> {
    let mut voters: Vec<Arc<dyn Voter>> = Vec::new();
    for kind in &voting.voters {
        voters.push(match kind {
            VoterKind::Mission => Arc::new(MissionVoter::new(voting.rules.clone())),
            VoterKind::Prompt => Arc::new(PromptVoter::new(Arc::clone(board))),
            VoterKind::Webhook => {
                // The mission parser refuses this already.
                let config = voting.webhook.clone().ok_or(WebhookError::NotConfigured)?;
                Arc::new(WebhookVoter::new(config, voting.policy.timeout)?)
            }
        });
    }
    if !voting.voters.contains(&VoterKind::Prompt) {
        voters.push(Arc::new(PromptVoter::owner_only(Arc::clone(board))));
    }
    Ok(voters)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn voters_are_named_as_written() {
        assert_eq!(
            VoterKind::ALL.map(|v| v.to_string()),
            ["mission", "prompt", "webhook"]
        );
    }

    #[test]
    fn a_webhook_voter_without_an_endpoint_is_an_error() {
        let voting = Voting {
            voters: vec![VoterKind::Webhook],
            ..Voting::default()
        };
        let board = PromptBoard::new(None);
        assert!(matches!(
            for_mission(&voting, &board),
            Err(WebhookError::NotConfigured)
        ));
        assert_eq!(for_mission(&Voting::default(), &board).unwrap().len(), 2);
        // The owner is always asked about policy objects.
        let mission_only = Voting {
            voters: vec![VoterKind::Mission],
            ..Voting::default()
        };
        let voters = for_mission(&mission_only, &board).unwrap();
        assert_eq!(
            voters
                .iter()
                .map(|v| (v.name(), v.owner()))
                .collect::<Vec<_>>(),
            [("mission", false), ("prompt", true)]
        );
    }
}
