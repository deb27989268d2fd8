//! Replay: a daemon that starts asks again about every request still parked
//! in the kernel, left by a daemon that died.

use std::{fs, os::unix::fs::MetadataExt, path::Path};

use pincer_common::{AccessEvent, Pending, event_flags, verdict};
use pincer_model::paths;

use super::Daemon;
use crate::{cgroup, twin::Journal};

impl Daemon {
    /// Asks again about every request still parked in the kernel: from the
    /// journal's copy of its event, or, when the daemon died before writing
    /// it, from what the kernel and `/proc` still tell.
    pub(super) fn replay(&mut self) {
        let journal = Journal::new(paths::journal_dir(&self.config.daemon.socket));
        let kept = journal.read();
        let twin = self.service.twin();
        let pending = twin.kernel_pending().unwrap_or_default();
        let mut replayed = 0;
        for (tid, parked) in pending {
            // A task of a held cgroup is no request: the scan continued it.
            if parked.id == 0 {
                continue;
            }
            if !Path::new(&format!("/proc/{tid}")).exists() {
                let _ = twin.forget_pending(tid);
                continue;
            }
            let event = kept
                .get(&tid)
                .filter(|e| e.request_id == parked.id)
                .copied()
                .or_else(|| rebuild_event(tid, &parked));
            match event {
                Some(event) => {
                    if let Err(error) = twin.on_parked(event) {
                        tracing::warn!(%error, tid, "answering a request parked before this daemon started");
                    }
                    replayed += 1;
                }
                // Its cgroup cannot be read: it is exiting.
                None => {
                    let _ = twin.forget_pending(tid);
                }
            }
        }
        for tid in kept.keys() {
            if !twin.waiting().any(|r| r.tid == *tid) {
                journal.forget(*tid);
            }
        }
        if replayed > 0 {
            tracing::info!(
                replayed,
                "asked again about requests parked before this daemon started"
            );
        }
    }
}

/// An event for a parked request whose journal entry is missing: what the
/// kernel's pending table and `/proc` still tell. The path is unknown; the
/// voters see the inode.
fn rebuild_event(tid: u32, parked: &Pending) -> Option<AccessEvent> {
    let cgroup = cgroup::proc_cgroup(tid).ok()?;
    let root = cgroup::cgroup2_mount().ok()?;
    let cgroup_id = fs::metadata(root.join(cgroup.trim_start_matches('/')))
        .ok()?
        .ino();
    let status = fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    let tgid = status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())?;
    // SAFETY: `AccessEvent` is plain old data; all zeroes is a valid value.
    let mut event: AccessEvent = unsafe { std::mem::zeroed() };
    event.cgroup_id = cgroup_id;
    event.dev = parked.dev;
    event.ino = parked.ino;
    event.request_id = parked.id;
    event.name_hash = parked.name_hash;
    event.pid = tid;
    event.tgid = tgid;
    event.ops = parked.ops;
    event.hook = parked.hook;
    event.verdict = verdict::PARKED;
    // Whether the agent had a level when it parked is not kept: the twin
    // reads the taint map, which says what it has now.
    event.flags = event_flags::TAINTED;
    if parked.name_hash != 0 {
        event.flags |= event_flags::NEW_NAME;
    }
    Some(event)
}

#[cfg(test)]
mod tests {
    use pincer_common::{hook, ops};

    use super::*;

    #[test]
    fn a_rebuilt_event_has_the_twin_read_the_taint_and_the_executable() {
        let tid = std::process::id();
        let parked = Pending {
            id: 7,
            dev: 1,
            ino: 2,
            name_hash: 3,
            ops: ops::CREATE,
            hook: hook::INODE_CREATE,
        };
        let event = rebuild_event(tid, &parked).expect("our own cgroup can be read");
        assert_eq!((event.pid, event.tgid, event.request_id), (tid, tid, 7));
        assert_eq!(
            event.flags,
            event_flags::TAINTED | event_flags::NEW_NAME,
            "the level it had is not kept: the map is read"
        );
        // No executable named: its path is read.
        assert_eq!(event.exe_ino, 0);
    }
}
