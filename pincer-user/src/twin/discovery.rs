//! Discovery in the twin: a parked request is put to the agent's asset
//! nodes ([`pincer_model::assets`]) before anyone votes. The first read of a
//! source is observed and granted; an object a node's source names is
//! admitted with the node's operations and extent; anything else goes to
//! the voters with the reason. The mission's rules still vote first: a
//! rule that denies overrides discovery. A request that is the owner's
//! alone (a policy object, a reserved action, revoked content) is never
//! discovered.

use std::{os::unix::fs::MetadataExt, path::Path};

use pincer_common::{AccessEvent, GrantKey, ObjectKey, event_flags, kernel_dev};
use pincer_model::{
    assets::{self, Admission, Considered, Evidence, Identified},
    audit::{AssetRecord, Record},
    control::{AgentAssets, ControlRequest, ControlResponse},
    escape::escape,
    events::op_names,
    request::Request,
    vote::{Ballot, Extent, Lifetime, Outcome, Vote},
};

use super::{
    Twin, TwinError, Waiting,
    grants::{Grants, Target, VoteGrant},
};
use crate::{loader::Kernel, vote::combine};

/// What discovery made of a parked request.
pub(super) enum Discovered {
    /// The first read of a source node, with what it holds now.
    Observed {
        /// The node.
        node: usize,
        /// Its content.
        evidence: Evidence,
    },
    /// An object a node's source names.
    Admitted(Admission),
}

impl<K: Kernel> Twin<K> {
    /// Puts a parked request to its agent's asset nodes. `None` when they
    /// do not decide it; the request then carries why for the voters.
    pub(super) fn discover(
        &mut self,
        event: &AccessEvent,
        request: &mut Request,
    ) -> Option<Discovered> {
        let agent = self.agents.get(&event.cgroup_id)?;
        let assets = agent.assets.as_ref()?;
        if !assets.discovers() {
            return None;
        }
        if request.owner_only.is_some() {
            request.discovery = Some("only the owner may allow it".to_owned());
            return None;
        }
        // Only a path the kernel named whole and printable is looked up.
        if !request.path.starts_with('/')
            || request.path.contains(['\\', pincer_model::escape::CUT])
        {
            request.discovery = Some("its path cannot be read back exactly".to_owned());
            return None;
        }
        let path = Path::new(&request.path);
        // Evidence never makes a policy object (instructions, settings,
        // hooks) part of the task, not even to read.
        if agent.policy_set.policy_of(path).is_some() {
            request.discovery = Some("a policy object: discovery never admits one".to_owned());
            return None;
        }
        let access = assets::Access {
            path,
            ops: event.ops,
            new_name: event.flags & event_flags::NEW_NAME != 0,
            dev: event.dev,
            ino: event.ino,
        };
        match assets.consider(&access) {
            Considered::Refer(reason) => {
                request.discovery = Some(reason);
                None
            }
            Considered::Observe { node } => {
                match Evidence::read(path, event.dev, event.ino, request.id) {
                    Ok(mut evidence) => {
                        // Its source, for a revocation to reach what it
                        // admits; a label that cannot be read is none.
                        let key = ObjectKey {
                            dev: event.dev,
                            ino: event.ino,
                        };
                        if let Ok(Some(label)) = self.kernel.label(key) {
                            evidence.origins = label.origins;
                        }
                        Some(Discovered::Observed { node, evidence })
                    }
                    Err(reason) => {
                        request.discovery = Some(reason);
                        None
                    }
                }
            }
            Considered::Admit(admission) => Some(Discovered::Admitted(admission)),
        }
    }

