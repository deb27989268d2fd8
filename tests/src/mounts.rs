//! Mounts a test makes outside every agent, for agents to meet.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

/// A tmpfs mounted for a test, unmounted on drop.
pub struct Tmpfs(PathBuf);

impl Tmpfs {
    /// Mounts a fresh tmpfs on `dir`.
    pub fn mount(dir: &Path) -> Tmpfs {
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "tmpfs"])
            .arg(dir)
            .status()
            .unwrap();
        assert!(status.success());
        Tmpfs(dir.to_owned())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        unmount(&self.0.to_string_lossy());
    }
}

/// Unmounts what is mounted on `path`, if anything is.
pub fn unmount(path: &str) {
    let _ = Command::new("umount").arg(path).status();
}
