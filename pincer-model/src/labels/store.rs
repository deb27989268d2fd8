//! Labels that outlive the programs: a sealed snapshot of the labels map in
//! pincer's state directory, written as a run or the daemon ends and put
//! back when one starts, so what an agent made stays evidence across a
//! reboot.
//!
//! Only labels the programs wrote with the inode's generation are kept:
//! they name their object by (device, inode, generation), and the programs
//! compare the generation, so a saved label never passes to another file
//! that reuses the inode number. The others (policy places and sources,
//! found by path) are labelled again whenever a mission is loaded.
//!
//! The snapshot is sealed with HMAC-SHA256 under a key only root reads
//! (`state.key` beside it): a snapshot changed, or copied from another
//! host, is refused, never trusted. What the map holds already wins over
//! what the snapshot says: restoring adds only labels the map lacks.

use std::{
    fs,
    io::{self, Write},
    os::unix::fs::{OpenOptionsExt, PermissionsExt},
    path::{Path, PathBuf},
};

use hmac::{Hmac, Mac};
use pincer_common::{Label, ObjectKey, Origin, Origins};
use sha2::Sha256;

/// The snapshot's file name in the state directory.
pub const SNAPSHOT: &str = "labels.json";
/// The revocation counters' file name in the state directory.
pub const REVOCATIONS: &str = "revocations.json";
/// The sealing key's file name in the state directory.
pub const KEY: &str = "state.key";

/// Why the snapshot could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A file could not be read or written.
    #[error("{}: {source}", .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// The seal does not match the content: changed, or from another host.
    #[error(
        "{}: not sealed by this host's key ({}): refusing to trust it (remove it to start without what it saved)",
        .path.display(),
        .key.display()
    )]
    Unsealed {
        /// The snapshot.
        path: PathBuf,
        /// The key.
        key: PathBuf,
    },
    /// The kernel holds a higher revocation counter than the sealed file:
    /// the file was restored from an earlier copy.
    #[error(
        "{}: the revocation counter of {source_path} is {saved} here but {kernel} in the kernel: the file was restored from an earlier copy; refusing to trust it",
        .path.display()
    )]
    RolledBack {
        /// The file.
        path: PathBuf,
        /// The source.
        source_path: String,
        /// Its counter in the file.
        saved: u32,
        /// Its counter in the kernel.
        kernel: u32,
    },
    /// The content is not a snapshot.
    #[error("{}: line {line}: {message}", .path.display())]
    Malformed {
        /// The snapshot.
        path: PathBuf,
        /// The line.
        line: usize,
        /// What is wrong.
        message: String,
    },
}

/// The state directory's snapshot of labels.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
}

/// One saved label: device, inode, authority, flags, generation, taint,
/// agent, and the sources it was derived from as `[source, stamp]` pairs
/// by position ([`pincer_common::Origins`]).
type Entry = (
    u64,
    u64,
    u32,
    u32,
    u32,
    u32,
    u64,
    [[u32; 2]; pincer_common::MAX_ORIGINS],
);

/// A label as a snapshot of an earlier pincer saved it, with one source
/// and its stamp: read back as a set of that one.
type EarlierEntry = (u64, u64, u32, u32, u32, u32, u64, u32, u32);

/// Either form, as the snapshot holds it.
#[derive(serde::Deserialize)]
#[serde(untagged)]
enum Stored {
    Now(Entry),
    Earlier(EarlierEntry),
}

impl Store {
    /// The snapshot in `dir`.
    pub fn at(dir: &Path) -> Store {
        Store {
            dir: dir.to_owned(),
        }
    }

    /// The revocation counters' file.
    pub fn revocations_path(&self) -> PathBuf {
        self.dir.join(REVOCATIONS)
    }

    fn snapshot(&self) -> PathBuf {
        self.dir.join(SNAPSHOT)
    }

    fn key_path(&self) -> PathBuf {
        self.dir.join(KEY)
    }

    /// The sealing key, made (32 random bytes, mode 0600, in a directory of
    /// mode 0700) when there is none.
    fn key(&self) -> Result<Vec<u8>, StoreError> {
        let path = self.key_path();
        let io = |source| StoreError::Io {
            path: path.clone(),
            source,
        };
        match fs::read(&path) {
            Ok(key) if !key.is_empty() => return Ok(key),
            Ok(_) => {}
            Err(error) if error.kind() == io::ErrorKind::NotFound => {}
            Err(error) => return Err(io(error)),
        }
        fs::create_dir_all(&self.dir).map_err(|source| StoreError::Io {
            path: self.dir.clone(),
            source,
        })?;
        fs::set_permissions(&self.dir, fs::Permissions::from_mode(0o700)).map_err(|source| {
            StoreError::Io {
                path: self.dir.clone(),
                source,
            }
        })?;
        let mut key = vec![0u8; 32];
        getrandom::fill(&mut key).map_err(|e| io(io::Error::other(e.to_string())))?;
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(io)?;
        file.write_all(&key)
            .and_then(|()| file.sync_all())
            .map_err(io)?;
        Ok(key)
    }

