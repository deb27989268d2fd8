//! The daemon tests' harness: one `pincer daemon` with its own
//! configuration, control socket, pin directory and cgroup slice ([`Host`]).
//! Here rather than in `tests/daemon.rs` so that file holds only tests.

use std::{
    fs,
    os::unix::process::CommandExt,
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
    thread,
    time::Duration,
};

use crate::{
    CGROUP2, EACCES, Reaped, Scratch, asking_mission, pincer_bin, probe_bin, stdout_lines, wait_for,
};

/// One daemon's world: config, socket, pins and its cgroup slice.
pub struct Host {
    pub s: Scratch,
    pub slice: PathBuf,
    pub pins: PathBuf,
}

impl Host {
    pub fn new(name: &str) -> Self {
        let s = Scratch::new(&format!("daemon-{name}"));
        let slice = Path::new(CGROUP2).join(format!("{name}.slice"));
        remove_cgroups(&slice);
        fs::create_dir_all(&slice).unwrap();
        let pins = PathBuf::from(format!("/sys/fs/bpf/pincer-{name}"));
        let _ = fs::remove_dir_all(&pins);
        Self { s, slice, pins }
    }

    pub fn socket(&self) -> PathBuf {
        self.s.path("run/pincer.sock")
    }

    pub fn config_path(&self) -> PathBuf {
        self.s.path("daemon.toml")
    }

    /// The `[daemon]` table every test uses, plus `extra` lines.
    pub fn daemon_table(&self, extra: &str) -> String {
        format!(
            "[daemon]\nsocket = \"{}\"\npin_dir = \"{}\"\naudit = \"{}\"\nscan_every = \"200ms\"\n{extra}\n",
            self.socket().display(),
            self.pins.display(),
            self.s.p("audit.jsonl"),
        )
    }

    /// Writes the configuration: the daemon table and one agent per
    /// `(name, pattern under the slice, mission file)`.
    pub fn configure(&self, extra: &str, agents: &[(String, String, PathBuf)]) {
        let mut text = self.daemon_table(extra);
        let slice = self.slice.file_name().unwrap().to_str().unwrap();
        for (name, pattern, mission) in agents {
            text.push_str(&format!(
                "\n[[agent]]\nname = \"{name}\"\ncgroup = \"{slice}/{pattern}\"\nmission = \"{}\"\n",
                mission.display()
            ));
        }
        fs::write(self.config_path(), text).unwrap();
    }

    /// Makes the configuration's scan come once an hour: what confines a
    /// new cgroup in time is then the kernel's hold (and the scans a held
    /// task or a pod's change bring on), never the periodic scan.
    pub fn scan_hourly(&self) {
        let text = fs::read_to_string(self.config_path()).unwrap();
        let hourly = text.replace("scan_every = \"200ms\"", "scan_every = \"1h\"");
        assert_ne!(hourly, text, "the configuration scans every 200ms");
        fs::write(self.config_path(), hourly).unwrap();
    }

    pub fn mission(&self, name: &str, text: &str) -> PathBuf {
        let path = self.s.path(&format!("{name}.toml"));
        fs::write(&path, text).unwrap();
        path
    }

