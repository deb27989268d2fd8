//! The systemd unit shipped in `dist/`: it runs the daemon this crate
//! builds, restarts it always, keeps the journal of parked requests across
//! restarts, and bounds its capabilities; and `systemd-analyze` accepts it
//! (`cargo xtask test` installs it).

use std::{fs, path::Path, process::Command};

fn unit() -> String {
    fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../dist/pincer.service"))
        .expect("dist/pincer.service")
}

/// The value of `key=` in the unit (the last one, as systemd reads it).
fn value<'a>(unit: &'a str, key: &str) -> Option<&'a str> {
    unit.lines()
        .filter_map(|l| l.strip_prefix(key)?.strip_prefix('='))
        .next_back()
}

#[test]
fn the_unit_runs_the_daemon_like_a_system_service() {
    let unit = unit();
    assert_eq!(
        value(&unit, "ExecStart"),
        Some("/usr/local/bin/pincer daemon --config /etc/pincer/daemon.toml")
    );
    assert_eq!(value(&unit, "ExecReload"), Some("/bin/kill -HUP $MAINPID"));
    assert_eq!(value(&unit, "Restart"), Some("always"));
    // Parked requests are journaled in /run/pincer/parked: a restart must
    // find them.
    assert_eq!(value(&unit, "RuntimeDirectory"), Some("pincer"));
    assert_eq!(value(&unit, "RuntimeDirectoryPreserve"), Some("yes"));
    assert_eq!(value(&unit, "NoNewPrivileges"), Some("yes"));
    let caps: Vec<&str> = value(&unit, "CapabilityBoundingSet")
        .expect("a bounded capability set")
        .split_whitespace()
        .collect();
    for needed in ["CAP_BPF", "CAP_PERFMON", "CAP_SYS_ADMIN", "CAP_KILL"] {
        assert!(caps.contains(&needed), "{needed} missing from {caps:?}");
    }
    for never in [
        "CAP_SYS_MODULE",
        "CAP_NET_ADMIN",
        "CAP_SYS_RAWIO",
        "CAP_SETUID",
    ] {
        assert!(!caps.contains(&never), "{never} is not needed");
    }
}

#[test]
fn systemd_accepts_the_unit() {
    let dir = tempfile::tempdir().unwrap();
    // `verify` wants the binary to exist: point it at this build's.
    let unit = unit().replace("/usr/local/bin/pincer", env!("CARGO_BIN_EXE_pincer"));
    let path = dir.path().join("pincer.service");
    fs::write(&path, unit).unwrap();
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
