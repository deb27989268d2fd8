//! Which cgroups the daemon confines, and with what: the periodic scan for
//! cgroups matching an agent pattern, and the confinement of one cgroup
//! with its agent's mission.

use std::{
    collections::HashMap,
    fs,
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
};

use pincer_common::Agent;
use pincer_model::{
    config::daemon::AgentConfig,
    control::{ConfinedAgent, GrantSource, ListedGrant},
    events,
    mission::{Mission, RunGrant},
};

use super::{Daemon, DaemonError};
use crate::{
    cgroup::{self, PINCER_DIR},
    procfs,
    twin::{Confinement, refusals},
    voters,
};

/// How many directory levels below the cgroup root are searched for agent
/// cgroups.
const MAX_SCAN_DEPTH: usize = 16;

/// One confined cgroup.
#[derive(Clone, Debug)]
pub(super) struct Confined {
    /// As `pincer agents` lists it.
    pub listed: ConfinedAgent,
    /// The mission's grants as `pincer grants` lists them (those written
    /// for its slot).
    pub mission_grants: Vec<ListedGrant>,
}

impl Daemon {
    /// Confines new matching cgroups, releases removed or no longer
    /// matching ones. `previous` are kernel agents of an earlier daemon:
    /// those not taken over are released, and their grants removed.
    pub(super) fn scan(&mut self, previous: &[(u64, Agent)]) -> Result<(), DaemonError> {
        self.watch()?;
        let root = self.config.daemon.cgroup_root.clone();
        // Read before the walk: a cgroup held after it is decided at the
        // next scan, which its report brings on.
        let mut held: HashMap<u64, Option<PathBuf>> = self
            .service
            .twin()
            .held()?
            .into_iter()
            .map(|id| (id, None))
            .collect();
        let mut found: HashMap<u64, (String, String)> = HashMap::new();
        // Containers of annotated pods, which no pattern matched.
        let mut pods = HashMap::new();
        walk(&root, &root, 0, &mut |relative, id| {
            if let Some(path) = held.get_mut(&id) {
                *path = Some(relative.to_owned());
            }
            // `pincer run`'s own cgroups are its business.
            if relative.starts_with(PINCER_DIR) {
                return;
            }
            if let Some(agent) = self.config.agent_for(relative) {
                found.insert(id, (agent.name.clone(), relative.display().to_string()));
            } else if let Some(pod) = self.pods.as_mut().and_then(|p| p.agent_for(relative)) {
                found.insert(
                    id,
                    (pod.config.name.clone(), relative.display().to_string()),
                );
                pods.insert(id, pod);
            }
        });
        let gone: Vec<u64> = self
            .confined
            .iter()
            .filter(|(id, c)| match c.listed.registered_by {
                // Until `pincer run` unregisters it, or it dies and leaves
                // the cgroup empty.
                Some(pid) => super::registrations::over(&root.join(&c.listed.cgroup), pid),
                // A pod's container moves to its new agent below, in one
                // map update.
                None => {
                    !pods.contains_key(id)
                        && found
                            .get(id)
                            .is_none_or(|(agent, _)| *agent != c.listed.agent)
                }
            })
            .map(|(id, _)| *id)
            .collect();
        for id in gone {
            self.release(id)?;
        }
        for (id, (agent, relative)) in found {
            if let Some(pod) = pods.remove(&id) {
                if self
                    .confined
                    .get(&id)
                    .is_some_and(|c| pod.confines(&c.listed))
                {
                    continue;
                }
                if let Err(error) =
                    self.confine_with(id, &relative, &pod.config, &pod.mission, None, &[])
                {
                    tracing::error!(agent = %agent, cgroup = %relative, error = %error, "cannot confine a pod's container");
                }
                continue;
            }
            if self.confined.contains_key(&id) {
                continue;
            }
            let Some(config) = self.config.agents.iter().find(|a| a.name == agent).cloned() else {
                continue;
            };
            if let Err(error) = self.confine(id, &relative, &config) {
                tracing::error!(agent = %agent, cgroup = %relative, error = %error, "cannot confine a cgroup");
            }
        }
        self.decide_held(held.into_iter().collect())?;
        if !previous.is_empty() {
            self.service.twin().take_over(previous)?;
        }
        self.publish();
        Ok(())
    }

    /// Stops confining a cgroup (removed, no longer matched, or its `pincer
    /// run` done with it).
    pub(super) fn release(&mut self, id: u64) -> Result<(), DaemonError> {
        let Some(confined) = self.confined.remove(&id) else {
            return Ok(());
        };
        self.service.twin().release(id)?;
        if let Some(pid) = confined.listed.registered_by {
            let _ = self.service.twin().unguard(pid);
            self.forget_registration(id);
            // Its `pincer run` is gone: nobody else removes it.
            let _ = fs::remove_dir(self.config.daemon.cgroup_root.join(&confined.listed.cgroup));
        }
        tracing::info!(agent = %confined.listed.agent, cgroup = %confined.listed.cgroup, "released an agent cgroup");
        Ok(())
    }

