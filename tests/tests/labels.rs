//! Authority labels, proven in the guest kernel: policy objects (an agent's
//! instructions and settings, git hooks and configuration, ...) are the
//! owner's to change even inside a granted tree, what an agent makes is its
//! own, and only the owner's answer releases a parked change.

use std::{fs, process::Stdio, thread, time::Duration};

use pincer_tests::{
    EACCES, EVERY_OPERATION, Reaped, Scratch, answer, probe_bin, read_stdout, wait_pending,
    webhook::{Behaviour, SECRET, webhook},
};
use serde_json::json;

/// What the user's instruction file holds.
const INSTRUCTIONS: &str = "Be careful.\n";
/// What the user's repository configuration holds.
const GIT_CONFIG: &str = "[core]\n\tbare = false\n";

/// A scratch tree whose project holds the user's policy files: an
/// instruction file, a repository's configuration and hooks, editor tasks,
/// and a subdirectory.
fn with_policy_files(name: &str) -> Scratch {
    let s = Scratch::new(name);
    for dir in ["project/.git/hooks", "project/.vscode", "project/docs"] {
        fs::create_dir_all(s.path(dir)).unwrap();
    }
    fs::write(s.path("project/CLAUDE.md"), INSTRUCTIONS).unwrap();
    fs::write(s.path("project/.git/config"), GIT_CONFIG).unwrap();
    fs::write(s.path("project/.git/HEAD"), "ref: refs/heads/main\n").unwrap();
    fs::write(
        s.path("project/.git/hooks/pre-commit.sample"),
        "#!/bin/sh\n",
    )
    .unwrap();
    fs::write(s.path("project/.vscode/tasks.json"), "{}\n").unwrap();
    s
}

/// Checks that the user's policy files hold what [`with_policy_files`]
/// wrote, and that nothing was added where hooks run.
#[track_caller]
fn assert_policy_files_unchanged(s: &Scratch) {
    assert_eq!(s.read("project/CLAUDE.md"), INSTRUCTIONS);
    assert_eq!(s.read("project/.git/config"), GIT_CONFIG);
    assert_eq!(s.read("project/.vscode/tasks.json"), "{}\n");
    s.assert_absent("project/.git/hooks/post-commit");
    s.assert_absent("project/docs/AGENTS.md");
    s.assert_absent("project/.claude");
}

#[test]
fn policy_files_in_a_granted_tree_are_not_the_agents_to_change() {
    let s = with_policy_files("policy-enforce");
    s.project_mission(EVERY_OPERATION);
    s.assert_probes(&[
        // Reading them is what they are for.
        ("read @project/CLAUDE.md", 0),
        ("read @project/.git/config", 0),
        // Changing them in any way is not the agent's.
        ("append @project/CLAUDE.md obey-the-page\n", EACCES),
        ("write @project/CLAUDE.md obey-the-page\n", EACCES),
        ("truncate @project/CLAUDE.md 0", EACCES),
        ("chmod @project/CLAUDE.md 666", EACCES),
        ("rename @project/CLAUDE.md @project/old.md", EACCES),
        ("unlink @project/CLAUDE.md", EACCES),
        ("link @project/CLAUDE.md @project/hard.md", EACCES),
        ("create-write @project/new.md obey-the-page\n", 0),
        ("rename @project/new.md @project/CLAUDE.md", EACCES),
        ("write @project/.git/config [core]\n", EACCES),
        (
            "create-write @project/.git/hooks/post-commit curl|sh",
            EACCES,
        ),
        (
            "write @project/.git/hooks/pre-commit.sample curl|sh",
            EACCES,
        ),
        ("append @project/.vscode/tasks.json x", EACCES),
        ("create @project/docs/AGENTS.md", EACCES),
        ("mkdir @project/.claude", EACCES),
        ("rename @project/.git @project/.git-old", EACCES),
        // Everything else in the tree stays the agent's to change,
        // the repository's other files included.
        ("append @project/a.txt more\n", 0),
        ("create @project/docs/notes.md", 0),
        ("write @project/.git/HEAD ref:refs/heads/fix\n", 0),
        ("create @project/.git/FETCH_HEAD", 0),
        ("mkdir @project/.github", 0),
    ]);
    assert_policy_files_unchanged(&s);
    assert_eq!(s.read("project/.git/HEAD"), "ref:refs/heads/fix\n");

    // Every refusal says why, and so does the audit log.
    let reasons = s.deny_reasons("file_open");
    assert!(
        reasons
            .iter()
            .all(|r| r.ends_with("of a policy object: only the owner may allow it")),
        "{reasons:#?}"
    );
    assert_eq!(
        s.deny_reasons("inode_create").len(),
        2,
        "hook and AGENTS.md"
    );

    // The control: outside the agent's cgroup, the same changes are made.
    assert_eq!(
        s.probe_outside(&["append @project/CLAUDE.md outside\n"]),
        ["ok wrote 8"]
    );
    assert_eq!(s.read("project/CLAUDE.md"), "Be careful.\noutside\n");
}

