//! What tests in several modules share: a file in a temporary directory.

use std::{fs, path::PathBuf};

use tempfile::TempDir;

/// A new temporary directory holding the file `name` with `contents`, and
/// the file's path; the directory goes away when the `TempDir` is dropped.
pub(crate) fn temp_file(name: &str, contents: impl AsRef<[u8]>) -> (TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    fs::write(&path, contents).unwrap();
    (dir, path)
}
