//! `pincer approvals`: one approval service for a fleet of nodes.
//!
//! Every node's webhook voter posts its parked requests to the service
//! (`POST /webhook`, the webhook's wire format, see
//! [`crate::voters::webhook`]). The service checks the signature, the
//! timestamp and that the nonce is new, lists the request for the
//! operators and holds the HTTP request open until one decides — then
//! answers it with a signed verdict — or answers a signed `abstain` just
//! before the voter's own timeout (which the request carries).
//!
//! Operators decide with `pincer approvals pending | approve | deny` or on
//! the page at `/`, both over a small JSON API behind a bearer token:
//!
//! ```text
//! GET  /api/pending   → {"requests": [PendingRequest, ...]}
//! POST /api/decide    {"id": 3, "decision": {"vote": "allow", "lifetime": {"kind": "session"}, "extent": "file"}}
//!                     {"id": 3, "decision": {"vote": "deny", "reason": "not today"}}
//!                     → {"message": "..."}
//! ```
//!
//! Errors answer `{"error": "..."}` with 400, 401 (no or wrong token), 404
//! (no such request), 409 (decided already) or 413.
//!
//! A node that restarts asks again about a request still parked, with a new
//! nonce: the service finds the entry it has (same node, request id,
//! cgroup, path, operations and hook), lists it once, and answers with the
//! decision if one was taken meanwhile. Decisions are kept for `keep`
//! (10 minutes by default), in memory: the service's own restart forgets
//! them, and the nodes, which still park their requests, ask again.
//!
//! The service speaks plain HTTP: serve it behind a TLS proxy when the
//! nodes or operators are not on its host.

pub mod board;
pub mod client;
pub mod server;

#[cfg(test)]
mod harness;
#[cfg(test)]
mod tests;

use pincer_model::{
    request::Request,
    vote::{Extent, Lifetime},
};
use serde::{Deserialize, Serialize};

pub use self::{
    board::DecideError,
    server::{ServeError, Server},
};

/// An operator's decision on a request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "vote")]
pub enum Decision {
    /// Allow, this long and this wide (the node caps both by its mission).
    Allow {
        /// How long.
        lifetime: Lifetime,
        /// How wide.
        #[serde(default)]
        extent: Extent,
    },
    /// Refuse.
    Deny {
        /// Why, for the node's audit log.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
}

/// A request waiting for an operator, as `GET /api/pending` lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingRequest {
    /// The service's id for it: what `approve` and `deny` take.
    pub id: u64,
    /// The node that asked.
    pub node: String,
    /// Seconds since it was first asked about.
    pub age_seconds: u64,
    /// Whether a node's connection waits for the answer now (false between
    /// a node's restart and its new ask).
    pub waiting: bool,
    /// The sanitized request, as the node sent it.
    pub request: Request,
}

/// `GET /api/pending`'s answer.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PendingList {
    /// Oldest first.
    pub requests: Vec<PendingRequest>,
}

/// `POST /api/decide`'s body.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecideRequest {
    /// The service's id of the request.
    pub id: u64,
    /// What the operator decided.
    pub decision: Decision,
}

/// The API's answer to a decision, or its error.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ApiAnswer {
    /// Done.
    Done {
        /// What was done.
        message: String,
    },
    /// Refused.
    Error {
        /// Why.
        error: String,
    },
}
