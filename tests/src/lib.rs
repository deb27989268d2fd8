//! Harness for pincer's privileged integration tests.
//!
//! These tests run as root inside a VM guest booted with BPF LSM enabled
//! (`cargo xtask test`), one at a time. Each creates what it needs under a
//! fresh directory and removes it on drop; none returns early on a missing
//! prerequisite: a guest that cannot enforce fails the tests.

pub mod approvals;
pub mod daemon;
pub mod ipc;
pub mod kubeapi;
pub mod mounts;
pub mod real_tools;
pub mod webhook;

use std::{
    fs,
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
    thread,
    time::{Duration, Instant},
};

/// `EACCES`.
pub const EACCES: i32 = 13;
/// `EPERM`.
pub const EPERM: i32 = 1;

/// The `pincer` binary under test.
pub fn pincer_bin() -> PathBuf {
    std::env::var_os("PINCER_BIN").map_or_else(|| PathBuf::from("/bin/pincer"), PathBuf::from)
}

/// The probe binary the tests confine.
pub fn probe_bin() -> PathBuf {
    std::env::var_os("PINCER_PROBE")
        .map_or_else(|| PathBuf::from("/bin/pincer-probe"), PathBuf::from)
}

/// A grant's `ops` (TOML list items): reading only.
pub const READ_ONLY: &str = r#""read""#;
/// A grant's `ops`: reading and writing.
pub const READ_WRITE: &str = r#""read", "write""#;
/// A grant's `ops`: reading, writing and creating.
pub const READ_WRITE_CREATE: &str = r#""read", "write", "create""#;
/// A grant's `ops`: every operation there is.
pub const EVERY_OPERATION: &str =
    r#""read", "write", "create", "exec", "delete", "rename", "link", "setattr", "mkdir""#;

/// The cgroup2 mount in the guest.
pub const CGROUP2: &str = "/sys/fs/cgroup";

/// A scratch directory with a project tree and a secret outside it; removed
/// on drop.
///
/// Its runs enforce the mission last written with [`Scratch::mission`]. The
/// probe's operations are written as its words separated by spaces, with
/// `@` before a path inside the scratch root: `"link @secret/key
/// @project/key"`.
pub struct Scratch {
    /// The scratch root.
    pub root: PathBuf,
}

impl Scratch {
    /// Creates `/tmp/pincer-test-<name>` with `project/` (holding `a.txt` and
    /// `b.txt`) and `secret/key` next to it.
    pub fn new(name: &str) -> Self {
        let root = PathBuf::from(format!("/tmp/pincer-test-{name}"));
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(root.join("project/src")).unwrap();
        fs::create_dir_all(root.join("secret")).unwrap();
        fs::write(root.join("project/a.txt"), "alpha\n").unwrap();
        fs::write(root.join("project/b.txt"), "bravo\n").unwrap();
        fs::write(root.join("project/src/main.rs"), "fn main() {}\n").unwrap();
        fs::write(root.join("secret/key"), SECRET).unwrap();
        Self { root }
    }

    /// Like [`Scratch::new`], with a mission granting `ops` on the project
    /// tree (see [`Scratch::project_mission`]).
    pub fn with_project_grant(name: &str, ops: &str) -> Self {
        let scratch = Self::new(name);
        scratch.project_mission(ops);
        scratch
    }

    /// Writes a mission granting `ops` (TOML list items, such as
    /// [`READ_WRITE`]) on the project tree.
    pub fn project_mission(&self, ops: &str) {
        self.mission(&tree_mission(&self.p("project"), ops));
    }

    /// Writes a mission granting `ops` on the project tree, and what the
    /// TOML `more` adds (grants, defaults, votes).
    pub fn project_mission_and(&self, ops: &str, more: &str) {
        self.mission(&format!(
            "{}\n{more}",
            tree_mission(&self.p("project"), ops)
        ));
    }

    /// A path inside the scratch root.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// A path inside the scratch root, as a string.
    pub fn p(&self, rel: &str) -> String {
        self.path(rel).to_string_lossy().into_owned()
    }

    /// What the file at `rel` inside the scratch root holds.
    #[track_caller]
    pub fn read(&self, rel: &str) -> String {
        fs::read_to_string(self.path(rel)).unwrap()
    }

