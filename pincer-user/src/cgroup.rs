//! Agent cgroups: each confined agent runs in its own cgroup v2 under
//! `<cgroup2 mount>/pincer/`, and the BPF programs recognise its tasks by the
//! cgroup's id.

use std::{
    fs, io,
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
    thread,
    time::{Duration, Instant},
};

use nix::{
    errno::Errno,
    sys::signal::{Signal, kill},
    unistd::Pid,
};
use pincer_model::escape::unescape_mount_field;

/// The directory under the cgroup2 mount that holds every agent cgroup.
pub const PINCER_DIR: &str = "pincer";

/// How long [`AgentCgroup::kill_all`] waits for killed processes to go.
pub const KILL_TIMEOUT: Duration = Duration::from_secs(2);

/// Interval between checks while waiting for processes to exit.
const POLL_INTERVAL: Duration = Duration::from_millis(10);

/// Attempts to remove a cgroup directory: the kernel answers `EBUSY` for a
/// moment after the last task has exited.
const REMOVE_ATTEMPTS: u32 = 20;

/// An error while finding, creating or removing a cgroup.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    /// A file or directory of the cgroup filesystem could not be accessed.
    #[error("cannot access {}", .path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// No cgroup2 filesystem is mounted.
    #[error("no cgroup2 filesystem is mounted (see {})", .mounts.display())]
    NotMounted {
        /// The mount table that was read.
        mounts: PathBuf,
    },
    /// A cgroup name that is not a single path component.
    #[error("invalid cgroup name {name:?}")]
    InvalidName {
        /// The name.
        name: String,
    },
    /// An earlier cgroup of the same name still has processes.
    #[error("cgroup {} already exists and is in use", .path.display())]
    InUse {
        /// The cgroup directory.
        path: PathBuf,
    },
    /// The cgroup directory could not be created.
    #[error("cannot create cgroup {}", .path.display())]
    Create {
        /// The cgroup directory.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// The cgroup directory could not be removed.
    #[error("cannot remove cgroup {}", .path.display())]
    Remove {
        /// The cgroup directory.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
}

/// Mount points of every filesystem of type `fs_type` in a mount table (the
/// text of `/proc/self/mounts`), in table order.
pub fn mount_points(mounts: &str, fs_type: &str) -> Vec<PathBuf> {
    mounts
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let _device = fields.next()?;
            let point = fields.next()?;
            (fields.next()? == fs_type).then(|| unescape_mount_field(point))
        })
        .collect()
}

/// The first cgroup2 mount point in a mount table (the text of
/// `/proc/self/mounts`): `/sys/fs/cgroup` on a unified hierarchy,
/// `/sys/fs/cgroup/unified` on a hybrid one.
pub fn parse_cgroup2_mount(mounts: &str) -> Option<PathBuf> {
    mount_points(mounts, "cgroup2").into_iter().next()
}

/// Where this process sees the cgroup2 filesystem.
pub fn cgroup2_mount() -> Result<PathBuf, CgroupError> {
    let mounts = Path::new("/proc/self/mounts");
    let text = fs::read_to_string(mounts).map_err(|source| CgroupError::Io {
        path: mounts.to_owned(),
        source,
    })?;
    parse_cgroup2_mount(&text).ok_or_else(|| CgroupError::NotMounted {
        mounts: mounts.to_owned(),
    })
}

/// The cgroup name of the agent started by the `pincer run` with this pid.
pub fn run_cgroup_name(pid: u32) -> String {
    format!("run-{pid}")
}

/// The pid in a name made by [`run_cgroup_name`].
fn run_cgroup_pid(name: &str) -> Option<Pid> {
    let digits = name.strip_prefix("run-")?;
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let pid: i32 = digits.parse().ok()?;
    (pid > 0).then(|| Pid::from_raw(pid))
}

/// Whether a process with this pid exists (in this pid namespace).
fn process_exists(pid: Pid) -> bool {
    // EPERM: it exists but belongs to someone else.
    !matches!(kill(pid, None), Err(Errno::ESRCH))
}

/// Removes the empty agent cgroups left behind by a `pincer run` that was
/// killed before it could clean up: `<root>/pincer/run-<pid>` whose pid no
/// longer exists. Cgroups that still hold processes are left alone. Returns
/// the directories it removed.
pub fn sweep_stale(cgroup2_root: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(cgroup2_root.join(PINCER_DIR)) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(run_cgroup_pid) else {
            continue;
        };
        let path = entry.path();
        // rmdir fails on a cgroup that still has tasks or children, which is
        // exactly when it must stay.
        if !process_exists(pid) && fs::remove_dir(&path).is_ok() {
            removed.push(path);
        }
    }
    removed
}

