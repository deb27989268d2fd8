//! The voters that decide parked requests, one file each, and how a
//! mission's `[vote]` section turns into them.

pub mod mission;
pub mod prompt;
pub mod webhook;

use std::sync::Arc;

use self::{
    mission::MissionVoter,
    prompt::{PromptBoard, PromptVoter},
    webhook::{WebhookConfig, WebhookError, WebhookVoter},
};
use crate::{
    mission::{VoterKind, Voting},
    vote::Voter,
};

/// The voters a mission's `[vote]` names, in its order; its prompts go to
/// `board`.
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
                let spec = voting.webhook.as_ref().ok_or(WebhookError::NotConfigured)?;
                let config = WebhookConfig {
                    url: spec.url.clone(),
                    secret_file: spec.secret_file.clone(),
                    clock_skew: spec.clock_skew,
                };
                Arc::new(WebhookVoter::new(config, voting.policy.timeout)?)
            }
        });
    }
    Ok(voters)
}
