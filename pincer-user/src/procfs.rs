//! Process facts from `/proc`, for requests: who is asking, and on whose
//! behalf. Everything read here is escaped before anyone sees it.

use std::fs;

use crate::{escape::escape, request::ProcessFacts};

/// Longest parent chain reported.
pub const MAX_PARENTS: usize = 8;

/// `comm` and executable of a process (best effort: it may be gone).
pub fn facts(pid: u32) -> ProcessFacts {
    let comm = fs::read(format!("/proc/{pid}/comm")).unwrap_or_default();
    let comm = escape(comm.strip_suffix(b"\n").unwrap_or(&comm));
    let exe = fs::read_link(format!("/proc/{pid}/exe"))
        .ok()
        .map(|p| escape(p.as_os_str().as_encoded_bytes()));
    ProcessFacts { pid, comm, exe }
}

/// The parent of a process, from `/proc/<pid>/stat`.
pub fn parent(pid: u32) -> Option<u32> {
    parse_stat_ppid(&fs::read(format!("/proc/{pid}/stat")).ok()?)
}

/// The parent pid field of a `stat` line. `comm` is the process's to choose
/// (any bytes but NUL, not always UTF-8, with spaces and parentheses), so
/// the line is read as bytes and the fields are counted from the last `)`.
pub fn parse_stat_ppid(stat: &[u8]) -> Option<u32> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(&stat[close + 1..]).ok()?;
    let mut fields = rest.split_whitespace();
    let _state = fields.next()?;
    fields.next()?.parse().ok()
}

/// The parents of `pid`, nearest first, stopping after `root` (the agent's
/// first process) or [`MAX_PARENTS`].
pub fn parents(pid: u32, root: Option<u32>) -> Vec<ProcessFacts> {
    let mut chain = Vec::new();
    let mut current = pid;
    if Some(pid) == root {
        return chain;
    }
    while chain.len() < MAX_PARENTS {
        let Some(parent) = parent(current).filter(|&p| p > 0) else {
            break;
        };
        chain.push(facts(parent));
        if Some(parent) == root {
            break;
        }
        current = parent;
    }
    chain
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ppid_survives_hostile_comm() {
        assert_eq!(parse_stat_ppid(b"42 (a) b) (c) S 7 42 42 0"), Some(7));
        assert_eq!(parse_stat_ppid(b"1 (init) S 0 1 1"), Some(0));
        assert_eq!(parse_stat_ppid(b"garbage"), None);
        // A name that is not UTF-8 does not hide the parent.
        assert_eq!(parse_stat_ppid(b"42 (\xff\xfe) S 7 42 42 0"), Some(7));
    }

    #[test]
    fn own_facts_and_parents() {
        let me = std::process::id();
        let facts = facts(me);
        assert_eq!(facts.pid, me);
        assert!(!facts.comm.is_empty());
        let chain = parents(me, None);
        assert!(!chain.is_empty(), "a test runs under some parent");
        assert_eq!(chain[0].pid, std::os::unix::process::parent_id());
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