    /// Answers a request discovery decided: the mission's rules first (a
    /// deny refuses), then the grant with the node's operations and extent
    /// for the session, the node's new state and the chain in the audit
    /// log.
    pub(super) fn conclude_discovered(
        &mut self,
        mut waiting: Waiting,
        discovered: Discovered,
    ) -> Result<(), TwinError> {
        let cgroup = waiting.event.cgroup_id;
        let Some(agent) = self.agents.get(&cgroup) else {
            return Ok(());
        };
        let mut ballots: Vec<Ballot> = agent
            .voters
            .iter()
            .filter(|voter| voter.name() == "mission")
            .filter_map(|voter| {
                voter.vote_now(&waiting.request).map(|vote| Ballot {
                    voter: voter.name(),
                    vote,
                })
            })
            .collect();
        if ballots
            .iter()
            .any(|ballot| matches!(ballot.vote, Vote::Deny { .. }))
        {
            let outcome = combine(ballots, &[], &agent.policy);
            return self.conclude(waiting, outcome);
        }
        let slot = agent.slot;
        let assets = agent.assets.as_ref().expect("discovered by its nodes");
        let (node, ops, tree, object) = match &discovered {
            Discovered::Observed { node, .. } => (
                *node,
                assets.nodes()[*node].spec.ops,
                false,
                Path::new(&waiting.request.path).to_owned(),
            ),
            Discovered::Admitted(admission) => (
                admission.node,
                admission.ops,
                admission.tree,
                admission.object.clone(),
            ),
        };
        let id = assets.nodes()[node].spec.id.clone();
        let reason = match &discovered {
            Discovered::Observed { evidence, .. } => {
                let found: Vec<String> = assets
                    .nodes()
                    .iter()
                    .filter(|n| n.spec.found_in == Some(node))
                    .map(|n| format!("`{}`", n.spec.id))
                    .collect();
                format!(
                    "the first read of `{id}`: its {} bytes (sha256 {}) are the evidence of {}",
                    evidence.bytes.len(),
                    &evidence.digest[..16],
                    found.join(", ")
                )
            }
            Discovered::Admitted(Admission {
                by:
                    Identified::Discovery {
                        source, excerpt, ..
                    },
                ..
            }) => format!(
                "`{id}` is named in `{source}`'s evidence at bytes {}..{}: \"{}\"",
                excerpt.start, excerpt.end, excerpt.text
            ),
            Discovered::Admitted(_) => format!("`{id}` was pinned"),
        };
        let extent = if tree { Extent::Tree } else { Extent::File };
        ballots.push(Ballot {
            voter: "discovery",
            vote: Vote::Allow {
                lifetime: Lifetime::Session,
                extent,
            },
        });
        waiting.planned = plan(&waiting, slot, &object, ops, tree);
        let request_id = waiting.request.id;
        let agent_name = waiting.request.mission.clone();
        let path = escape(object.as_os_str().as_encoded_bytes());
        let mut record = AssetRecord {
            path: Some(path),
            request: Some(request_id),
            ops: Some(op_names(ops)),
            extent: Some(extent),
            ..AssetRecord::new("observe", &agent_name, &id)
        };
        let audited = match &discovered {
            Discovered::Observed { evidence, .. } => self.audit(&Record::Asset(AssetRecord {
                evidence: Some(&evidence.digest),
                bytes: Some((evidence.bytes.len(), evidence.size)),
                ..record
            })),
            Discovered::Admitted(admission) => {
                if let Identified::Discovery {
                    source,
                    excerpt,
                    evidence,
                } = &admission.by
                {
                    record.action = "admit";
                    record.source = Some(source);
                    record.evidence = Some(evidence);
                    record.excerpt = Some(excerpt);
                }
                self.audit(&Record::Asset(record))
            }
        };
        if let Some(assets) = self
            .agents
            .get_mut(&cgroup)
            .and_then(|agent| agent.assets.as_mut())
        {
            match discovered {
                Discovered::Observed { node, evidence } => assets.observed(node, evidence),
                Discovered::Admitted(admission) => assets.admitted(&admission, Some(request_id)),
            }
        }
        let outcome = Outcome {
            allow: Some((Lifetime::Session, extent)),
            decided_by: "discovery".to_owned(),
            reason,
            ballots,
        };
        let concluded = self.conclude(waiting, outcome);
        audited.and(concluded)
    }