/// A cgroup created for one agent; removed (after killing what is left in
/// it) by [`AgentCgroup::remove`] or, best effort, when dropped.
#[derive(Debug)]
pub struct AgentCgroup {
    path: PathBuf,
    id: u64,
    removed: bool,
}

impl AgentCgroup {
    /// Creates `<cgroup2_root>/pincer/<name>` (and `pincer/` when missing).
    ///
    /// A leftover cgroup of the same name without processes is replaced, so
    /// that the new one gets a fresh id; one with processes is an error.
    pub fn create(cgroup2_root: &Path, name: &str) -> Result<Self, CgroupError> {
        if name.is_empty()
            || name == "."
            || name == ".."
            || name.contains(['/', '\0'])
            || name.len() > 255
        {
            return Err(CgroupError::InvalidName {
                name: name.to_owned(),
            });
        }
        let parent = cgroup2_root.join(PINCER_DIR);
        match fs::create_dir(&parent) {
            Ok(()) => {}
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {}
            Err(source) => {
                return Err(CgroupError::Create {
                    path: parent,
                    source,
                });
            }
        }
        let path = parent.join(name);
        match fs::create_dir(&path) {
            Ok(()) => {}
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {
                match fs::remove_dir(&path) {
                    Ok(()) => {}
                    // A cgroup with tasks or children (EBUSY), or a plain
                    // directory with files (ENOTEMPTY).
                    Err(error)
                        if matches!(error.raw_os_error(), Some(libc::EBUSY | libc::ENOTEMPTY)) =>
                    {
                        return Err(CgroupError::InUse { path });
                    }
                    Err(source) => return Err(CgroupError::Remove { path, source }),
                }
                fs::create_dir(&path).map_err(|source| CgroupError::Create {
                    path: path.clone(),
                    source,
                })?;
            }
            Err(source) => return Err(CgroupError::Create { path, source }),
        }
        let id = match fs::metadata(&path) {
            Ok(metadata) => metadata.ino(),
            Err(source) => {
                let _ = fs::remove_dir(&path);
                return Err(CgroupError::Io { path, source });
            }
        };
        Ok(Self {
            path,
            id,
            removed: false,
        })
    }

    /// The cgroup id: the inode number of its directory, which is what
    /// `bpf_get_current_cgroup_id()` returns for its tasks.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The cgroup directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `cgroup.procs`: writing a pid moves that process into the cgroup.
    pub fn procs_path(&self) -> PathBuf {
        self.path.join("cgroup.procs")
    }

    /// Moves a process into the cgroup.
    pub fn add_process(&self, pid: u32) -> Result<(), CgroupError> {
        let procs = self.procs_path();
        fs::OpenOptions::new()
            .write(true)
            .open(&procs)
            .and_then(|mut file| io::Write::write_all(&mut file, pid.to_string().as_bytes()))
            .map_err(|source| CgroupError::Io {
                path: procs,
                source,
            })
    }

    /// The processes in the cgroup itself (not in child cgroups). A cgroup
    /// that no longer exists has none.
    pub fn processes(&self) -> Result<Vec<u32>, CgroupError> {
        let procs = self.procs_path();
        match fs::read_to_string(&procs) {
            Ok(text) => Ok(text
                .lines()
                .filter_map(|line| line.trim().parse().ok())
                .collect()),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(source) => Err(CgroupError::Io {
                path: procs,
                source,
            }),
        }
    }