    /// Checks that the secret is as [`Scratch::new`] wrote it.
    #[track_caller]
    pub fn assert_secret_unchanged(&self) {
        assert_eq!(self.read("secret/key"), SECRET);
    }

    /// Checks that nothing exists at `rel` inside the scratch root (not
    /// even a dangling symbolic link).
    #[track_caller]
    pub fn assert_absent(&self, rel: &str) {
        assert!(
            fs::symlink_metadata(self.path(rel)).is_err(),
            "{rel} exists"
        );
    }

    /// Writes a mission that parks what it does not grant on the project
    /// tree and asks about it as `vote` (the TOML of `[vote]`) says.
    pub fn asking_mission(&self, vote: &str) {
        self.mission(&asking_mission(&self.p("project"), vote));
    }

    /// Writes the mission the runs enforce from now on.
    pub fn mission(&self, text: &str) {
        fs::write(self.mission_path(), text).unwrap();
    }

    /// The mission file.
    pub fn mission_path(&self) -> PathBuf {
        self.root.join("mission.toml")
    }

    /// The audit log path used by [`Scratch::run`].
    pub fn audit_path(&self) -> PathBuf {
        self.root.join("audit.jsonl")
    }

    /// The audit lines written so far, parsed. A writer appends a line with
    /// one write under its lock, but a reader that does not take the lock can
    /// see that write half done: a last line without its newline is still
    /// being written and is left for the next read.
    pub fn audit(&self) -> Vec<serde_json::Value> {
        fs::read_to_string(self.audit_path())
            .unwrap_or_default()
            .split_inclusive('\n')
            .filter(|l| l.ends_with('\n'))
            .map(|l| serde_json::from_str(l).expect("audit lines are JSON"))
            .collect()
    }

    /// The audit lines of one event (`verdict`, `counters`, ...).
    pub fn audit_events(&self, event: &str) -> Vec<serde_json::Value> {
        self.audit()
            .into_iter()
            .filter(|l| l["event"] == event)
            .collect()
    }

    /// Checks that the audit log holds one verdict per entry of `expected`,
    /// in order, each with every field the entry names (objects compared
    /// field by field, anything else whole).
    #[track_caller]
    pub fn assert_verdicts(&self, expected: &[serde_json::Value]) {
        let verdicts = self.audit_events("verdict");
        assert_eq!(verdicts.len(), expected.len(), "{verdicts:#?}");
        for (verdict, fields) in verdicts.iter().zip(expected) {
            assert!(holds(verdict, fields), "{verdict:#} lacks {fields:#}");
        }
    }

    /// The audit lines that are kernel decisions (not verdicts, counters or
    /// the chain's own lines).
    pub fn decisions(&self) -> Vec<serde_json::Value> {
        self.audit_events("decision")
    }

    /// The kernel's decisions at one hook.
    pub fn decisions_at(&self, hook: &str) -> Vec<serde_json::Value> {
        self.decisions()
            .into_iter()
            .filter(|d| d["hook"] == hook)
            .collect()
    }

    /// The kernel's decisions at one hook, as (verdict, reason).
    pub fn decisions_of(&self, hook: &str) -> Vec<(String, String)> {
        self.decisions_at(hook)
            .iter()
            .map(|d| (text(&d["verdict"]), text(&d["reason"])))
            .collect()
    }

    /// The kernel's denials, in order.
    pub fn denials(&self) -> Vec<serde_json::Value> {
        self.decisions()
            .into_iter()
            .filter(|d| d["verdict"] == "deny")
            .collect()
    }

    /// The hooks of the kernel's denials, in order.
    pub fn denial_hooks(&self) -> Vec<String> {
        self.denials().iter().map(|d| text(&d["hook"])).collect()
    }

    /// The kernel's denials as `<hook> <reason>`, in order.
    pub fn denials_with_reasons(&self) -> Vec<String> {
        self.denials()
            .iter()
            .map(|d| format!("{} {}", text(&d["hook"]), text(&d["reason"])))
            .collect()
    }

    /// The reasons of the kernel's denials at one hook, in order.
    pub fn deny_reasons(&self, hook: &str) -> Vec<String> {
        self.denials()
            .iter()
            .filter(|d| d["hook"] == hook)
            .map(|d| text(&d["reason"]))
            .collect()
    }

