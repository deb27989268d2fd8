//! Inspected changes: a repository's git configuration on its way in.
//!
//! git writes `.git/config` by filling `config.lock` and renaming it over
//! the file. The programs park that rename, in enforce mode too
//! (`event_flags::INSPECT`); the twin reads the lock and the current file
//! and decides on the keys that change ([`pincer_model::gitconfig`]). A change of
//! keys that run nothing is answered at once; any other is the owner's
//! (refused in enforce mode, asked in ask mode).
//!
//! What the agent could do between the twin's read and the restarted
//! rename (write the lock again through a descriptor it kept, put another
//! file in its place) must not land. So an allowed change is **sealed**:
//! the twin writes the bytes it read into a file of its own, labels it
//! [`label_flags::SEALED`] (the programs let it be renamed or removed,
//! never changed), renames it over `config.lock`, and pins its verdict to
//! that file ([`pincer_common::Verdict::pin_ino`]): the restarted rename is
//! allowed only if it moves exactly the sealed copy.

use std::{
    io::{Read as _, Write as _},
    os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt},
    path::{Path, PathBuf},
};

use pincer_common::{AccessEvent, Label, ObjectKey, authority, event_flags, label_flags};
use pincer_model::gitconfig::{self, Changes, MAX_BYTES};

use crate::loader::Kernel;

/// The name git writes a configuration through, beside it.
const LOCK: &str = "config.lock";

/// What the twin read for a change: the new configuration, and where it
/// goes.
#[derive(Debug, Clone)]
pub struct Read {
    /// The repository's directory (`.git`).
    dir: PathBuf,
    /// The bytes of `config.lock` as read.
    bytes: Vec<u8>,
    /// Its owner, group and mode, which the sealed copy keeps.
    uid: u32,
    gid: u32,
    mode: u32,
}

/// What an inspection found.
#[derive(Debug)]
pub enum Inspection {
    /// The change is the agent's: only keys that run nothing.
    Agents(Changes, Read),
    /// The change is the owner's, for this reason; what was read, when it
    /// could be, so an owner's allow lands exactly that.
    Owners(String, Option<Read>),
}

/// Inspects the parked change of `event`, whose object's path (the
/// configuration's, escaped) is `path`.
pub fn inspect(event: &AccessEvent, path: &str) -> Inspection {
    let read = match read(event, path) {
        Ok(read) => read,
        Err(why) => return Inspection::Owners(why, None),
    };
    let (read, old) = read;
    match gitconfig::compare(&old, &read.bytes) {
        Ok(changes) => Inspection::Agents(changes, read),
        Err(refused) => Inspection::Owners(refused.to_string(), Some(read)),
    }
}

/// Reads the lock and the current configuration of the change, after
/// checking that the path names the object the kernel parked.
fn read(event: &AccessEvent, path: &str) -> Result<(Read, Vec<u8>), String> {
    // Only a path the kernel named whole and printable is read back.
    if !path.starts_with('/') || path.contains(['\\', pincer_model::escape::CUT]) {
        return Err("its path cannot be read back exactly".to_owned());
    }
    let config = Path::new(path);
    let dir = config
        .parent()
        .ok_or_else(|| "the configuration has no directory".to_owned())?;
    let new_name = event.flags & event_flags::NEW_NAME != 0;
    let parked = if new_name { dir } else { config };
    let meta = std::fs::symlink_metadata(parked)
        .map_err(|e| format!("{} cannot be looked at: {e}", parked.display()))?;
    if identity(&meta) != (event.dev, event.ino) {
        return Err(format!(
            "{} is not the object the kernel parked",
            parked.display()
        ));
    }
    let (bytes, lock_meta) = read_file(&dir.join(LOCK))?;
    if lock_meta.dev() != meta.dev() {
        return Err("the lock is on another file system".to_owned());
    }
    let old = if new_name {
        Vec::new()
    } else {
        read_file(config)?.0
    };
    Ok((
        Read {
            dir: dir.to_owned(),
            bytes,
            uid: lock_meta.uid(),
            gid: lock_meta.gid(),
            mode: lock_meta.permissions().mode() & 0o7777,
        },
        old,
    ))
}

/// The kernel's identity of an object.
fn identity(meta: &std::fs::Metadata) -> (u64, u64) {
    (pincer_common::kernel_dev(meta.dev()), meta.ino())
}

/// A regular file's bytes (up to [`MAX_BYTES`]), without following a link.
fn read_file(path: &Path) -> Result<(Vec<u8>, std::fs::Metadata), String> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| format!("{} cannot be read: {e}", path.display()))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("{} cannot be read: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{} is not a regular file", path.display()));
    }
    let mut bytes = Vec::new();
    file.take(MAX_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{} cannot be read: {e}", path.display()))?;
    if bytes.len() > MAX_BYTES {
        return Err(format!("{} is larger than pincer reads", path.display()));
    }
    Ok((bytes, meta))
}

