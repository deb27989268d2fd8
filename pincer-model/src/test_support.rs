//! What tests in several modules share: a file in a temporary directory,
//! and the running example of a mission with assets.

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

/// The running example's mission: Alice's email, `~/mail/alice.eml`, is
/// read, and the images to upload (at most `images` of them, under `~` or
/// `/tmp`) are found in it; `more` follows on line 12.
pub(crate) fn upload_mission(images: u32, more: &str) -> String {
    format!(
        r#"[mission]
name = "upload"
[[asset]]
id = "email"
path = "~/mail/alice.eml"
ops = ["read"]
[[asset]]
id = "image"
found_in = "email"
ops = ["read"]
constraints = {{ under = ["~", "/tmp"], glob = "*.{{png,jpg,jpeg}}", max_count = {images} }}
{more}"#
    )
}
