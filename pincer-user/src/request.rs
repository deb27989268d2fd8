//! A parked request, sanitized: the only thing voters, prompts, the control
//! socket and webhooks ever see of an access the mission did not grant.

use serde::Serialize;

/// One process in the chain above the requesting task.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ProcessFacts {
    /// Process id.
    pub pid: u32,
    /// Escaped `comm`.
    pub comm: String,
    /// Escaped path of the executable, when it could be read.
    pub exe: Option<String>,
}

/// An access waiting for a verdict while its task is stopped in the kernel.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Request {
    /// Identifier of the parked request, unique for the life of the loaded
    /// programs (the kernel assigns it).
    pub id: u64,
    /// The mission's name.
    pub mission: String,
    /// The agent's cgroup id.
    pub cgroup: u64,
    /// Process id of the requesting task.
    pub pid: u32,
    /// Thread id of the requesting task.
    pub tid: u32,
    /// Escaped `comm` of the task.
    pub comm: String,
    /// Escaped executable path of the task, when readable.
    pub exe: Option<String>,
    /// Parents of the task, nearest first, up to the agent's first process.
    pub parents: Vec<ProcessFacts>,
    /// Operations requested, by name (`read`, `write`, `create`, `exec`).
    pub operation: Vec<&'static str>,
    /// Operation bits (`pincer_common::ops`).
    #[serde(skip)]
    pub ops: u32,
    /// Escaped, length-bounded path of the object (for a creation: of the
    /// name to be created).
    pub path: String,
    /// `file_open` or `inode_create`.
    pub hook: &'static str,
    /// Device of the object (for a creation, its directory), kernel encoding.
    #[serde(skip)]
    pub dev: u64,
    /// Inode of the object (for a creation, its directory).
    #[serde(skip)]
    pub ino: u64,
    /// Why the mission did not grant it.
    pub why: String,
}
