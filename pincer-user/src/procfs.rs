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
    parse_stat_ppid(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// The parent pid field of a `stat` line. `comm` may contain spaces and
/// parentheses, so the fields are counted from the last `)`.
pub fn parse_stat_ppid(stat: &str) -> Option<u32> {
    let rest = &stat[stat.rfind(')')? + 1..];
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
        assert_eq!(parse_stat_ppid("42 (a) b) (c) S 7 42 42 0"), Some(7));
        assert_eq!(parse_stat_ppid("1 (init) S 0 1 1"), Some(0));
        assert_eq!(parse_stat_ppid("garbage"), None);
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
}
