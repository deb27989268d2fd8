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
//! | an agent pattern matches it          | confines it with the agent's mission, then continues its held tasks    |
//! | ... but its mission cannot be loaded | keeps it held (its tasks stay stopped) and logs why at every scan |
//! | a container of an annotated pod (`[kubernetes]`) | confines it with the pod's mission (from the container's first exec), then continues its tasks |
//! | a container whose pod the watch has not brought yet | keeps it held, up to 30 s, then lets it go |
//! | no pattern matches it, or it is gone | lets it go, then continues its held tasks             |
//!
//! A watched parent that does not exist yet is watched from the first scan
//! that finds it: create agents' parent cgroups (systemd slices do) before
//! their agents.
//!
//! [`CgroupPattern::literal_parent`]: super::config::CgroupPattern::literal_parent

use std::{
    fs,
    os::unix::fs::MetadataExt,
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
        for (id, relative) in held {
            if let Some(confined) = self.confined.get(&id) {
                self.held_since.remove(&id);
                let confined = confined.listed.clone();
                let continued = continue_held(&self.service.twin().forget_held_tasks(id)?);
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
            let continued = continue_held(&self.service.twin().forget_held_tasks(id)?);
            tracing::debug!(cgroup = ?relative, continued, "let a held cgroup go: no agent's");
        }
        Ok(())
    }
}

/// Continues the held threads `tids` (the kernel's pending entries of a
/// held cgroup, just removed); how many were still there. `SIGCONT` to a
/// thread continues its whole process, which stopped with it; a process of
/// the cgroup stopped for another reason (job control) is left stopped.
/// Sent after the entry is gone, it also cancels a stop the hook raised
/// that was not delivered yet: the thread then retries its call at once.
fn continue_held(tids: &[u32]) -> usize {
    tids.iter()
        .filter_map(|&tid| i32::try_from(tid).ok())
        .filter(|&tid| signal::kill(Pid::from_raw(tid), signal::SIGCONT).is_ok())
        .count()
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    /// Whether a thread of the process is stopped (`T` in its `stat`).
    fn stopped(pid: i32) -> bool {
        fs::read_dir(format!("/proc/{pid}/task"))
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .any(|task| {
                fs::read(task.path().join("stat"))
                    .ok()
                    .and_then(|stat| crate::procfs::stat_state(&stat))
                    == Some(b'T')
            })
    }

    fn wait_until(what: &str, done: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !done() {
            assert!(Instant::now() < deadline, "{what}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn only_the_held_threads_are_continued() {
        let spawn = || {
            std::process::Command::new("sleep")
                .arg("30")
                .spawn()
                .unwrap()
        };
        // One held (its entry named it), one stopped by job control.
        let (mut held, mut other) = (spawn(), spawn());
        for child in [&held, &other] {
            let pid = child.id() as i32;
            signal::kill(Pid::from_raw(pid), signal::SIGSTOP).unwrap();
            wait_until("stopped", || stopped(pid));
        }
        assert_eq!(continue_held(&[held.id()]), 1);
        wait_until("the held one continued", || !stopped(held.id() as i32));
        // Long enough for a signal sent to it to have been delivered.
        std::thread::sleep(Duration::from_millis(200));
        assert!(stopped(other.id() as i32), "the other stays stopped");
        for child in [&mut held, &mut other] {
            child.kill().unwrap();
            child.wait().unwrap();
        }
        // A thread that is gone counts for nothing.
        assert_eq!(continue_held(&[held.id()]), 0);
    }
}