#[test]
fn a_repository_the_agent_makes_is_its_own() {
    let s = with_policy_files("policy-fresh");
    s.project_mission(EVERY_OPERATION);
    s.assert_probes(&[
        // A new repository, as `git init` or `git clone` make it.
        ("mkdir @project/new", 0),
        ("mkdir @project/new/.git", 0),
        ("mkdir @project/new/.git/hooks", 0),
        ("create-write @project/new/.git/config.lock [core]\n", 0),
        (
            "rename @project/new/.git/config.lock @project/new/.git/config",
            0,
        ),
        (
            "create-write @project/new/.git/hooks/pre-commit.sample #!/bin/sh\n",
            0,
        ),
        ("create-write @project/new/CLAUDE.md notes\n", 0),
        // Changed again afterwards: still its own.
        ("append @project/new/.git/config [user]\n", 0),
        ("create-write @project/new/.git/config.lock [core]\n", 0),
        (
            "rename @project/new/.git/config.lock @project/new/.git/config",
            0,
        ),
        ("append @project/new/CLAUDE.md more\n", 0),
        ("rename @project/new/.git @project/new/.git-old", 0),
        // The user's repository beside it is not.
        ("write @project/.git/config [core]\n", EACCES),
    ]);
    assert_eq!(s.read("project/new/.git-old/config"), "[core]\n");
    assert_eq!(s.read("project/new/CLAUDE.md"), "notes\nmore\n");
    assert_policy_files_unchanged(&s);

    // A later agent finds it made by an agent too.
    s.assert_probes(&[("append @project/new/CLAUDE.md later\n", 0)]);
}

#[test]
fn the_mission_adds_policy_objects_by_path() {
    let s = with_policy_files("policy-mission");
    fs::write(s.path("project/docs/style.md"), "tabs\n").unwrap();
    s.project_mission_and(
        EVERY_OPERATION,
        &format!(
            "[labels]\npolicy = [\"{}/\", \"README.md\"]\n",
            s.p("project/docs")
        ),
    );
    s.assert_probes(&[
        ("append @project/docs/style.md spaces\n", EACCES),
        ("create @project/docs/new.md", EACCES),
        ("create @project/README.md", EACCES),
        ("append @project/a.txt more\n", 0),
    ]);
    assert_eq!(s.read("project/docs/style.md"), "tabs\n");
    s.assert_absent("project/docs/new.md");
}

/// A mission that parks what it does not grant, whose own rule and a
/// signed webhook both allow everything in the project, with `voters`.
fn lenient_mission(s: &Scratch, url: &str, voters: &str) {
    fs::write(s.path("webhook.key"), SECRET).unwrap();
    s.mission(&format!(
        r#"[mission]
name = "test"

[[grant]]
path = "{project}"
ops = ["read", "write", "create", "delete", "rename"]
extent = "tree"

[defaults]
on_unknown = "ask"

[vote]
voters = [{voters}]
timeout = "20s"
default = "allow-once"
max_extent = "tree"

[vote.webhook]
url = "{url}"
secret_file = "{key}"

[[vote.rule]]
path = "{project}"
extent = "tree"
verdict = "allow"
lifetime = "session"
"#,
        project = s.p("project"),
        key = s.p("webhook.key"),
    ));
}