    /// Whether any process is left in the cgroup or below it.
    fn populated(&self) -> Result<bool, CgroupError> {
        // `cgroup.events` also counts child cgroups an agent may have made.
        let events = self.path.join("cgroup.events");
        match fs::read_to_string(&events) {
            Ok(text) => Ok(text.lines().any(|line| line.trim() == "populated 1")),
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                Ok(!self.processes()?.is_empty())
            }
            Err(source) => Err(CgroupError::Io {
                path: events,
                source,
            }),
        }
    }

    /// Sends `SIGKILL` to every process in the cgroup and waits (up to
    /// [`KILL_TIMEOUT`]) until it is empty.
    ///
    /// Uses `cgroup.kill` (Linux 5.14) when the kernel has it: it also kills
    /// processes forked meanwhile and those in child cgroups. Otherwise it
    /// kills the listed processes until none is left. Failures are logged:
    /// [`AgentCgroup::remove`] reports a cgroup that could not be emptied.
    pub fn kill_all(&self) {
        if let Err(error) = self.try_kill_all() {
            tracing::warn!(cgroup = %self.path.display(), error = %error, "failed to empty cgroup");
        }
    }

    fn try_kill_all(&self) -> Result<(), CgroupError> {
        let kill_file = self.path.join("cgroup.kill");
        let use_kill_file = kill_file.exists();
        if use_kill_file {
            fs::write(&kill_file, "1").map_err(|source| CgroupError::Io {
                path: kill_file,
                source,
            })?;
        }
        let deadline = Instant::now() + KILL_TIMEOUT;
        loop {
            if !use_kill_file {
                for pid in self.processes()? {
                    // Gone already (ESRCH) is what we want.
                    if let Ok(pid) = i32::try_from(pid) {
                        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
                    }
                }
            }
            if !self.populated()? {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(CgroupError::InUse {
                    path: self.path.clone(),
                });
            }
            thread::sleep(POLL_INTERVAL);
        }
    }

    /// Kills the processes left in the cgroup, then removes it.
    pub fn remove(mut self) -> Result<(), CgroupError> {
        self.removed = true;
        self.kill_and_remove()
    }

    fn kill_and_remove(&self) -> Result<(), CgroupError> {
        self.kill_all();
        let mut attempt = 1;
        loop {
            match fs::remove_dir(&self.path) {
                Ok(()) => return Ok(()),
                Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(()),
                Err(error)
                    if error.raw_os_error() == Some(libc::EBUSY) && attempt < REMOVE_ATTEMPTS =>
                {
                    attempt += 1;
                    thread::sleep(POLL_INTERVAL);
                }
                Err(source) => {
                    return Err(CgroupError::Remove {
                        path: self.path.clone(),
                        source,
                    });
                }
            }
        }
    }
}

impl Drop for AgentCgroup {
    fn drop(&mut self) {
        if !self.removed {
            self.removed = true;
            if let Err(error) = self.kill_and_remove() {
                tracing::warn!(error = %error, "failed to remove agent cgroup");
            }
        }
    }
}

/// The processes in the cgroup at `dir` now (none when it cannot be read).
pub fn processes_in(dir: &Path) -> Vec<u32> {
    fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.trim().parse().ok())
        .collect()
}

/// Whether a cgroup v2 path (as `/proc/<pid>/cgroup` shows it) is an agent
/// cgroup: `/pincer` or anything below it.
///
/// Paths are relative to the reader's cgroup namespace, which is the one
/// where pincer mounts cgroup2 and creates `pincer/`, so they compare
/// directly.
pub fn in_agent_cgroup(cgroup_path: &str) -> bool {
    // The kernel marks the cgroup of a process whose cgroup was removed.
    let path = cgroup_path
        .strip_suffix(" (deleted)")
        .unwrap_or(cgroup_path);
    path.split('/').find(|part| !part.is_empty()) == Some(PINCER_DIR)
}

/// The cgroup v2 path in the text of a `/proc/<pid>/cgroup` file: its single
/// `0::` line.
///
/// More than one such line means a cgroup name containing a newline is
/// trying to pass for another line, so the answer is `None`, as when there
/// is none.
pub fn cgroup_v2_path(proc_cgroup: &str) -> Option<&str> {
    let mut paths = proc_cgroup
        .lines()
        .filter_map(|line| line.strip_prefix("0::"));
    let path = paths.next()?;
    paths.next().is_none().then_some(path)
}

