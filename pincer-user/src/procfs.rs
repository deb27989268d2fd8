//! Process facts from `/proc`, for requests: who is asking, and on whose
//! behalf. Everything read here is escaped before anyone sees it.

use std::{collections::HashMap, fs, io::Read};

use pincer_common::AccessEvent;
use pincer_model::{
    escape::escape,
    events::{self, Mounts},
    request::{ProcessFacts, Request},
};

/// Longest parent chain reported.
pub const MAX_PARENTS: usize = 8;

/// Bytes read of a `stat` line: what comes before the parent's pid is a pid,
/// a `comm` of at most 64 bytes (a kernel thread's full name) and a state.
const STAT_PREFIX: usize = 512;

/// The escaped path of a process's executable, when it can be read.
pub fn exe(pid: u32) -> Option<String> {
    fs::read_link(format!("/proc/{pid}/exe"))
        .ok()
        .map(|p| escape(p.as_os_str().as_encoded_bytes()))
}

/// Which file a process runs, as the kernel named it in a parked event.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub struct ExeKey {
    /// The process.
    pub pid: u32,
    /// Device (kernel encoding) of its executable.
    pub dev: u64,
    /// Inode of its executable.
    pub ino: u64,
    /// Generation of that inode: a number reused for another file has
    /// another generation.
    pub generation: u32,
}

impl ExeKey {
    /// The executable of a parked event's process; `None` when the kernel
    /// could not read it (then the path is read every time).
    pub fn of(event: &AccessEvent) -> Option<ExeKey> {
        (event.exe_ino != 0).then_some(ExeKey {
            pid: event.tgid,
            dev: event.exe_dev,
            ino: event.exe_ino,
            generation: event.exe_generation,
        })
    }
}

/// The executable paths read for parked requests, by process and
/// executable. A `readlink` of `/proc/<pid>/exe` was the costliest step of
/// sanitizing a request; the kernel names the file the process runs in
/// each parked event, so the path is read once per process and file. A
/// process that runs another file (an `exec`) has another key, as has a
/// new process reusing the pid, so a path is never put on a file it was
/// not read for. What it does not follow: the file renamed, or run by
/// another of its hard links, after the first read (the first name stays).
#[derive(Debug, Default)]
pub struct ExeNames {
    known: HashMap<ExeKey, String>,
}

impl ExeNames {
    /// Paths kept before the cache starts again: one per process and
    /// executable that parked, so a long-lived daemon stays small.
    const MAX: usize = 4096;

    /// The path for `key`, from what was read before, or from `read` (a
    /// read that fails is not kept: the process may be gone).
    pub fn name(
        &mut self,
        key: Option<ExeKey>,
        read: impl FnOnce() -> Option<String>,
    ) -> Option<String> {
        let Some(key) = key else {
            return read();
        };
        if let Some(path) = self.known.get(&key) {
            return Some(path.clone());
        }
        let path = read()?;
        if self.known.len() >= Self::MAX {
            self.known.clear();
        }
        self.known.insert(key, path.clone());
        Some(path)
    }
}

/// A process's `comm` and parent, from one read of `/proc/<pid>/stat` (the
/// same `comm` `/proc/<pid>/comm` shows), when it can be read.
fn stat(pid: u32) -> Option<(String, u32)> {
    let mut file = fs::File::open(format!("/proc/{pid}/stat")).ok()?;
    // One read: the kernel hands out the start of the line whole.
    let mut line = [0; STAT_PREFIX];
    let len = file.read(&mut line).ok()?;
    let (comm, ppid) = parse_stat(&line[..len])?;
    Some((escape(comm), ppid))
}

/// The `comm` and parent pid fields of a `stat` line. `comm` is the
/// process's to choose (any bytes but NUL, not always UTF-8, with spaces and
/// parentheses), so the line is read as bytes: `comm` ends at the last `)`,
/// and the fields are counted from there.
pub fn parse_stat(stat: &[u8]) -> Option<(&[u8], u32)> {
    let open = stat.iter().position(|&b| b == b'(')?;
    let (close, rest) = after_comm(stat)?;
    let comm = stat.get(open + 1..close)?;
    let mut fields = std::str::from_utf8(rest).ok()?.split_whitespace();
    let _state = fields.next()?;
    Some((comm, fields.next()?.parse().ok()?))
}

/// The state letter of a `stat` line (`R`, `S`, `T` for stopped, ...):
/// the first field after `comm`.
pub fn stat_state(stat: &[u8]) -> Option<u8> {
    let (_, rest) = after_comm(stat)?;
    rest.iter().copied().find(|b| !b.is_ascii_whitespace())
}

/// Where a `stat` line's `comm` ends (its last `)`), and the fields after
/// it: the one place both readers above find them.
fn after_comm(stat: &[u8]) -> Option<(usize, &[u8])> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    Some((close, &stat[close + 1..]))
}

