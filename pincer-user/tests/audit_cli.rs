//! `pincer audit verify`, `summary` and `export` as a script sees them: their exit
//! status and what they print, on logs intact, cut, edited, missing and
//! hostile.

mod common;

use std::{
    fs,
    path::{Path, PathBuf},
    process::Output,
};

use common::pincer;

fn code_and_out(output: &Output) -> (i32, String, String) {
    (
        output.status.code().unwrap(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// A log of two decisions (one path holds a terminal escape and a
/// right-to-left override), closed or not.
fn log(dir: &Path, close: bool) -> PathBuf {
    common::audit_log(
        dir.join("audit.jsonl"),
        &["/p/a", "/p/\u{1b}[2J\u{202e}b"],
        close,
    )
}

fn verify(path: &Path, extra: &[&str]) -> (i32, String, String) {
    let path = path.to_str().unwrap();
    code_and_out(&pincer(&[&["audit", "verify", path][..], extra].concat()))
}

#[test]
fn an_intact_log_exits_0_and_its_summary_escapes_what_it_shows() {
    let dir = tempfile::tempdir().unwrap();
    let path = log(dir.path(), true);
    let (code, out, _) = verify(&path, &["--strict"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.ends_with("intact: 3 line(s), 0 restart(s)\n"), "{out}");
    let (code, out, _) = code_and_out(&pincer(&["audit", "summary", path.to_str().unwrap()]));
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("intact: 3 line(s)"), "{out}");
    assert!(
        out.contains("/p/\\x1b[2J\\xe2\\x80\\xaeb  by cat"),
        "{out:?}"
    );
    assert!(!out.contains('\u{1b}'), "{out:?}");
}

#[test]
fn a_cut_log_warns_and_fails_only_under_strict() {
    let dir = tempfile::tempdir().unwrap();
    let path = log(dir.path(), false);
    let (code, out, _) = verify(&path, &[]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("warning: no close line"), "{out}");
    assert_eq!(verify(&path, &["--strict"]).0, 3);
    // A garbage tail without a newline reads as a killed writer's line.
    let mut text = fs::read(&path).unwrap();
    text.extend_from_slice(b"{\"garbage");
    fs::write(&path, &text).unwrap();
    let (code, out, _) = verify(&path, &[]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("is incomplete"), "{out}");
    assert_eq!(verify(&path, &["--strict"]).0, 3);
    // With a newline it is an edit.
    text.extend_from_slice(b"\n");
    fs::write(&path, &text).unwrap();
    let (code, out, _) = verify(&path, &["--strict"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("broken: line 3: malformed"), "{out}");
}

#[test]
fn an_edited_log_exits_1_from_both_commands() {
    let dir = tempfile::tempdir().unwrap();
    let path = log(dir.path(), true);
    let text = fs::read_to_string(&path)
        .unwrap()
        .replacen("/p/a", "/p/b", 1);
    fs::write(&path, text).unwrap();
    let (code, out, _) = verify(&path, &[]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("broken: line 1: mac mismatch"), "{out}");
    let (code, out, _) = code_and_out(&pincer(&["audit", "summary", path.to_str().unwrap()]));
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("broken: line 1"), "{out}");
}

#[test]
fn a_log_that_cannot_be_read_exits_2_naming_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("absent.jsonl");
    let (code, _, err) = verify(&missing, &[]);
    assert_eq!(code, 2);
    assert_eq!(
        err,
        format!(
            "pincer: failed to read audit log {}: No such file or directory (os error 2)\n",
            missing.display()
        )
    );
    // A named pipe would hang the reader; it is refused at once.
    let fifo = dir.path().join("fifo.jsonl");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let (code, _, err) = verify(&fifo, &[]);
    assert_eq!(code, 2);
    assert!(
        err.ends_with("a named pipe: only regular files are read\n"),
        "{err}"
    );
    // A log whose key is gone cannot be verified, and says so.
    let path = log(dir.path(), true);
    fs::remove_file(dir.path().join("audit.jsonl.key")).unwrap();
    let (code, _, err) = code_and_out(&pincer(&["audit", "summary", path.to_str().unwrap()]));
    assert_eq!(code, 2);
    assert!(err.contains("failed to read audit key"), "{err}");
}

#[test]
fn export_prints_one_ocsf_event_per_access() {
    let dir = tempfile::tempdir().unwrap();
    let path = common::audit_run_log(
        dir.path().join("audit.jsonl"),
        "m",
        &[(&["read"], "/srv/a"), (&["create"], "/srv/new")],
    );
    let (code, out, err) = code_and_out(&pincer(&[
        "audit",
        "export",
        "--format",
        "ocsf",
        "--from",
        path.to_str().unwrap(),
        "--hostname",
        "build-host",
    ]));
    assert_eq!(code, 0, "{err}");
    let events: Vec<serde_json::Value> = out
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    // Two decisions; the close line is no event.
    assert_eq!(events.len(), 2, "{out}");
    let activities: Vec<_> = events
        .iter()
        .map(|e| (e["type_uid"].as_u64(), e["file"]["path"].as_str()))
        .collect();
    assert_eq!(
        activities,
        [
            (Some(100102), Some("/srv/a")),
            (Some(100101), Some("/srv/new"))
        ]
    );
    assert!(
        events
            .iter()
            .all(|e| e["device"]["hostname"] == "build-host"
                && e["metadata"]["version"] == "1.5.0"
                && e.get("mac").is_none())
    );
}
