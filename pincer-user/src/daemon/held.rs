//! New cgroups below the daemon's agent cgroups are held by the kernel from
//! their first instant until the daemon has decided what they are (see the
//! programs' `held` module), so not one instruction of an agent runs before
//! its mission is in force, however late the scan comes.
//!
//! The daemon watches, for every `[[agent]]` pattern, the deepest cgroup
//! every match lies below ([`CgroupPattern::literal_parent`]) that exists,
//! and with `[kubernetes]` the kubelet's parent cgroup;
//! `pincer run`'s own directory below it is exempt (each run confines its
//! own cgroup). A report of a held task, or the periodic scan, makes the
//! daemon decide:
//!
//! | the held cgroup                      | what the daemon does                                   |
//! |--------------------------------------|--------------------------------------------------------|
//! | an agent pattern matches it          | confines it with the agent's mission, then continues its stopped tasks |
//! | ... but its mission cannot be loaded | keeps it held (its tasks stay stopped) and logs why at every scan |
//! | a container of an annotated pod (`[kubernetes]`) | confines it with the pod's mission (from the container's first exec), then continues its tasks |
//! | a container whose pod the watch has not brought yet | keeps it held, up to 30 s, then lets it go |
//! | no pattern matches it, or it is gone | lets it go, then continues its stopped tasks          |
//!
//! A watched parent that does not exist yet is watched from the first scan
//! that finds it: create agents' parent cgroups (systemd slices do) before
//! their agents.
//!
//! [`CgroupPattern::literal_parent`]: super::config::CgroupPattern::literal_parent

use std::{
    fs,
    os::unix::fs::MetadataExt,
    path::Path,
    time::{Duration, Instant},
};

use nix::{sys::signal, unistd::Pid};
use pincer_common::watch;

use super::{Daemon, DaemonError};
use crate::cgroup::PINCER_DIR;

/// How long a held container cgroup whose pod the watch has not brought
/// waits for it before it is let go as no agent's: the pod reaches the
/// kubelet through the same API, so it comes within moments unless the
/// API server is out of reach.
const POD_WAIT: Duration = Duration::from_secs(30);

impl Daemon {
    /// Writes the cgroups below which new ones are held, when they changed.
    pub(super) fn watch(&mut self) -> Result<(), DaemonError> {
        let root = self.config.daemon.cgroup_root.clone();
        let mut watched: Vec<(u64, u32)> = Vec::new();
        let kubepods = self.pods.as_ref().map(|pods| pods.kubepods().to_owned());
        let parents = self
            .config
            .agents
            .iter()
            .map(|agent| (agent.name.clone(), agent.cgroup.literal_parent()))
            .chain(kubepods.map(|kubepods| ("pods".to_owned(), kubepods)));
        for (agent, parent) in parents {
            let parent = root.join(parent);
            match fs::metadata(&parent) {
                Ok(metadata) if metadata.is_dir() => watched.push((metadata.ino(), watch::HOLD)),
                _ => {
                    if self.unwatched.insert(parent.clone()) {
                        tracing::warn!(agent = %agent, parent = %parent.display(),
                            "the agent's parent cgroup does not exist: its cgroups are found by the scan until it does");
                    }
                }
            }
        }
        if !watched.is_empty() {
            // Made now, if need be, so that it is exempt before the first
            // run's cgroup appears below it.
            let exempt = root.join(PINCER_DIR);
            let _ = fs::create_dir(&exempt);
            if let Ok(metadata) = fs::metadata(&exempt) {
                watched.push((metadata.ino(), watch::EXEMPT));
            }
        }
        watched.sort_unstable();
        watched.dedup_by_key(|(id, _)| *id);
        if watched != self.watched {
            self.service.twin().watch(&watched)?;
            tracing::info!(
                watched = watched.iter().filter(|(_, w)| *w == watch::HOLD).count(),
                "new cgroups below the agents' parents are held until decided"
            );
            self.watched = watched;
        }
        Ok(())
    }

