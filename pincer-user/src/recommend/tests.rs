//! Recommendations from logs written through the crate's own `AuditLog`,
//! over real directories, read back with the mission parser.

use std::{
    fs,
    path::{Path, PathBuf},
};

use pincer_common::{caps, ops};
use pincer_model::{
    audit::AuditLog,
    events::{AUDIT_MODE, GRANTED},
    mission::{Mission, Mode},
    vote::Extent,
};
use serde_json::{Value, json};

use super::*;

/// A decision line as `pincer run` writes it: `verdict` `ops` on `path`
/// at `hook`.
fn decision(verdict: &str, operation: &[&str], path: &str, hook: &str) -> Value {
    let missing = operation.join(", ");
    let reason = match verdict {
        "allow" => GRANTED.to_owned(),
        "audit" => format!("{AUDIT_MODE}no grant covers {missing}"),
        _ => format!("no grant covers {missing}"),
    };
    json!({
        "event": "decision", "pid": 7, "tid": 7, "comm": "agent", "operation": operation,
        "path": path, "verdict": verdict, "reason": reason, "hook": hook, "dev": "0:1",
        "ino": 1, "cgroup": 9,
    })
}

/// An access audit mode let through.
fn audited(operation: &[&str], path: &Path) -> Value {
    let hook = match operation {
        ["create"] => "inode_create",
        ["mkdir"] => "inode_mkdir",
        _ => "file_open",
    };
    decision("audit", operation, path.to_str().unwrap(), hook)
}

/// What `recommend` refuses `options` with.
fn refusal(options: &Options) -> String {
    recommend(options).unwrap_err().to_string()
}

/// Audited reads of `names` below `root`, in order.
fn reads(root: &Path, names: &[&str]) -> Vec<Value> {
    names
        .iter()
        .map(|name| audited(&["read"], &root.join(name)))
        .collect()
}

/// A log directory of its own (apart from the trees the tests fold) and
/// the log in it, holding `records` under `mission`, closed.
struct Log {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl Log {
    fn new(mission: &str, records: &[Value]) -> Log {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.jsonl");
        let mut log = AuditLog::open(Some(&path), mission).unwrap();
        for record in records {
            log.record(record).unwrap();
        }
        log.close().unwrap();
        Log { _dir: dir, path }
    }

    fn options(&self) -> Options {
        Options {
            log: self.path.clone(),
            ..Options::default()
        }
    }

