//! How `pincer run` fails before it confines anything: loudly, with nothing
//! run, and with an audit log that says so.

mod common;

use std::{os::unix::net::UnixListener, process::Command};

/// `pincer run` never hands its command to a socket it cannot trust: a
/// server of another user answering `register → ok` would leave the command
/// unconfined.
#[test]
fn pincer_run_refuses_a_socket_of_another_user_and_runs_nothing() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test needs root: it hands a socket to another user"
    );
    let dir = tempfile::tempdir().unwrap();
    let mission = common::minimal_mission(dir.path());
    let socket = dir.path().join("pincer.sock");
    let _listener = UnixListener::bind(&socket).unwrap();
    std::os::unix::fs::chown(&socket, Some(65534), None).unwrap();
    let ran = dir.path().join("ran");
    let out = common::run_touching(&mission, &[], &ran)
        .env("PINCER_SOCKET", &socket)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "pincer: {} is not to be trusted: the socket belongs to uid 65534, not root or uid 0\n",
            socket.display()
        )
    );
    assert!(!ran.exists());
}

/// A run that fails after opening its audit log (here: a bad environment
/// variable, checked before the programs load) records the failure, and the
/// log has no clean close line for `verify --strict` to accept.
#[test]
fn a_failed_run_leaves_a_failure_record_and_no_clean_close() {
    let dir = tempfile::tempdir().unwrap();
    let mission = common::minimal_mission(dir.path());
    let log = dir.path().join("audit.jsonl");
    let ran = dir.path().join("ran");
    let absent = dir.path().join("absent.sock");
    let out = common::run_touching(
        &mission,
        &[
            "--audit".as_ref(),
            log.as_ref(),
            "--socket".as_ref(),
            absent.as_ref(),
        ],
        &ran,
    )
    .env("PINCER_RING_BYTES", "3")
    .env("PINCER_LOG", "trace")
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(125));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("\npincer: environment variable PINCER_RING_BYTES"),
        "{stderr}"
    );
    // Diagnostics on a pipe carry no colour codes.
    assert!(stderr.contains("loading"), "{stderr}");
    assert!(!stderr.contains('\u{1b}'), "{stderr:?}");
    assert!(!ran.exists());
    let text = std::fs::read_to_string(&log).unwrap();
    let last: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(last["event"], "failure");
    assert!(!text.contains("\"chain\":\"close\""), "{text}");
    let verify = Command::new(env!("CARGO_BIN_EXE_pincer"))
        .args(["audit", "verify", "--strict"])
        .arg(&log)
        .output()
        .unwrap();
    assert_eq!(verify.status.code(), Some(3));
}