/// The parents of `pid`, nearest first, stopping after `root` (the agent's
/// first process) or [`MAX_PARENTS`]. Each parent costs one read of its
/// `stat` (its `comm` and its own parent) and of its executable.
pub fn parents(pid: u32, root: Option<u32>) -> Vec<ProcessFacts> {
    let mut chain = Vec::new();
    if Some(pid) == root {
        return chain;
    }
    let Some((_, mut parent)) = stat(pid) else {
        return chain;
    };
    while chain.len() < MAX_PARENTS && parent > 0 {
        let read = stat(parent);
        chain.push(ProcessFacts {
            pid: parent,
            comm: read
                .as_ref()
                .map(|(comm, _)| comm.clone())
                .unwrap_or_default(),
            exe: exe(parent),
        });
        match read {
            Some((_, grandparent)) if Some(parent) != root => parent = grandparent,
            _ => break,
        }
    }
    chain
}

/// `NS_GET_PARENT` (`_IO(0xb7, 0x2)`): a descriptor of a namespace's parent.
const NS_GET_PARENT: libc::c_ulong = 0xb702;

/// How deep user namespaces nest (the kernel's limit is 32).
const MAX_USERNS_LEVEL: u32 = 32;

/// The level of the user namespace process `pid` (`None`: this process)
/// runs in: 0 for the initial one, one more for each namespace below it,
/// counted by asking the kernel for parents (`NS_GET_PARENT`) until there
/// is none this process may see. `None` when the namespace cannot be read
/// (the process is gone).
pub fn userns_level(pid: Option<u32>) -> Option<u32> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    let path = match pid {
        Some(pid) => format!("/proc/{pid}/ns/user"),
        None => "/proc/self/ns/user".to_owned(),
    };
    let mut ns: OwnedFd = fs::File::open(path).ok()?.into();
    for level in 0..=MAX_USERNS_LEVEL {
        // SAFETY: an ioctl with no argument on a descriptor we own; a
        // non-negative result is a new descriptor, owned from here on.
        let parent = unsafe { libc::ioctl(ns.as_raw_fd(), NS_GET_PARENT) };
        if parent < 0 {
            return Some(level);
        }
        ns = unsafe { OwnedFd::from_raw_fd(parent) };
    }
    Some(MAX_USERNS_LEVEL)
}

/// The home of an agent whose cgroup holds `processes` now
/// ([`pincer_common::Agent::userns_home`]): the deepest user namespace of
/// this process and of those, so that a namespace someone else made for
/// them (a container's) is never counted as the agent's own. When this
/// process's own level cannot be read, the agent gets no namespaces of its
/// own.
pub fn userns_home(processes: &[u32]) -> u32 {
    let Some(own) = userns_level(None) else {
        return pincer_common::NO_OWN_NAMESPACES;
    };
    processes
        .iter()
        .filter_map(|&pid| userns_level(Some(pid)))
        .fold(own, u32::max)
}

