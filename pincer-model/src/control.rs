//! The control socket's protocol: how people (`pincer pending`,
//! `approve`, `deny`) and `pincer run` (`register`) reach the twin of a
//! `pincer run` or of `pincer daemon`, and how the daemon answers its
//! queries (`status`, `agents`, `grants`, `revoke`). Every message is a type
//! here, so the runtime's server and client read and write the same thing.
//!
//! # Protocol
//!
//! Newline-delimited JSON over a Unix stream socket
//! ([`crate::paths::DEFAULT_SOCKET`] unless `--socket` or `PINCER_SOCKET`
//! says otherwise). The client writes one request per line and reads exactly
//! one response line for each; a connection may carry several requests in
//! turn.
//!
//! Requests ([`ControlRequest`], tagged by `cmd`):
//!
//! ```text
//! {"cmd":"pending"}
//! {"cmd":"approve","id":7,"lifetime":{"kind":"once"}}
//! {"cmd":"approve","id":7,"lifetime":{"kind":"ttl","seconds":600}}
//! {"cmd":"approve","id":7,"lifetime":{"kind":"session"}}
//! {"cmd":"deny","id":7,"reason":"not during the demo"}     (reason optional)
//! {"cmd":"status"}  {"cmd":"agents"}  {"cmd":"grants","agent":"claude"}
//! {"cmd":"revoke","agent":"claude","path":"/home/me/x"}    (path optional)
//! {"cmd":"register","cgroup":"pincer/run-42","mission":"/abs/m.toml","mode":"ask"}
//! {"cmd":"unregister","cgroup":"pincer/run-42"}
//! {"cmd":"map","path":"/home/me/.cache/agent/page-17.html","authority":"evidence","origins":["https://example.org/x"]}
//! {"cmd":"derive","path":"/home/me/notes/summary.md","from":["/home/me/.cache/agent/page-17.html"]}
//! ```
//!
//! Responses ([`ControlResponse`], tagged by `status`):
//!
//! ```text
//! {"status":"pending","requests":[{"id":7,"mission":"docs",...}, ...]}
//! {"status":"daemon","daemon":{"pid":1,"pins":"/sys/fs/bpf/pincer",...}}
//! {"status":"agents","agents":[{"agent":"claude","cgroup":"...",...}]}
//! {"status":"grants","grants":[{"agent":"claude","cgroup":"...","grants":[...]}]}
//! {"status":"ok","message":"approved request 7 (once)"}
//! {"status":"error","message":"..."}
//! ```
//!
//! Each pending request is a [`Request`], the sanitized request exactly as
//! voters see it.
//!
//! A line that is not a valid request gets an `error` response naming the
//! problem and the connection stays usable. A line longer than
//! [`MAX_REQUEST_LINE`] bytes gets an `error` response and the connection is
//! closed, since the rest of it cannot be told apart from the next request.
//!

use std::{collections::BTreeMap, fmt, path::PathBuf};

use serde::{Deserialize, Serialize};

use crate::{
    assets::NodeStatus,
    audit::Descriptor,
    request::Request,
    vote::{Extent, Lifetime},
};

/// Longest request line the server reads, without its newline.
pub const MAX_REQUEST_LINE: usize = 64 * 1024;

