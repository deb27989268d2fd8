//! A parked request, sanitized: the only thing voters, prompts, the control
//! socket and webhooks ever see of an access the mission did not grant.
//!
//! One type serves every side: the twin builds it from a kernel event
//! (`events::request`), voters read it, and the control socket and
//! the webhook carry it as JSON, which `pincer pending` reads back into the
//! same type. The kernel identities (`ops`, `dev`, `ino`) stay in the twin:
//! they are not serialized, and read back as zero.

use std::{borrow::Cow, fmt};

use serde::{Deserialize, Serialize};

/// One process in the chain above the requesting task.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessFacts {
    /// Process id.
    pub pid: u32,
    /// Escaped `comm`.
    pub comm: String,
    /// Escaped path of the executable, when it could be read.
    pub exe: Option<String>,
}

/// An access waiting for a verdict while its task is stopped in the kernel.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
    /// Operations requested, by name (`read`, `write`, `create`, `exec`,
    /// ...). Names are static on the twin's side, owned once read back.
    pub operation: Vec<Cow<'static, str>>,
    /// Operation bits (`pincer_common::ops`).
    #[serde(skip)]
    pub ops: u32,
    /// Escaped, length-bounded path of the object (for a creation: of the
    /// name to be created).
    pub path: String,
    /// The LSM hook that parked it (`file_open`, `inode_create`, ...).
    pub hook: Cow<'static, str>,
    /// Device of the object (for a creation, its directory), kernel encoding.
    #[serde(skip)]
    pub dev: u64,
    /// Inode of the object (for a creation, its directory).
    #[serde(skip)]
    pub ino: u64,
    /// Why the mission did not grant it.
    pub why: String,
    /// Why only the owner may allow it, when so (a change to a policy
    /// object): other voters' allows do not count, silence denies, and an
    /// allow covers the object itself only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_only: Option<String>,
    /// What lowered the agent's level, first read first (`read <path>
    /// (<authority>)`): empty for an agent that read nothing of lower
    /// authority.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taint: Vec<String>,
    /// Why the mission's asset nodes did not admit it, when it has nodes
    /// found in evidence (`matches image but is not in email's evidence`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discovery: Option<String>,
    /// What made the object a policy object, when it is one: the class
    /// and rule of the policy set, and where on the path it met.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<PolicyReason>,
}

/// Why an object is a policy object: the rule that made its change the
/// owner's, as the audit log, the prompt and `pincer explain` name it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyReason {
    /// The rule's class (`instructions`, `configuration`, `git`,
    /// `start-up code`, ..., `named` for what a mission added, `labelled`,
    /// `person's directory`).
    pub class: String,
    /// The rule as written (`.git/config`, `.*`), or what the programs'
    /// own rule is.
    pub rule: String,
    /// The path up to the component the rule met (the object itself, or
    /// the directory it is in).
    pub at: String,
    /// Why the rule holds.
    pub why: String,
}

impl fmt::Display for PolicyReason {
    /// `git: `.git/config` at /w/p/.git/config`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: `{}` at {}", self.class, self.rule, self.at)
    }
}

/// Why content derived from a revoked source is the owner's alone to allow.
pub const OWNER_ONLY_REVOKED: &str =
    "content derived from a source the owner revoked: only the owner may allow it";

/// Why an action by a tainted agent is the owner's alone to allow.
pub const OWNER_ONLY_ACTION: &str = "an action the mission reserves for untainted agents, by an agent that read content of lower authority: only the owner may allow it";

/// Why a change to a policy object is the owner's alone to allow.
pub const OWNER_ONLY_POLICY: &str = "a change to a policy object (instructions, settings or hooks something obeys later): only the owner may allow it";

impl fmt::Display for Request {
    /// One line for `pincer pending`: id, mission, operations, path, task and
    /// the reason it parked.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} [{}] {} {} by {} (pid {}): {}",
            self.id,
            self.mission,
            self.operation.join(","),
            self.path,
            self.comm,
            self.pid,
            self.why
        )?;
        if let Some(why) = &self.owner_only {
            write!(f, "; {why}")?;
        }
        if !self.taint.is_empty() {
            write!(f, "; this agent {}", self.taint.join(", then "))?;
        }
        if let Some(why) = &self.discovery {
            write!(f, "; not discovered: {why}")?;
        }
        Ok(())
    }
}

impl Request {
    /// The request as it reads back from its JSON: the operation bits and
    /// the object's kernel identity (device, inode) stay in the twin and are
    /// never sent.
    #[must_use]
    pub fn as_sent(&self) -> Request {
        Request {
            ops: 0,
            dev: 0,
            ino: 0,
            ..self.clone()
        }
    }
}

/// What a decision's reason says of a policy object, before the rule is
/// named.
pub const OF_A_POLICY_OBJECT: &str = "of a policy object";

impl PolicyReason {
    /// `text`, a reason that speaks of a policy object, naming this rule
    /// where it does.
    pub(crate) fn named_in(&self, text: &str) -> String {
        text.replacen(
            OF_A_POLICY_OBJECT,
            &format!("{OF_A_POLICY_OBJECT} ({self})"),
            1,
        )
    }
}

impl Request {
    /// Names the rule that made the object policy, in the reasons too.
    pub fn name_policy(&mut self, reason: PolicyReason) {
        self.why = reason.named_in(&self.why);
        self.policy = Some(reason);
    }

    /// A request for tests: `cat` (pid 100) reading `path`.
    #[doc(hidden)]
    pub fn example(id: u64, path: &str) -> Request {
        Request {
            id,
            mission: "docs".into(),
            cgroup: 4242,
            pid: 100,
            tid: 101,
            comm: "cat".into(),
            exe: Some("/usr/bin/cat".into()),
            parents: vec![ProcessFacts {
                pid: 99,
                comm: "sh".into(),
                exe: None,
            }],
            operation: vec!["read".into()],
            ops: pincer_common::ops::READ,
            path: path.into(),
            hook: "file_open".into(),
            dev: 1,
            ino: 2,
            why: "no grant covers it".into(),
            owner_only: None,
            taint: Vec::new(),
            discovery: None,
            policy: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wire_form_reads_back_without_kernel_identities() {
        let request = Request::example(7, "/home/u/.ssh/id_ed25519");
        let text = serde_json::to_string(&request).unwrap();
        assert!(
            !text.contains("\"ops\"") && !text.contains("\"ino\""),
            "{text}"
        );
        let back: Request = serde_json::from_str(&text).unwrap();
        assert_eq!(back, request.as_sent());
    }

    #[test]
    fn one_line_for_pending() {
        let mut request = Request::example(7, "/home/u/.ssh/id_ed25519");
        request.operation.push("write".into());
        assert_eq!(
            request.to_string(),
            "7 [docs] read,write /home/u/.ssh/id_ed25519 by cat (pid 100): no grant covers it"
        );
        request.owner_only = Some(OWNER_ONLY_POLICY.into());
        assert!(
            request
                .to_string()
                .ends_with(&format!("it; {OWNER_ONLY_POLICY}"))
        );
        let back: Request =
            serde_json::from_str(&serde_json::to_string(&request).unwrap()).unwrap();
        assert_eq!(back.owner_only.as_deref(), Some(OWNER_ONLY_POLICY));
    }
}
