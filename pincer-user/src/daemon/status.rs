//! The daemon's side of the control socket: the snapshot its queries read
//! (kept current by the event loop), and the commands that change its state
//! (carried out by the event loop, answered when done).

use std::{
    collections::{HashMap, HashSet},
    path::Path,
    sync::{Arc, Mutex},
};

use pincer_model::{
    audit::Record,
    control::{
        AgentGrants, ConfinedAgent, ControlRequest, ControlResponse, DaemonStatus, HumanAnswer,
        ListedGrant,
    },
    labels,
    request::Request,
};
use tokio::sync::{mpsc, oneshot};

use super::{Daemon, DaemonError};
use crate::{
    cgroup,
    control::{
        ControlHandler,
        server::{Submitted, hand_over},
    },
    voters::prompt::PromptBoard,
};

/// What the control socket shows; the event loop keeps it current.
#[derive(Default)]
pub(super) struct Snapshot {
    status: Option<DaemonStatus>,
    agents: Vec<ConfinedAgent>,
    /// Every grant of each slot, mission's first.
    grants: HashMap<u32, Vec<ListedGrant>>,
    cgroup_paths: HashSet<String>,
}

/// The control socket's side of the daemon.
pub(super) struct Handler {
    board: Arc<PromptBoard>,
    snapshot: Arc<Mutex<Snapshot>>,
    commands: mpsc::UnboundedSender<Submitted>,
}

impl Handler {
    /// A handler answering prompts on `board`, queries from `snapshot`, and
    /// passing commands to the event loop.
    pub(super) fn new(
        board: Arc<PromptBoard>,
        snapshot: Arc<Mutex<Snapshot>>,
        commands: mpsc::UnboundedSender<Submitted>,
    ) -> Handler {
        Handler {
            board,
            snapshot,
            commands,
        }
    }
}

fn stopping() -> ControlResponse {
    ControlResponse::Error {
        message: "the daemon is stopping".into(),
    }
}

fn no_agent(agent: &str) -> ControlResponse {
    ControlResponse::Error {
        message: format!("no confined cgroup of agent `{agent}`"),
    }
}

impl ControlHandler for Handler {
    fn pending(&self) -> Vec<Request> {
        self.board.pending()
    }

    fn answer(&self, id: u64, answer: HumanAnswer) -> Result<(), String> {
        self.board.answer(id, answer)
    }

    fn query(&self, request: &ControlRequest) -> ControlResponse {
        let snapshot = self
            .snapshot
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match request {
            ControlRequest::Status => match &snapshot.status {
                Some(status) => ControlResponse::Daemon {
                    daemon: Box::new(status.clone()),
                },
                None => stopping(),
            },
            ControlRequest::Agents => ControlResponse::Agents {
                agents: snapshot.agents.clone(),
            },
            ControlRequest::Grants { agent } => {
                let grants: Vec<AgentGrants> = snapshot
                    .agents
                    .iter()
                    .filter(|c| agent.as_ref().is_none_or(|a| *a == c.agent))
                    .map(|c| AgentGrants {
                        agent: c.agent.clone(),
                        cgroup: c.cgroup.clone(),
                        grants: snapshot.grants.get(&c.slot).cloned().unwrap_or_default(),
                    })
                    .collect();
                match agent {
                    Some(agent) if grants.is_empty() => no_agent(agent),
                    _ => ControlResponse::Grants { grants },
                }
            }
            _ => ControlResponse::Error {
                message: "not a query".into(),
            },
        }
    }

    fn submit(
        &self,
        request: ControlRequest,
        caller: u32,
    ) -> Result<oneshot::Receiver<ControlResponse>, ControlResponse> {
        hand_over(&self.commands, request, caller, stopping)
    }