/// A request from the command line to the twin.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "lowercase")]
pub enum ControlRequest {
    /// List the parked requests waiting for a human.
    Pending,
    /// Allow a parked request.
    Approve {
        /// The request's id.
        id: u64,
        /// How long the allow lasts (the mission may cap it).
        lifetime: Lifetime,
    },
    /// Refuse a parked request.
    Deny {
        /// The request's id.
        id: u64,
        /// Why, for the audit log.
        #[serde(default)]
        reason: Option<String>,
    },
    /// The daemon's state (`pincer status`; daemon only).
    Status,
    /// The confined agent cgroups (`pincer agents`; daemon only).
    Agents,
    /// The grants of one agent, or of all (`pincer grants`; daemon only).
    Grants {
        /// The agent's name.
        #[serde(default)]
        agent: Option<String>,
    },
    /// Confines a cgroup `pincer run` made, with a mission, for as long as
    /// it lives (daemon only; answered once the cgroup is confined).
    Register {
        /// The cgroup, relative to the cgroup2 mount (`pincer/run-<pid>`).
        cgroup: String,
        /// The mission file (absolute).
        mission: PathBuf,
        /// `enforce`, `audit` or `ask`; the mission's own default otherwise.
        #[serde(default)]
        mode: Option<String>,
        /// The descriptors the command starts with, for the audit log.
        #[serde(default)]
        descriptors: Vec<Descriptor>,
        /// Profiles added with `pincer run --profile`.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        profiles: Vec<String>,
        /// What the run made for its command alone, to be granted to it.
        #[serde(default)]
        own: RunOwn,
    },
    /// Releases a registered cgroup (daemon only).
    Unregister {
        /// The cgroup, as registered.
        cgroup: String,
    },
    /// Withdraws the grants votes made for an agent, all of them or those
    /// on one path (`pincer revoke`; daemon only). Mission grants stay.
    Revoke {
        /// The agent's name.
        agent: String,
        /// Only the grants on this path.
        #[serde(default)]
        path: Option<String>,
    },
    /// Labels a file a harness wrote (a fetched page, a tool's output) with
    /// the authority of what it holds: `evidence` or `user`, never more
    /// (daemon only; see [`crate::labels::harness`]).
    Map {
        /// The file (absolute).
        path: PathBuf,
        /// `evidence` or `user`.
        authority: String,
        /// Where its content came from (a URL, a tool's name), for the
        /// audit log.
        #[serde(default)]
        origins: Vec<String>,
    },
    /// Declares that a file was derived from others: it gets the lowest
    /// authority and taint of them (daemon only).
    Derive {
        /// The derived file (absolute).
        path: PathBuf,
        /// The files it was derived from (absolute).
        from: Vec<PathBuf>,
    },
    /// The asset nodes of one agent, or of all (`pincer mission status`).
    Assets {
        /// The agent's name.
        #[serde(default)]
        agent: Option<String>,
    },
    /// The owner pins an object as an asset node (`pincer mission admit`),
    /// or, with no path, drops the node (`pincer mission drop`): audited.
    Asset {
        /// The agent's name; needed only when several agents have the node.
        #[serde(default)]
        agent: Option<String>,
        /// The node's id.
        node: String,
        /// The object (absolute) to pin; none to drop the node.
        #[serde(default)]
        path: Option<PathBuf>,
    },
}

/// One agent's asset nodes, as `pincer mission status` lists them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentAssets {
    /// The agent.
    pub agent: String,
    /// Its nodes, in mission order.
    pub nodes: Vec<NodeStatus>,
}

/// What a registering `pincer run` made for its command alone, which the
/// daemon grants it beside the mission ([`crate::mission::RunGrant`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunOwn {
    /// Its private temporary directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tmp: Option<PathBuf>,
    /// The terminal it was started on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminal: Option<PathBuf>,
}

impl ControlRequest {
    /// Reads one request line (its newline, if any, is JSON whitespace) as
    /// the server does. Public so that the decoding can be exercised on its
    /// own, without a socket: the fuzz targets do.
    pub fn from_line(line: &[u8]) -> Result<ControlRequest, serde_json::Error> {
        serde_json::from_slice(line)
    }
}

