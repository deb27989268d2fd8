//! `pincer run` never hands its command to a socket it cannot trust: a
//! server of another user answering `register → ok` would leave the command
//! unconfined. It refuses loudly, before anything runs.

use std::{os::unix::net::UnixListener, process::Command};

#[test]
fn pincer_run_refuses_a_socket_of_another_user_and_runs_nothing() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test needs root: it hands a socket to another user"
    );
    let dir = tempfile::tempdir().unwrap();
    let mission = dir.path().join("m.toml");
    std::fs::write(&mission, "[mission]\nname = \"m\"\n").unwrap();
    let socket = dir.path().join("pincer.sock");
    let _listener = UnixListener::bind(&socket).unwrap();
    std::os::unix::fs::chown(&socket, Some(65534), None).unwrap();
    let ran = dir.path().join("ran");
    let out = Command::new(env!("CARGO_BIN_EXE_pincer"))
        .arg("run")
        .arg("--mission")
        .arg(&mission)
        .env("PINCER_SOCKET", &socket)
        .arg("--")
        .arg("touch")
        .arg(&ran)
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
