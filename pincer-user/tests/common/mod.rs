//! What the host integration tests share: each test file is its own crate
//! and takes what it needs from here.

#![allow(dead_code, reason = "each test crate uses only some of these helpers")]

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use pincer::audit::AuditLog;
use serde_json::json;

/// Writes an audit log at `path` with one `deny` decision of `cat` per
/// path, closed or not (as a killed writer leaves it); returns `path`.
pub fn audit_log(path: PathBuf, paths: &[&str], close: bool) -> PathBuf {
    let mut log = AuditLog::open(Some(&path), "m").unwrap();
    for p in paths {
        log.record(&json!({"event": "decision", "verdict": "deny", "operation": ["read"], "path": p, "comm": "cat"}))
            .unwrap();
    }
    if close {
        log.close().unwrap();
    } else {
        // Dropped without a close line, as a killed writer leaves it.
        std::mem::forget(log);
    }
    path
}

/// Writes the smallest mission there is, `m.toml` in `dir`.
pub fn minimal_mission(dir: &Path) -> PathBuf {
    let mission = dir.join("m.toml");
    std::fs::write(&mission, "[mission]\nname = \"m\"\n").unwrap();
    mission
}

/// `pincer run --mission <mission> [extra] -- touch <ran>`: a command
/// whose only trace, should it ever run, is the file `ran`.
pub fn run_touching(mission: &Path, extra: &[&std::ffi::OsStr], ran: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_pincer"));
    command
        .arg("run")
        .arg("--mission")
        .arg(mission)
        .args(extra)
        .arg("--")
        .arg("touch")
        .arg(ran);
    command
}