/// The cgroup v2 path of process `pid`, from `/proc/<pid>/cgroup`.
pub fn proc_cgroup(pid: u32) -> io::Result<String> {
    let text = fs::read_to_string(format!("/proc/{pid}/cgroup"))?;
    cgroup_v2_path(&text).map(str::to_owned).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("no single cgroup v2 entry in /proc/{pid}/cgroup"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "\
sysfs /sys sysfs rw,nosuid,nodev,noexec,relatime 0 0
proc /proc proc rw,nosuid,nodev,noexec,relatime 0 0
tmpfs /sys/fs/cgroup tmpfs ro,nosuid,nodev,noexec,mode=755 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,nosuid,nodev,noexec,relatime,nsdelegate 0 0
cgroup /sys/fs/cgroup/systemd cgroup rw,nosuid,nodev,noexec,relatime,xattr,name=systemd 0 0
cgroup /sys/fs/cgroup/memory cgroup rw,nosuid,nodev,noexec,relatime,memory 0 0
bpf /sys/fs/bpf bpf rw,nosuid,nodev,noexec,relatime,mode=700 0 0
";

    const UNIFIED: &str = "\
proc /proc proc rw,nosuid,nodev,noexec,relatime 0 0
cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime 0 0
";

    #[test]
    fn finds_the_cgroup2_mount() {
        let v1_only = "cgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0\n\
                       none /mnt/cgroup2 tmpfs rw 0 0\n";
        let two = "cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\ncgroup2 /mnt/other cgroup2 rw 0 0\n";
        let escaped = "cgroup2 /mnt/my\\040cgroups\\011tab\\134x cgroup2 rw 0 0\n";
        // (what, /proc/self/mounts, the cgroup2 mount point found)
        let cases = [
            ("unified", UNIFIED, Some("/sys/fs/cgroup")),
            ("hybrid", HYBRID, Some("/sys/fs/cgroup/unified")),
            ("cgroup v1 only", v1_only, None),
            ("no mounts", "", None),
            ("the first of two wins", two, Some("/sys/fs/cgroup")),
            ("escaped", escaped, Some("/mnt/my cgroups\ttab\\x")),
            ("short lines", "cgroup2 /x\n\ngarbage\n", None),
        ];
        for (what, mounts, expected) in cases {
            assert_eq!(
                parse_cgroup2_mount(mounts),
                expected.map(PathBuf::from),
                "{what}"
            );
        }
    }

    #[test]
    fn finds_mount_points_by_type() {
        assert_eq!(
            mount_points(HYBRID, "bpf"),
            vec![PathBuf::from("/sys/fs/bpf")]
        );
        assert_eq!(mount_points(HYBRID, "cgroup").len(), 2);
        assert!(mount_points(HYBRID, "securityfs").is_empty());
    }

    #[test]
    fn run_cgroup_names() {
        assert_eq!(run_cgroup_name(4242), "run-4242");
        assert_eq!(run_cgroup_pid("run-4242"), Some(Pid::from_raw(4242)));
        for name in [
            "run-",
            "run-0",
            "run-+5",
            "run-12a",
            "run-99999999999",
            "other-5",
        ] {
            assert_eq!(run_cgroup_pid(name), None, "{name}");
        }
    }

    /// A pid above the kernel's maximum (2^22), so no process has it.
    const DEAD_PID: u32 = 999_999_999;

    #[test]
    fn sweep_removes_only_empty_dirs_of_dead_runs() {
        let root = tempfile::tempdir().unwrap();
        let pincer = root.path().join(PINCER_DIR);
        let dead = pincer.join(run_cgroup_name(DEAD_PID));
        let dead_busy = pincer.join(run_cgroup_name(DEAD_PID - 1));
        let alive = pincer.join(run_cgroup_name(std::process::id()));
        let other = pincer.join("agent-7");
        for dir in [&dead, &dead_busy, &alive, &other] {
            fs::create_dir_all(dir).unwrap();
        }
        // Stands for a cgroup that still has processes: rmdir fails.
        fs::write(dead_busy.join("cgroup.procs"), "123\n").unwrap();

        assert_eq!(sweep_stale(root.path()), vec![dead.clone()]);
        assert!(!dead.exists());
        assert!(dead_busy.exists() && alive.exists() && other.exists());
        assert!(sweep_stale(root.path()).is_empty());
    }

    #[test]
    fn sweep_without_a_pincer_dir_does_nothing() {
        let root = tempfile::tempdir().unwrap();
        assert!(sweep_stale(root.path()).is_empty());
    }

    #[test]
    fn create_and_remove_in_a_plain_directory() {
        let root = tempfile::tempdir().unwrap();
        let cgroup = AgentCgroup::create(root.path(), "run-1").unwrap();
        let path = root.path().join("pincer/run-1");
        assert_eq!(cgroup.path(), path);
        assert_eq!(cgroup.procs_path(), path.join("cgroup.procs"));
        assert_eq!(cgroup.id(), fs::metadata(&path).unwrap().ino());
        assert_eq!(cgroup.processes().unwrap(), Vec::<u32>::new());

        // A second agent shares the existing `pincer/` directory.
        let second = AgentCgroup::create(root.path(), "run-2").unwrap();
        cgroup.remove().unwrap();
        assert!(!path.exists());
        assert!(root.path().join("pincer/run-2").exists());
        drop(second);
        assert!(!root.path().join("pincer/run-2").exists());
        assert!(root.path().join("pincer").exists());
    }

    #[test]
    fn create_replaces_an_empty_leftover_and_refuses_a_busy_one() {
        let root = tempfile::tempdir().unwrap();
        let leftover = root.path().join("pincer/run-3");
        fs::create_dir_all(&leftover).unwrap();
        let cgroup = AgentCgroup::create(root.path(), "run-3").unwrap();
        assert_eq!(cgroup.id(), fs::metadata(&leftover).unwrap().ino());
        drop(cgroup);

        let busy = root.path().join("pincer/run-4");
        fs::create_dir_all(&busy).unwrap();
        fs::write(busy.join("cgroup.procs"), "").unwrap();
        let error = AgentCgroup::create(root.path(), "run-4").unwrap_err();
        assert!(
            matches!(error, CgroupError::InUse { ref path } if *path == busy),
            "{error}"
        );
    }

    #[test]
    fn create_rejects_names_that_are_not_one_component() {
        let root = tempfile::tempdir().unwrap();
        for name in ["", ".", "..", "a/b", "a\0b"] {
            let error = AgentCgroup::create(root.path(), name).unwrap_err();
            assert!(matches!(error, CgroupError::InvalidName { .. }), "{name:?}");
        }
        assert!(!root.path().join("pincer/a").exists());
    }

    #[test]
    fn create_fails_without_the_root() {
        let root = tempfile::tempdir().unwrap();
        let missing = root.path().join("missing");
        let error = AgentCgroup::create(&missing, "run-1").unwrap_err();
        assert!(
            matches!(error, CgroupError::Create { ref path, .. } if *path == missing.join("pincer")),
            "{error}"
        );
    }

    /// Needs root and a cgroup2 mount, as every machine the tests run on
    /// has (the host test command runs as root).
    #[test]
    fn real_cgroup_kills_and_removes() {
        assert!(nix::unistd::geteuid().is_root(), "this test needs root");
        let root = cgroup2_mount().expect("this test needs a cgroup2 mount");
        let name = format!("test-{}", std::process::id());
        let cgroup = AgentCgroup::create(&root, &name).unwrap();
        let path = cgroup.path().to_owned();
        assert_eq!(cgroup.id(), fs::metadata(&path).unwrap().ino());

        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        cgroup.add_process(child.id()).unwrap();
        assert_eq!(cgroup.processes().unwrap(), vec![child.id()]);

        let started = Instant::now();
        cgroup.kill_all();
        assert!(started.elapsed() < KILL_TIMEOUT);
        assert!(cgroup.processes().unwrap().is_empty());
        let status = child.wait().unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(libc::SIGKILL)
        );

        cgroup.remove().unwrap();
        assert!(!path.exists());
    }

    #[test]
    fn agent_cgroups() {
        assert!(in_agent_cgroup("/pincer/run-1"));
        assert!(in_agent_cgroup("/pincer/run-1/nested"));
        assert!(in_agent_cgroup("/pincer"));
        assert!(in_agent_cgroup("/pincer/run-1 (deleted)"));
        assert!(in_agent_cgroup("/pincer (deleted)"));
        assert!(!in_agent_cgroup("/pincerx"));
        assert!(!in_agent_cgroup("/pincerx/run-1"));
        assert!(!in_agent_cgroup(
            "/user.slice/user-1000.slice/session-2.scope"
        ));
        assert!(!in_agent_cgroup("/system.slice/pincer.service"));
        assert!(!in_agent_cgroup("/"));
        assert!(!in_agent_cgroup(""));
    }

    #[test]
    fn cgroup_v2_lines() {
        assert_eq!(cgroup_v2_path("0::/pincer/run-1\n"), Some("/pincer/run-1"));
        let hybrid = "12:memory:/user.slice\n1:name=systemd:/user.slice\n0::/user.slice\n";
        assert_eq!(cgroup_v2_path(hybrid), Some("/user.slice"));
        assert_eq!(cgroup_v2_path("4:memory:/\n1:cpu:/\n"), None);
        // A cgroup named "x\n0::" must not pass for a second entry.
        assert_eq!(cgroup_v2_path("0::/pincer/run-1/x\n0::/\n"), None);
    }
}
