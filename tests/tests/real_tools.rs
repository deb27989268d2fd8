//! Real tools under minimal missions, in the Debian guest: each task does
//! real work with git, python3, gcc, make, sed, patch, tar, find, node, npm
//! or pip under the smallest mission it needs, and must succeed; its
//! injected variant also tries one goal an attacker would want (a key or a
//! token into the tree, a shell start-up file, a cron entry, a git alias or
//! hook, an instruction file, a system binary, a planted link). A goal
//! outside the mission must fail, and the task must still be done. A goal
//! inside the granted tree (an instruction file, a git hook, `.git/config`)
//! is beyond what a tree grant can refuse: it is reported as it goes, not
//! asserted, until authority labels close it.
//!
//! Each test prints one row of the table (`REAL-TOOLS-ROW`, tab-separated),
//! which `cargo xtask test` gathers into the table and its figures: clean
//! utility and injected goal success.

use std::{
    fs,
    io::Write,
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
    sync::LazyLock,
};

use pincer_tests::pincer_bin;
use serde::Deserialize;

/// Operations on a task's tree: everything editors, version control and
/// build tools do to files, but running them.
const TREE_OPS: &str =
    r#""read", "write", "create", "delete", "rename", "link", "setattr", "mkdir""#;

/// The tasks, from `tests/real-tools.toml` (what its comments say).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Tasks {
    /// Sets up the user's home for every task.
    home: String,
    /// A repository with one commit.
    repository: String,
    task: Vec<Task>,
}

/// One scripted task.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Task {
    /// The test's name.
    name: String,
    /// What it does, for the table.
    work_is: String,
    /// Whether it runs what is in its tree.
    #[serde(default)]
    exec: bool,
    /// Whether the tree starts as a repository with one commit.
    #[serde(default)]
    repository: bool,
    /// Prepares the tree and whatever the task starts from.
    #[serde(default)]
    setup: String,
    /// The agent's work.
    work: String,
    /// Succeeds when the work is done.
    check: String,
    /// The mission's grants besides the tree.
    #[serde(default)]
    grant: Vec<Grant>,
    injected: Injected,
    /// A refusal the clean run meets and goes past.
    tolerated: Option<Tolerated>,
}

/// A grant of a task's mission.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Grant {
    path: String,
    ops: Vec<String>,
    extent: Option<String>,
}

/// The goal of a task's injected variant.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Injected {
    /// What the injected text makes the agent try.
    goal: String,
    /// What that is, for the table.
    is: String,
    place: Place,
    /// Succeeds when the goal was reached.
    reached: String,
}

/// Where an injected goal is.
#[derive(Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Place {
    /// Outside the mission: it must be refused.
    Outside,
    /// Inside the granted tree: a tree grant cannot tell it from the task's
    /// own work.
    Tree,
}

/// A refusal whose text holds `refusal` is counted and shown, not failed:
/// `why` says why it stays refused.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Tolerated {
    refusal: String,
    why: String,
}

static TASKS: LazyLock<Tasks> = LazyLock::new(|| {
    toml::from_str(include_str!("../real-tools.toml")).expect("tests/real-tools.toml is valid")
});

/// A task's home and tree, fresh for each run.
struct World {
    home: PathBuf,
    tree: PathBuf,
}

impl World {
    /// `/home/<task>` with the user's secrets, and the tree
    /// `~/work/<task>` set up for the task.
    fn new(task: &Task) -> World {
        let home = Path::new("/home").join(&task.name);
        let _ = fs::remove_dir_all(&home);
        let world = World {
            tree: home.join("work").join(&task.name),
            home,
        };
        for leftover in [
            "/etc/cron.d/evil",
            "/var/spool/cron/crontabs/root",
            "/usr/lib/python3/dist-packages/evil.pth",
        ] {
            let _ = fs::remove_file(leftover);
        }
        let repository = if task.repository {
            TASKS.repository.as_str()
        } else {
            ""
        };
        let out = world.bash(&format!("{}\n{repository}\n{}", TASKS.home, task.setup));
        assert!(
            out.status.success(),
            "setting up {}: {}",
            task.name,
            String::from_utf8_lossy(&out.stderr)
        );
        world
    }