/// The twin's answer to one [`ControlRequest`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum ControlResponse {
    /// The parked requests waiting for a human, oldest first as the handler
    /// lists them.
    Pending {
        /// The requests.
        requests: Vec<Request>,
    },
    /// The daemon's state (`status`).
    Daemon {
        /// The state (boxed: it is most of a response's size).
        daemon: Box<DaemonStatus>,
    },
    /// The confined agent cgroups (`agents`).
    Agents {
        /// One entry per cgroup, by agent and cgroup.
        agents: Vec<ConfinedAgent>,
    },
    /// The grants of the agents asked about (`grants`).
    Grants {
        /// One entry per cgroup.
        grants: Vec<AgentGrants>,
    },
    /// The asset nodes of the agents asked about (`assets`).
    Assets {
        /// One entry per agent with nodes.
        agents: Vec<AgentAssets>,
    },
    /// The request was carried out.
    Ok {
        /// What was done.
        message: String,
    },
    /// The request was refused or failed.
    Error {
        /// Why.
        message: String,
    },
}

/// What `pincer status` shows of a daemon.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DaemonStatus {
    /// The daemon's process id.
    pub pid: u32,
    /// Its configuration file.
    pub config: PathBuf,
    /// Its pin directory.
    pub pins: PathBuf,
    /// Its control socket.
    pub socket: PathBuf,
    /// Its audit log.
    pub audit: PathBuf,
    /// Where it serves metrics, if it does.
    pub metrics: Option<String>,
    /// Whether it took over the pins of an earlier daemon.
    pub reattached: bool,
    /// Seconds since it started.
    pub uptime_seconds: u64,
    /// Confined agent cgroups.
    pub agents: usize,
    /// Requests waiting for a verdict.
    pub pending: usize,
    /// Successful reloads since it started.
    pub reloads: u64,
    /// Why the last reload was refused, if it was.
    pub last_reload_error: Option<String>,
    /// The kernel's counters by name, when they could be read.
    pub counters: Option<BTreeMap<String, u64>>,
    /// The last integrity check: what the kernel holds against what the
    /// daemon wrote (`None` before the first).
    #[serde(default)]
    pub integrity: Option<Integrity>,
}

/// What the kernel holds, checked against what pincer wrote, and whether
/// the programs decide (the runtime's `pincer::twin::integrity`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Integrity {
    /// When the check ran, in seconds since the Unix epoch.
    pub checked: u64,
    /// The programs attached and running.
    pub programs: usize,
    /// What differs, one sentence each; empty when all holds.
    pub problems: Vec<String>,
    /// Each confined cgroup's tally.
    pub agents: Vec<AgentIntegrity>,
}

impl Integrity {
    /// Whether what the kernel holds is what pincer wrote.
    pub fn healthy(&self) -> bool {
        self.problems.is_empty()
    }
}

/// One confined cgroup in an [`Integrity`] check.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentIntegrity {
    /// The agent's name.
    pub agent: String,
    /// The kernel's cgroup id.
    pub cgroup: u64,
    /// Grants pincer wrote for its slot (inode, name and prefix grants).
    pub grants: usize,
    /// Grants the kernel holds for its slot.
    pub live: usize,
    /// A digest of the inode and name grants pincer wrote (16 hex digits).
    pub digest: String,
    /// The same digest over what the kernel holds.
    pub live_digest: String,
    /// What the canary met: `refused` (`EPERM`), `reported` (audit mode:
    /// allowed and reported), `not armed` (an agent decided from its first
    /// `exec`, before it), or what went wrong; `None` when none ran.
    pub canary: Option<String>,
}

/// One confined cgroup, as `pincer agents` lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfinedAgent {
    /// The agent (configuration entry, or `<mission>/run-<pid>` for a
    /// registered `pincer run`) it belongs to.
    pub agent: String,
    /// Its path under the cgroup root.
    pub cgroup: String,
    /// The kernel's cgroup id.
    pub id: u64,
    /// Its grant slot.
    pub slot: u32,
    /// The mission's name.
    pub mission: String,
    /// The mission's file.
    pub mission_file: PathBuf,
    /// `enforce`, `audit` or `ask`.
    pub mode: String,
    /// The `pincer run` that registered it (not matched by a pattern).
    pub registered_by: Option<u32>,
}

