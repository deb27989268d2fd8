//! The harness of the real-tools tests: the tasks of
//! `tests/real-tools.toml`, the home and tree each runs in, and the scripted
//! model endpoint the agent programs talk to.

use std::{
    fs,
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
    sync::LazyLock,
};

use serde::Deserialize;

use crate::pincer_bin;

/// Operations on a task's tree: everything editors, version control and
/// build tools do to files, but running them.
pub const TREE_OPS: &str =
    r#""read", "write", "create", "delete", "rename", "link", "setattr", "mkdir""#;

/// The tasks, from `tests/real-tools.toml` (what its comments say).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tasks {
    /// Sets up the user's home for every task.
    home: String,
    /// A repository with one commit.
    repository: String,
    pub task: Vec<Task>,
}

/// One scripted task.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Task {
    /// The test's name.
    pub name: String,
    /// What it does, for the table.
    pub work_is: String,
    /// Whether it runs what is in its tree.
    #[serde(default)]
    pub exec: bool,
    /// Whether the tree starts as a repository with one commit.
    #[serde(default)]
    pub repository: bool,
    /// Prepares the tree and whatever the task starts from.
    #[serde(default)]
    pub setup: String,
    /// The agent's work.
    pub work: String,
    /// Succeeds when the work is done.
    pub check: String,
    /// The mission's grants besides the tree.
    #[serde(default)]
    pub grant: Vec<Grant>,
    /// The goals of its injected variant, tried in turn before the work.
    pub injected: Vec<Injected>,
    /// A refusal the clean run meets and goes past.
    pub tolerated: Option<Tolerated>,
}

/// A grant of a task's mission.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grant {
    path: String,
    ops: Vec<String>,
    extent: Option<String>,
}

/// The goal of a task's injected variant.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Injected {
    /// What the injected text makes the agent try.
    pub goal: String,
    /// What that is, for the table.
    pub is: String,
    pub place: Place,
    /// Succeeds when the goal was reached.
    pub reached: String,
}

/// Where an injected goal is.
#[derive(Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Place {
    /// Outside the mission: it must be refused.
    Outside,
    /// A policy object inside the granted tree: a tree grant cannot tell it
    /// from the task's own work, its label can.
    Policy,
}

/// A refusal whose text holds `refusal` is counted and shown, not failed:
/// `why` says why it stays refused.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tolerated {
    pub refusal: String,
    pub why: String,
}

/// The tasks of `tests/real-tools.toml`, read once.
pub static TASKS: LazyLock<Tasks> = LazyLock::new(|| {
    toml::from_str(include_str!("../real-tools.toml")).expect("tests/real-tools.toml is valid")
});

/// A task's home and tree, fresh for each run.
pub struct World {
    home: PathBuf,
    tree: PathBuf,
}

impl World {
    /// `/home/<task>` with the user's secrets, and the tree
    /// `~/work/<task>` set up for the task.
    pub fn new(task: &Task) -> World {
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
    pub fn bash(&self, script: &str) -> Output {
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
    pub fn mission(&self, task: &Task) -> PathBuf {
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
    /// the tree; returns its output and the refusals in the audit log. The
    /// programs stay loaded for the next run to take over (with every map
    /// cleared): each task starts as a fresh load would, without the half
    /// minute an emulated guest takes to verify them.
    pub fn confined(&self, task: &Task, script: &str) -> (Output, Vec<String>) {
        let audit = self.home.join("audit.jsonl");
        let _ = fs::remove_file(&audit);
        let out = Command::new(pincer_bin())
            .args(["run", "--linger", "2h", "--mode", "enforce", "--mission"])
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
        (out, refusals_in(&audit))
    }

    /// The decisions the kernel made in the last confined run, from the
    /// counters its audit log ends with.
    pub fn decisions(&self) -> u64 {
        let audit = fs::read_to_string(self.home.join("audit.jsonl")).unwrap_or_default();
        let counters = audit
            .lines()
            .rev()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|l| l["event"] == "counters")
            .expect("the audit log ends with the kernel's counters");
        ["allowed", "denied", "audited"]
            .iter()
            .filter_map(|c| counters["counters"][c].as_u64())
            .sum()
    }

    /// Whether `check` succeeds, run with bash outside pincer.
    pub fn holds(&self, check: &str) -> bool {
        self.bash(&format!("set -e\n{check}")).status.success()
    }
}

/// The scripted model endpoint (`tests/agents/model.py`) on a port of
/// loopback, stopped when dropped.
pub struct Model {
    server: std::process::Child,
    dir: PathBuf,
    pub port: u16,
}

impl Model {
    pub fn start(name: &str, port: u16) -> Model {
        Model::scripted(name, port, None)
    }

    /// Like [`Model::start`], answering the first request that offers the
    /// `Bash` tool with a call of it running `command`.
    pub fn scripted(name: &str, port: u16, command: Option<&str>) -> Model {
        let dir = Path::new("/tmp").join(format!("model-{name}"));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("model.py"), include_str!("../agents/model.py")).unwrap();
        let server = Command::new("python3")
            .args(["model.py", &port.to_string()])
            .args(command)
            .current_dir(&dir)
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        // Up when it accepts a connection.
        assert!(
            crate::wait_for(std::time::Duration::from_secs(30), || {
                std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
            }),
            "the model endpoint starts"
        );
        Model { server, dir, port }
    }

    /// How many of its answers were a call of the `Bash` tool.
    pub fn commands(&self) -> usize {
        fs::read_to_string(self.dir.join("requests.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|l| l["command"] == true)
            .count()
    }

    /// What it logged of each request.
    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.join("requests.jsonl")).unwrap_or_default()
    }

    /// The requests it was sent (paths), in order.
    pub fn requests(&self) -> Vec<String> {
        fs::read_to_string(self.dir.join("requests.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter_map(|l| l["path"].as_str().map(str::to_owned))
            .collect()
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

/// The refusals of an audit log, as `comm hook path`.
pub fn refusals_in(audit: &Path) -> Vec<String> {
    fs::read_to_string(audit)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|l| l["event"] == "decision" && l["verdict"] == "deny")
        .map(|l| {
            let field = |name: &str| l[name].as_str().unwrap_or("?").to_owned();
            format!("{} {} {}", field("comm"), field("hook"), field("path"))
        })
        .collect()
}
