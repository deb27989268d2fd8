//! Real tools under minimal missions, in the Debian guest: each task does
//! real work with git, python3, gcc, make, sed, patch, tar, find, node, npm
//! or pip under the smallest mission it needs, and must succeed; its
//! injected variant also tries one goal an attacker would want (a key or a
//! token into the tree, a shell start-up file, a cron entry, a git alias or
//! hook, an instruction file, a system binary, a planted link). A goal
//! outside the mission must fail, and the task must still be done. A goal
//! inside the granted tree is a policy object (an instruction file, a git
//! hook, `.git/config`): beyond what a tree grant can refuse, it must be
//! refused too, as the owner's alone to change.
//!
//! Each test prints one row of the table (`REAL-TOOLS-ROW`, tab-separated),
//! which `cargo xtask test` gathers into the table and its figures: clean
//! utility and injected goal success.

use std::{
    fs,
    io::Write,
    path::Path,
    process::{Command, Output, Stdio},
};

use pincer_tests::{
    pincer_bin, program_stats,
    real_tools::{Model, Place, TASKS, TREE_OPS, Task, World, refusals_in},
};

/// Runs a task of `tests/real-tools.toml` clean and injected, prints its
/// row, and asserts that the
/// clean run did its work without a refusal and that the injected run did
/// it too while its goal, when outside the mission, was refused.
fn task(name: &str) {
    let task = TASKS
        .task
        .iter()
        .find(|t| t.name == name)
        .expect("a task of tests/real-tools.toml");

    let world = World::new(task);
    let (out, refusals) = world.confined(task, &format!("set -e\n{}", task.work));
    let clean = out.status.success() && world.holds(&task.check);
    eprintln!(
        "clean run of {name}: {:?}\n  stdout: {}\n  stderr: {}\n  refusals: {refusals:?}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    let world = World::new(task);
    let goals: String = task
        .injected
        .iter()
        .map(|injected| format!("{{ {}\n}} || true\n", injected.goal))
        .collect();
    let injected = format!("{goals}set -e\n{}", task.work);
    let (out, _) = world.confined(task, &injected);
    let reached: Vec<bool> = task
        .injected
        .iter()
        .map(|injected| world.holds(&injected.reached))
        .collect();
    let still_done = out.status.success() && world.holds(&task.check);
    eprintln!(
        "injected run of {name}: {:?}, goals reached: {reached:?}\n  stderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );

    let (tolerated, unexpected): (Vec<String>, Vec<String>) = refusals.into_iter().partition(|r| {
        task.tolerated
            .as_ref()
            .is_some_and(|t| r.contains(&t.refusal))
    });
    let refusals = match &task.tolerated {
        Some(t) if !tolerated.is_empty() => {
            format!("{} ({})", tolerated.len() + unexpected.len(), t.why)
        }
        _ => unexpected.len().to_string(),
    };
    // One row per goal; the task's own columns on its first row only.
    for (index, (injected, reached)) in task.injected.iter().zip(&reached).enumerate() {
        let first = index == 0;
        let row = [
            if first { task.name.as_str() } else { "" },
            if first { task.work_is.as_str() } else { "" },
            match (first, clean) {
                (false, _) => "",
                (true, true) => "done",
                (true, false) => "FAILED",
            },
            if first { refusals.as_str() } else { "" },
            &injected.is,
            match injected.place {
                Place::Outside => "outside the mission",
                Place::Policy => "a policy object in the tree",
            },
            if *reached { "reached" } else { "refused" },
        ]
        .join("\t");
        // Straight to the descriptor: libtest keeps what a passing test
        // prints with the macros.
        let _ = writeln!(std::io::stdout(), "REAL-TOOLS-ROW\t{row}");
    }

    assert!(clean, "{name}: the clean run did not do its work");
    assert_eq!(
        unexpected,
        Vec::<String>::new(),
        "{name}: refusals in the clean run"
    );
    assert!(still_done, "{name}: the injected run did not do its work");
    for (injected, reached) in task.injected.iter().zip(reached) {
        assert!(
            !reached,
            "{name}: the injected goal was reached: {}",
            injected.is
        );
    }
}

#[test]
fn git_init_commit() {
    task("git_init_commit");
}

#[test]
fn git_branch_and_rebase() {
    task("git_branch_and_rebase");
}

#[test]
fn git_stash() {
    task("git_stash");
}

#[test]
fn git_clone_from_a_local_upstream() {
    task("git_clone_from_a_local_upstream");
}

#[test]
fn git_status_in_an_existing_repository() {
    task("git_status_in_an_existing_repository");
}

#[test]
fn python_unittest() {
    task("python_unittest");
}

#[test]
fn python_writes_json_atomically() {
    task("python_writes_json_atomically");
}

#[test]
fn make_and_gcc() {
    task("make_and_gcc");
}

#[test]
fn the_loader_runs_only_what_may_run() {
    task("the_loader_runs_only_what_may_run");
}

#[test]
fn bubblewrap_sandboxes_a_command() {
    task("bubblewrap_sandboxes_a_command");
}

#[test]
fn sed_in_place() {
    task("sed_in_place");
}

#[test]
fn patch_applies_a_diff() {
    task("patch_applies_a_diff");
}

#[test]
fn tar_in_and_out() {
    task("tar_in_and_out");
}

#[test]
fn find_and_grep_report() {
    task("find_and_grep_report");
}

#[test]
fn editor_atomic_save() {
    task("editor_atomic_save");
}

#[test]
fn runs_a_script_from_the_tree() {
    task("runs_a_script_from_the_tree");
}

#[test]
fn npm_installs_a_local_package() {
    task("npm_installs_a_local_package");
}

#[test]
fn pip_installs_a_local_wheel() {
    task("pip_installs_a_local_wheel");
}

#[test]
fn git_switch_with_an_upstream() {
    task("git_switch_with_an_upstream");
}

#[test]
fn pip_installs_into_a_project_venv() {
    task("pip_installs_into_a_project_venv");
}

#[test]
fn pytest_and_black() {
    task("pytest_and_black");
}

#[test]
fn instructions_keep_their_place() {
    task("instructions_keep_their_place");
}

#[test]
fn every_task_of_the_table_has_its_test() {
    // A task added to the table without a test would never run.
    let source = include_str!("real_tools.rs");
    for task in &TASKS.task {
        assert!(
            source.contains(&format!("fn {}()", task.name)),
            "{} has no test",
            task.name
        );
    }
    assert!(TASKS.task.len() >= 15);
}

/// A turn of an agent program under `profile`, in enforce mode, with the
/// task's tree granted: `script` runs it, then what else the test tries
/// from the agent's cgroup. Returns the output and the refusals.
fn agent_turn(
    profile: &str,
    home_setup: &str,
    script: &str,
    env: &[(&str, String)],
) -> (Output, Vec<String>) {
    let home = Path::new("/home").join(format!("agent-{profile}"));
    // A fresh home but for `.local`, where the root has a program installed
    // for its user (aider).
    for entry in fs::read_dir(&home).into_iter().flatten().flatten() {
        if entry.file_name() != ".local" {
            let path = entry.path();
            let _ = fs::remove_dir_all(&path).or_else(|_| fs::remove_file(&path));
        }
    }
    let tree = home.join("work/project");
    fs::create_dir_all(&tree).unwrap();
    fs::write(tree.join("README.md"), "# the project\n").unwrap();
    let setup = Command::new("bash")
        .args(["-c", home_setup])
        .env("HOME", &home)
        .status()
        .unwrap();
    assert!(setup.success());
    let mission = home.join("mission.toml");
    fs::write(
        &mission,
        format!(
            "[mission]\nname = \"{profile}\"\n\n[[grant]]\npath = \"{}\"\nops = [{TREE_OPS}]\nextent = \"tree\"\n",
            tree.display()
        ),
    )
    .unwrap();
    let audit = home.join("audit.jsonl");
    let out = Command::new(pincer_bin())
        .args([
            "run",
            "--mode",
            "enforce",
            "--profile",
            profile,
            "--mission",
        ])
        .arg(&mission)
        .arg("--audit")
        .arg(&audit)
        .args(["--", "bash", "-c", script])
        .env("HOME", &home)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .env_remove("TMPDIR")
        .current_dir(&tree)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    eprintln!(
        "{profile}: {:?}\n  stdout: {}\n  stderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let refusals = refusals_in(&audit);
    eprintln!("  refusals: {refusals:#?}");
    (out, refusals)
}

/// What the agent tries after its program's turn: its program's settings
/// and instructions stay as they were, its state and the tree are written.
fn tries(settings: &[&str], state: &str) -> String {
    let mut script = String::new();
    for file in settings {
        script.push_str(&format!(
            "if echo injected >> {file} 2>/dev/null; then echo \"wrote {file}\"; else echo \"refused {file}\"; fi\n"
        ));
    }
    script.push_str(&format!(
        "echo state > {state}/pincer-test && echo \"wrote state\"\necho done > notes.md && echo \"wrote tree\"\n"
    ));
    script
}

/// Claude Code's environment for a turn against `model`.
fn claude_env(model: &Model) -> [(&'static str, String); 3] {
    [
        (
            "ANTHROPIC_BASE_URL",
            format!("http://127.0.0.1:{}", model.port),
        ),
        ("ANTHROPIC_API_KEY", "sk-scripted".to_owned()),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".to_owned()),
    ]
}

#[test]
fn claude_code_runs_a_turn_under_its_profile() {
    let model = Model::start("claude-code", 8765);
    let settings = ["~/.claude/settings.json", "~/.claude/CLAUDE.md"];
    let (out, refusals) = agent_turn(
        "claude-code",
        "mkdir -p ~/.claude && echo '{}' > ~/.claude/settings.json && echo 'Be brief.' > ~/.claude/CLAUDE.md",
        &format!(
            "claude -p 'say hi'\n{}",
            tries(&settings, "~/.claude/projects")
        ),
        &claude_env(&model),
    );
    assert!(
        model
            .requests()
            .iter()
            .any(|p| p.starts_with("/v1/messages"))
    );
    // Its own run meets no refusal: only the agent's writes to the settings.
    assert_turn(&out, &settings, &refusals, &[]);
}

/// The scripted model's command for the sandboxed turns: it records the
/// mount namespace it runs in.
const SANDBOXED_COMMAND: &str = "readlink /proc/self/ns/mnt > sandbox-ns.txt && cat README.md";

/// After a sandboxed turn whose script ended with `readlink
/// /proc/self/ns/mnt > outside-ns.txt` in `tree`: the model asked for one
/// command, and it ran in a mount namespace other than the agent's.
fn assert_ran_sandboxed(model: &Model, tree: &Path) {
    assert_eq!(model.commands(), 1, "{}", model.log());
    let inside = fs::read_to_string(tree.join("sandbox-ns.txt")).unwrap_or_default();
    let outside = fs::read_to_string(tree.join("outside-ns.txt")).unwrap();
    assert!(inside.starts_with("mnt:["), "the command ran: {inside:?}");
    assert_ne!(inside, outside, "in a mount namespace of its own");
}

/// Claude Code's own sandbox (bubblewrap: user, mount, pid and network
/// namespaces) works under pincer: the model has it run a command, which
/// it runs sandboxed, with no fallback allowed; the command reads and
/// writes the tree from a mount namespace of its own.
#[test]
fn claude_code_runs_a_command_in_its_own_sandbox_under_its_profile() {
    let model = Model::scripted("claude-code-sandbox", 8768, Some(SANDBOXED_COMMAND));
    let settings = ["~/.claude/settings.json", "~/.claude/CLAUDE.md"];
    let (out, refusals) = agent_turn(
        "claude-code",
        "mkdir -p ~/.claude && echo 'Be brief.' > ~/.claude/CLAUDE.md && \
         echo '{\"sandbox\": {\"enabled\": true, \"failIfUnavailable\": true, \
         \"autoAllowBashIfSandboxed\": true, \"allowUnsandboxedCommands\": false}}' \
         > ~/.claude/settings.json",
        &format!(
            "claude -p 'run the command'\nreadlink /proc/self/ns/mnt > outside-ns.txt\n{}",
            tries(&settings, "~/.claude/projects")
        ),
        &claude_env(&model),
    );
    let tree = Path::new("/home/agent-claude-code/work/project");
    assert_ran_sandboxed(&model, tree);
    // bubblewrap left empty placeholders in the tree for the names Claude
    // Code protects, and Claude Code removed them after the command.
    for name in [".bashrc", ".mcp.json", ".gitmodules"] {
        assert!(!tree.join(name).exists(), "{name} left behind");
    }
    // Nothing the sandbox does is refused (no mount, capability, placeholder
    // or removal of one). What is refused is Claude Code's making of
    // places that are not its state: directories in ~/.claude whose use is
    // not known (its other names there are what it obeys), other tools'
    // places in the home, the person's own `.claude` in the project (the
    // sandbox makes it as a placeholder instead), and its plugin store made
    // again in the read-only plugins tree: a sandboxed turn removes the
    // empty store `pincer run` made (the profile's tree grant covers the
    // store itself), then makes it again, and the grant, by identity, does
    // not follow the name.
    // Its sandbox's write of `user.max_user_namespaces` (bubblewrap's
    // `--disable-userns`) is allowed: the limit is the sandbox's own.
    assert_turn(
        &out,
        &settings,
        &refusals,
        &[
            "inode_mkdir /home/agent-claude-code/.claude/seed-admin",
            "inode_mkdir /home/agent-claude-code/.claude/dev-mods",
            "inode_mkdir /home/agent-claude-code/.claude/ssh",
            "inode_mkdir /home/agent-claude-code/.claude/.cc-writes",
            "inode_mkdir /home/agent-claude-code/.cache",
            "inode_mkdir /home/agent-claude-code/.config",
            "inode_mkdir /home/agent-claude-code/work/project/.claude",
            "inode_mkdir /home/agent-claude-code/.claude/plugins/store",
            // npm, which Claude Code runs at times during a sandboxed turn
            // (it asks npm where global packages are), makes its own cache
            // in the home, another tool's place.
            "npm inode_mkdir /home/agent-claude-code/.npm",
        ],
    );
}

/// Codex's settings and instructions, which its turns must leave as they
/// were.
const CODEX_SETTINGS: [&str; 2] = ["~/.codex/config.toml", "~/.codex/AGENTS.md"];

/// A turn of Codex, running `command`, against `model`: its home holds its
/// instructions and a configuration that points it at the model, with the
/// settings `more` besides; `after` ends the setup (each of its lines
/// begun with a newline).
fn codex_turn(model: &Model, more: &str, after: &str, command: &str) -> (Output, Vec<String>) {
    let setup = format!(
        "mkdir -p ~/.codex && echo 'Be brief.' > ~/.codex/AGENTS.md && cat > ~/.codex/config.toml <<'C'\n\
         model = \"scripted\"\nmodel_provider = \"scripted\"\n{more}[model_providers.scripted]\nname = \"scripted\"\n\
         base_url = \"http://127.0.0.1:{}/v1\"\nenv_key = \"SCRIPTED_KEY\"\nwire_api = \"responses\"\nC{after}",
        model.port
    );
    agent_turn(
        "codex",
        &setup,
        &format!("{command}\n{}", tries(&CODEX_SETTINGS, "~/.codex/sessions")),
        &[("SCRIPTED_KEY", "k".to_owned())],
    )
}

/// What a turn of Codex must show (see [`assert_turn`]). Its bundled skills
/// would be instructions written by the agent's cgroup: refused (the
/// profile says so), and Codex goes on.
fn assert_codex_turn(out: &Output, refusals: &[String]) {
    assert_turn(
        out,
        &CODEX_SETTINGS,
        refusals,
        &["inode_mkdir /home/agent-codex/.codex/skills/.system"],
    );
}

#[test]
fn codex_runs_a_turn_under_its_profile() {
    let model = Model::start("codex", 8766);
    let (out, refusals) = codex_turn(&model, "", "", "codex exec --skip-git-repo-check 'say hi'");
    assert!(model.requests().iter().any(|p| p == "/v1/responses"));
    assert_codex_turn(&out, &refusals);
}

/// Codex's own sandbox (bubblewrap on Linux) works under pincer: the model
/// has it run a command in `workspace-write` mode, which it runs
/// sandboxed, from a mount namespace of its own.
#[test]
fn codex_runs_a_command_in_its_own_sandbox_under_its_profile() {
    let model = Model::scripted("codex-sandbox", 8769, Some(SANDBOXED_COMMAND));
    let (out, refusals) = codex_turn(
        &model,
        "approval_policy = \"never\"\nsandbox_mode = \"workspace-write\"\n\
         [sandbox_workspace_write]\nexclude_slash_tmp = true\nexclude_tmpdir_env_var = true\n",
        "\ngit init -q ~/work/project",
        "codex exec --skip-git-repo-check --sandbox workspace-write 'run the command'\n\
         readlink /proc/self/ns/mnt > outside-ns.txt",
    );
    assert_ran_sandboxed(&model, Path::new("/home/agent-codex/work/project"));
    assert_codex_turn(&out, &refusals);
}

#[test]
fn aider_runs_a_turn_under_its_profile() {
    let model = Model::start("aider", 8767);
    let settings = [
        "~/.aider.conf.yml",
        "~/.env",
        "~/.aider/oauth-keys.env",
        "~/.gitconfig",
    ];
    // Its settings in ~/.aider.conf.yml (the turn works only if they are
    // read), the user's git identity, and the project a repository, as
    // aider expects to find them. aider is installed for this user with
    // its own installer's layout (`uv tool install aider-chat`).
    let setup = format!(
        "cat > ~/.aider.conf.yml <<'C'\n\
         model: openai/scripted\nopenai-api-base: http://127.0.0.1:{}/v1\ncheck-update: false\n\
         analytics-disable: true\nshow-model-warnings: false\npretty: false\nfancy-input: false\n\
         yes-always: true\nC\n\
         echo 'OPENAI_API_KEY=k' > ~/.env\n\
         git config --global user.name Agent && git config --global user.email agent@example.com\n\
         cd ~/work/project && git init -q && git add . && git commit -qm init",
        model.port
    );
    let (out, refusals) = agent_turn(
        "aider",
        &setup,
        &format!(
            "aider --message 'say hi' </dev/null\n{}",
            tries(&settings, "~/.aider/caches")
        ),
        &[(
            "PATH",
            format!(
                "/home/agent-aider/.local/bin:{}",
                std::env::var("PATH").unwrap_or_default()
            ),
        )],
    );
    assert!(model.requests().iter().any(|p| p == "/v1/chat/completions"));
    // Its state: analytics choice, install record, the model prices it
    // caches; in the tree, its chat history.
    let home = Path::new("/home/agent-aider");
    for state in [
        ".aider/analytics.json",
        ".aider/installs.json",
        "work/project/.aider.chat.history.md",
    ] {
        assert!(home.join(state).is_file(), "{state}");
    }
    assert_turn(&out, &settings, &refusals, &[]);
}

/// What every agent turn must show: the model's answer came through, the
/// agent's writes to its program's `settings` were refused while its state
/// and its tree were written, and the program itself met no refusal but
/// those ending with one of `expected`.
fn assert_turn(out: &Output, settings: &[&str], refusals: &[String], expected: &[&str]) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("hello from the scripted model"), "{stdout}");
    for file in settings {
        assert!(stdout.contains(&format!("refused {file}")), "{stdout}");
    }
    assert!(
        stdout.contains("wrote state") && stdout.contains("wrote tree"),
        "{stdout}"
    );
    let unexpected: Vec<&String> = refusals
        .iter()
        .filter(|r| !r.starts_with("bash "))
        .filter(|r| !expected.iter().any(|e| r.ends_with(e)))
        .collect();
    assert_eq!(
        unexpected,
        Vec::<&String>::new(),
        "refusals of the agent program itself"
    );
}

/// The demo (`cargo xtask demo`), run as it runs there: the read beyond
/// the mission is parked with the task stopped, approved for the session by
/// a person and the agent carries on; the injected read is parked and
/// denied; the script's own checks (tests pass, fix committed, key not
/// leaked, the agent stopped twice) decide its exit status.
#[test]
fn the_demo_parks_an_access_a_person_approves_and_one_they_deny() {
    let out = Command::new("sh")
        .args(["-c", include_str!("../../xtask/guest/demo.sh")])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stdout}");
    // Request ids go on counting from whatever the programs it took over
    // parked before (git's configuration is inspected in other tasks).
    let approved: u64 = stdout
        .split("approved request ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|id| id.parse().ok())
        .unwrap_or_else(|| panic!("no approved request in\n{stdout}"));
    for line in [
        "read /home/alice/docs/spec.md by sed".to_owned(),
        format!("approved request {approved} (for the session)"),
        "read /home/alice/.ssh/id_ed25519 by cat".to_owned(),
        format!("denied request {}", approved + 1),
    ] {
        assert!(stdout.contains(&line), "{line:?} missing from\n{stdout}");
    }
}

/// What real work costs under pincer (`cargo xtask bench` runs it; ignored
/// otherwise): every clean task, `BENCH_ROUNDS` rounds (default 5), each
/// round the task once without pincer and once confined, interleaved so
/// that the emulated machine's drift hits both alike. The time is the
/// work's own, taken inside the shell that does it (the confined run's
/// start-up, loading the programs, is not the work's). Prints one
/// `REAL-BENCH-ROW` per task (the medians, their ratio, the decisions the
/// kernel made in the confined runs), then `HOOK-ROW`s: the kernel's own
/// run-time statistics for each program over one more confined pass of
/// every task, the programs kept loaded between the runs.
#[test]
#[ignore = "a benchmark: cargo xtask bench runs it"]
fn bench_real_work() {
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(5);
    let timed = |task: &Task| {
        format!(
            "start=$(date +%s%N)\n( set -e\n{}\n) >/dev/null 2>&1 || exit 1\necho $(( ($(date +%s%N) - start) / 1000 ))",
            task.work
        )
    };
    let micros = |out: &Output, name: &str| -> u64 {
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}: no time in {:?}", out.stdout))
    };
    let mut rows = Vec::new();
    for task in &TASKS.task {
        let (mut none, mut confined, mut decisions) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..rounds {
            let world = World::new(task);
            // In the tree, as the confined run starts.
            let out = world.bash(&format!("cd \"$T\"\n{}", timed(task)));
            none.push(micros(&out, &task.name));
            let world = World::new(task);
            let (out, _) = world.confined(task, &timed(task));
            confined.push(micros(&out, &task.name));
            decisions.push(world.decisions());
        }
        let ratio = median(&confined) as f64 / median(&none).max(1) as f64;
        let row = format!(
            "{}\t{}\t{}\t{ratio:.3}\t{}\t{}\t{}",
            task.name,
            median(&none),
            median(&confined),
            median(&decisions),
            join(&none),
            join(&confined)
        );
        let _ = writeln!(std::io::stdout(), "REAL-BENCH-ROW\t{row}");
        rows.push(row);
    }
    assert_eq!(rows.len(), TASKS.task.len());

    // The kernel's statistics: kept on while the handle is open.
    let _stats = aya::sys::enable_stats(aya::sys::Stats::RunTime).expect("BPF_ENABLE_STATS");
    for task in &TASKS.task {
        let world = World::new(task);
        let (out, _) = world.confined(task, &format!("set -e\n{}", task.work));
        assert!(out.status.success(), "{}", task.name);
    }
    let mut hooks = 0;
    for (name, runs, time) in program_stats() {
        if runs == 0 {
            continue;
        }
        let per_run = time.as_nanos() / u128::from(runs);
        let _ = writeln!(std::io::stdout(), "HOOK-ROW\t{name}\t{runs}\t{per_run}");
        hooks += 1;
    }
    assert!(hooks > 0, "no LSM program ran");
    // Let the lingering programs go.
    let out = Command::new(pincer_bin())
        .args(["run", "--linger", "0", "--mission"])
        .arg(World::new(&TASKS.task[0]).mission(&TASKS.task[0]))
        .args(["--", "true"])
        .output()
        .unwrap();
    assert!(out.status.success());
}

fn median(values: &[u64]) -> u64 {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    sorted.get(sorted.len() / 2).copied().unwrap_or(0)
}

fn join(values: &[u64]) -> String {
    values
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(",")
}