    fn seal(key: &[u8], body: &[u8]) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
        mac.update(body);
        mac
    }

    /// The body of a sealed file in the state directory: `None` when it
    /// does not exist; an error when its seal does not match.
    fn read_sealed(&self, name: &str, what: &str) -> Result<Option<String>, StoreError> {
        let path = self.dir.join(name);
        let text = match fs::read_to_string(&path) {
            Ok(text) => text,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(StoreError::Io { path, source }),
        };
        let malformed = |line, message: String| StoreError::Malformed {
            path: path.clone(),
            line,
            message,
        };
        let mut lines = text.lines();
        let (Some(body), Some(seal), None) = (lines.next(), lines.next(), lines.next()) else {
            return Err(malformed(
                1,
                format!("expected two lines: the {what} and their seal"),
            ));
        };
        let seal =
            hex::decode(seal).map_err(|_| malformed(2, "the seal is not hexadecimal".into()))?;
        if Self::seal(&self.key()?, body.as_bytes())
            .verify_slice(&seal)
            .is_err()
        {
            return Err(StoreError::Unsealed {
                path: path.clone(),
                key: self.key_path(),
            });
        }
        Ok(Some(body.to_owned()))
    }

    /// Replaces a sealed file of the state directory; written to a new
    /// file first, so a crash leaves the old one or the new one.
    fn write_sealed(&self, name: &str, body: &str) -> Result<(), StoreError> {
        let key = self.key()?;
        let seal = hex::encode(Self::seal(&key, body.as_bytes()).finalize().into_bytes());
        let path = self.dir.join(name);
        let io = |source| StoreError::Io {
            path: path.clone(),
            source,
        };
        let mut file = tempfile::NamedTempFile::new_in(&self.dir).map_err(io)?;
        writeln!(file, "{body}\n{seal}")
            .and_then(|()| file.as_file().sync_all())
            .map_err(io)?;
        file.persist(&path).map_err(|e| io(e.error))?;
        Ok(())
    }

    /// The revocation counters and the labels, each file's seal checked:
    /// a run or the daemon reads them before it spends time loading the
    /// programs, so a changed file is refused before rather than after, and
    /// puts back what it read, not a file read again later.
    pub fn read(&self) -> Result<Saved, StoreError> {
        Ok(Saved {
            revocations: self.revocations()?,
            labels: self.load()?,
            revocations_path: self.revocations_path(),
        })
    }

    /// The saved labels: none when there is no snapshot yet.
    pub fn load(&self) -> Result<Vec<(ObjectKey, Label)>, StoreError> {
        let Some(body) = self.read_sealed(SNAPSHOT, "labels")? else {
            return Ok(Vec::new());
        };
        let saved: Vec<Stored> =
            serde_json::from_str(&body).map_err(|error| StoreError::Malformed {
                path: self.snapshot(),
                line: 1,
                message: format!("not a list of labels: {error}"),
            })?;
        Ok(saved
            .into_iter()
            .map(|stored| {
                let (dev, ino, authority, flags, generation, taint, agent, origins) = match stored {
                    Stored::Now((dev, ino, authority, flags, generation, taint, agent, at)) => {
                        let mut origins = Origins::NONE;
                        for (origin, [source, stamp]) in origins.at.iter_mut().zip(at) {
                            *origin = Origin { source, stamp };
                        }
                        (
                            dev, ino, authority, flags, generation, taint, agent, origins,
                        )
                    }
                    Stored::Earlier((
                        dev,
                        ino,
                        authority,
                        flags,
                        generation,
                        taint,
                        agent,
                        source,
                        stamp,
                    )) => {
                        let origins = Origins::one(source, stamp);
                        (
                            dev, ino, authority, flags, generation, taint, agent, origins,
                        )
                    }
                };
                (
                    ObjectKey { dev, ino },
                    Label {
                        authority,
                        flags,
                        generation,
                        taint,
                        agent,
                        origins,
                    },
                )
            })
            .collect())
    }

    /// Replaces the snapshot with the labels worth keeping of `labels`
    /// (those with a generation), sealed.
    pub fn save(&self, labels: &[(ObjectKey, Label)]) -> Result<usize, StoreError> {
        let mut kept: Vec<Entry> = labels
            .iter()
            .filter(|(_, label)| label.generation != 0)
            .map(|(k, l)| {
                (
                    k.dev,
                    k.ino,
                    l.authority,
                    l.flags,
                    l.generation,
                    l.taint,
                    l.agent,
                    l.origins.at.map(|o| [o.source, o.stamp]),
                )
            })
            .collect();
        kept.sort_unstable();
        let body = serde_json::to_string(&kept).expect("numbers serialize");
        self.write_sealed(SNAPSHOT, &body)?;
        Ok(kept.len())
    }

    /// The sources' revocation counters (see [`Revoked`]): none when no
    /// source was ever revoked.
    pub fn revocations(&self) -> Result<Vec<Revoked>, StoreError> {
        let Some(body) = self.read_sealed(REVOCATIONS, "revocations")? else {
            return Ok(Vec::new());
        };
        serde_json::from_str(&body).map_err(|error| StoreError::Malformed {
            path: self.dir.join(REVOCATIONS),
            line: 1,
            message: format!("not a list of revocations: {error}"),
        })
    }

    /// Replaces the sources' revocation counters, sealed.
    pub fn save_revocations(&self, revoked: &[Revoked]) -> Result<(), StoreError> {
        let mut revoked = revoked.to_vec();
        revoked.sort_by_key(|r| r.source);
        let body = serde_json::to_string(&revoked).expect("revocations serialize");
        self.write_sealed(REVOCATIONS, &body)
    }
}

