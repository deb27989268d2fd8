//! What the host integration tests share: each test file is its own crate
//! and takes what it needs from here.

#![allow(dead_code, reason = "each test crate uses only some of these helpers")]

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

use pincer_model::audit::AuditLog;
use serde_json::json;

/// Runs the `pincer` binary with `args`, as a script would.
pub fn pincer(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pincer"))
        .args(args)
        .output()
        .unwrap()
}

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

/// Writes the audit log of a run in audit mode at `path`, mission `mission`:
/// one decision per access, `(operations, path)`, each as `pincer run`
/// writes it (an access with `create` at `inode_create`, others at
/// `file_open`), then the close line; returns `path`.
pub fn audit_run_log(path: PathBuf, mission: &str, accesses: &[(&[&str], &str)]) -> PathBuf {
    let mut log = AuditLog::open(Some(&path), mission).unwrap();
    for (operation, p) in accesses {
        let hook = if operation.contains(&"create") {
            "inode_create"
        } else {
            "file_open"
        };
        log.record(&json!({
            "event": "decision", "pid": 40, "tid": 40, "comm": "agent",
            "operation": operation, "path": p, "verdict": "audit",
            "reason": format!("audit mode: would be denied, no grant covers {}", operation.join(", ")),
            "hook": hook, "dev": "0:30", "ino": 12, "cgroup": 4000,
        }))
        .unwrap();
    }
    log.close().unwrap();
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