    /// After a reload: every cgroup matched by a pattern switches to its
    /// (possibly new) agent and mission, or is released when none matches
    /// any more.
    pub(super) fn confine_again(&mut self) -> Result<(), DaemonError> {
        let current: Vec<(u64, String)> = self
            .confined
            .iter()
            .filter(|(_, c)| c.listed.registered_by.is_none())
            .map(|(id, c)| (*id, c.listed.cgroup.clone()))
            .collect();
        for (id, relative) in current {
            match self.config.agent_for(Path::new(&relative)).cloned() {
                Some(agent) => {
                    if let Err(error) = self.confine(id, &relative, &agent) {
                        tracing::error!(cgroup = %relative, error = %error, "cannot confine a cgroup again");
                    }
                }
                None => match self
                    .pods
                    .as_mut()
                    .and_then(|p| p.agent_for(Path::new(&relative)))
                {
                    Some(pod) => {
                        if let Err(error) =
                            self.confine_with(id, &relative, &pod.config, &pod.mission, None, &[])
                        {
                            tracing::error!(cgroup = %relative, error = %error, "cannot confine a pod's container again");
                        }
                    }
                    None => {
                        self.confined.remove(&id);
                        self.service.twin().release(id)?;
                    }
                },
            }
        }
        Ok(())
    }

    /// Confines one cgroup with its configured agent's mission.
    fn confine(
        &mut self,
        id: u64,
        relative: &str,
        config: &AgentConfig,
    ) -> Result<(), DaemonError> {
        let mission = self
            .missions
            .get(&config.name)
            .expect("every configured agent has its mission")
            .clone();
        self.confine_with(id, relative, config, &mission, None, &[])
    }

    /// Confines a cgroup with `mission` under a new slot; `registered_by` is
    /// the `pincer run` that asked for it, if one did. A cgroup confined
    /// before (by a previous daemon, or before a reload) switches to the new
    /// slot in one map update, so it is never unconfined.
    pub(super) fn confine_with(
        &mut self,
        id: u64,
        relative: &str,
        config: &AgentConfig,
        mission: &Mission,
        registered_by: Option<u32>,
        run: &[RunGrant],
    ) -> Result<(), DaemonError> {
        // The configuration's sources are every agent's, registered runs'
        // included.
        let mission = &self.config.with_sources(mission);
        let twin = self.service.twin();
        let slot = twin.new_slot();
        let grants = mission
            .resolve_with(slot, run)
            .map_err(|source| DaemonError::Mission {
                place: config.mission_place(&self.config.path),
                source: Box::new(source),
            })?;
        let mode = config.mode.unwrap_or(mission.on_unknown);
        let written = grants.inode.len() + grants.names.len() + grants.prefixes.len();
        let private_tmp = run
            .iter()
            .find(|grant| grant.what == RunGrant::PRIVATE_TMP)
            .map(|grant| grant.path.clone());
        twin.confine(
            id,
            Confinement {
                name: config.name.clone(),
                slot,
                mode,
                report_allowed: false,
                from_exec: config.from_exec,
                capabilities: mission.capabilities,
                // Processes already in the cgroup (a container's) start
                // in the namespace they are in.
                userns_home: procfs::userns_home(&cgroup::processes_in(
                    &self.config.daemon.cgroup_root.join(relative),
                )),
                grants,
                voters: voters::for_mission(&mission.vote, &self.board)?,
                policy: mission.vote.policy.clone(),
                policy_set: self.config.policy_set(mission),
                policy_roots: mission.policy_roots(),
                // A registered run's private temporary directory is its
                // command's own place, as in a run of its own.
                own_roots: mission
                    .own_roots()
                    .into_iter()
                    .chain(private_tmp.clone())
                    .collect(),
                assets: pincer_model::assets::Assets::of(mission),
                // A registered run's command learns why in its private
                // directory; the daemon's standard error is its journal.
                tell: refusals::Tell {
                    stderr: false,
                    dir: private_tmp,
                },
            },
        )?;
        let confined = Confined {
            listed: ConfinedAgent {
                agent: config.name.clone(),
                cgroup: relative.to_owned(),
                id,
                slot,
                mission: mission.name.clone(),
                mission_file: config.mission.clone(),
                mode: mode.name().to_owned(),
                registered_by,
            },
            mission_grants: mission
                .grants
                .iter()
                .map(|spec| ListedGrant {
                    path: spec.path.display().to_string(),
                    ops: events::op_names(spec.ops)
                        .into_iter()
                        .map(String::from)
                        .collect(),
                    extent: spec.extent,
                    by: GrantSource::Mission,
                    expires_in_seconds: None,
                })
                .collect(),
        };
        tracing::info!(agent = %config.name, cgroup = %relative, slot, mission = %mission.name, grants = written, "confined an agent cgroup");
        self.confined.insert(id, confined);
        Ok(())
    }
}

/// Walks the cgroup tree below `dir`, calling `visit` with each cgroup's
/// path relative to `root` and its id (the directory's inode number).
fn walk(root: &Path, dir: &Path, depth: usize, visit: &mut dyn FnMut(&Path, u64)) {
    if depth >= MAX_SCAN_DEPTH {
        return;
    }
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if !kind.is_dir() {
            continue;
        }
        let path = entry.path();
        let Ok(metadata) = entry.metadata() else {
            continue;
        };
        if let Ok(relative) = path.strip_prefix(root) {
            visit(relative, metadata.ino());
        }
        walk(root, &path, depth + 1, visit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_walk_names_every_cgroup_below_the_root_by_id() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir_all(root.join("agents.slice/claude-1.scope")).unwrap();
        fs::create_dir_all(root.join("system.slice")).unwrap();
        fs::write(root.join("cgroup.procs"), "").unwrap();
        let mut seen = Vec::new();
        walk(root, root, 0, &mut |relative, id| {
            seen.push((relative.display().to_string(), id));
        });
        seen.sort();
        let names: Vec<&str> = seen.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "agents.slice",
                "agents.slice/claude-1.scope",
                "system.slice"
            ]
        );
        let id = fs::metadata(root.join("system.slice")).unwrap().ino();
        assert_eq!(seen[2].1, id);
    }
}