/// Sanitizes a parked event into the request voters see. `root` is the
/// agent's first process, where the parent chain stops; the executable's
/// path comes from `exes`, which reads it only for a process and
/// executable it has not read it for.
pub fn request(
    event: &AccessEvent,
    mounts: &Mounts,
    mission: &str,
    root: Option<u32>,
    exes: &mut ExeNames,
) -> Request {
    let exe = exes.name(ExeKey::of(event), || exe(event.tgid));
    events::sanitize(event, mounts, mission, exe, parents(event.tgid, root))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_namespaces_are_counted_from_the_initial_one() {
        let own = userns_level(None).unwrap();
        let mut child = std::process::Command::new("unshare")
            .args(["--user", "--", "sleep", "60"])
            .spawn()
            .unwrap();
        let pid = child.id();
        let mine = fs::read_link("/proc/self/ns/user").unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while fs::read_link(format!("/proc/{pid}/ns/user")).ok() == Some(mine.clone())
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let level = userns_level(Some(pid));
        let home = userns_home(&[pid]);
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(level, Some(own + 1));
        // A process already in a deeper namespace sets the home; this
        // process's own namespace is the least.
        assert_eq!(home, own + 1);
        assert_eq!(userns_home(&[]), own);
        assert_eq!(userns_home(&[pid]), own, "gone, so not counted");
        assert_eq!(userns_level(Some(pid)), None);
    }

    #[test]
    fn an_executable_path_is_read_once_per_process_and_file() {
        let mut exes = ExeNames::default();
        let key = ExeKey {
            pid: 7,
            dev: 8,
            ino: 9,
            generation: 1,
        };
        let reads = std::cell::Cell::new(0);
        let read = |path: &'static str| {
            reads.set(reads.get() + 1);
            Some(path.to_owned())
        };
        assert_eq!(
            exes.name(Some(key), || read("/bin/a")).as_deref(),
            Some("/bin/a")
        );
        assert_eq!(
            exes.name(Some(key), || read("/bin/b")).as_deref(),
            Some("/bin/a")
        );
        assert_eq!(reads.get(), 1);
        // After an exec, a new process with the pid, or a reused inode
        // number, the path is read again.
        for other in [
            ExeKey { ino: 10, ..key },
            ExeKey { pid: 8, ..key },
            ExeKey {
                generation: 2,
                ..key
            },
            ExeKey { dev: 9, ..key },
        ] {
            assert_eq!(
                exes.name(Some(other), || read("/bin/c")).as_deref(),
                Some("/bin/c")
            );
        }
        assert_eq!(reads.get(), 5);
        // With no identity from the kernel, every request reads.
        assert_eq!(
            exes.name(None, || read("/bin/d")).as_deref(),
            Some("/bin/d")
        );
        assert_eq!(
            exes.name(None, || read("/bin/e")).as_deref(),
            Some("/bin/e")
        );
        assert_eq!(reads.get(), 7);
        // A failed read (the process is gone) is not kept.
        let gone = ExeKey { pid: 99, ..key };
        assert_eq!(exes.name(Some(gone), || None), None);
        assert_eq!(
            exes.name(Some(gone), || read("/bin/f")).as_deref(),
            Some("/bin/f")
        );
    }

    #[test]
    fn the_executable_cache_starts_again_when_full() {
        let mut exes = ExeNames::default();
        for pid in 0..ExeNames::MAX as u32 + 1 {
            let key = ExeKey {
                pid,
                dev: 1,
                ino: 2,
                generation: 0,
            };
            exes.name(Some(key), || Some(format!("/bin/{pid}")));
        }
        assert_eq!(exes.known.len(), 1);
    }

    #[test]
    fn the_state_follows_the_last_parenthesis() {
        assert_eq!(stat_state(b"42 (a) T (b) S 7 42"), Some(b'S'));
        assert_eq!(stat_state(b"1 (init) T 0 1 1"), Some(b'T'));
        assert_eq!(stat_state(b"1 (init)"), None);
        assert_eq!(stat_state(b"garbage"), None);
    }

    #[test]
    fn comm_and_ppid_survive_hostile_comm() {
        assert_eq!(
            parse_stat(b"42 (a) b) (c) S 7 42 42 0"),
            Some((&b"a) b) (c"[..], 7))
        );
        assert_eq!(parse_stat(b"1 (init) S 0 1 1"), Some((&b"init"[..], 0)));
        assert_eq!(parse_stat(b"garbage"), None);
        assert_eq!(parse_stat(b"1 )init( S 0 1 1"), None);
        // A name that is not UTF-8 does not hide the parent.
        assert_eq!(
            parse_stat(b"42 (\xff\xfe) S 7 42 42 0"),
            Some((&b"\xff\xfe"[..], 7))
        );
    }

    #[test]
    fn the_comm_in_stat_is_the_comm_file() {
        let me = std::process::id();
        let comm = fs::read(format!("/proc/{me}/comm")).unwrap();
        let (from_stat, ppid) = stat(me).unwrap();
        assert_eq!(from_stat, escape(comm.strip_suffix(b"\n").unwrap()));
        assert_eq!(ppid, std::os::unix::process::parent_id());
    }

    #[test]
    fn own_parents() {
        let me = std::process::id();
        let chain = parents(me, None);
        assert!(!chain.is_empty(), "a test runs under some parent");
        let parent = std::os::unix::process::parent_id();
        assert_eq!(chain[0].pid, parent);
        let comm = fs::read(format!("/proc/{parent}/comm")).unwrap();
        assert_eq!(chain[0].comm, escape(comm.strip_suffix(b"\n").unwrap()));
        assert_eq!(chain[0].exe, exe(parent));
        assert!(chain[0].exe.is_some());
        // The chain stops after the root, and is empty from the root itself.
        assert_eq!(parents(me, Some(parent)).len(), 1);
        assert!(parents(me, Some(me)).is_empty());
    }

    #[test]
    fn a_parent_named_in_bytes_that_are_not_utf8_does_not_end_the_chain() {
        use std::os::unix::ffi::OsStrExt;
        // A process's name is the file name it was started by: sh through a
        // link named in bytes that are not UTF-8, with a `)` to mislead.
        let dir = tempfile::tempdir().unwrap();
        let name = std::ffi::OsStr::from_bytes(b"\xff\xfe) S 1");
        let sh_link = dir.path().join(name);
        std::os::unix::fs::symlink("/bin/sh", &sh_link).unwrap();
        // sh runs sleep as a child (the `; :` keeps it from exec'ing it).
        let mut sh = std::process::Command::new(&sh_link)
            .args(["-c", "sleep 30; :"])
            .spawn()
            .unwrap();
        let children = format!("/proc/{0}/task/{0}/children", sh.id());
        let sleep = (0..500)
            .find_map(|_| {
                let pid = fs::read_to_string(&children).ok()?.trim().parse().ok();
                if pid.is_none() {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                pid
            })
            .expect("sh started sleep");
        let chain = parents(sleep, None);
        sh.kill().unwrap();
        sh.wait().unwrap();
        assert_eq!(chain[0].pid, sh.id());
        assert_eq!(chain[0].comm, "\\xff\\xfe) S 1");
        assert_eq!(chain[1].pid, std::process::id());
    }
}
