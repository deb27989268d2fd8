//! `pincer mission check` and `pincer daemon --check`: what a start would
//! refuse is refused with its reason, and risky grants are named.

use std::{fs, os::unix::fs::PermissionsExt, path::Path, process::Command};

fn pincer(args: &[&str], home: &Path) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_pincer"))
        .args(args)
        .env("HOME", home)
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_check_refuses_a_readable_secret_and_warns_about_risky_grants() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    fs::create_dir(&home).unwrap();
    let secret = dir.path().join("webhook.key");
    fs::write(&secret, "sixteen bytes or more\n").unwrap();
    fs::set_permissions(&secret, fs::Permissions::from_mode(0o644)).unwrap();
    let mission = dir.path().join("m.toml");
    fs::write(
        &mission,
        format!(
            "[mission]\nname = \"m\"\n\n\
             [[grant]]\npath = \"/\"\nops = [\"read\", \"write\"]\nextent = \"tree\"\n\n\
             [[grant]]\npath = \"~\"\nops = [\"read\", \"create\"]\nextent = \"tree\"\n\n\
             [[grant]]\npath = \"/proc/self/status\"\nops = [\"read\"]\n\n\
             [vote]\nvoters = [\"webhook\"]\n\n\
             [vote.webhook]\nurl = \"http://192.0.2.1/hook\"\nsecret_file = \"{}\"\n",
            secret.display()
        ),
    )
    .unwrap();
    let m = mission.to_str().unwrap();
    let (code, _, err) = pincer(&["mission", "check", m], &home);
    assert_eq!(code, 2, "{err}");
    assert_eq!(
        err,
        format!(
            "pincer: mission {m} would not start: {m}:23: vote.webhook.secret_file: {} can be \
             read by others than its owner (mode 644); chmod 600 it\n",
            secret.display()
        )
    );
    fs::set_permissions(&secret, fs::Permissions::from_mode(0o600)).unwrap();
    let (code, out, err) = pincer(&["mission", "check", m], &home);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("mission: m\n"), "{out}");
    let warnings: Vec<&str> = err.lines().collect();
    assert_eq!(warnings.len(), 4, "{err}");
    assert!(
        warnings[0].starts_with(&format!("warning: {m}:5: `/` as a tree")),
        "{err}"
    );
    assert!(
        warnings[1].starts_with(&format!("warning: {m}:10: the home directory as a tree")),
        "{err}"
    );
    assert!(
        warnings[2].starts_with(&format!(
            "warning: {m}:15: /proc/self/status names a different process"
        )),
        "{err}"
    );
    assert!(
        warnings[3].contains("webhook http://192.0.2.1/hook is plain http off this host"),
        "{err}"
    );

    // The daemon's check covers every agent's mission the same way.
    let config = dir.path().join("daemon.toml");
    fs::write(
        &config,
        format!("[[agent]]\nname = \"a\"\ncgroup = \"agents/*\"\nmission = \"{m}\"\n"),
    )
    .unwrap();
    let c = config.to_str().unwrap();
    let (code, out, err) = pincer(&["daemon", "--config", c, "--check"], &home);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        format!("{c}: the daemon would start with 1 agent pattern(s)\n")
    );
    assert_eq!(err.lines().count(), 4, "{err}");
    assert!(err.starts_with("warning: agent `a`: "), "{err}");
    fs::set_permissions(&secret, fs::Permissions::from_mode(0o640)).unwrap();
    let (code, _, err) = pincer(&["daemon", "--config", c, "--check"], &home);
    assert_ne!(code, 0);
    assert!(
        err.contains(&format!(
            "{c}:4: agent[1].mission: {m}:23: vote.webhook.secret_file: "
        )),
        "{err}"
    );
    assert!(
        err.contains("can be read by others than its owner (mode 640)"),
        "{err}"
    );
}
