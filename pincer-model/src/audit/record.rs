//! What pincer writes to the audit log: one [`Record`] per line, tagged by
//! its `event` member. The chain's own members (`time`, `mission`, `seq`,
//! `prev`, `mac`) surround it (see the module documentation of
//! [`crate::audit`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{
    events::Decision,
    request::Request,
    vote::{Ballot, Extent, Lifetime},
};

/// One audit record.
#[derive(Debug, Serialize)]
#[serde(tag = "event", rename_all = "lowercase")]
pub enum Record<'a> {
    /// A decision the kernel made (or, in audit mode, would have made), or
    /// a request it parked.
    Decision(&'a Decision),
    /// The verdict on a parked request.
    Verdict(VerdictRecord<'a>),
    /// The kernel's counters at the end of a run.
    Counters {
        /// Each counter by name.
        counters: BTreeMap<&'static str, u64>,
    },
    /// The descriptors an agent's command started with (standard input,
    /// output and error, and those `--pass-fd` named).
    Descriptors {
        /// The agent.
        agent: &'a str,
        /// Each descriptor and what it refers to.
        fds: &'a [Descriptor],
    },
    /// Vote grants withdrawn by `pincer revoke`.
    Revoke {
        /// The agent whose grants they were.
        agent: &'a str,
        /// The path they were withdrawn on (all of the agent's when `None`).
        path: Option<&'a str>,
        /// How many were withdrawn.
        grants: usize,
    },
    /// The integrity check found that what the kernel holds is not what
    /// pincer wrote, or that the programs do not decide (each problem one
    /// sentence); or, with no problem, that it holds again after that.
    Integrity {
        /// What differs.
        problems: &'a [String],
    },
    /// A harness labelled a file through the control socket (`map`), or
    /// declared what it was derived from (`derive`).
    Label {
        /// `map` or `derive`.
        action: &'static str,
        /// The file, escaped.
        path: &'a str,
        /// Its authority now.
        authority: &'static str,
        /// The taint reading it gives (`none` when it lowers no one).
        taint: &'static str,
        /// Its origins as the harness named them (`map`), or the files it
        /// was derived from (`derive`).
        from: &'a [String],
        /// The process id of the caller.
        caller: u32,
    },
    /// An asset node changed: a source observed at the agent's first read
    /// (`observe`), an object admitted by discovery with its chain
    /// (`admit`), pinned (`pin`) or the node dropped (`drop`) by the owner.
    Asset(AssetRecord<'a>),
    /// pincer itself failed (a `pincer run` that could not load, confine or
    /// supervise): the log then ends without a close line, so that `verify
    /// --strict` does not take it for a clean end.
    Failure {
        /// What failed.
        message: &'a str,
    },
}

impl Record<'_> {
    /// `event` of a kernel decision.
    pub const DECISION: &'static str = "decision";
    /// `event` of a verdict.
    pub const VERDICT: &'static str = "verdict";
}

/// A descriptor an agent's command inherited.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Descriptor {
    /// Its number.
    pub fd: i32,
    /// What it refers to (`/proc/self/fd/<fd>`'s link), escaped.
    pub target: String,
}

/// An asset node's change ([`Record::Asset`]).
#[derive(Debug, Serialize)]
pub struct AssetRecord<'a> {
    /// `observe`, `admit`, `pin` or `drop`.
    pub action: &'static str,
    /// The agent.
    pub agent: &'a str,
    /// The node's id.
    pub node: &'a str,
    /// The object (the source read, the object admitted or pinned), escaped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The request it happened on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request: Option<u64>,
    /// What was granted: operations and extent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ops: Option<Vec<&'static str>>,
    /// Its extent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extent: Option<Extent>,
    /// The node whose evidence named the object (`admit`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<&'a str>,
    /// SHA-256 of the evidence (`observe`, `admit`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evidence: Option<&'a str>,
    /// How many bytes were kept and how large the file was (`observe`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<(usize, u64)>,
    /// Where the evidence names the object (`admit`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub excerpt: Option<&'a crate::assets::Excerpt>,
    /// The caller's process id (`pin`, `drop`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub caller: Option<u32>,
}

impl<'a> AssetRecord<'a> {
    /// A record of `action` on `node` of `agent`, with nothing else said.
    pub fn new(action: &'static str, agent: &'a str, node: &'a str) -> Self {
        Self {
            action,
            agent,
            node,
            path: None,
            request: None,
            ops: None,
            extent: None,
            source: None,
            evidence: None,
            bytes: None,
            excerpt: None,
            caller: None,
        }
    }
}

/// The verdict on a parked request, with every vote cast.
#[derive(Debug, Serialize)]
pub struct VerdictRecord<'a> {
    /// The sanitized request.
    pub request: &'a Request,
    /// The threads it answered (identical requests share one verdict).
    pub tids: Vec<u32>,
    /// `allow` or `deny`.
    pub verdict: &'static str,
    /// How long an allow lasts.
    pub lifetime: Option<Lifetime>,
    /// How wide an allow is.
    pub extent: Option<Extent>,
    /// Who decided: a voter, `timeout`, `default`, or `grant` when another
    /// request's grant released it.
    pub decided_by: &'a str,
    /// Why.
    pub reason: &'a str,
    /// Every vote cast.
    pub votes: &'a [Ballot],
    /// Where the round trip's time went.
    pub stages: Stages,
}

#[cfg(test)]
impl<'a> VerdictRecord<'a> {
    /// A verdict for tests: `verdict` on `request` (thread 101), once and
    /// on the file, by the prompt, because "yes", with no ballots.
    pub(crate) fn example(request: &'a Request, verdict: &'static str) -> Self {
        VerdictRecord {
            request,
            tids: vec![101],
            verdict,
            lifetime: Some(Lifetime::Once),
            extent: Some(Extent::File),
            decided_by: "prompt",
            reason: "yes",
            votes: &[],
            stages: Stages::default(),
        }
    }
}

/// Where a parked request's time went, in microseconds, up to the moment
/// its tasks were continued (what is left until the task runs again, the
/// scheduler's, only the task itself can time).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Stages {
    /// From the kernel's event to the twin taking it off the ring buffer
    /// (none for an event with no time).
    pub kernel_to_twin_us: Option<u64>,
    /// Holding the task and sanitizing the request (its `/proc` reads).
    pub sanitize_us: u64,
    /// The votes, until their outcome reached the twin's loop.
    pub vote_us: u64,
    /// Writing the verdict or grant and continuing the tasks.
    pub answer_us: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_tagged_by_event() {
        let decision = Decision::example("/x");
        let line = serde_json::to_string(&Record::Decision(&decision)).unwrap();
        assert!(
            line.starts_with(r#"{"event":"decision","pid":1,"tid":2,"#),
            "{line}"
        );
        let line = serde_json::to_string(&Record::Revoke {
            agent: "a",
            path: None,
            grants: 2,
        })
        .unwrap();
        assert_eq!(
            line,
            r#"{"event":"revoke","agent":"a","path":null,"grants":2}"#
        );
        let request = Request::example(7, "/k");
        let line =
            serde_json::to_string(&Record::Verdict(VerdictRecord::example(&request, "allow")))
                .unwrap();
        assert!(
            line.starts_with(r#"{"event":"verdict","request":{"id":7,"#),
            "{line}"
        );
        assert!(
            line.ends_with(
                r#""decided_by":"prompt","reason":"yes","votes":[],"stages":{"kernel_to_twin_us":null,"sanitize_us":0,"vote_us":0,"answer_us":0}}"#
            ),
            "{line}"
        );
    }
}