    /// After a scan has confined what it found: decides the held cgroups
    /// (`held`, by id, with their paths relative to the cgroup root when
    /// the scan saw them) and continues their stopped tasks.
    pub(super) fn decide_held(
        &mut self,
        held: Vec<(u64, Option<std::path::PathBuf>)>,
    ) -> Result<(), DaemonError> {
        let root = self.config.daemon.cgroup_root.clone();
        for (id, relative) in held {
            if let Some(confined) = self.confined.get(&id) {
                self.held_since.remove(&id);
                let confined = confined.listed.clone();
                self.service.twin().forget_held_tasks(id)?;
                let continued = relative
                    .as_deref()
                    .map_or(0, |relative| continue_stopped(&root.join(relative)));
                tracing::info!(agent = %confined.agent, cgroup = %confined.cgroup, continued,
                    "a held cgroup was confined before its tasks went on");
                continue;
            }
            let matched = relative
                .as_deref()
                .is_some_and(|relative| self.config.agent_for(relative).is_some());
            if matched {
                // Its confinement failed and was logged: it stays held
                // rather than run unconfined.
                continue;
            }
            let since = *self.held_since.entry(id).or_insert_with(Instant::now);
            let waits = relative.as_deref().is_some_and(|relative| {
                self.pods.as_ref().is_some_and(|pods| pods.waits(relative))
            });
            if waits {
                if since.elapsed() < POD_WAIT {
                    continue;
                }
                tracing::warn!(cgroup = ?relative, waited = ?POD_WAIT,
                    "no pod of this node has the held container's uid: let go as no agent");
            }
            self.held_since.remove(&id);
            self.service.twin().let_go(id)?;
            self.service.twin().forget_held_tasks(id)?;
            if let Some(relative) = relative {
                let continued = continue_stopped(&root.join(&relative));
                tracing::debug!(cgroup = %relative.display(), continued, "let a held cgroup go: no agent's");
            }
        }
        Ok(())
    }
}

/// Continues the processes of a cgroup that have a stopped thread; how
/// many. A stopped process continued that was stopped for another reason
/// (job control) goes on as after any `SIGCONT`.
fn continue_stopped(cgroup: &Path) -> usize {
    let Ok(procs) = fs::read_to_string(cgroup.join("cgroup.procs")) else {
        return 0;
    };
    procs
        .lines()
        .filter_map(|line| line.trim().parse::<i32>().ok())
        .filter(|&pid| has_stopped_thread(pid))
        .filter(|&pid| signal::kill(Pid::from_raw(pid), signal::SIGCONT).is_ok())
        .count()
}

/// Whether a thread of the process is stopped (`T` in its `stat`).
fn has_stopped_thread(pid: i32) -> bool {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.filter_map(Result::ok).any(|task| {
        fs::read(task.path().join("stat"))
            .ok()
            .and_then(|stat| state(&stat))
            == Some(b'T')
    })
}

/// The state field of a `stat` line: the byte after the `)` that ends
/// `comm` and a space.
fn state(stat: &[u8]) -> Option<u8> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    stat.get(close + 2).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_follows_the_last_parenthesis() {
        assert_eq!(state(b"42 (sh) T 1 42 42 0"), Some(b'T'));
        assert_eq!(state(b"42 (a) b) (c) S 1"), Some(b'S'));
        assert_eq!(state(b"42 (sh)"), None);
    }

    #[test]
    fn a_stopped_child_is_continued_and_a_running_one_left() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        signal::kill(Pid::from_raw(pid), signal::SIGSTOP).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !has_stopped_thread(pid) {
            assert!(std::time::Instant::now() < deadline, "never stopped");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("cgroup.procs"), format!("{pid}\n")).unwrap();
        assert_eq!(continue_stopped(dir.path()), 1);
        while has_stopped_thread(pid) {
            assert!(std::time::Instant::now() < deadline, "never continued");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(continue_stopped(dir.path()), 0);
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