    /// Answers the control socket's `assets` and `asset` requests (from
    /// outside every agent: the socket checks the caller).
    pub fn asset_command(&mut self, request: ControlRequest, caller: u32) -> ControlResponse {
        match request {
            ControlRequest::Assets { agent } => ControlResponse::Assets {
                agents: self
                    .asset_status()
                    .into_iter()
                    .filter(|(name, _)| agent.as_ref().is_none_or(|a| a == name))
                    .map(|(agent, nodes)| AgentAssets { agent, nodes })
                    .collect(),
            },
            ControlRequest::Asset { agent, node, path } => {
                if let Some(path) = path.as_ref().filter(|p| !p.is_absolute()) {
                    return ControlResponse::Error {
                        message: format!("{} is not an absolute path", path.display()),
                    };
                }
                match self.owner_asset(agent.as_deref(), &node, path.as_deref(), caller) {
                    Ok(message) => ControlResponse::Ok { message },
                    Err(message) => ControlResponse::Error { message },
                }
            }
            _ => ControlResponse::Error {
                message: "not an asset request".into(),
            },
        }
    }

    /// Takes back what discovery admitted on the evidence of a source the
    /// owner revoked since (`pincer label revoke`): its vote grants go, the
    /// nodes lose those objects, the source admits nothing more; audited.
    /// Looks at the counters only when some evidence came from a source.
    pub(super) fn revoke_discovered(&mut self) -> Result<(), TwinError> {
        let watched: Vec<u32> = self
            .agents
            .values()
            .filter_map(|agent| agent.assets.as_ref())
            .flat_map(assets::Assets::watched_origins)
            .map(|(origin, _)| origin)
            .collect();
        if watched.is_empty() {
            return Ok(());
        }
        let counters = self.kernel.revocations()?;
        let mut result = Ok(());
        for (origin, counter) in counters.into_iter().filter(|(o, _)| watched.contains(o)) {
            let cgroups: Vec<u64> = self.agents.keys().copied().collect();
            for cgroup in cgroups {
                let Some(agent) = self.agents.get_mut(&cgroup) else {
                    continue;
                };
                let Some(assets) = agent.assets.as_mut() else {
                    continue;
                };
                let taken = assets.revoke_origin(origin, counter);
                let ids: Vec<(String, String)> = taken
                    .iter()
                    .map(|(node, source, _)| {
                        (
                            assets.nodes()[*node].spec.id.clone(),
                            assets.nodes()[*source].spec.id.clone(),
                        )
                    })
                    .collect();
                let (slot, name) = (agent.slot, agent.name.clone());
                for ((_, _, object), (node, source)) in taken.iter().zip(&ids) {
                    let path = object.display().to_string();
                    for grant in self.grants.revoke(slot, Some(&path)) {
                        result = result.and(self.write_target(&grant.target));
                    }
                    tracing::info!(agent = %name, node, %path, "a source was revoked: what it admitted is taken back");
                    result = result.and(self.audit(&Record::Asset(AssetRecord {
                        path: Some(escape(object.as_os_str().as_encoded_bytes())),
                        source: Some(source),
                        ..AssetRecord::new("revoke", &name, node)
                    })));
                }
            }
        }
        result
    }

    /// Every agent's asset nodes, as `pincer mission status` lists them.
    pub fn asset_status(&self) -> Vec<(String, Vec<assets::NodeStatus>)> {
        let mut agents: Vec<(String, Vec<assets::NodeStatus>)> = self
            .agents
            .values()
            .filter_map(|agent| Some((agent.name.clone(), agent.assets.as_ref()?.status())))
            .collect();
        agents.sort_by(|a, b| a.0.cmp(&b.0));
        agents
    }

