//! Cgroups that `pincer run` registers with the daemon: confined with the
//! run's mission for as long as the run lives, and kept on disk so that a
//! restarted daemon confines them again.

use std::{
    fs,
    os::unix::fs::{FileTypeExt, MetadataExt},
    path::{Component, Path, PathBuf},
};

use pincer_model::{
    audit::{Descriptor, Record},
    config::daemon::{AgentConfig, CgroupPattern},
    control::{ControlResponse, RunOwn},
    mission::{Mission, Mode, RunGrant},
    paths,
};
use serde::{Deserialize, Serialize};

use super::Daemon;
use crate::cgroup::PINCER_DIR;

/// A cgroup `pincer run` registered, as kept for the next daemon.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Registration {
    /// The cgroup's id (its inode), once confined.
    id: u64,
    /// The cgroup, relative to the cgroup root.
    cgroup: String,
    /// The mission file.
    mission: PathBuf,
    /// The mode asked for, if any.
    mode: Option<String>,
    /// The `pincer run` that registered it.
    pid: u32,
    /// Profiles `pincer run --profile` added.
    #[serde(default)]
    profiles: Vec<String>,
    /// What the run made for its command.
    #[serde(default)]
    own: RunOwn,
}

impl Registration {
    /// A registration as `pincer run` (`pid`) asks for it.
    pub(super) fn new(
        cgroup: String,
        mission: PathBuf,
        mode: Option<String>,
        profiles: Vec<String>,
        own: RunOwn,
        pid: u32,
    ) -> Registration {
        Registration {
            id: 0,
            cgroup,
            mission,
            mode,
            pid,
            profiles,
            own,
        }
    }
}

fn error(message: String) -> ControlResponse {
    ControlResponse::Error { message }
}

impl Daemon {
    /// Confines `cgroup` (relative to the cgroup root, directly under
    /// `pincer/`) with the mission file `mission` for the `pincer run`
    /// `caller`, keeps the registration, and audits the `descriptors` its
    /// command starts with.
    pub(super) fn register(
        &mut self,
        mut registration: Registration,
        descriptors: &[Descriptor],
    ) -> ControlResponse {
        let caller = registration.pid;
        let cgroup = registration.cgroup.clone();
        let relative = Path::new(&cgroup);
        // Registered cgroups live under `pincer/`, where no pattern
        // reaches, and nowhere else.
        if !relative.starts_with(PINCER_DIR)
            || relative.components().count() != 2
            || relative
                .components()
                .any(|c| !matches!(c, Component::Normal(_)))
        {
            return error(format!(
                "cannot register {cgroup}: only cgroups directly under {PINCER_DIR}/ can be"
            ));
        }
        let Ok(metadata) = fs::metadata(self.config.daemon.cgroup_root.join(relative)) else {
            return error(format!("cannot register {cgroup}: no such cgroup"));
        };
        let id = metadata.ino();
        if self.confined.contains_key(&id) {
            return error(format!("{cgroup} is confined already"));
        }
        let mode = match registration
            .mode
            .as_deref()
            .map(|name| (name, Mode::from_name(name)))
        {
            None => None,
            Some((_, Some(mode))) => Some(mode),
            Some((other, None)) => return error(format!("unknown mode {other:?}")),
        };
        let run_grants = match run_grants(&registration.own) {
            Ok(grants) => grants,
            Err(message) => return error(format!("cannot register {cgroup}: {message}")),
        };
        let loaded = Mission::from_file(&registration.mission).and_then(|mut mission| {
            mission.add_profiles(&registration.profiles)?;
            Ok(mission)
        });
        let loaded = match loaded {
            Ok(loaded) => loaded,
            Err(e) => return error(format!("{:#}", anyhow::Error::new(e))),
        };
        let Ok(pattern) = CgroupPattern::parse(&cgroup) else {
            return error(format!("cannot register {cgroup}: not a plain cgroup name"));
        };
        let name = relative
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let agent = AgentConfig {
            name: format!("{}/{name}", loaded.name),
            cgroup: pattern,
            mission: registration.mission.clone(),
            mode,
            // `pincer run`'s command is the agent from its first
            // instruction.
            from_exec: false,
            number: 0,
            line: 0,
        };
        if let Err(e) = self.confine_with(id, &cgroup, &agent, &loaded, Some(caller), &run_grants) {
            return error(format!("{:#}", anyhow::Error::new(e)));
        }
        registration.id = id;
        self.save_registration(&registration);
        if !descriptors.is_empty() {
            let record = Record::Descriptors {
                agent: &agent.name,
                fds: descriptors,
            };
            if let Err(e) = self.service.twin().audit(&record) {
                return error(format!("{:#}", anyhow::Error::new(e)));
            }
        }
        // The command cannot signal or trace the `pincer run` that started
        // it, as with a run of its own.
        if let Err(e) = self.service.twin().guard(caller) {
            tracing::warn!(error = %e, pid = caller, "cannot protect the registering process");
        }
        self.publish();
        ControlResponse::Ok {
            message: format!("confined {cgroup} as {}", agent.name),
        }
    }