    /// Starts the daemon and waits until it confines `agents` cgroups.
    pub fn start(&self, agents: usize) -> Reaped {
        // The daemon's log goes to a file, shown if the test fails.
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.s.path("daemon.log"))
            .unwrap();
        let mut command = Command::new(pincer_bin());
        command
            .args(["daemon", "--config"])
            .arg(self.config_path())
            .env("PINCER_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log);
        let keep = unit_capabilities();
        // SAFETY: only prctl(2) between fork and exec.
        unsafe {
            command.pre_exec(move || {
                // As under the shipped unit: root, with the bounding set it
                // names (exec then leaves exactly those capabilities).
                for cap in 0..64 {
                    if !keep.contains(&cap) {
                        libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0);
                    }
                }
                Ok(())
            });
        }
        let child = command.spawn().unwrap();
        let daemon = Reaped(child);
        let mask: u64 = unit_capabilities().iter().map(|c| 1u64 << c).sum();
        // The kernel commits an exec's credentials a moment after `spawn`
        // returns (the close-on-exec pipe closes first).
        let mut effective = None;
        let pid = daemon.0.id();
        assert!(
            wait_for(Duration::from_secs(10), || {
                effective = fs::read_to_string(format!("/proc/{pid}/status"))
                    .ok()
                    .and_then(|status| {
                        let value = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?;
                        u64::from_str_radix(value.trim(), 16).ok()
                    });
                effective == Some(mask)
            }),
            "the daemon runs with the unit's capabilities ({mask:#x}), not {effective:#x?}"
        );
        // The daemon answers once its programs are loaded and verified,
        // which under emulation on a busy machine takes minutes.
        assert!(
            wait_for(Duration::from_secs(250), || self.agent_count()
                == Some(agents)),
            "the daemon never confined {agents} cgroups"
        );
        daemon
    }

    /// Starts a daemon that must refuse to run (exit status 2); its error.
    pub fn refused_start(&self) -> String {
        let out = Command::new(pincer_bin())
            .args(["daemon", "--config"])
            .arg(self.config_path())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        stderr
    }

    /// `pincer <args> --socket <ours>`.
    pub fn cli(&self, args: &[&str]) -> Output {
        Command::new(pincer_bin())
            .args(args)
            .arg("--socket")
            .arg(self.socket())
            .output()
            .unwrap()
    }

    pub fn json(&self, args: &[&str]) -> Option<serde_json::Value> {
        let out = self.cli(args);
        out.status
            .success()
            .then(|| serde_json::from_slice(&out.stdout).ok())
            .flatten()
    }

    pub fn agent_count(&self) -> Option<usize> {
        self.json(&["agents", "--json"])
            .and_then(|a| a.as_array().map(Vec::len))
    }

    pub fn pending(&self) -> Vec<serde_json::Value> {
        self.json(&["pending", "--json"])
            .and_then(|p| p.as_array().cloned())
            .unwrap_or_default()
    }

    pub fn wait_pending(&self, n: usize) -> Vec<serde_json::Value> {
        let mut found = Vec::new();
        assert!(
            wait_for(Duration::from_secs(60), || {
                found = self.pending();
                found.len() == n
            }),
            "expected {n} pending requests, found {found:?}"
        );
        found
    }

    /// Waits for the one pending request and answers it: `pincer <answer>
    /// <id> [more]`.
    pub fn answer_next(&self, answer: &[&str]) {
        let id = self.wait_pending(1)[0]["id"].as_u64().unwrap().to_string();
        let mut args = vec![answer[0], &id];
        args.extend_from_slice(&answer[1..]);
        let out = self.cli(&args);
        assert!(out.status.success(), "{out:?}");
    }

    pub fn cgroup(&self, name: &str) -> PathBuf {
        let path = self.slice.join(name);
        fs::create_dir_all(&path).unwrap();
        path
    }

    /// Starts the probe with `args` inside `cgroup`: the shell moves itself
    /// in, then becomes the probe.
    pub fn spawn_in(&self, cgroup: &Path, args: &[&str]) -> Child {
        Command::new("sh")
            .arg("-c")
            .arg(format!(
                "echo 0 > {}/cgroup.procs && exec \"$@\"",
                cgroup.display()
            ))
            .arg("sh")
            .arg(probe_bin())
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// Runs the probe in `cgroup`; its output lines.
    pub fn probe_in(&self, cgroup: &Path, args: &[&str]) -> Vec<String> {
        stdout_lines(&self.spawn_in(cgroup, args).wait_with_output().unwrap())
    }

    /// In `cgroup`, the secret is refused and the project (which every
    /// test mission grants) is read.
    pub fn assert_mission_enforced(&self, cgroup: &Path) {
        let secret = self.s.p("secret/key");
        let project = self.s.p("project/a.txt");
        let lines = self.probe_in(cgroup, &["read", &secret, ",", "read", &project]);
        assert!(denied(&lines[0]) && ok(&lines[1]), "{lines:?}");
    }

    /// `pincer run` of `sh -c script`, enforcing `mission`, against this
    /// daemon; its output is piped.
    pub fn run_registered(&self, mission: &Path, script: &str) -> Child {
        Command::new(pincer_bin())
            .args(["run", "--mode", "enforce", "--mission"])
            .arg(mission)
            .arg("--socket")
            .arg(self.socket())
            .args(["--", "sh", "-c", script])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap()
    }

    pub fn uninstall(&self) -> Output {
        Command::new(pincer_bin())
            .args(["daemon", "--uninstall", "--config"])
            .arg(self.config_path())
            .output()
            .unwrap()
    }
}

/// The capabilities of `CapabilityBoundingSet=` in the shipped systemd unit.
fn unit_capabilities() -> Vec<u32> {
    let unit = include_str!("../../dist/pincer.service");
    let names = unit
        .lines()
        .find_map(|l| l.strip_prefix("CapabilityBoundingSet="))
        .expect("the unit bounds its capabilities");
    names
        .split_whitespace()
        .map(|name| match name {
            "CAP_CHOWN" => 0,
            "CAP_DAC_OVERRIDE" => 1,
            "CAP_DAC_READ_SEARCH" => 2,
            "CAP_FOWNER" => 3,
            "CAP_KILL" => 5,
            "CAP_SYS_PTRACE" => 19,
            "CAP_SYS_ADMIN" => 21,
            "CAP_MAC_ADMIN" => 33,
            "CAP_PERFMON" => 38,
            "CAP_BPF" => 39,
            other => panic!("add {other} to the test's table"),
        })
        .collect()
}

/// A host with one asking agent `a` (a person answers, on the socket) in
/// cgroup `a`; `extra` goes into the `[daemon]` table.
pub fn asking_host(name: &str, extra: &str) -> (Host, PathBuf) {
    let h = Host::new(name);
    let m = h.mission(
        "m",
        &asking_mission(&h.s.p("project"), "voters = [\"prompt\"]\ntimeout = \"5m\""),
    );
    h.configure(extra, &[("a".into(), "a".into(), m)]);
    let cg = h.cgroup("a");
    (h, cg)
}

impl Drop for Host {
    fn drop(&mut self) {
        if thread::panicking() {
            let log = fs::read_to_string(self.s.path("daemon.log")).unwrap_or_default();
            eprintln!("daemon log:\n{log}");
        }
        // The agents first: nothing is parked or running in the programs
        // that go idle.
        remove_cgroups(&self.slice);
        if !crate::shelve_pins(&self.pins) {
            let _ = self.uninstall();
        }
    }
}

/// Kills whatever runs in the cgroups below `dir` and removes them.
pub fn remove_cgroups(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            remove_cgroups(&entry.path());
        }
    }
    let _ = fs::write(dir.join("cgroup.kill"), "1");
    wait_for(Duration::from_secs(10), || {
        fs::remove_dir(dir).is_ok() || !dir.exists()
    });
}

/// Whether a probe's output line reports success.
pub fn ok(line: &str) -> bool {
    line.starts_with("ok ")
}

/// Whether a probe's output line reports `EACCES`.
pub fn denied(line: &str) -> bool {
    line == format!("err {EACCES}")
}
