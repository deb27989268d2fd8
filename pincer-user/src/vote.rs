//! Votes on a parked request and how they combine into a verdict.
//!
//! Every voter answers `Allow { lifetime, extent }`, `Deny { reason }` or
//! `Abstain` within the mission's deadline. A deny overrides any allow; a
//! voter that does not answer in time abstains; when nobody allows, the
//! mission's default applies (deny unless configured). An allow is clamped to
//! the mission's caps: no voter can grant more than the request asked for and
//! the mission permits.

use std::{future::Future, pin::Pin, sync::Arc, time::Duration};

use serde::{Deserialize, Serialize};

use crate::request::Request;

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

mod secs {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_secs())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_secs)
    }
}

/// What an allow covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// The requested object only.
    File,
    /// The requested object's directory and everything below it.
    Tree,
}

/// One voter's answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase", tag = "vote")]
pub enum Vote {
    /// Allow, for this long, this wide.
    Allow {
        /// How long.
        lifetime: Lifetime,
        /// How wide.
        extent: Scope,
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

/// A future that yields a vote.
pub type VoteFuture = Pin<Box<dyn Future<Output = Vote> + Send + 'static>>;

/// Something that votes on parked requests.
pub trait Voter: Send + Sync {
    /// The voter's name in missions and audit lines (`mission`, `prompt`,
    /// `webhook`).
    fn name(&self) -> &'static str;

    /// Votes on a request. The caller enforces the deadline; a voter may also
    /// give up earlier by abstaining.
    fn vote(&self, request: Arc<Request>) -> VoteFuture;
}