    fn is_agent_cgroup(&self, cgroup_path: &str) -> bool {
        let path = cgroup_path
            .strip_suffix(" (deleted)")
            .unwrap_or(cgroup_path);
        let path = path.trim_start_matches('/');
        let snapshot = self
            .snapshot
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        cgroup::in_agent_cgroup(cgroup_path)
            || snapshot
                .cgroup_paths
                .iter()
                .any(|agent| Path::new(path).starts_with(agent))
    }
}

impl Daemon {
    /// Carries out a command from the control socket and answers it.
    pub(super) fn command(&mut self, command: Submitted) -> Result<(), DaemonError> {
        let Submitted {
            request,
            caller,
            answer,
        } = command;
        let response = match request {
            ControlRequest::Register {
                cgroup,
                mission,
                mode,
                descriptors,
                profiles,
                own,
            } => self.register(
                super::registrations::Registration::new(
                    cgroup, mission, mode, profiles, own, caller,
                ),
                &descriptors,
            ),
            ControlRequest::Unregister { cgroup } => self.unregister(&cgroup, caller),
            ControlRequest::Revoke { agent, path } => self.revoke(&agent, path.as_deref())?,
            ControlRequest::Map {
                path,
                authority,
                origins,
            } => self.map(&path, &authority, &origins, caller)?,
            ControlRequest::Derive { path, from } => self.derive(&path, &from, caller)?,
            asset @ (ControlRequest::Assets { .. } | ControlRequest::Asset { .. }) => {
                self.service.twin().asset_command(asset, caller)
            }
            _ => ControlResponse::Error {
                message: "not a command".into(),
            },
        };
        let _ = answer.send(response);
        Ok(())
    }

    /// Withdraws the vote grants of an agent (on one path, or all), and
    /// audits it.
    fn revoke(&mut self, agent: &str, path: Option<&str>) -> Result<ControlResponse, DaemonError> {
        let slots: Vec<u32> = self
            .confined
            .values()
            .filter(|c| c.listed.agent == agent)
            .map(|c| c.listed.slot)
            .collect();
        if slots.is_empty() {
            return Ok(no_agent(agent));
        }
        let twin = self.service.twin();
        let mut revoked = 0;
        for slot in slots {
            revoked += twin.revoke(slot, path)?;
        }
        twin.audit(&Record::Revoke {
            agent,
            path,
            grants: revoked,
        })?;
        tracing::info!(agent, path, revoked, "revoked vote grants");
        self.publish();
        Ok(ControlResponse::Ok {
            message: match path {
                Some(path) => format!("revoked {revoked} vote grant(s) of `{agent}` on {path}"),
                None => format!("revoked {revoked} vote grant(s) of `{agent}`"),
            },
        })
    }

    /// Labels a file a harness wrote (`map`), and audits it.
    fn map(
        &mut self,
        path: &Path,
        authority: &str,
        origins: &[String],
        caller: u32,
    ) -> Result<ControlResponse, DaemonError> {
        let twin = self.service.twin();
        let label = match labels::harness::map(path, authority) {
            Ok(label) => label,
            Err(message) => return Ok(ControlResponse::Error { message }),
        };
        twin.set_label(label.key, label.label)?;
        twin.audit(&Record::Label {
            action: "map",
            path: &label.path,
            authority: pincer_common::authority::name(label.label.authority),
            taint: pincer_common::authority::name(label.label.taint),
            from: origins,
            caller,
        })?;
        Ok(ControlResponse::Ok {
            message: format!(
                "{}: {}",
                label.path,
                pincer_common::authority::name(label.label.authority)
            ),
        })
    }