    /// Releases a cgroup the caller registered.
    pub(super) fn unregister(&mut self, cgroup: &str, caller: u32) -> ControlResponse {
        let Some(id) = self
            .confined
            .iter()
            .find(|(_, c)| c.listed.cgroup == cgroup && c.listed.registered_by == Some(caller))
            .map(|(id, _)| *id)
        else {
            return error(format!("{cgroup} is not registered by the caller"));
        };
        self.confined.remove(&id);
        self.forget_registration(id);
        let _ = self.service.twin().unguard(caller);
        if let Err(e) = self.service.twin().release(id) {
            return error(format!("{:#}", anyhow::Error::new(e)));
        }
        self.publish();
        ControlResponse::Ok {
            message: format!("released {cgroup}"),
        }
    }

    fn registrations_dir(&self) -> PathBuf {
        paths::registrations_dir(&self.config.daemon.socket)
    }

    /// Keeps a registration where the next daemon finds it.
    fn save_registration(&self, registration: &Registration) {
        let dir = self.registrations_dir();
        let path = dir.join(registration.id.to_string());
        let written = fs::create_dir_all(&dir)
            .and_then(|()| fs::write(&path, serde_json::to_vec(registration).unwrap_or_default()));
        if let Err(error) = written {
            tracing::warn!(%error, path = %path.display(), "cannot keep a registration");
        }
    }

    /// Forgets the registration of a cgroup.
    pub(super) fn forget_registration(&self, id: u64) {
        let _ = fs::remove_file(self.registrations_dir().join(id.to_string()));
    }

    /// Confines again the cgroups `pincer run` registered with a previous
    /// daemon. One that cannot be (its mission no longer loads) has its
    /// processes killed rather than left unconfined.
    pub(super) fn restore_registrations(&mut self) {
        let Ok(entries) = fs::read_dir(self.registrations_dir()) else {
            return;
        };
        let root = self.config.daemon.cgroup_root.clone();
        for entry in entries.filter_map(Result::ok) {
            let kept: Option<Registration> = fs::read(entry.path())
                .ok()
                .and_then(|bytes| serde_json::from_slice(&bytes).ok());
            let _ = fs::remove_file(entry.path());
            let Some(kept) = kept else {
                continue;
            };
            let path = root.join(&kept.cgroup);
            if fs::metadata(&path).map(|m| m.ino()).ok() != Some(kept.id) {
                continue;
            }
            // Its descriptors were audited when it first registered.
            let (cgroup, pid) = (kept.cgroup.clone(), kept.pid);
            match self.register(kept, &[]) {
                ControlResponse::Ok { .. } => {
                    tracing::info!(%cgroup, pid, "confined a registered cgroup again");
                }
                response => {
                    tracing::error!(%cgroup, ?response, "cannot confine a registered cgroup again: killing its processes");
                    let _ = fs::write(path.join("cgroup.kill"), "1");
                }
            }
        }
    }
}

/// The grants of what a registering run made for its command: its private
/// temporary directory must be a directory (not a link to one), its
/// terminal a character device.
fn run_grants(own: &RunOwn) -> Result<Vec<RunGrant>, String> {
    let mut grants = Vec::new();
    if let Some(tmp) = &own.tmp {
        let is_dir = tmp.is_absolute() && fs::symlink_metadata(tmp).is_ok_and(|m| m.is_dir());
        if !is_dir {
            return Err(format!("{} is not a directory", tmp.display()));
        }
        grants.push(RunGrant::private_tmp(tmp));
    }
    if let Some(terminal) = &own.terminal {
        let is_device = terminal.is_absolute()
            && fs::metadata(terminal).is_ok_and(|m| m.file_type().is_char_device());
        if !is_device {
            return Err(format!("{} is not a terminal", terminal.display()));
        }
        grants.push(RunGrant::terminal(terminal));
    }
    Ok(grants)
}

/// Whether a registered cgroup is done with: removed, or left empty by a
/// `pincer run` that died without unregistering.
pub(super) fn over(cgroup: &Path, registrant: u32) -> bool {
    if !cgroup.exists() {
        return true;
    }
    let alive = Path::new(&format!("/proc/{registrant}")).exists();
    let populated = fs::read_to_string(cgroup.join("cgroup.events"))
        .is_ok_and(|events| events.lines().any(|l| l == "populated 1"));
    !alive && !populated
}
