//! `pincer recommend` as a person runs it: a log written as `pincer run
//! --mode audit` writes one, the mission on standard output or in a file,
//! read back by the mission parser.

mod common;

use std::{
    fs,
    path::{Path, PathBuf},
};

use pincer_common::ops;
use pincer_model::mission::{Mission, Mode};

use common::pincer;

/// A project tree (`a.txt`, `b.txt`, `src/main.rs`, `out/`) and a key in
/// `home/.ssh`, under `dir`; its real path.
fn project(dir: &Path) -> PathBuf {
    let root = fs::canonicalize(dir).unwrap();
    fs::create_dir_all(root.join("project/src")).unwrap();
    fs::create_dir_all(root.join("project/out")).unwrap();
    fs::create_dir_all(root.join("home/.ssh")).unwrap();
    for file in ["project/a.txt", "project/b.txt", "project/src/main.rs"] {
        fs::write(root.join(file), file).unwrap();
    }
    fs::write(root.join("home/.ssh/id_rsa"), "KEY").unwrap();
    root
}

/// The log of the workload: it read three files of the project, made two
/// in `out/` and read the key.
fn run_log(log_dir: &Path, root: &Path) -> PathBuf {
    let p = |rel: &str| root.join(rel).to_str().unwrap().to_owned();
    let accesses: Vec<(&[&str], String)> = vec![
        (&["read"], p("project/a.txt")),
        (&["read"], p("project/b.txt")),
        (&["read"], p("project/src/main.rs")),
        (&["create"], p("project/out/r1.txt")),
        (&["create"], p("project/out/r2.txt")),
        (&["read"], p("home/.ssh/id_rsa")),
    ];
    for made in ["project/out/r1.txt", "project/out/r2.txt"] {
        fs::write(root.join(made), "").unwrap();
    }
    let accesses: Vec<(&[&str], &str)> = accesses
        .iter()
        .map(|(ops, path)| (*ops, path.as_str()))
        .collect();
    common::audit_run_log(log_dir.join("a.jsonl"), "learning", &accesses)
}

/// The project and the log of its workload, each in a directory of its own.
struct Learned {
    _work: tempfile::TempDir,
    logs: tempfile::TempDir,
    /// The project tree's real path.
    root: PathBuf,
    log: PathBuf,
}

impl Learned {
    fn new() -> Self {
        let work = tempfile::tempdir().unwrap();
        let logs = tempfile::tempdir().unwrap();
        let root = project(work.path());
        let log = run_log(logs.path(), &root);
        Learned {
            _work: work,
            logs,
            root,
            log,
        }
    }
}

#[test]
fn the_mission_is_written_the_parser_reads_it_and_the_key_stays_a_comment() {
    let learned = Learned::new();
    let (root, log) = (&learned.root, &learned.log);
    let output = learned.logs.path().join("m.toml");
    let out = pincer(&[
        "recommend",
        "--from",
        log.to_str().unwrap(),
        "--task",
        "summarize the project into out/",
        "--output",
        output.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(out.stdout.is_empty());
    assert_eq!(
        stderr,
        format!("pincer: wrote {} (1 grant(s))\n", output.display())
    );
    let mission = Mission::from_file(&output).unwrap();
    let text = fs::read_to_string(&output).unwrap();
    assert_eq!(mission.name, "summarize the project into out/");
    assert_eq!(mission.on_unknown, Mode::Enforce);
    assert_eq!(mission.grants.len(), 1, "{text}");
    let grant = &mission.grants[0];
    assert_eq!(grant.path, root.join("project"));
    assert_eq!(grant.ops, ops::READ | ops::WRITE | ops::CREATE);
    assert!(
        text.contains(&format!(
            "# not granted: read {} (a secret, `.ssh/`",
            root.join("home/.ssh/id_rsa").display()
        )),
        "{text}"
    );
    assert!(text.starts_with(&format!(
        "# Recommended by `pincer recommend` from the audit log {} (its chain verified):\n",
        fs::canonicalize(log).unwrap().display()
    )));
    assert!(text.contains("# Task: summarize the project into out/\n"));

    // On standard output, the same mission.
    let out = pincer(&["recommend", "--from", log.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    let mission = Mission::parse_with_home(&text, Path::new("-"), None).unwrap();
    assert_eq!(mission.name, "learning");
    assert_eq!(mission.grants.len(), 1);
}

#[test]
fn an_edited_log_exits_1_and_is_read_unverified_only_when_asked() {
    let learned = Learned::new();
    let log = &learned.log;
    let text = fs::read_to_string(log).unwrap();
    fs::write(log, text.replacen("src/main.rs", "src/lib.rs", 1)).unwrap();
    let out = pincer(&["recommend", "--from", log.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("the audit chain is broken: line 3: mac mismatch"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());

    let out = pincer(&["recommend", "--from", log.to_str().unwrap(), "--unverified"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.starts_with("warning: ") && stderr.contains("read without a verified chain"),
        "{stderr}"
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("(its chain NOT verified: broken: line 3"),
        "{text}"
    );
}
