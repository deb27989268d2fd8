//! `pincer recommend` end to end: a workload run in audit mode under a
//! mission that grants nothing, the mission recommended from its audit
//! log, and the same workload under that mission in enforce mode. What the
//! workload did works again; the read of a key in a home directory of the
//! scratch tree is not granted, is refused, and is named in a comment of
//! the mission.

use std::{fs, path::Path, process::Command};

use pincer_common::ops;
use pincer_model::mission::{Mission, Mode};
use pincer_tests::{EACCES, SECRET, Scratch, pincer_bin, stdout_lines};
use serde_json::json;

/// The workload: it reads three files of the project, makes two files in
/// its `out/` directory, and reads an SSH key.
const WORKLOAD: [&str; 6] = [
    "read @project/a.txt",
    "read @project/b.txt",
    "read @project/src/main.rs",
    "create-write @project/out/r1.txt first\n",
    "create-write @project/out/r2.txt second\n",
    "read @home/.ssh/id_rsa",
];

/// The key the workload reads, inside the scratch root.
const KEY: &str = "home/.ssh/id_rsa";

#[test]
fn a_recommended_mission_runs_the_workload_again_and_keeps_the_key_out() {
    let s = Scratch::new("recommend");
    fs::create_dir_all(s.path("project/out")).unwrap();
    fs::create_dir_all(s.path("home/.ssh")).unwrap();
    fs::write(s.path(KEY), SECRET).unwrap();
    s.mission("[mission]\nname = \"learning\"\n");

    // In audit mode nothing is refused, and every access is reported.
    let out = s.run_probe(&["--mode", "audit"], &WORKLOAD);
    assert_eq!(out.status.code(), Some(0));
    let lines = stdout_lines(&out);
    assert_eq!(lines.len(), WORKLOAD.len(), "{lines:?}");
    assert!(
        lines.iter().all(|line| line.starts_with("ok ")),
        "{lines:?}"
    );
    let learned = s.decisions();
    assert!(
        learned.iter().all(|d| d["verdict"] == "audit"),
        "{learned:#?}"
    );
    for rel in ["project/a.txt", "project/out/r1.txt", KEY] {
        assert!(
            learned.iter().any(|d| d["path"] == s.p(rel)),
            "{rel}: {learned:#?}"
        );
    }

    // The mission, from the run's log.
    let recommended = s.path("m.toml");
    let out = Command::new(pincer_bin())
        .args(["recommend", "--from"])
        .arg(s.audit_path())
        .args(["--task", "summarize the project into out/", "--output"])
        .arg(&recommended)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let text = fs::read_to_string(&recommended).unwrap();
    eprintln!("{text}");
    let key = s.p(KEY);
    assert!(
        text.lines()
            .any(|line| line.starts_with("# not granted: read ")
                && line.contains(&key)
                && line.contains("a secret")),
        "{text}"
    );
    assert!(
        !text
            .lines()
            .any(|line| line.starts_with("path = ") && line.contains(".ssh")),
        "{text}"
    );
    let mission = Mission::from_file(&recommended).unwrap();
    assert_eq!(mission.name, "summarize the project into out/");
    assert_eq!(mission.on_unknown, Mode::Enforce);
    assert!(
        mission
            .grants
            .iter()
            .all(|grant| !Path::new(&key).starts_with(&grant.path)),
        "{text}"
    );
    // The project is one tree: the run made names in it.
    assert!(
        mission
            .grants
            .iter()
            .any(|grant| grant.path == s.path("project")
                && grant.ops & (ops::READ | ops::WRITE | ops::CREATE)
                    == ops::READ | ops::WRITE | ops::CREATE),
        "{text}"
    );

    // The same workload, enforced under it, logged afresh: the key alone
    // is refused.
    fs::remove_file(s.audit_path()).unwrap();
    fs::remove_file(s.path("audit.jsonl.key")).unwrap();
    s.mission(&text);
    s.assert_probes(&[
        (WORKLOAD[0], 0),
        (WORKLOAD[1], 0),
        (WORKLOAD[2], 0),
        (WORKLOAD[3], 0),
        (WORKLOAD[4], 0),
        (WORKLOAD[5], EACCES),
    ]);
    assert_eq!(s.read("project/out/r1.txt"), "first\n");
    assert_eq!(s.read("project/out/r2.txt"), "second\n");
    let decisions = s.decisions();
    assert_eq!(decisions.len(), 1, "{decisions:#?}");
    let denial = &decisions[0];
    assert_eq!(denial["verdict"], "deny");
    assert_eq!(denial["path"], key);
    assert_eq!(denial["operation"], json!(["read"]));
    assert_eq!(denial["mission"], "summarize the project into out/");
}
