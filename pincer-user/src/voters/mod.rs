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
    mission::{DefaultVerdict, Mission, VoterKind},
    vote::{Policy, Voter},
};

/// A mission's vote policy: its deadline, default and caps.
pub fn policy_for(mission: &Mission) -> Policy {
    Policy {
        timeout: mission.vote.timeout,
        default_allow: mission.vote.default == DefaultVerdict::AllowOnce,
        max_lifetime: mission.vote.max_lifetime,
        max_extent: mission.vote.max_extent,
    }
}

/// The voters a mission names, in its order; its prompts go to `board`.
pub fn for_mission(
    mission: &Mission,
    board: &Arc<PromptBoard>,
) -> Result<Vec<Arc<dyn Voter>>, WebhookError> {
    let mut voters: Vec<Arc<dyn Voter>> = Vec::new();
    for kind in &mission.vote.voters {
        voters.push(match kind {
            VoterKind::Mission => Arc::new(MissionVoter::new(mission.vote.rules.clone())),
            VoterKind::Prompt => Arc::new(PromptVoter::new(Arc::clone(board))),
            VoterKind::Webhook => {
                let spec = mission
                    .vote
                    .webhook
                    .as_ref()
                    .expect("the mission parser requires [vote.webhook] for this voter");
                let config = WebhookConfig {
                    url: spec.url.clone(),
                    secret_file: spec.secret_file.clone(),
                    clock_skew: spec.clock_skew,
                };
                Arc::new(WebhookVoter::new(config, mission.vote.timeout)?)
            }
        });
    }
    Ok(voters)
}