/// Puts a sealed copy of what was read in place of the lock, and returns
/// its identity, which the verdict pins.
pub fn seal<K: Kernel>(read: &Read, kernel: &mut K) -> Result<ObjectKey, String> {
    let copy = tempfile::Builder::new()
        .prefix(".pincer-config-")
        .tempfile_in(&read.dir)
        .map_err(|e| format!("cannot make the sealed copy: {e}"))?;
    let fail = |what: &str, e: std::io::Error| format!("cannot make the sealed copy ({what}): {e}");
    copy.as_file()
        .write_all(&read.bytes)
        .map_err(|e| fail("write", e))?;
    std::os::unix::fs::fchown(copy.as_file(), Some(read.uid), Some(read.gid))
        .map_err(|e| fail("owner", e))?;
    copy.as_file()
        .set_permissions(std::fs::Permissions::from_mode(read.mode))
        .map_err(|e| fail("mode", e))?;
    let meta = copy.as_file().metadata().map_err(|e| fail("stat", e))?;
    let (dev, ino) = identity(&meta);
    let key = ObjectKey { dev, ino };
    // Sealed before anyone can reach it under the lock's name.
    let label = Label {
        authority: authority::USER,
        flags: label_flags::SEALED,
        generation: pincer_model::labels::generation(copy.path()).unwrap_or(0),
        taint: 0,
        agent: 0,
        origins: pincer_common::Origins::NONE,
    };
    kernel
        .set_labels(&[(key, label)])
        .map_err(|e| format!("cannot seal the copy: {e}"))?;
    copy.persist(read.dir.join(LOCK))
        .map_err(|e| fail("rename", e.error))?;
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::twin::fake::FakeKernel;

    /// A new directory standing for a repository's `.git`, and its real
    /// path (the one the kernel's events name); it is removed when the
    /// first of the two is dropped.
    fn git_dir() -> (tempfile::TempDir, PathBuf) {
        let repo = tempfile::tempdir().unwrap();
        let git = repo.path().canonicalize().unwrap();
        (repo, git)
    }

    fn event_for(path: &Path, new_name: bool) -> AccessEvent {
        let meta = std::fs::symlink_metadata(path).unwrap();
        let (dev, ino) = identity(&meta);
        // SAFETY: plain old data, valid for any bit pattern.
        let mut event: AccessEvent = unsafe { std::mem::zeroed() };
        event.dev = dev;
        event.ino = ino;
        if new_name {
            event.flags = event_flags::NEW_NAME;
        }
        event
    }

    #[test]
    fn an_upstream_is_the_agents_and_its_sealed_copy_takes_the_locks_place() {
        let (_repo, git) = git_dir();
        let config = git.join("config");
        std::fs::write(&config, "[core]\n\tbare = false\n").unwrap();
        std::fs::write(
            git.join(LOCK),
            "[core]\n\tbare = false\n[branch \"fix\"]\n\tremote = origin\n",
        )
        .unwrap();
        let event = event_for(&config, false);
        let Inspection::Agents(changes, read) = inspect(&event, config.to_str().unwrap()) else {
            panic!("refused");
        };
        assert_eq!(changes.set, ["branch.fix.remote"]);

        // The agent writes the lock again after the read: what lands is
        // what was read.
        std::fs::write(git.join(LOCK), "[alias]\n\tx = !evil\n").unwrap();
        let mut kernel = FakeKernel::default();
        let sealed = seal(&read, &mut kernel).unwrap();
        let lock = std::fs::metadata(git.join(LOCK)).unwrap();
        assert_eq!(identity(&lock), (sealed.dev, sealed.ino));
        assert!(
            std::fs::read_to_string(git.join(LOCK))
                .unwrap()
                .contains("fix")
        );
        assert_eq!(kernel.labels[&sealed].flags, label_flags::SEALED);
        // No copy is left behind.
        let names: Vec<_> = std::fs::read_dir(&git)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }

    #[test]
    fn a_key_that_runs_a_program_is_the_owners_and_a_new_file_is_compared_with_nothing() {
        let (_repo, git) = git_dir();
        std::fs::write(git.join(LOCK), "[alias]\n\tx = !evil\n").unwrap();
        let event = event_for(&git, true);
        let Inspection::Owners(why, Some(_)) =
            inspect(&event, git.join("config").to_str().unwrap())
        else {
            panic!("allowed");
        };
        assert!(why.contains("alias.x"), "{why}");
        std::fs::write(git.join(LOCK), "[core]\n\tbare = false\n").unwrap();
        assert!(matches!(
            inspect(&event, git.join("config").to_str().unwrap()),
            Inspection::Agents(..)
        ));
    }

    #[test]
    fn another_object_at_the_path_or_a_link_for_the_lock_is_read_as_nothing() {
        let (_repo, git) = git_dir();
        let config = git.join("config");
        std::fs::write(&config, "").unwrap();
        std::fs::write(git.join("other"), "").unwrap();
        let wrong = event_for(&git.join("other"), false);
        assert!(matches!(
            inspect(&wrong, config.to_str().unwrap()),
            Inspection::Owners(why, None) if why.contains("not the object")
        ));
        std::fs::write(git.join("elsewhere"), "[core]\n\tbare = false\n").unwrap();
        std::os::unix::fs::symlink("elsewhere", git.join(LOCK)).unwrap();
        let event = event_for(&config, false);
        assert!(matches!(
            inspect(&event, config.to_str().unwrap()),
            Inspection::Owners(why, None) if why.contains("cannot be read")
        ));
        assert!(matches!(
            inspect(&event, "relative/config"),
            Inspection::Owners(_, None)
        ));
    }
}