    /// Labels a file derived from others (`derive`), and audits it.
    fn derive(
        &mut self,
        path: &Path,
        from: &[std::path::PathBuf],
        caller: u32,
    ) -> Result<ControlResponse, DaemonError> {
        let twin = self.service.twin();
        let labels = twin.all_labels()?;
        let counters = twin.revocations()?;
        let derived = match labels::harness::derive(path, from, &labels, &counters) {
            Ok(derived) => derived,
            Err(message) => return Ok(ControlResponse::Error { message }),
        };
        twin.set_label(derived.key, derived.label)?;
        let sources: Vec<String> = from
            .iter()
            .map(|p| pincer_model::escape::escape(p.as_os_str().as_encoded_bytes()))
            .collect();
        let taint = match derived.label.taint {
            0 => "none",
            level => pincer_common::authority::name(level),
        };
        twin.audit(&Record::Label {
            action: "derive",
            path: &derived.path,
            authority: pincer_common::authority::name(derived.label.authority),
            taint,
            from: &sources,
            caller,
        })?;
        Ok(ControlResponse::Ok {
            message: format!(
                "{}: {} (taint {taint})",
                derived.path,
                pincer_common::authority::name(derived.label.authority)
            ),
        })
    }

    /// Checks what the kernel holds against what the daemon wrote, with a
    /// canary in every confined cgroup ([`crate::twin::integrity`]); a
    /// problem is logged, counted in the metrics, audited when the set of
    /// problems changes, and shown by `pincer status` (which then fails).
    pub(super) fn check_integrity(&mut self) -> Result<(), DaemonError> {
        let root = &self.config.daemon.cgroup_root;
        let dirs: HashMap<u64, std::path::PathBuf> = self
            .confined
            .iter()
            .map(|(id, confined)| (*id, root.join(&confined.listed.cgroup)))
            .collect();
        let (integrity, changed) = self.service.twin().check_integrity(&dirs)?;
        self.metrics
            .set_integrity_problems(integrity.problems.len() as i64);
        if changed {
            for problem in &integrity.problems {
                tracing::error!(%problem, "integrity check");
            }
            if integrity.healthy() {
                tracing::info!("integrity check: the kernel holds what was written again");
            }
        }
        self.integrity = Some(integrity);
        self.publish();
        Ok(())
    }

    /// Updates what the control socket and the metrics show.
    pub(super) fn publish(&mut self) {
        let twin = self.service.twin();
        let counters = twin.counters().ok();
        let waiting = twin.waiting().count();
        self.metrics.set_pending(waiting as i64);
        self.metrics.set_agents(self.confined.len() as i64);
        if let Some(counters) = &counters {
            let named: Vec<(&str, u64)> = counters.iter().map(|(k, v)| (*k, *v)).collect();
            self.metrics.set_kernel_counters(&named);
        }
        let mut grants: HashMap<u32, Vec<ListedGrant>> = HashMap::new();
        for confined in self.confined.values() {
            let slot = confined.listed.slot;
            let mut listed = confined.mission_grants.clone();
            listed.extend(twin.vote_grants(slot));
            grants.insert(slot, listed);
        }
        let daemon = &self.config.daemon;
        let status = DaemonStatus {
            pid: std::process::id(),
            config: self.config.path.clone(),
            pins: daemon.pin_dir.clone(),
            socket: daemon.socket.clone(),
            audit: daemon.audit.clone(),
            metrics: daemon.metrics.map(|addr| addr.to_string()),
            reattached: self.reattached,
            uptime_seconds: self.started.elapsed().unwrap_or_default().as_secs(),
            agents: self.confined.len(),
            pending: waiting,
            reloads: self.reloads,
            last_reload_error: self.last_reload_error.clone(),
            counters: counters.map(|counters| {
                counters
                    .into_iter()
                    .map(|(name, value)| (name.to_owned(), value))
                    .collect()
            }),
            integrity: self.integrity.clone(),
        };
        let mut agents: Vec<ConfinedAgent> =
            self.confined.values().map(|c| c.listed.clone()).collect();
        agents.sort_by(|a, b| (&a.agent, &a.cgroup).cmp(&(&b.agent, &b.cgroup)));
        let mut snapshot = self
            .snapshot
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        snapshot.cgroup_paths = agents.iter().map(|c| c.cgroup.clone()).collect();
        snapshot.agents = agents;
        snapshot.grants = grants;
        snapshot.status = Some(status);
    }
}
