//! Pods as agents: with a `[kubernetes]` table, the daemon watches its
//! node's pods through the Kubernetes API and confines the containers of
//! annotated pods with the missions the annotations name.
//!
//! - **The watch** lists and watches the pods whose `spec.nodeName` is the
//!   daemon's node (the API filters them, so a node never hears of another's
//!   pods) and keeps what it needs of each (name, namespace, `pincer.dev/`
//!   annotations, the ids of its containers from the status) in a cache
//!   shared with the daemon's loop. Every change of the cache starts a scan,
//!   as `scan_every` does. A lost watch is resumed, or the pods listed
//!   again, with the client's backoff.
//! - **Which cgroup is which container**: a cgroup below `kubepods`
//!   names its pod's uid and its container's id (`cgroups.rs`); the pod's
//!   `containerStatuses`, `initContainerStatuses` and
//!   `ephemeralContainerStatuses` give the container's name. The mission is
//!   the container's own annotation, or else the pod's (`annotations.rs`).
//! - **A container cgroup the status does not list** (the pod's sandbox, or
//!   a container the kubelet has not reported yet) is confined with the
//!   pod's `pincer.dev/mission` when there is one: every process of the pod
//!   runs under it until its container is known, which may only narrow what
//!   a container-level annotation gives. With container-level annotations
//!   only, it is left alone until the status names it.
//! - **A wrong annotation, or a mission file that does not load,** confines
//!   every container of the pod with nothing granted (no baseline either, in
//!   `enforce` mode): the pod asked to be an agent, and a typo must not
//!   leave it unconfined. The error is logged with the pod, the annotation
//!   or file, and why; `pincer agents` lists its mission as `refused`.
//! - A pod that is deleted, loses its annotations, or whose cgroup is gone
//!   is released; one whose mission or mode changes moves to the new one in
//!   one map update.
//! - Missions are read from `missions/<NAME>.toml` when first used, and
//!   again after `SIGHUP`.
//! - **Restarts**: the first scan waits for the first complete list of the
//!   node's pods, so that a restarted daemon takes its pods over instead of
//!   releasing them. Until then the pins enforce as without a daemon.

// Built without the `pods` feature (as the fuzz targets are, to spare
// them the Kubernetes client), nothing makes a `Pods`: the cache and its
// readers stay, unused, for the configuration's checks.
#![cfg_attr(
    not(feature = "pods"),
    allow(dead_code, reason = "nothing makes a `Pods` without the watch")
)]

pub mod annotations;
pub mod cgroups;

#[cfg(feature = "pods")]
mod watch;

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
    time::Duration,
};

use pincer_model::{
    config::daemon::{AgentConfig, CgroupPattern, KubernetesConfig},
    control::ConfinedAgent,
    mission::Mission,
};
use tokio::sync::Notify;

use self::{annotations::Marking, cgroups::Runtime};

/// What every container of a pod with a wrong annotation is confined with.
const REFUSED: &str =
    "[mission]\nname = \"refused\"\n\n[defaults]\nbaseline = \"none\"\non_unknown = \"deny\"\n";

/// How long a client that cannot be made (no kubeconfig, no service
/// account yet) waits before it is tried again.
const CLIENT_RETRY: Duration = Duration::from_secs(5);

/// What the daemon keeps of one pod.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PodEntry {
    namespace: String,
    name: String,
    /// Its `pincer.dev/` annotations; `None`: it is no agent.
    marking: Option<Result<Marking, String>>,
    /// Its containers as the status lists them: runtime, id, name.
    containers: Vec<(Option<Runtime>, String, String)>,
}

/// The node's pods, by uid, as the watch last saw them.
#[derive(Debug, Default)]
struct Cache {
    /// Whether the first complete list has come.
    synced: bool,
    pods: HashMap<String, PodEntry>,
}

/// The pods of the daemon's node, and what their containers are confined
/// with.
pub(super) struct Pods {
    config: KubernetesConfig,
    node: String,
    cache: Arc<Mutex<Cache>>,
    changed: Arc<Notify>,
    /// Missions read so far, by annotation name; an error says why one
    /// does not load.
    missions: HashMap<String, Result<Mission, String>>,
    refused: Mission,
}

/// A pod's container, and what it is confined with.
pub(super) struct PodAgent {
    pub config: AgentConfig,
    pub mission: Mission,
}

impl PodAgent {
    /// Whether `listed` is already confined as this says.
    pub fn confines(&self, listed: &ConfinedAgent) -> bool {
        listed.agent == self.config.name
            && listed.mission_file == self.config.mission
            && listed.mission == self.mission.name
            && listed.mode == self.config.mode.unwrap_or(self.mission.on_unknown).name()
    }
}

impl Pods {
    /// The pods of the configured node (or `NODE_NAME`'s); nothing is
    /// watched before [`Pods::start`].
    pub fn new(config: &KubernetesConfig, file: &Path) -> Result<Pods, String> {
        if !cfg!(feature = "pods") {
            return Err(
                "this pincer is built without the `pods` feature, which watches the Kubernetes API"
                    .to_owned(),
            );
        }
        let node = config.node_name(file)?;
        let refused = Mission::parse(REFUSED, Path::new("pincer.dev/mission"))
            .map_err(|error| format!("the mission of refused pods: {error}"))?;
        Ok(Pods {
            config: config.clone(),
            node,
            cache: Arc::default(),
            changed: Arc::new(Notify::new()),
            missions: HashMap::new(),
            refused,
        })
    }