/// What the state directory holds ([`Store::read`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Saved {
    /// The sources' revocation counters.
    pub revocations: Vec<Revoked>,
    /// The labels of the snapshot.
    pub labels: Vec<(ObjectKey, Label)>,
    /// The counters' file, for messages.
    pub revocations_path: PathBuf,
}

/// A source's revocation counter: how many times `pincer label revoke`
/// revoked it. Objects derived from it before the last revocation carry a
/// lower counter ([`pincer_common::Origin::stamp`]) and are refused.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Revoked {
    /// Its id ([`pincer_common::source_id`] of `path`).
    pub source: u32,
    /// The counter.
    pub counter: u32,
    /// The source's path, as revoked.
    pub path: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn label(generation: u32) -> Label {
        Label {
            authority: pincer_common::authority::EVIDENCE,
            flags: pincer_common::label_flags::AGENT_MADE,
            generation,
            taint: 1,
            agent: 99,
            origins: Origins::one(5, 2),
        }
    }

    #[test]
    fn a_snapshot_comes_back_as_saved_without_labels_that_have_no_generation() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::at(&dir.path().join("state"));
        assert!(store.load().unwrap().is_empty(), "nothing saved yet");
        let a = (ObjectKey { dev: 8, ino: 2 }, label(7));
        let b = (ObjectKey { dev: 8, ino: 3 }, label(0));
        assert_eq!(store.save(&[a, b]).unwrap(), 1);
        assert_eq!(store.load().unwrap(), [a]);
        let mode = fs::metadata(store.key_path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn a_snapshot_an_earlier_pincer_saved_with_one_source_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::at(&dir.path().join("state"));
        store
            .write_sealed(SNAPSHOT, "[[8,2,1,1,7,1,99,5,2],[8,3,2,0,9,0,0,0,0]]")
            .unwrap();
        let loaded = store.load().unwrap();
        assert_eq!(loaded[0], (ObjectKey { dev: 8, ino: 2 }, label(7)));
        assert!(loaded[1].1.origins.is_empty());
        // And it is saved back in the form of now.
        store.save(&loaded).unwrap();
        assert_eq!(store.load().unwrap(), loaded);
    }

    #[test]
    fn a_changed_or_foreign_snapshot_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::at(dir.path());
        store
            .save(&[(ObjectKey { dev: 8, ino: 2 }, label(7))])
            .unwrap();
        let path = store.snapshot();
        let saved = fs::read_to_string(&path).unwrap();
        // An agent-made label turned into a policy one.
        assert!(store.read().is_ok());
        fs::write(&path, saved.replacen("[[8,2,1,1,", "[[8,2,3,2,", 1)).unwrap();
        assert!(matches!(store.load(), Err(StoreError::Unsealed { .. })));
        assert!(matches!(store.read(), Err(StoreError::Unsealed { .. })));
        // Sealed, but under another host's key.
        let other = tempfile::tempdir().unwrap();
        Store::at(other.path())
            .save(&[(ObjectKey { dev: 8, ino: 2 }, label(7))])
            .unwrap();
        fs::copy(other.path().join(SNAPSHOT), &path).unwrap();
        let error = store.load().unwrap_err();
        assert!(
            error.to_string().contains("not sealed by this host's key"),
            "{error}"
        );
        fs::write(&path, "garbage").unwrap();
        let error = store.load().unwrap_err();
        assert!(error.to_string().contains("line 1"), "{error}");
    }
}