    fn recommend(&self) -> Recommendation {
        recommend(&self.options()).unwrap()
    }
}

/// A directory of files, each holding its own name.
fn tree(files: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::Builder::new().prefix("tree-").tempdir().unwrap();
    for file in files {
        let path = dir.path().join(file);
        if file.ends_with('/') {
            fs::create_dir_all(&path).unwrap();
        } else {
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(&path, file).unwrap();
        }
    }
    dir
}

/// The recommendation read back by the mission parser.
fn parsed(text: &str) -> Mission {
    Mission::parse_with_home(text, Path::new("m.toml"), None)
        .unwrap_or_else(|error| panic!("{error}\n{text}"))
}

/// The recommendation from a log of `records` under mission `m`, and the
/// mission read back from it.
fn recommended(records: &[Value]) -> (String, Mission) {
    let text = Log::new("m", records).recommend().text;
    let mission = parsed(&text);
    (text, mission)
}

/// Asserts that the recommendation `text` holds `said`, showing it whole
/// when it does not.
#[track_caller]
fn assert_says(text: &str, said: &str) {
    assert!(text.contains(said), "{text}");
}

/// Whether a grant of `mission` gives `ops` on `path`, by path.
fn covers(mission: &Mission, path: &Path, ops: u32) -> bool {
    mission.grants.iter().any(|grant| {
        grant.ops & ops == ops
            && match grant.extent {
                Extent::Tree => path.starts_with(&grant.path),
                Extent::File => path == grant.path,
            }
    })
}

/// The grants as (path, ops, tree), by path.
fn grants(mission: &Mission) -> Vec<(PathBuf, u32, bool)> {
    let mut grants: Vec<_> = mission
        .grants
        .iter()
        .map(|grant| (grant.path.clone(), grant.ops, grant.extent == Extent::Tree))
        .collect();
    grants.sort();
    grants
}

/// The real path of a temporary directory (the kernel's paths have links
/// resolved: `/tmp` may be one).
fn real_root(dir: &tempfile::TempDir) -> PathBuf {
    fs::canonicalize(dir.path()).unwrap()
}

#[test]
fn what_the_run_used_round_trips_through_the_parser_and_is_covered() {
    let project = tree(&["a.txt", "b.txt", "src/main.rs", "out/", "docs/guide.md"]);
    let root = real_root(&project);
    let other = tree(&["notes.txt"]);
    let notes = real_root(&other).join("notes.txt");
    let accesses: Vec<(&[&str], PathBuf)> = vec![
        (&["read"], root.join("a.txt")),
        (&["read"], root.join("b.txt")),
        (&["read"], root.join("src/main.rs")),
        (&["create"], root.join("out/r1.txt")),
        (&["create"], root.join("out/r2.txt")),
        (&["read"], notes.clone()),
        (&["read"], notes.clone()),
    ];
    let records: Vec<Value> = accesses
        .iter()
        .map(|(ops, path)| audited(ops, path))
        .collect();
    // What the run made is there when the next run comes.
    fs::write(root.join("out/r1.txt"), "1").unwrap();
    fs::write(root.join("out/r2.txt"), "2").unwrap();
    let log = Log::new("audit run", &records);
    let recommendation = log.recommend();
    let text = &recommendation.text;
    let mission = parsed(text);
    assert_eq!(mission.name, "audit run");
    assert_eq!(mission.on_unknown, Mode::Enforce);
    let mut expected = vec![
        (root.clone(), ops::READ | ops::WRITE | ops::CREATE, true),
        (notes.clone(), ops::READ, false),
    ];
    expected.sort();
    assert_eq!(grants(&mission), expected, "{text}");
    for (names, path) in &accesses {
        let bits = names.iter().fold(0, |bits, name| {
            bits | ops::NAMES.iter().find(|(_, n)| n == name).unwrap().0
        });
        assert!(covers(&mission, path, bits), "{path:?}\n{text}");
    }
    // It starts on this machine: every grant resolves.
    mission.resolve(1).unwrap();
    assert_eq!(recommendation.grants, 2);
    assert!(recommendation.warnings.is_empty(), "{recommendation:?}");
    // Each grant says what it covers.
    assert_says(
        text,
        "# 5 object(s) in this tree (read 3, create 2): a.txt, b.txt, out/r1.txt and 2 more; by agent\n# + write: the run made 2 of these names, which the next run opens again\n[[grant]]",
    );
    assert_says(text, "# read 2; by agent\n[[grant]]");
    assert_says(text, "(its chain verified)");
}

#[test]
fn secrets_and_policy_objects_are_comments_never_grants() {
    // The work tree, read file by file.
    let work = [
        "work/a.txt",
        "work/b.txt",
        "work/c.txt",
        "work/src/x.rs",
        "work/src/y.rs",
        "work/src/z.rs",
        "work/deploy/site.pem",
    ];
    let project = tree(&[&["home/.ssh/id_rsa", "work/CLAUDE.md"][..], &work].concat());
    let root = real_root(&project);
    let mut records = reads(&root, &["home/.ssh/id_rsa", "home/.ssh/id_rsa"]);
    records.push(audited(&["write"], &root.join("work/CLAUDE.md")));
    records.extend(reads(&root, &work));
    let (text, mission) = recommended(&records);
    let secret = root.join("home/.ssh/id_rsa");
    assert_says(
        &text,
        &format!(
            "# not granted: read {} (a secret, `.ssh/`: SSH keys and the hosts they open, 2 times)",
            secret.display()
        ),
    );
    assert_says(
        &text,
        &format!(
            "# not granted: write {} (a policy object, `CLAUDE.md` (instructions): only the owner changes it)",
            root.join("work/CLAUDE.md").display()
        ),
    );
    assert_says(
        &text,
        &format!(
            "# not granted: read {} (a secret, `*.pem`",
            root.join("work/deploy/site.pem").display()
        ),
    );
    for never in ["home/.ssh/id_rsa", "work/CLAUDE.md", "work/deploy/site.pem"] {
        let path = root.join(never);
        assert!(!covers(&mission, &path, ops::READ), "{never}\n{text}");
        assert!(!text.contains(&format!("path = \"{}\"", path.display())));
    }
    // `work` holds a secret: no tree over it; `src` is one, the rest of
    // `work` is granted object by object. The policy object blocks no
    // tree (none gives a change to it), but the secret does.
    assert_eq!(
        grants(&mission),
        [
            (root.join("work/a.txt"), ops::READ, false),
            (root.join("work/b.txt"), ops::READ, false),
            (root.join("work/c.txt"), ops::READ, false),
            (root.join("work/src"), ops::READ, true),
        ],
        "{text}"
    );
    assert_says(
        &text,
        &format!(
            "#   {}: it holds {}, a secret",
            root.join("work").display(),
            root.join("work/deploy/site.pem").display()
        ),
    );
}

#[test]
fn a_secret_on_disk_keeps_its_directory_from_being_a_tree() {
    // Nothing read the key, but a tree over it would give it.
    let project = tree(&["a", "b", "c", ".env"]);
    let root = real_root(&project);
    let records = reads(&root, &["a", "b", "c"]);
    let (text, mission) = recommended(&records);
    assert_eq!(mission.grants.len(), 3, "{text}");
    assert!(mission.grants.iter().all(|g| g.extent == Extent::File));
    assert_says(
        &text,
        &format!(
            "#   {}: it holds {}, a secret, `.env`",
            root.display(),
            root.join(".env").display()
        ),
    );
}

#[test]
fn a_few_reads_stay_file_grants_and_three_objects_make_a_tree() {
    let project = tree(&["two/a", "two/b", "three/a", "three/b", "three/sub/c"]);
    let root = real_root(&project);
    let mut records = reads(&root, &["two/a", "two/b", "three/a", "three/b"]);
    records.push(audited(&["read", "write"], &root.join("three/sub/c")));
    let (text, mission) = recommended(&records);
    assert_eq!(
        grants(&mission),
        [
            (root.join("three"), ops::READ | ops::WRITE, true),
            (root.join("two/a"), ops::READ, false),
            (root.join("two/b"), ops::READ, false),
        ],
        "{text}"
    );
}

#[test]
fn broad_directories_are_never_folded() {
    // Three objects in /tmp, /etc and / would qualify; none of them is a
    // tree.
    let a = tree(&["x"]);
    let b = tree(&["y"]);
    let c = tree(&["z"]);
    let paths: Vec<PathBuf> = [(&a, "x"), (&b, "y"), (&c, "z")]
        .iter()
        .map(|(dir, name)| real_root(dir).join(name))
        .collect();
    let mut records: Vec<Value> = paths.iter().map(|p| audited(&["read"], p)).collect();
    for etc in ["/etc/hostname", "/etc/fstab", "/etc/issue"] {
        records.push(audited(&["read"], Path::new(etc)));
    }
    let (text, mission) = recommended(&records);
    assert!(
        mission.grants.iter().all(|g| g.extent == Extent::File),
        "{text}"
    );
    assert_says(
        &text,
        "#   /etc: too broad: the root, or a directory directly in it",
    );
}

#[test]
fn a_name_a_rename_made_gets_delete() {
    let project = tree(&["x/a", "x/b", "x/c"]);
    let root = real_root(&project);
    let path = |name: &str| root.join(name).to_str().unwrap().to_owned();
    // An editor's save: a new file beside the old, renamed over it.
    let records = [
        audited(&["create"], &root.join("x/a.tmp")),
        decision("audit", &["rename"], &path("x/a.tmp"), "inode_rename"),
        decision("audit", &["create"], &path("x/a"), "inode_rename"),
    ];
    let (text, mission) = recommended(&records);
    assert_eq!(
        grants(&mission),
        [(
            root.join("x"),
            ops::CREATE | ops::RENAME | ops::WRITE | ops::DELETE,
            true
        )],
        "{text}"
    );
    assert_says(
        &text,
        "# + delete: a rename made 1 of these names, which the next run's replaces",
    );
}

#[test]
fn a_directory_the_run_made_and_removed_is_made_again() {
    // Its directory holds a secret: no tree there.
    let project = tree(&[".env"]);
    let root = real_root(&project);
    let build = root.join("build");
    let path = |p: &Path| p.to_str().unwrap().to_owned();
    let records = [
        audited(&["mkdir"], &build),
        audited(&["create"], &build.join("o.o")),
        decision(
            "audit",
            &["delete"],
            &path(&build.join("o.o")),
            "inode_unlink",
        ),
        decision("audit", &["delete"], &path(&build), "inode_rmdir"),
    ];
    let (text, mission) = recommended(&records);
    assert_eq!(
        grants(&mission),
        [(
            build.clone(),
            ops::MKDIR | ops::CREATE | ops::DELETE | ops::WRITE,
            true
        )],
        "{text}"
    );
    assert!(mission.grants[0].make, "{text}");
    assert_says(
        &text,
        "# make: the run made this directory and it is gone now",
    );
    mission.resolve(1).unwrap();
}

#[test]
fn a_file_grant_that_would_keep_the_mission_from_starting_is_a_comment() {
    let gone = "/nonexistent/pincer/dir/file";
    let records = [audited(&["read"], Path::new(gone))];
    let (text, mission) = recommended(&records);
    assert!(mission.grants.is_empty(), "{text}");
    assert_says(
        &text,
        &format!("# not granted: read {gone} (neither it nor its directory exists now"),
    );
}

#[test]
fn capabilities_beyond_the_default_set_are_added_never_those_never_given() {
    let capability = |cap: u32| {
        let mut record = decision("audit", &[], "", "capable");
        record["ino"] = json!(cap);
        record["reason"] = json!(format!(
            "{AUDIT_MODE}the capability is not among the agent's"
        ));
        record
    };
    let records = [
        capability(caps::NET_RAW),
        capability(caps::NET_RAW),
        capability(caps::SYS_ADMIN),
        capability(caps::CHOWN),
    ];
    let (text, mission) = recommended(&records);
    assert_eq!(
        mission.capabilities,
        caps::DEFAULT | caps::bit(caps::NET_RAW),
        "{text}"
    );
    assert_says(&text, "capabilities = [\"net_raw\"]");
    assert_says(
        &text,
        "# not granted: capability sys_admin (the capability is not among",
    );
}

#[test]
fn what_the_new_mission_allows_anyway_is_left_out() {
    let records = [
        decision("allow", &["read", "exec"], "/usr/bin/python3", "file_open"),
        decision("audit", &["read"], "/etc/passwd", "file_open"),
        decision(
            "allow",
            &["create"],
            "/tmp/pincer-run-77-xyz/tmp.c",
            "inode_create",
        ),
        decision("allow", &["read", "write"], "/dev/pts/4", "file_open"),
        decision("audit", &["read"], "/dev/pts/5", "file_open"),
        decision("deny", &["read"], "/proc/1/environ", "file_open"),
    ];
    let mut records = records.to_vec();
    records[5]["reason"] =
        json!("the /proc entries of processes outside the agent's cgroup are never open to it");
    let (text, mission) = recommended(&records);
    assert!(mission.grants.is_empty(), "{text}");
    assert_says(
        &text,
        "# Left out: 2 access(es) the runtime baseline or the default capabilities give, 2 of the run's own",
    );
    assert_says(
        &text,
        "# not granted: read /dev/pts/5 (a terminal: pincer run grants the one it was started on)",
    );
    assert_says(
        &text,
        "# not granted: read /proc/1/environ (the /proc entries of processes outside the agent's cgroup are never open to it)",
    );
}

#[test]
fn what_the_run_s_mission_allowed_is_carried_over_when_it_was_logged() {
    // With --log-allowed, the base mission's grants show as allows.
    let project = tree(&["a"]);
    let file = real_root(&project).join("a");
    let records = [decision(
        "allow",
        &["read", "write"],
        file.to_str().unwrap(),
        "file_open",
    )];
    let (_, mission) = recommended(&records);
    assert_eq!(grants(&mission), [(file, ops::READ | ops::WRITE, false)]);
}

#[test]
fn the_task_names_the_mission_and_heads_it_as_a_comment() {
    let project = tree(&["a"]);
    let records = [audited(&["read"], &real_root(&project).join("a"))];
    let log = Log::new("m", &records);
    let mut options = log.options();
    options.task = Some("fix the test\n[[grant]]\npath = \"/\"\nops = [\"write\"]".to_owned());
    let text = recommend(&options).unwrap().text;
    let mission = parsed(&text);
    assert_eq!(mission.name, options.task.clone().unwrap().trim());
    assert_eq!(mission.grants.len(), 1, "{text}");
    assert!(
        text.starts_with("# Recommended by `pincer recommend` from the audit log "),
        "{text}"
    );
    assert_says(
        &text,
        "# Task: fix the test\n#   [[grant]]\n#   path = \"/\"\n",
    );
    options.task = Some(" \n".to_owned());
    assert!(matches!(
        recommend(&options),
        Err(RecommendError::BlankTask)
    ));
}

#[test]
fn a_path_from_an_edited_log_cannot_write_toml() {
    // Only a log read unverified can hold what pincer never writes.
    let log = Log::new(
        "m",
        &[
            decision(
                "audit",
                &["read"],
                "/p/x\n[[grant]]\npath = \"/\"",
                "file_open",
            ),
            decision("audit", &["read"], "/p/\\x1b[2J", "file_open"),
        ],
    );
    let mut options = log.options();
    let text = recommend(&options).unwrap().text;
    let mission = parsed(&text);
    assert!(mission.grants.is_empty(), "{text}");
    assert_says(
        &text,
        "# not granted: read /p/x\\x0a[[grant]]\\x0apath = \"/\" (the log shows its path shortened or escaped",
    );
    options.unverified = true;
    assert!(parsed(&recommend(&options).unwrap().text).grants.is_empty());
}

#[test]
fn a_broken_chain_is_refused_unless_read_unverified() {
    let project = tree(&["a"]);
    let file = real_root(&project).join("a");
    let log = Log::new("m", &[audited(&["read"], &file)]);
    let text = fs::read_to_string(&log.path).unwrap();
    fs::write(&log.path, text.replacen("\"read\"", "\"write\"", 1)).unwrap();
    let error = recommend(&log.options()).unwrap_err();
    assert_eq!(error.exit_code(), 1);
    assert_eq!(
        error.to_string(),
        format!(
            "{}: the audit chain is broken: line 1: mac mismatch (the line was edited, or the \
             key is not this log's); not recommending from it (--unverified reads it anyway)",
            log.path.display()
        )
    );
    let mut options = log.options();
    options.unverified = true;
    let recommendation = recommend(&options).unwrap();
    assert!(
        recommendation
            .text
            .contains("(its chain NOT verified: broken: line 1: mac mismatch"),
        "{}",
        recommendation.text
    );
    assert_eq!(
        recommendation.warnings,
        [format!(
            "{}: read without a verified chain (broken: line 1: mac mismatch (the line was \
             edited, or the key is not this log's))",
            log.path.display()
        )]
    );
    // What it read is what the line says now.
    assert_eq!(
        grants(&parsed(&recommendation.text)),
        [(file, ops::WRITE, false)]
    );

    // A key that is gone: nothing can be verified.
    fs::remove_file(pincer_model::paths::default_key_path(&log.path)).unwrap();
    let error = recommend(&log.options()).unwrap_err();
    assert_eq!(error.exit_code(), 2);
    assert_eq!(
        format!("{:#}", anyhow::Error::new(error)),
        format!(
            "{}: cannot verify the audit chain (--unverified reads the log anyway): failed to \
             read audit key {}.key: No such file or directory (os error 2)",
            log.path.display(),
            log.path.display()
        )
    );
    assert!(recommend(&options).is_ok());
}

#[test]
fn a_malformed_line_read_unverified_is_named_by_its_line() {
    let log = Log::new("m", &[decision("audit", &["read"], "/p/a", "file_open")]);
    let mut text = fs::read_to_string(&log.path).unwrap();
    text.push_str("{\"event\":\"decision\",\"verdict\":\"audit\"}\nnot json\n");
    fs::write(&log.path, text).unwrap();
    let mut options = log.options();
    options.unverified = true;
    let error = recommend(&options).unwrap_err();
    assert_eq!(
        error.to_string(),
        format!("{}:3: a decision without `operation`", log.path.display())
    );
    let mut text = fs::read_to_string(&log.path).unwrap();
    text = text.replace("{\"event\":\"decision\",\"verdict\":\"audit\"}\n", "");
    fs::write(&log.path, text).unwrap();
    let error = refusal(&options);
    assert!(
        error.starts_with(&format!("{}:3: not an audit record (", log.path.display())),
        "{error}"
    );
}

#[test]
fn a_log_without_decisions_or_of_several_missions_is_refused() {
    let empty = Log::new("m", &[json!({"event": "counters", "counters": {}})]);
    let error = refusal(&empty.options());
    assert!(
        error.ends_with(": no decisions: nothing to recommend (a run logs what its mission did not grant, and what it did with --log-allowed)"),
        "{error}"
    );

    let log = Log::new("a", &[decision("audit", &["read"], "/p/a", "file_open")]);
    {
        let mut other = AuditLog::open(Some(&log.path), "b").unwrap();
        other
            .record(&decision("audit", &["read"], "/p/b", "file_open"))
            .unwrap();
        other.close().unwrap();
    }
    let error = refusal(&log.options());
    assert!(
        error
            .ends_with(": decisions of several missions (\"a\", \"b\"): choose one with --mission"),
        "{error}"
    );
    let mut options = log.options();
    options.mission = Some("b".into());
    let text = recommend(&options).unwrap().text;
    assert!(text.contains("/p/b") && !text.contains("/p/a"), "{text}");
    options.mission = Some("c".into());
    let error = refusal(&options);
    assert!(
        error.ends_with(": no decisions of mission \"c\" (the log has \"a\", \"b\")"),
        "{error}"
    );
}

#[test]
fn the_output_is_never_the_log_and_never_granted() {
    let project = tree(&["a", "b"]);
    let root = real_root(&project);
    let log = Log::new(
        "m",
        &[
            audited(&["read"], &root.join("a")),
            audited(&["create"], &root.join("b")),
        ],
    );
    let mut options = log.options();
    options.output = Some(log.path.clone());
    assert!(matches!(
        recommend(&options),
        Err(RecommendError::OutputIsLog { .. })
    ));
    options.output = Some(pincer_model::paths::default_key_path(&log.path));
    assert!(recommend(&options).is_err());
    // Written into the directory the run made names in: no tree over it.
    options.output = Some(root.join("m.toml"));
    let text = recommend(&options).unwrap().text;
    let mission = parsed(&text);
    assert!(
        mission.grants.iter().all(|g| g.extent == Extent::File),
        "{text}"
    );
    assert!(
        text.contains("it holds ") && text.contains("m.toml, the recommended mission"),
        "{text}"
    );
}

#[test]
fn many_distinct_objects_are_planned_without_quadratic_work() {
    // An agent chooses how many paths it touches.
    let decisions: Vec<log::Decision> = (0..20_000)
        .map(|i| log::Decision {
            verdict: "audit".into(),
            ops: ops::READ,
            path: format!("/nonexistent/pincer/{}/{i}", i % 200),
            reason: format!("{AUDIT_MODE}no grant covers read"),
            hook: "file_open".into(),
            ino: 1,
            comm: "agent".into(),
        })
        .collect();
    let context = Context {
        homes: Vec::new(),
        own: Vec::new(),
        policy: super::default_classifier(),
        max_scan: MAX_SCAN,
    };
    let plan = fold::plan(&decisions, &context);
    assert!(plan.grants.is_empty());
    assert_eq!(plan.not_granted.len(), 20_000);
    // The directories qualified, and none exists to be a tree.
    assert_eq!(plan.not_trees.len(), 201);
}

#[test]
fn in_ask_mode_what_was_allowed_is_granted_and_what_was_refused_is_not() {
    let project = tree(&["a", "b"]);
    let root = real_root(&project);
    let asked = |path: &Path, verdict: &str, decided_by: &str| {
        json!({
            "event": "verdict",
            "request": {"id": 3, "operation": ["read"], "path": path, "hook": "file_open",
                        "comm": "agent"},
            "tids": [7], "verdict": verdict, "decided_by": decided_by, "reason": "because",
            "votes": [],
        })
    };
    let parked = |path: &Path| {
        let mut record = decision("park", &["read"], path.to_str().unwrap(), "file_open");
        record["reason"] = json!("no grant covers read: asking");
        record
    };
    let records = [
        parked(&root.join("a")),
        asked(&root.join("a"), "allow", "prompt"),
        parked(&root.join("b")),
        asked(&root.join("b"), "deny", "prompt"),
    ];
    let (text, mission) = recommended(&records);
    assert_eq!(
        grants(&mission),
        [(root.join("a"), ops::READ, false)],
        "{text}"
    );
    assert_says(
        &text,
        &format!(
            "# not granted: read {} (refused when asked, by prompt: because)",
            root.join("b").display()
        ),
    );
    assert_says(&text, "# 2 decision(s) of mission");
}