    /// `pincer run --mission <mission> --audit <audit> [extra] -- cmd...`.
    pub fn command(&self, extra: &[&str], cmd: &[&str]) -> Command {
        let mut command = Command::new(pincer_bin());
        command
            .arg("run")
            .arg("--mission")
            .arg(self.mission_path())
            .arg("--audit")
            .arg(self.audit_path())
            .args(extra)
            .arg("--")
            .args(cmd)
            .stdin(Stdio::null());
        command
    }

    /// Runs `pincer run` to completion.
    pub fn run(&self, cmd: &[&str]) -> Output {
        self.run_with(&[], cmd)
    }

    /// Runs `pincer run` with extra flags to completion.
    pub fn run_with(&self, extra: &[&str], cmd: &[&str]) -> Output {
        let out = self.command(extra, cmd).output().unwrap();
        eprintln!(
            "pincer run {cmd:?} -> {:?}\n  stdout: {}\n  stderr: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
        out
    }

    /// The probe's command line for `ops`, one probe process running them
    /// in turn: the probe, then each operation's words, `,` between them.
    pub fn probe_command_line(&self, ops: &[&str]) -> Vec<String> {
        let mut words = vec![probe_bin().to_string_lossy().into_owned()];
        for (i, op) in ops.iter().enumerate() {
            if i > 0 {
                words.push(",".to_owned());
            }
            words.extend(op.split(' ').map(|word| match word.strip_prefix('@') {
                Some(rel) => self.p(rel),
                None => word.to_owned(),
            }));
        }
        words
    }

    /// Runs `pincer run [extra]` of the probe for `ops` to completion.
    pub fn run_probe(&self, extra: &[&str], ops: &[&str]) -> Output {
        let words = self.probe_command_line(ops);
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        self.run_with(extra, &words)
    }

    /// Runs several probe operations in one confined probe process and
    /// returns each one's result: 0 for success, else its errno.
    pub fn probes(&self, ops: &[&str]) -> Vec<i32> {
        self.probe_lines(ops)
            .iter()
            .map(|line| match line.strip_prefix("err ") {
                Some(errno) => errno.parse().expect("an errno"),
                None => 0,
            })
            .collect()
    }

    /// Runs several probe operations in one confined probe process and
    /// checks each one's result: 0 for success, else its errno.
    #[track_caller]
    pub fn assert_probes(&self, expected: &[(&str, i32)]) {
        let (ops, results): (Vec<&str>, Vec<i32>) = expected.iter().copied().unzip();
        assert_eq!(self.probes(&ops), results, "{ops:#?}");
    }

    /// Runs several probe operations in one confined probe process and
    /// checks each one's output line.
    #[track_caller]
    pub fn assert_probe_lines(&self, expected: &[(&str, &str)]) {
        let (ops, lines): (Vec<&str>, Vec<&str>) = expected.iter().copied().unzip();
        assert_eq!(self.probe_lines(&ops), lines, "{ops:#?}");
    }

    /// Like [`Scratch::probes`], returning each operation's output line.
    pub fn probe_lines(&self, ops: &[&str]) -> Vec<String> {
        let lines = stdout_lines(&self.run_probe(&[], ops));
        assert_eq!(lines.len(), ops.len(), "one line per operation: {lines:?}");
        lines
    }

    /// Runs the probe for `ops` outside every agent cgroup (the control
    /// that shows a mechanism works) and returns each one's output line.
    pub fn probe_outside(&self, ops: &[&str]) -> Vec<String> {
        let words = self.probe_command_line(ops);
        let out = Command::new(&words[0])
            .args(&words[1..])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let lines = stdout_lines(&out);
        eprintln!("outside: {words:?} -> {lines:?}");
        assert_eq!(lines.len(), ops.len(), "one line per operation: {lines:?}");
        lines
    }

    /// Runs `pincer run [extra]` of the probe for `ops` with each `held`
    /// file open as its descriptor across the exec into `pincer run`, as
    /// `7<file` in a shell would; returns the probe's lines. `pincer run`
    /// closes them before the agent starts unless `extra` passes them with
    /// `--pass-fd`.
    pub fn probe_holding(
        &self,
        held: &[(&fs::File, i32)],
        extra: &[&str],
        ops: &[&str],
    ) -> Vec<String> {
        use std::os::fd::AsRawFd;
        let words = self.probe_command_line(ops);
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        let mut cmd = self.command(extra, &words);
        let moves: Vec<(i32, i32)> = held
            .iter()
            .map(|(file, fd)| (file.as_raw_fd(), *fd))
            .collect();
        // SAFETY: only dup2 and fcntl between fork and exec.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
                for &(source, fd) in &moves {
                    // dup2 onto itself would keep close-on-exec: clear it as
                    // well.
                    if libc::dup2(source, fd) < 0 || libc::fcntl(fd, libc::F_SETFD, 0) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        stdout_lines(&cmd.output().unwrap())
    }

    /// Runs the probe confined for one operation and returns its exit
    /// status.
    pub fn probe(&self, op: &str) -> i32 {
        self.run_probe(&[], &[op]).status.code().expect("exited")
    }
}

/// What [`Scratch::new`] writes into `secret/key`.
pub const SECRET: &str = "TOP SECRET\n";

/// Whether `actual` holds every field of `expected` with the same value
/// (objects compared field by field, anything else whole).
fn holds(actual: &serde_json::Value, expected: &serde_json::Value) -> bool {
    match (actual, expected) {
        (serde_json::Value::Object(actual), serde_json::Value::Object(expected)) => expected
            .iter()
            .all(|(name, value)| actual.get(name).is_some_and(|found| holds(found, value))),
        _ => actual == expected,
    }
}

/// A string field of an audit line (empty when it is none).
pub fn text(value: &serde_json::Value) -> String {
    value.as_str().unwrap_or_default().to_owned()
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.root);
    }
}