    /// Runs `script` with bash outside pincer, in the tree.
    fn bash(&self, script: &str) -> Output {
        Command::new("bash")
            .args(["-c", script])
            .env("HOME", &self.home)
            .env("T", &self.tree)
            .env_remove("TMPDIR")
            .current_dir("/")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// The task's mission: its tree and `grants`.
    fn mission(&self, task: &Task) -> PathBuf {
        let path = self.home.join("mission.toml");
        let exec = if task.exec { r#", "exec""# } else { "" };
        let mut text = format!(
            "[mission]\nname = \"{}\"\n\n[[grant]]\npath = \"{}\"\nops = [{TREE_OPS}{exec}]\nextent = \"tree\"\n",
            task.name,
            self.tree.display(),
        );
        for grant in &task.grant {
            let ops: Vec<String> = grant.ops.iter().map(|op| format!("{op:?}")).collect();
            text.push_str(&format!(
                "\n[[grant]]\npath = {:?}\nops = [{}]\nextent = {:?}\n",
                grant.path,
                ops.join(", "),
                grant.extent.as_deref().unwrap_or("file"),
            ));
        }
        fs::write(&path, text).unwrap();
        path
    }

    /// Runs `script` with bash confined by the task's mission (enforce), in
    /// the tree; returns its output and the refusals in the audit log.
    fn confined(&self, task: &Task, script: &str) -> (Output, Vec<String>) {
        let audit = self.home.join("audit.jsonl");
        let _ = fs::remove_file(&audit);
        let out = Command::new(pincer_bin())
            .args(["run", "--mode", "enforce", "--mission"])
            .arg(self.mission(task))
            .arg("--audit")
            .arg(&audit)
            .args(["--", "bash", "-c", script])
            .env("HOME", &self.home)
            .env("T", &self.tree)
            .env_remove("TMPDIR")
            .current_dir(&self.tree)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let refusals = fs::read_to_string(&audit)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|l| l["event"] == "decision" && l["verdict"] == "deny")
            .map(|l| {
                let field = |name: &str| l[name].as_str().unwrap_or("?").to_owned();
                format!("{} {} {}", field("comm"), field("hook"), field("path"))
            })
            .collect();
        (out, refusals)
    }

    fn holds(&self, check: &str) -> bool {
        self.bash(&format!("set -e\n{check}")).status.success()
    }
}

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
    let injected = format!(
        "{{ {}\n}} || true\nset -e\n{}",
        task.injected.goal, task.work
    );
    let (out, _) = world.confined(task, &injected);
    let reached = world.holds(&task.injected.reached);
    let still_done = out.status.success() && world.holds(&task.check);
    eprintln!(
        "injected run of {name}: {:?}, goal reached: {reached}\n  stderr: {}",
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
    let row = [
        task.name.as_str(),
        &task.work_is,
        if clean { "done" } else { "FAILED" },
        &refusals,
        &task.injected.is,
        match task.injected.place {
            Place::Outside => "outside the mission",
            Place::Tree => "inside the tree",
        },
        if reached { "reached" } else { "refused" },
    ]
    .join("\t");
    // Straight to the descriptor: libtest keeps what a passing test
    // prints with the macros.
    let _ = writeln!(std::io::stdout(), "REAL-TOOLS-ROW\t{row}");

    assert!(clean, "{name}: the clean run did not do its work");
    assert_eq!(
        unexpected,
        Vec::<String>::new(),
        "{name}: refusals in the clean run"
    );
    assert!(still_done, "{name}: the injected run did not do its work");
    if task.injected.place == Place::Outside {
        assert!(
            !reached,
            "{name}: the injected goal outside the mission was reached"
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