    /// The owner pins `object` as node `id` of `agent` (the only agent
    /// with such a node when `None`), or drops the node (`object` none):
    /// a pinned object is granted with the node's operations and extent
    /// for the session. Audited; `Err` says what is wrong, for the caller.
    pub fn owner_asset(
        &mut self,
        agent: Option<&str>,
        id: &str,
        object: Option<&Path>,
        caller: u32,
    ) -> Result<String, String> {
        let mut matching = self.agents.iter().filter(|(_, state)| {
            agent.is_none_or(|name| name == state.name)
                && state.assets.as_ref().is_some_and(|a| a.find(id).is_some())
        });
        let (cgroup, found) = match (matching.next(), matching.next()) {
            (Some((cgroup, state)), None) => (*cgroup, state),
            (None, _) => return Err(format!("no agent has an asset {id:?}")),
            (Some(_), Some(_)) => {
                return Err(format!(
                    "several agents have an asset {id:?}: name the agent"
                ));
            }
        };
        let (slot, name) = (found.slot, found.name.clone());
        let assets = found.assets.as_ref().expect("matched on its assets");
        let node = assets.find(id).expect("matched on the node");
        let Some(object) = object else {
            if let Some(assets) = self.agents.get_mut(&cgroup).and_then(|a| a.assets.as_mut()) {
                assets.drop_node(node);
            }
            self.audit(&Record::Asset(AssetRecord {
                caller: Some(caller),
                ..AssetRecord::new("drop", &name, id)
            }))
            .map_err(|e| e.to_string())?;
            return Ok(format!("dropped {id}"));
        };
        let object = std::fs::canonicalize(object)
            .map_err(|e| format!("cannot resolve {}: {e}", object.display()))?;
        let admission = assets.pin(node, &object)?;
        let metadata = std::fs::metadata(&object)
            .map_err(|e| format!("cannot look up {}: {e}", object.display()))?;
        let grant = VoteGrant {
            target: Target::Inode(GrantKey {
                slot,
                _pad: 0,
                dev: kernel_dev(metadata.dev()),
                ino: metadata.ino(),
            }),
            path: object.display().to_string(),
            ops: admission.ops,
            tree: admission.tree,
            expires: None,
        };
        let target = self.grants.add_vote(grant).clone();
        self.write_target(&target).map_err(|e| e.to_string())?;
        if let Some(assets) = self.agents.get_mut(&cgroup).and_then(|a| a.assets.as_mut()) {
            assets.admitted(&admission, None);
        }
        self.audit(&Record::Asset(AssetRecord {
            path: Some(escape(object.as_os_str().as_encoded_bytes())),
            ops: Some(op_names(admission.ops)),
            extent: Some(if admission.tree {
                Extent::Tree
            } else {
                Extent::File
            }),
            caller: Some(caller),
            ..AssetRecord::new("pin", &name, id)
        }))
        .map_err(|e| e.to_string())?;
        Ok(format!("{id} is {}", object.display()))
    }
}

/// The grant a discovered object gets: on the object the kernel saw (a
/// new name in its directory), or, for a tree node, on the directory the
/// evidence named. `None` when it cannot be kept (a name too long, a
/// directory gone): the access is then allowed once.
fn plan(waiting: &Waiting, slot: u32, object: &Path, ops: u32, tree: bool) -> Option<VoteGrant> {
    let event = &waiting.event;
    let accessed = object == Path::new(&waiting.request.path);
    let new_name = event.flags & event_flags::NEW_NAME != 0;
    let target = if accessed && !(tree && new_name) {
        Grants::target_for(event, slot, Extent::File)?.0
    } else {
        let metadata = std::fs::metadata(object).ok()?;
        Target::Inode(GrantKey {
            slot,
            _pad: 0,
            dev: kernel_dev(metadata.dev()),
            ino: metadata.ino(),
        })
    };
    Some(VoteGrant {
        target,
        path: object.display().to_string(),
        ops,
        tree,
        expires: None,
    })
}