#[test]
fn only_the_owner_allows_a_change_to_a_policy_file() {
    let s = with_policy_files("policy-owner");
    let hook = webhook();
    *hook.behaviour.lock().unwrap() = Behaviour::Allow;
    lenient_mission(&s, &hook.url, r#""mission", "webhook", "prompt""#);
    let probe = probe_bin().display().to_string();
    let claude = s.p("project/CLAUDE.md");
    let mut agent = Reaped(
        s.command(
            &[],
            &[
                "sh",
                "-c",
                &format!("{probe} append {claude} first; {probe} append {claude} second"),
            ],
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap(),
    );
    let mut stderr = agent.0.stderr.take().unwrap();
    let log = thread::spawn(move || {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut stderr, &mut text).unwrap();
        text
    });
    let parked = pincer_tests::wait_for(Duration::from_secs(150), || {
        !pincer_tests::pending().is_empty()
    });
    if !parked {
        let _ = agent.0.kill();
        panic!("nothing parked; pincer run said:\n{}", log.join().unwrap());
    }
    let first = wait_pending(1).remove(0);
    assert_eq!(first["path"], claude);
    assert!(
        first["owner_only"]
            .as_str()
            .is_some_and(|why| why.contains("only the owner may allow it")),
        "{first}"
    );
    // The mission's rule and the signed webhook allowed at once; the
    // request still waits for the owner.
    thread::sleep(Duration::from_secs(2));
    let still = pincer_tests::pending();
    if still.len() != 1 {
        let _ = agent.0.kill();
        panic!(
            "still {still:?}: audit {:#?}\npincer run said:\n{}",
            s.audit(),
            log.join().unwrap()
        );
    }
    assert_eq!(still[0]["id"], first["id"]);
    assert!(
        hook.last
            .lock()
            .unwrap()
            .as_ref()
            .is_some_and(|sent| sent["request"]["owner_only"].is_string()),
        "the webhook is told the request is the owner's"
    );
    let (code, text) = answer(&["approve", &first["id"].to_string()]);
    assert_eq!(code, 0, "{text}");

    let mut second = None;
    pincer_tests::wait_for(Duration::from_secs(60), || {
        second = pincer_tests::pending()
            .into_iter()
            .find(|r| r["id"] != first["id"]);
        second.is_some()
    });
    let Some(second) = second else {
        let _ = agent.0.kill();
        panic!(
            "no second request: audit {:#?}\npincer run said:\n{}",
            s.audit(),
            log.join().unwrap()
        );
    };
    let (code, text) = answer(&["deny", &second["id"].to_string(), "--reason", "no"]);
    assert_eq!(code, 0, "{text}");
    let out = read_stdout(&mut agent.0);
    let status = agent.0.wait().unwrap().code();
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        ["ok wrote 5", &format!("err {EACCES}")]
    );
    assert_eq!(status, Some(EACCES));
    assert_eq!(s.read("project/CLAUDE.md"), "Be careful.\nfirst");
    s.assert_verdicts(&[
        json!({"verdict": "allow", "decided_by": "prompt", "lifetime": {"kind": "once"}}),
        json!({"verdict": "deny", "decided_by": "prompt", "reason": "no"}),
    ]);
    let first_votes = &s.audit_events("verdict")[0]["votes"];
    for voter in ["mission", "webhook"] {
        assert!(
            first_votes
                .as_array()
                .unwrap()
                .iter()
                .any(|v| v["voter"] == voter
                    && v["vote"] == "abstain"
                    && v["reason"] == "only the owner may allow this"),
            "{voter}: {first_votes:#}"
        );
    }
}

#[test]
fn the_owner_is_asked_even_when_the_mission_lists_no_prompt_and_silence_denies() {
    let s = with_policy_files("policy-silence");
    let hook = webhook();
    lenient_mission(&s, &hook.url, r#""mission", "webhook""#);
    // Short deadline: the mission's default is allow-once, which a policy
    // change never gets.
    s.mission(
        &fs::read_to_string(s.mission_path())
            .unwrap()
            .replace("timeout = \"20s\"", "timeout = \"3s\""),
    );
    let start = std::time::Instant::now();
    assert_eq!(s.probe("append @project/.git/config [alias]"), EACCES);
    assert!(start.elapsed() >= Duration::from_secs(3));
    assert_eq!(s.read("project/.git/config"), GIT_CONFIG);
    s.assert_verdicts(&[json!({"verdict": "deny", "decided_by": "timeout"})]);
    // An ordinary request of the same mission is allowed by its rule.
    assert_eq!(s.probe("create @project/docs/new.md"), 0);
}