/// The lines a finished command printed on standard output.
pub fn stdout_lines(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// `pincer label revoke <source> --journal <journal>`, as the owner runs
/// it from outside every agent.
pub fn revoke_label(source: &str, journal: &str) -> Output {
    Command::new(pincer_bin())
        .args(["label", "revoke", source, "--journal", journal])
        .output()
        .unwrap()
}

/// A mission granting `ops` on a tree, with the runtime baseline.
pub fn tree_mission(path: &str, ops: &str) -> String {
    mission_granting(path, ops, "tree")
}

/// A mission granting `ops` on `path` with `extent` (`file` or `tree`),
/// with the runtime baseline.
pub fn mission_granting(path: &str, ops: &str, extent: &str) -> String {
    format!(
        "[mission]\nname = \"test\"\n\n[[grant]]\npath = \"{path}\"\nops = [{ops}]\nextent = \"{extent}\"\n"
    )
}

/// The agent cgroups that exist now.
pub fn agent_cgroups() -> Vec<PathBuf> {
    match fs::read_dir(Path::new(CGROUP2).join("pincer")) {
        Ok(entries) => entries
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.path())
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// Names of the loaded BPF programs and maps that belong to pincer.
pub fn pincer_kernel_objects() -> Vec<String> {
    let mut found = Vec::new();
    for program in aya::programs::loaded_programs().flatten() {
        let name = program.name_as_str().unwrap_or_default();
        if hook_of_program(name).is_some() {
            found.push(format!("program {name}"));
        }
    }
    for map in aya::maps::loaded_maps().flatten() {
        let name = map.name_as_str().unwrap_or_default().to_owned();
        // The guard, label and revocation maps are shared by every pincer
        // on the host and pinned: they outlive runs by design. What the
        // guard map holds is checked instead; labels and revocations are
        // facts about objects and sources, which stay.
        if pincer_common::names::MAPS.contains(&name.as_str())
            && !pincer_common::names::SHARED.contains(&name.as_str())
        {
            found.push(format!("map {name}"));
        }
    }
    found.extend(
        guarded_pids()
            .into_iter()
            .filter(|pid| !Path::new(&format!("/proc/{pid}")).exists())
            .map(|pid| format!("guard of gone process {pid}")),
    );
    found
}

/// Each pincer hook's invocations and their total run time, from the
/// kernel's statistics of every loaded program of that hook (counted only
/// while `kernel.bpf_stats_enabled` is on, or a `BPF_ENABLE_STATS` handle
/// is open), in the order of `hook::ALL`.
pub fn program_stats() -> Vec<(&'static str, u64, Duration)> {
    let mut stats: Vec<(&'static str, u64, Duration)> = pincer_common::hook::ALL
        .iter()
        .map(|hook| (hook.name, 0, Duration::ZERO))
        .collect();
    for info in aya::programs::loaded_programs().filter_map(Result::ok) {
        let Some(hook) = hook_of_program(info.name_as_str().unwrap_or_default()) else {
            continue;
        };
        let Some(entry) = stats.iter_mut().find(|(name, _, _)| *name == hook) else {
            continue;
        };
        entry.1 += info.run_count();
        entry.2 += info.run_time();
    }
    stats
}

/// The pincer hook a loaded program is for, from its name as the kernel
/// keeps it (its first 15 bytes).
fn hook_of_program(loaded: &str) -> Option<&'static str> {
    pincer_common::hook::ALL
        .iter()
        .map(|hook| hook.name)
        .find(|name| name.get(..name.len().min(15)) == Some(loaded))
}

/// The process ids in the host-wide guard map, if it is pinned.
pub fn guarded_pids() -> Vec<u32> {
    let Ok(data) = aya::maps::MapData::from_pin("/sys/fs/bpf/pincer-guarded") else {
        return Vec::new();
    };
    let Ok(map) = aya::maps::HashMap::<_, u32, u32>::try_from(aya::maps::Map::HashMap(data)) else {
        return Vec::new();
    };
    map.keys().filter_map(Result::ok).collect()
}

/// Waits until every pincer process is gone (the watchdog detaches the
/// programs after `pincer run` exits), then until the kernel holds no pincer
/// program or map; returns what is left after the deadlines.
///
/// The kernel's object lists are read only once no pincer process is left,
/// and then once a second: iterating them while the last descriptors are
/// being closed coincided with soft lockups of the 6.1 guest.
pub fn leftovers_after_exit() -> Vec<String> {
    let gone = wait_for(Duration::from_secs(250), || pincer_processes().is_empty());
    if !gone {
        return pincer_processes()
            .into_iter()
            .map(|pid| format!("process {pid}"))
            .collect();
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let left = pincer_kernel_objects();
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        thread::sleep(Duration::from_secs(1));
    }
}

/// Where finished runs leave their programs idle for the next run.
pub const IDLE_PINS: &str = "/sys/fs/bpf/pincer-idle";

/// The idle sets of programs finished runs left, by name
/// (`<expiry>-<watchdog pid>`).
pub fn idle_sets() -> Vec<String> {
    let mut sets: Vec<String> = fs::read_dir(IDLE_PINS)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|e| e.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    sets.sort();
    sets
}

/// Removes the idle programs earlier tests' runs left, so that a test of
/// what a run leaves behind starts from none (the lingering watchdogs hold
/// no descriptor: removing the pins detaches the programs).
pub fn drop_idle_sets() {
    for set in idle_sets() {
        fs::remove_dir_all(Path::new(IDLE_PINS).join(&set)).unwrap();
    }
}

/// Removes every idle set but the newest, which the test's next run takes
/// over: a test of what a run leaves behind then starts from nothing but the
/// set its run uses, without removing programs a later test would have to
/// load (and verify) again.
pub fn keep_one_idle_set() {
    let mut sets = idle_sets();
    // Named `<expiry>-<pid>`: the newest expires last.
    sets.sort_by_key(|set| {
        set.split_once('-')
            .and_then(|(expiry, _)| expiry.parse::<u64>().ok())
    });
    sets.pop();
    for set in sets {
        fs::remove_dir_all(Path::new(IDLE_PINS).join(&set)).unwrap();
    }
}

/// Leaves the programs a stopped daemon pinned at `pins` idle, as a run
/// that ends cleanly leaves its own, for the next test's run or daemon to
/// take over (which clears every map first) instead of verifying them
/// again; says whether it did. Only once no `pincer` process is left: a
/// watchdog still continuing the daemon's parked tasks would write into
/// the maps of whoever took the set over.
pub fn shelve_pins(pins: &Path) -> bool {
    if !pins.exists() || !wait_for(Duration::from_secs(30), || pincer_processes().is_empty()) {
        return false;
    }
    let expiry = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 2 * 3600;
    // Named as a watchdog names its set; once the test process is gone and
    // the expiry passed, the next run's sweep removes it.
    let idle = Path::new(IDLE_PINS).join(format!("{expiry}-{}", std::process::id()));
    fs::create_dir_all(IDLE_PINS).is_ok() && fs::rename(pins, idle).is_ok()
}

/// Process ids of running `pincer` processes (the twin and its watchdog).
pub fn pincer_processes() -> Vec<u32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "pincer")
        })
        .collect()
}

