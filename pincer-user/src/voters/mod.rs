//! The voters that decide parked requests, one file each, made from a
//! mission's `[vote]` section ([`pincer_model::vote::Voting`]).

pub mod mission;
pub mod prompt;
pub mod webhook;

use std::sync::Arc;

use pincer_model::vote::{VoterKind, Voting};

use self::{
    mission::MissionVoter,
    prompt::{PromptBoard, PromptVoter},
    webhook::{WebhookError, WebhookVoter},
};
use crate::vote::Voter;

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