    /// Starts watching the node's pods on the current runtime.
    pub fn start(&self) {
        #[cfg(feature = "pods")]
        tokio::spawn(watch::watch(
            self.config.api.clone(),
            self.node.clone(),
            Arc::clone(&self.cache),
            Arc::clone(&self.changed),
        ));
        tracing::info!(node = %self.node, "watching this node's pods");
    }

    /// Woken when the cache changes (a change made while nobody waits is
    /// kept for the next wait).
    pub fn changes(&self) -> Arc<Notify> {
        Arc::clone(&self.changed)
    }

    /// Waits until the first complete list of the node's pods came.
    pub async fn synced(&self) {
        loop {
            let notified = self.changed.notified();
            if self.cache.lock().expect("the pod cache").synced {
                // Not consumed: the scan that follows covers it.
                self.changed.notify_one();
                return;
            }
            notified.await;
        }
    }

    /// A new configuration: the missions are read again; the node and the
    /// API server stay until the next start.
    pub fn reconfigure(&mut self, config: &KubernetesConfig) {
        if config.node != self.config.node || config.api != self.config.api {
            tracing::warn!(
                "kubernetes.node and kubernetes.api changes take effect at the next start"
            );
        }
        self.config.missions.clone_from(&config.missions);
        self.config.kubepods.clone_from(&config.kubepods);
        self.missions.clear();
    }

    /// The kubelet's parent cgroup, relative to the cgroup root: new
    /// cgroups below it are held until decided.
    pub fn kubepods(&self) -> &Path {
        &self.config.kubepods
    }

    /// Whether a container cgroup's pod is not known yet (the first list
    /// has not come, or the watch has not brought the pod): what it is
    /// cannot be decided yet. The status is not waited for: the runtime
    /// creates the cgroup before the kubelet can report the container.
    pub fn waits(&self, relative: &Path) -> bool {
        let Some(cgroup) = cgroups::parse(relative, &self.config.kubepods) else {
            return false;
        };
        let cache = self.cache.lock().expect("the pod cache");
        !cache.synced || !cache.pods.contains_key(&cgroup.pod_uid)
    }

    /// The agent a cgroup (by its path relative to the cgroup root) is, as
    /// a container of an annotated pod of this node; `None` when it is no
    /// such container.
    pub fn agent_for(&mut self, relative: &Path) -> Option<PodAgent> {
        let cgroup = cgroups::parse(relative, &self.config.kubepods)?;
        let (pod, container) = {
            let cache = self.cache.lock().expect("the pod cache");
            let pod = cache.pods.get(&cgroup.pod_uid)?;
            let container = pod
                .containers
                .iter()
                .find(|(runtime, id, _)| {
                    *id == cgroup.container_id
                        && (runtime.is_none()
                            || cgroup.runtime.is_none()
                            || *runtime == cgroup.runtime)
                })
                .map(|(_, _, name)| name.clone());
            (pod.clone(), container)
        };
        let name = format!(
            "{}/{}/{}",
            pod.namespace,
            pod.name,
            container.clone().unwrap_or_else(|| {
                // The sandbox, or a container not reported yet.
                format!(
                    "({})",
                    &cgroup.container_id[..cgroup.container_id.len().min(12)]
                )
            })
        );
        let Ok(marking) = pod.marking.as_ref()? else {
            return Some(self.refused(name, relative));
        };
        let mission_name = marking.mission_of(container.as_deref())?;
        let file = self.config.missions.join(format!("{mission_name}.toml"));
        let loaded = self
            .missions
            .entry(mission_name.to_owned())
            .or_insert_with(|| {
                Mission::from_file(&file).map_err(|error| {
                    let message = format!("{:#}", anyhow::Error::new(error));
                    tracing::error!(
                        mission = %file.display(),
                        error = %message,
                        "a pod's mission does not load: its containers are confined with nothing granted"
                    );
                    message
                })
            });
        let Ok(mission) = loaded.clone() else {
            return Some(self.refused(name, relative));
        };
        Some(PodAgent {
            config: agent_config(name, relative, file, marking.mode)?,
            mission,
        })
    }

    /// Nothing granted, refused at once.
    fn refused(&self, name: String, relative: &Path) -> PodAgent {
        PodAgent {
            config: agent_config(
                name,
                relative,
                PathBuf::new(),
                Some(pincer_model::mission::Mode::Enforce),
            )
            .expect("a cgroup below kubepods is a plain pattern"),
            mission: self.refused.clone(),
        }
    }
}

fn agent_config(
    name: String,
    relative: &Path,
    mission: PathBuf,
    mode: Option<pincer_model::mission::Mode>,
) -> Option<AgentConfig> {
    Some(AgentConfig {
        name,
        cgroup: CgroupPattern::parse(relative.to_str()?).ok()?,
        mission,
        mode,
        // The runtime sets the container up in its cgroup (mounts,
        // capabilities) before it executes the container's command.
        from_exec: true,
        number: 0,
        line: 0,
    })
}

/// Puts a pod into `pods`; a wrong annotation is logged when it first
/// shows.
fn insert(pods: &mut HashMap<String, PodEntry>, uid: String, entry: PodEntry) {
    if let Some(Err(why)) = &entry.marking {
        let before = pods.get(&uid).and_then(|old| old.marking.as_ref());
        if before != entry.marking.as_ref() {
            tracing::error!(
                pod = %format!("{}/{}", entry.namespace, entry.name),
                error = %why,
                "a pod's annotation is wrong: its containers are confined with nothing granted"
            );
        }
    }
    pods.insert(uid, entry);
}