/// The grants of one confined cgroup, as `pincer grants` lists them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentGrants {
    /// The agent.
    pub agent: String,
    /// Its cgroup.
    pub cgroup: String,
    /// Mission grants first, then vote grants.
    pub grants: Vec<ListedGrant>,
}

/// One grant as `pincer grants` lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListedGrant {
    /// The path it was made for.
    pub path: String,
    /// Operations granted.
    pub ops: Vec<String>,
    /// `file` or `tree`.
    pub extent: Extent,
    /// Where it comes from.
    pub by: GrantSource,
    /// Seconds left for a time-limited vote grant; absent for grants with
    /// no end (the mission's, and a vote's for the session).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_in_seconds: Option<u64>,
}

/// Why a listed grant exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GrantSource {
    /// The mission file.
    Mission,
    /// A vote on a parked request.
    Vote,
}

impl fmt::Display for GrantSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GrantSource::Mission => "mission",
            GrantSource::Vote => "vote",
        })
    }
}

/// A human's answer to a parked request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HumanAnswer {
    /// Allow it for this long.
    Allow(Lifetime),
    /// Refuse it, optionally saying why.
    Deny(Option<String>),
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn wire_format() {
        let json = |request: &ControlRequest| serde_json::to_string(request).unwrap();
        assert_eq!(json(&ControlRequest::Pending), r#"{"cmd":"pending"}"#);
        assert_eq!(
            json(&ControlRequest::Approve {
                id: 7,
                lifetime: Lifetime::Once
            }),
            r#"{"cmd":"approve","id":7,"lifetime":{"kind":"once"}}"#
        );
        assert_eq!(
            json(&ControlRequest::Approve {
                id: 7,
                lifetime: Lifetime::Ttl(Duration::from_secs(600))
            }),
            r#"{"cmd":"approve","id":7,"lifetime":{"kind":"ttl","seconds":600}}"#
        );
        let deny: ControlRequest = serde_json::from_str(r#"{"cmd":"deny","id":3}"#).unwrap();
        assert_eq!(
            deny,
            ControlRequest::Deny {
                id: 3,
                reason: None
            }
        );
        let ok = ControlResponse::Ok {
            message: "done".into(),
        };
        assert_eq!(
            serde_json::to_string(&ok).unwrap(),
            r#"{"status":"ok","message":"done"}"#
        );
    }

    #[test]
    fn answers_read_back_as_they_were_sent() {
        let grants = ControlResponse::Grants {
            grants: vec![AgentGrants {
                agent: "a".into(),
                cgroup: "agents/a".into(),
                grants: vec![
                    ListedGrant {
                        path: "/p".into(),
                        ops: vec!["read".into()],
                        extent: Extent::Tree,
                        by: GrantSource::Mission,
                        expires_in_seconds: None,
                    },
                    ListedGrant {
                        path: "/k".into(),
                        ops: vec!["read".into(), "write".into()],
                        extent: Extent::File,
                        by: GrantSource::Vote,
                        expires_in_seconds: Some(60),
                    },
                ],
            }],
        };
        let line = serde_json::to_string(&grants).unwrap();
        assert!(
            line.starts_with(r#"{"status":"grants","grants":[{"agent":"a","cgroup":"agents/a","grants":[{"path":"/p","ops":["read"],"extent":"tree","by":"mission"}"#),
            "{line}"
        );
        assert_eq!(
            serde_json::from_str::<ControlResponse>(&line).unwrap(),
            grants
        );
        let pending = ControlResponse::Pending {
            requests: vec![Request::example(7, "/k")],
        };
        let line = serde_json::to_string(&pending).unwrap();
        let ControlResponse::Pending { requests } = serde_json::from_str(&line).unwrap() else {
            panic!("{line}");
        };
        assert_eq!(requests[0].path, "/k");
        assert_eq!(requests[0].parents[0].comm, "sh");
    }
}