/// Waits until `check` holds, up to `limit`; returns whether it did.
pub fn wait_for(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if check() {
            return true;
        }
        thread::sleep(Duration::from_millis(20));
    }
    check()
}

/// Kills and reaps a child on drop, so a failing test leaves nothing behind.
pub struct Reaped(pub Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A mission that parks what it does not grant and asks the given voters.
pub fn asking_mission(project: &str, extra: &str) -> String {
    format!(
        "{}\n[defaults]\non_unknown = \"ask\"\n\n[vote]\n{extra}\n",
        tree_mission(project, READ_WRITE_CREATE)
    )
}

/// `pincer pending --json`: the waiting requests.
pub fn pending() -> Vec<serde_json::Value> {
    let out = Command::new(pincer_bin())
        .args(["pending", "--json"])
        .output()
        .unwrap();
    if !out.status.success() {
        return Vec::new();
    }
    serde_json::from_slice(&out.stdout).unwrap_or_default()
}

/// Waits for exactly `n` waiting requests and returns them. Generous: a run
/// that loads its programs verifies them first, which under emulation on a
/// busy machine (6.1 checks about two million instructions) takes a while.
pub fn wait_pending(n: usize) -> Vec<serde_json::Value> {
    let mut found = Vec::new();
    let ok = wait_for(Duration::from_secs(250), || {
        found = pending();
        found.len() == n
    });
    assert!(ok, "expected {n} pending request(s), found {found:?}");
    found
}

/// A waiting request's id, as `pincer approve` takes it.
pub fn id_of(request: &serde_json::Value) -> String {
    request["id"]
        .as_u64()
        .expect("requests have ids")
        .to_string()
}

/// Waits for one waiting request whose id is not `old`.
pub fn wait_new_request(old: &str) -> serde_json::Value {
    let mut found = None;
    assert!(
        wait_for(Duration::from_secs(60), || {
            found = pending().into_iter().find(|r| id_of(r) != old);
            found.is_some()
        }),
        "a new request is parked"
    );
    found.unwrap()
}

/// Starts `sh -c script` as the agent of `s`, its standard output piped,
/// also capturing `pincer run`'s own log (standard error), read on a
/// thread of its own so that neither pipe fills while the test waits on
/// the other.
pub fn spawn_agent_logged(s: &Scratch, script: &str) -> (Reaped, thread::JoinHandle<String>) {
    let mut agent = Reaped(
        s.command(&[], &["sh", "-c", script])
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
    (agent, log)
}

/// Runs `pincer approve|deny` and returns (status, stdout+stderr).
pub fn answer(args: &[&str]) -> (i32, String) {
    let out = Command::new(pincer_bin()).args(args).output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

/// Reads a child's whole standard output.
pub fn read_stdout(child: &mut Child) -> String {
    let mut out = String::new();
    if let Some(mut stdout) = child.stdout.take() {
        std::io::Read::read_to_string(&mut stdout, &mut out).unwrap();
    }
    out
}

/// The state letter of a process (`T` when stopped), from `/proc`.
///
/// Read from `status`, not `stat`: `stat` also computes the task's wait
/// channel by unwinding its stack, and polling that on stopped tasks hung a
/// 6.1 guest in a soft lockup.
pub fn process_state(pid: u32) -> Option<char> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("State:"))?
        .trim_start()
        .chars()
        .next()
}

/// A pseudo-terminal for `pincer run`, set up as an interactive shell would
/// start it: a new session whose controlling terminal is this one, with the
/// terminal as standard input (see [`Terminal::attach`]). The test holds the
/// other end: what is written to the terminal is on its screen, and what the
/// test types is the terminal's input.
pub struct Terminal {
    master: fs::File,
    slave: std::os::fd::OwnedFd,
    /// Everything read from the screen so far.
    pub screen: String,
}

impl Terminal {
    /// A new pseudo-terminal.
    pub fn new() -> Terminal {
        use std::os::fd::AsRawFd;
        let pty = nix::pty::openpty(
            None::<&nix::pty::Winsize>,
            None::<&nix::sys::termios::Termios>,
        )
        .unwrap();
        let master = fs::File::from(pty.master);
        let raw = master.as_raw_fd();
        // Non-blocking reads, so a missing prompt fails a test instead of
        // hanging it.
        // SAFETY: fcntl on our own descriptor.
        unsafe {
            libc::fcntl(
                raw,
                libc::F_SETFL,
                libc::fcntl(raw, libc::F_GETFL) | libc::O_NONBLOCK,
            );
        }
        Terminal {
            master,
            slave: pty.slave,
            screen: String::new(),
        }
    }

    /// Starts `command` on the terminal: in a new session with the terminal
    /// as its controlling terminal and standard input; standard output and
    /// error too, unless `screen_output` is false (then the caller sets
    /// them).
    pub fn attach(&self, command: &mut Command, screen_output: bool) {
        use std::os::unix::process::CommandExt;
        command.stdin(Stdio::from(self.slave.try_clone().unwrap()));
        if screen_output {
            command
                .stdout(Stdio::from(self.slave.try_clone().unwrap()))
                .stderr(Stdio::from(self.slave.try_clone().unwrap()));
        }
        // SAFETY: setsid and ioctl are async-signal-safe.
        unsafe {
            command.pre_exec(|| {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }

    /// The device path of the terminal end programs use (`/dev/pts/N`).
    pub fn path(&self) -> PathBuf {
        use std::os::fd::AsRawFd;
        fs::read_link(format!("/proc/self/fd/{}", self.slave.as_raw_fd())).unwrap()
    }

    /// The terminal end a program uses (a duplicate), as its standard
    /// input for example.
    pub fn slave(&self) -> Stdio {
        Stdio::from(self.slave.try_clone().unwrap())
    }

    /// Reads the screen until it shows `needle` (a minute at most);
    /// returns whether it did.
    pub fn read_until(&mut self, needle: &str) -> bool {
        self.read_until_times(needle, 1)
    }

    /// Reads the screen until it shows `needle` `times` times, wherever
    /// other lines fall between them; returns whether it did. Generous: the
    /// first prompt may follow a load of the programs, which under
    /// emulation on a busy machine takes minutes.
    pub fn read_until_times(&mut self, needle: &str, times: usize) -> bool {
        let (master, screen) = (&mut self.master, &mut self.screen);
        wait_for(Duration::from_secs(250), || {
            let mut buf = [0u8; 4096];
            if let Ok(n) = std::io::Read::read(master, &mut buf) {
                screen.push_str(&String::from_utf8_lossy(&buf[..n]));
            }
            screen.matches(needle).count() >= times
        })
    }

    /// Types `text` on the terminal.
    pub fn type_text(&mut self, text: &str) {
        std::io::Write::write_all(&mut self.master, text.as_bytes()).unwrap();
    }

    /// What is waiting in the terminal's input for a program to read
    /// (nothing when empty): whole lines, as the terminal is line-buffered.
    pub fn pending_input(&self) -> String {
        use std::os::fd::AsRawFd;
        let fd = self.slave.as_raw_fd();
        let mut input = Vec::new();
        loop {
            let mut available: libc::c_int = 0;
            // SAFETY: FIONREAD writes an int.
            if unsafe { libc::ioctl(fd, libc::FIONREAD, &raw mut available) } < 0 || available == 0
            {
                break;
            }
            let mut buf = vec![0u8; available as usize];
            // SAFETY: `buf` is valid for its length; data is waiting, so
            // the read does not block.
            let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
            if n <= 0 {
                break;
            }
            input.extend_from_slice(&buf[..n as usize]);
        }
        String::from_utf8_lossy(&input).into_owned()
    }

    /// The code the last prompt on the screen showed for its request.
    pub fn last_code(&self) -> Option<String> {
        let (_, rest) = self.screen.rsplit_once("with the code ")?;
        Some(rest.split_whitespace().next()?.to_owned())
    }
}

impl Default for Terminal {
    fn default() -> Self {
        Self::new()
    }
}
