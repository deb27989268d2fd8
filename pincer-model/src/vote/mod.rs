//! The nouns of a vote on a parked request: what a voter answers
//! ([`Vote`]: allow for a [`Lifetime`] and an [`Extent`], deny, abstain),
//! what no voter may exceed ([`Policy`]), the ballots and the verdict
//! ([`Outcome`]) as audited, and a mission's `[vote]` section ([`Voting`]):
//! who votes, by what policy, with the mission voter's [`rules`] and the
//! [`webhook`]'s endpoint. How the votes are gathered and combined is the
//! runtime's.

pub mod rules;
pub mod webhook;

use std::time::Duration;

use serde::{Deserialize, Serialize};

use self::{rules::Rule, webhook::WebhookConfig};
use crate::toml_file::{Named, named};

/// How long an allow lasts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "kind", content = "seconds")]
pub enum Lifetime {
    /// This one access; the next identical access parks again.
    Once,
    /// For a time.
    #[serde(with = "secs")]
    Ttl(Duration),
    /// Until `pincer run` ends (the agent's session).
    Session,
}

impl Lifetime {
    /// Order for capping: once < ttl < session; two ttls compare by length.
    fn rank(self) -> (u8, Duration) {
        match self {
            Lifetime::Once => (0, Duration::ZERO),
            Lifetime::Ttl(d) => (1, d),
            Lifetime::Session => (2, Duration::ZERO),
        }
    }

    /// The shorter of two lifetimes.
    pub fn min(self, cap: Lifetime) -> Lifetime {
        if self.rank() <= cap.rank() { self } else { cap }
    }
}

/// The longest time an allow may last: a year. Every place a ttl is
/// written (a mission's rule and cap, `pincer approve --ttl`, the control
/// socket, a webhook's answer) refuses a longer one, so an expiry is always a
/// time the clock can reach; access meant to last longer belongs in the
/// mission's grants.
pub const MAX_TTL: Duration = Duration::from_secs(365 * 24 * 60 * 60);

/// Checks the length of a `ttl` lifetime: whole seconds (the protocol counts
/// seconds), longer than zero, at most [`MAX_TTL`].
pub fn check_ttl(ttl: Duration) -> Result<Duration, String> {
    if ttl.is_zero() {
        Err("must be longer than zero".to_owned())
    } else if ttl.subsec_nanos() != 0 {
        Err("must be a whole number of seconds".to_owned())
    } else if ttl > MAX_TTL {
        Err("must be at most 365 days".to_owned())
    } else {
        Ok(ttl)
    }
}

mod secs {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_secs())
    }

    /// Seconds no longer than [`super::MAX_TTL`] (zero is the reader's to
    /// refuse with its own words).
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let ttl = Duration::from_secs(u64::deserialize(d)?);
        if ttl > super::MAX_TTL {
            return Err(D::Error::custom("a ttl must be at most 365 days"));
        }
        Ok(ttl)
    }
}

/// What a grant, a rule or an allow covers: the object, or the tree below a
/// directory. Written `file` or `tree` in missions, audit lines and answers.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Extent {
    /// The object itself: an existing file or directory, or a file the agent
    /// will create.
    #[default]
    File,
    /// A directory and everything below it.
    Tree,
}

named!(Extent: "file" => File, "tree" => Tree);

/// The verdict on a parked request when no voter allows it in time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum DefaultVerdict {
    /// The access is refused.
    #[default]
    Deny,
    /// This one access is allowed; the next one parks again.
    AllowOnce,
}

named!(DefaultVerdict: "deny" => Deny, "allow-once" => AllowOnce);

/// Votes on parked requests are in by this long unless the mission says
/// otherwise.
pub const DEFAULT_VOTE_TIMEOUT: Duration = Duration::from_secs(60);

/// One voter's answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase", tag = "vote")]
pub enum Vote {
    /// Allow, for this long, this wide.
    Allow {
        /// How long.
        lifetime: Lifetime,
        /// How wide.
        extent: Extent,
    },
    /// Refuse.
    Deny {
        /// Why, for the audit log.
        reason: String,
    },
    /// No opinion (also: no answer in time, or an answer that was rejected).
    Abstain {
        /// Why, for the audit log.
        reason: String,
    },
}

/// What no voter may exceed, and what silence means: the mission's `[vote]`
/// `timeout`, `default`, `max_lifetime` (with `max_ttl`) and `max_extent`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    /// Deadline for all votes on one request.
    pub timeout: Duration,
    /// The vote of a voter that did not answer in time, and the verdict when
    /// every voter abstained.
    pub default: DefaultVerdict,
    /// The longest lifetime an allow may have.
    pub max_lifetime: Lifetime,
    /// The widest extent an allow may have.
    pub max_extent: Extent,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            timeout: DEFAULT_VOTE_TIMEOUT,
            default: DefaultVerdict::Deny,
            max_lifetime: Lifetime::Session,
            max_extent: Extent::File,
        }
    }
}

impl Policy {
    /// Whether silence allows (once).
    pub fn allows_by_default(&self) -> bool {
        self.default == DefaultVerdict::AllowOnce
    }
}

/// One voter's vote, as audited.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Ballot {
    /// The voter.
    pub voter: &'static str,
    /// Its vote (a timeout shows as the default it counted as).
    #[serde(flatten)]
    pub vote: Vote,
}

/// The verdict on one request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Outcome {
    /// `Some` to allow, for this long and this wide; `None` to deny.
    pub allow: Option<(Lifetime, Extent)>,
    /// Who decided: a voter's name, `default` (all abstained) or `timeout`.
    pub decided_by: String,
    /// Why.
    pub reason: String,
    /// Every vote cast.
    pub ballots: Vec<Ballot>,
}

impl Outcome {
    /// An outcome decided without a vote, by `decided_by` (the twin's
    /// inspection of a change).
    pub fn decided(decided_by: &str, reason: String, allow: Option<(Lifetime, Extent)>) -> Outcome {
        Outcome {
            allow,
            decided_by: decided_by.to_owned(),
            reason,
            ballots: Vec::new(),
        }
    }
}

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
}
