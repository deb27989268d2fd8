//! The journal of parked events (`pincer daemon` only): each parked event is
//! kept as `<dir>/<tid>` (its raw bytes) until its verdict, so a daemon that
//! starts after another died can ask again about every request still
//! parked in the kernel, with its path.

use std::{
    collections::HashMap,
    fs,
    path::{Path, PathBuf},
};

use pincer_common::AccessEvent;
use pincer_model::events;

/// Where parked events wait for their verdict.
#[derive(Clone, Debug)]
pub struct Journal {
    dir: PathBuf,
}

impl Journal {
    /// A journal in `dir` (which must exist).
    pub fn new(dir: PathBuf) -> Journal {
        Journal { dir }
    }

    /// Keeps a parked event until [`Journal::forget`].
    pub fn keep(&self, event: &AccessEvent) {
        // SAFETY: `AccessEvent` is plain old data; its bytes are read, not
        // interpreted.
        let bytes = unsafe {
            std::slice::from_raw_parts(
                (event as *const AccessEvent).cast::<u8>(),
                size_of::<AccessEvent>(),
            )
        };
        let path = self.entry(event.pid);
        if let Err(error) = fs::write(&path, bytes) {
            tracing::warn!(%error, path = %path.display(), "cannot keep a parked event");
        }
    }

    /// Forgets the event of a thread (answered, or gone).
    pub fn forget(&self, tid: u32) {
        let _ = fs::remove_file(self.entry(tid));
    }

    /// The events a previous daemon kept, by thread id.
    pub fn read(&self) -> HashMap<u32, AccessEvent> {
        read(&self.dir)
    }

    fn entry(&self, tid: u32) -> PathBuf {
        self.dir.join(tid.to_string())
    }
}

fn read(dir: &Path) -> HashMap<u32, AccessEvent> {
    let Ok(entries) = fs::read_dir(dir) else {
        return HashMap::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let tid = entry.file_name().to_str()?.parse().ok()?;
            let event = events::parse(&fs::read(entry.path()).ok()?)?;
            (event.pid == tid).then_some((tid, event))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_kept_until_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::new(dir.path().to_owned());
        // SAFETY: plain old data; zeroes are a valid event.
        let mut event: AccessEvent = unsafe { std::mem::zeroed() };
        event.pid = 41;
        event.request_id = 9;
        journal.keep(&event);
        event.pid = 42;
        journal.keep(&event);
        // A file whose name is not the event's thread is not an entry.
        fs::copy(dir.path().join("42"), dir.path().join("43")).unwrap();
        let kept = journal.read();
        assert_eq!(kept.len(), 2);
        assert_eq!(kept[&41].request_id, 9);
        journal.forget(41);
        assert_eq!(journal.read().keys().collect::<Vec<_>>(), [&42]);
    }
}
