//! Asset nodes at run time: a mission that grows only from the evidence
//! the task scoped.
//!
//! A mission's `[[asset]]` entries are nodes: each names what the task
//! needs (operations, extent, constraints). A node with a `path` is
//! identified from the start; one `found_in` another node is *unknown*
//! until that node's content names an object that meets its constraints.
//! A node that others are found in is a *source*: its first read by the
//! agent parks, and the twin keeps its content as read then
//! ([`Evidence`]): the node is *fetched*, and a later change to the file
//! cannot rewrite what was observed.
//!
//! An access no grant covers is put to the nodes ([`Assets::consider`]):
//! it is admitted only when its object (or, for a tree node, a directory
//! above it) meets a node's constraints — strictly below one of its
//! `under` directories, its name matching `glob`, of its `kind`, the
//! operations within the node's, the node's `max_count` not reached —
//! **and** is named in the evidence of that node's own source. A name in
//! any other file admits nothing. The grant admitted has the node's
//! operations and extent, for the session, and the chain (node, source,
//! evidence digest, the excerpt and its byte offsets) is audited.
//! Everything else goes to the other voters with the reason.

mod evidence;

use std::{
    fmt::Write as _,
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
};

use globset::GlobMatcher;
use pincer_common::{kernel_dev, ops};
use serde::{Deserialize, Serialize};

pub use self::evidence::{Evidence, Excerpt, MAX_EVIDENCE};
use crate::{
    events::op_names,
    mission::{AssetKind, AssetSpec, Mission, asset_glob},
    vote::Extent,
};

/// Where a node stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Nothing is known of its identity yet.
    Unknown,
    /// It is an object (or, with `max_count` above one, some objects).
    Identified,
    /// Identified, and its content was read: the evidence of the nodes
    /// found in it.
    Fetched,
}

/// How a node came to be an object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "by")]
pub enum Identified {
    /// The mission names it.
    Mission,
    /// Its source's evidence names it.
    Discovery {
        /// The node whose evidence named it.
        source: String,
        /// Where.
        excerpt: Excerpt,
        /// The evidence's digest.
        evidence: String,
    },
    /// The owner pinned it (`pincer mission admit`).
    Owner,
}

/// One object a node became.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// Its path.
    pub path: PathBuf,
    /// How.
    #[serde(flatten)]
    pub by: Identified,
    /// The request it was admitted on, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request: Option<u64>,
}

/// A node and what is known of it.
#[derive(Debug)]
pub struct Node {
    /// As the mission wrote it.
    pub spec: AssetSpec,
    glob: Option<GlobMatcher>,
    /// What it became, first first.
    pub identities: Vec<Identity>,
    /// Its content as first read, when it is a source and was read.
    pub evidence: Option<Evidence>,
    /// Whether the owner dropped it: it admits nothing more.
    pub dropped: bool,
}

impl Node {
    /// Where it stands.
    pub fn status(&self) -> Status {
        if self.evidence.is_some() {
            Status::Fetched
        } else if self.identities.is_empty() {
            Status::Unknown
        } else {
            Status::Identified
        }
    }
}

/// What [`Assets::consider`] makes of an access no grant covers.
#[derive(Debug, PartialEq, Eq)]
pub enum Considered {
    /// The first read of a source node: observe its content, then grant
    /// it.
    Observe {
        /// The node.
        node: usize,
    },
    /// Admitted by discovery.
    Admit(Admission),
    /// Not for discovery: the other voters decide, told why.
    Refer(String),
}

/// An access discovery admits: the object that becomes the node, and the
/// grant it gets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Admission {
    /// The node.
    pub node: usize,
    /// The object: the accessed one, or for a tree node the directory
    /// above it that the evidence names.
    pub object: PathBuf,
    /// Whether the grant covers the tree below `object`.
    pub tree: bool,
    /// The node's operations.
    pub ops: u32,
    /// How it was identified (the chain).
    pub by: Identified,
}

/// The nodes of one agent's mission.
#[derive(Debug)]
pub struct Assets {
    nodes: Vec<Node>,
    home: Option<PathBuf>,
}

/// An access put to the nodes.
#[derive(Clone, Copy, Debug)]
pub struct Access<'a> {
    /// Its path, exactly as the kernel named it.
    pub path: &'a Path,
    /// The operations asked.
    pub ops: u32,
    /// Whether it makes a new name (`path` does not exist yet).
    pub new_name: bool,
    /// The object's identity as the kernel saw it (for a new name, its
    /// directory's), st_dev as the kernel encodes it.
    pub dev: u64,
    /// Its inode.
    pub ino: u64,
}

impl Assets {
    /// A mission's asset nodes at run time, when it has any; `~` in
    /// evidence means `$HOME`, as in the mission.
    pub fn of(mission: &Mission) -> Option<Assets> {
        (!mission.assets.is_empty())
            .then(|| Assets::new(&mission.assets, std::env::var_os("HOME").map(PathBuf::from)))
    }

    /// The nodes of a mission; `home` is what `~` means in evidence. A
    /// node with a path is identified by the mission (its path made
    /// canonical where it exists).
    pub fn new(specs: &[AssetSpec], home: Option<PathBuf>) -> Assets {
        // The kernel names objects by their real paths.
        let real = |path: &PathBuf| std::fs::canonicalize(path).unwrap_or_else(|_| path.clone());
        let nodes = specs
            .iter()
            .map(|spec| {
                let mut spec = spec.clone();
                spec.constraints.under = spec.constraints.under.iter().map(real).collect();
                spec
            })
            .map(|spec| Node {
                glob: spec
                    .constraints
                    .glob
                    .as_deref()
                    .and_then(|g| asset_glob(g).ok()),
                identities: spec
                    .path
                    .iter()
                    .map(|path| Identity {
                        path: real(path),
                        by: Identified::Mission,
                        request: None,
                    })
                    .collect(),
                evidence: None,
                dropped: false,
                spec,
            })
            .collect();
        Assets {
            nodes,
            home: home.map(|home| real(&home)),
        }
    }

    /// Whether any node is found in another: only then is anything ever
    /// discovered.
    pub fn discovers(&self) -> bool {
        self.nodes.iter().any(|n| n.spec.found_in.is_some())
    }

    /// Whether node `index` is a source (some node is found in it).
    pub fn is_source(&self, index: usize) -> bool {
        self.nodes.iter().any(|n| n.spec.found_in == Some(index))
    }

    /// The nodes.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// The node of an id.
    pub fn find(&self, id: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.spec.id == id)
    }

    /// Keeps what the agent read of a source node.
    pub fn observed(&mut self, node: usize, evidence: Evidence) {
        let node = &mut self.nodes[node];
        if node.evidence.is_none() {
            node.evidence = Some(evidence);
        }
    }

    /// Records an admission: the node is that object now.
    pub fn admitted(&mut self, admission: &Admission, request: Option<u64>) {
        let node = &mut self.nodes[admission.node];
        if !node.identities.iter().any(|i| i.path == admission.object) {
            node.identities.push(Identity {
                path: admission.object.clone(),
                by: admission.by.clone(),
                request,
            });
        }
    }

    /// The owner drops a node: what it admitted stays granted until
    /// revoked, nothing more is admitted for it.
    pub fn drop_node(&mut self, node: usize) {
        self.nodes[node].dropped = true;
    }

    /// The owner pins `object` as node `index`: the admission to grant,
    /// when the object meets the node's kind (location and evidence are the
    /// owner's to vouch for).
    pub fn pin(&self, index: usize, object: &Path) -> Result<Admission, String> {
        let node = &self.nodes[index];
        let metadata = std::fs::metadata(object)
            .map_err(|e| format!("cannot look up {}: {e}", object.display()))?;
        let tree = node.spec.extent == Extent::Tree;
        if tree != metadata.is_dir() {
            return Err(format!(
                "`{}` is a {}: {} is not",
                node.spec.id,
                if tree { "directory" } else { "file" },
                object.display()
            ));
        }
        Ok(Admission {
            node: index,
            object: object.to_owned(),
            tree,
            ops: node.spec.ops,
            by: Identified::Owner,
        })
    }

    /// Puts an access no grant covers to the nodes.
    pub fn consider(&self, access: &Access<'_>) -> Considered {
        if let Some(considered) = self.first_read_of_a_source(access) {
            return considered;
        }
        let mut reasons = Vec::new();
        for (index, node) in self.nodes.iter().enumerate() {
            let Some(source) = node.spec.found_in else {
                continue;
            };
            match self.admits(index, node, source, access) {
                Ok(admission) => return Considered::Admit(admission),
                Err(Some(reason)) => reasons.push(reason),
                Err(None) => {}
            }
        }
        if reasons.is_empty() {
            Considered::Refer("no asset of the mission matches".to_owned())
        } else {
            Considered::Refer(reasons.join("; "))
        }
    }

    /// The read of a source node not read yet.
    fn first_read_of_a_source(&self, access: &Access<'_>) -> Option<Considered> {
        if access.new_name {
            return None;
        }
        let index = self.nodes.iter().enumerate().position(|(index, node)| {
            node.evidence.is_none()
                && self.is_source(index)
                && node.identities.iter().any(|i| same_object(&i.path, access))
        })?;
        let node = &self.nodes[index];
        Some(if access.ops & !node.spec.ops != 0 {
            Considered::Refer(format!(
                "`{}` allows {}, not {}",
                node.spec.id,
                op_names(node.spec.ops).join(", "),
                op_names(access.ops & !node.spec.ops).join(", ")
            ))
        } else {
            Considered::Observe { node: index }
        })
    }

    /// Whether node `index`, found in `source`, admits the access: `Err`
    /// with why not (`None` when the access is nowhere near the node).
    fn admits(
        &self,
        index: usize,
        node: &Node,
        source: usize,
        access: &Access<'_>,
    ) -> Result<Admission, Option<String>> {
        let id = &node.spec.id;
        let tree = node.spec.extent == Extent::Tree;
        // The objects that could be this node: the accessed one, and for a
        // tree each directory above it, deepest first; strictly below one
        // of the node's places.
        let candidates: Vec<&Path> = access
            .path
            .ancestors()
            .enumerate()
            .filter(|&(depth, candidate)| {
                (depth == 0 || tree)
                    && node
                        .spec
                        .constraints
                        .under
                        .iter()
                        .any(|under| candidate != under && candidate.starts_with(under))
            })
            .map(|(_, candidate)| candidate)
            .collect();
        if candidates.is_empty() {
            return Err(None);
        }
        if node.dropped {
            return Err(Some(format!("`{id}` was dropped by the owner")));
        }
        if access.ops & !node.spec.ops != 0 {
            return Err(Some(format!(
                "matches `{id}`, which allows {}, not {}",
                op_names(node.spec.ops).join(", "),
                op_names(access.ops & !node.spec.ops).join(", ")
            )));
        }
        let source_node = &self.nodes[source];
        let source_id = &source_node.spec.id;
        let Some(evidence) = &source_node.evidence else {
            return Err(Some(format!(
                "matches `{id}`, but `{source_id}` has not been read yet"
            )));
        };
        if evidence.revoked {
            return Err(Some(format!(
                "matches `{id}`, but the owner revoked the source of `{source_id}`'s evidence"
            )));
        }
        // Why no candidate is the node: the reason of the one that got
        // furthest (kind, then pattern, then evidence).
        let mut why_not: Option<(u8, String)> = None;
        let mut note = |rank: u8, reason: String| {
            if why_not.as_ref().is_none_or(|(known, _)| rank > *known) {
                why_not = Some((rank, reason));
            }
        };
        for candidate in candidates {
            let kind = kind_of(candidate, access);
            let wanted = node.spec.constraints.kind.unwrap_or(if tree {
                AssetKind::Directory
            } else {
                AssetKind::File
            });
            if kind != Some(wanted) {
                note(
                    0,
                    format!("matches `{id}` but is not a {}", kind_name(wanted)),
                );
                continue;
            }
            if let Some(glob) = &node.glob
                && !candidate
                    .file_name()
                    .is_some_and(|name| glob.is_match(name))
            {
                note(
                    1,
                    format!(
                        "matches `{id}`'s places but not its pattern {:?}",
                        node.spec.constraints.glob.as_deref().unwrap_or_default()
                    ),
                );
                continue;
            }
            let Some(excerpt) = evidence.names(candidate, tree, self.home.as_deref()) else {
                note(
                    2,
                    format!("matches `{id}` but is not in `{source_id}`'s evidence"),
                );
                continue;
            };
            let known = node.identities.iter().any(|i| i.path == candidate);
            let count = node.identities.len();
            if !known && count >= node.spec.constraints.max_count as usize {
                let mut reason = format!(
                    "matches `{id}`, but its count is exhausted ({count} of max_count {}:",
                    node.spec.constraints.max_count
                );
                for identity in &node.identities {
                    let _ = write!(reason, " {}", identity.path.display());
                }
                reason.push(')');
                return Err(Some(reason));
            }
            return Ok(Admission {
                node: index,
                object: candidate.to_owned(),
                tree,
                ops: node.spec.ops,
                by: Identified::Discovery {
                    source: source_id.clone(),
                    excerpt,
                    evidence: evidence.digest.clone(),
                },
            });
        }
        Err(why_not.map(|(_, reason)| reason))
    }

    /// The sources whose evidence admitted something, with the revocation
    /// counter the evidence was read at: `(source id, counter)`.
    pub fn watched_origins(&self) -> Vec<(u32, u32)> {
        self.nodes
            .iter()
            .filter_map(|n| n.evidence.as_ref())
            .filter(|e| !e.revoked)
            .flat_map(|e| e.origins.sources().map(|o| (o.source, o.stamp)))
            .collect()
    }

    /// The owner revoked `origin` (its counter is past what the evidence
    /// was read at): each source read from it admits nothing more, and what
    /// it admitted is taken back. Returns the objects taken back: `(node,
    /// source node, object)`.
    pub fn revoke_origin(&mut self, origin: u32, counter: u32) -> Vec<(usize, usize, PathBuf)> {
        let mut sources = Vec::new();
        for (index, node) in self.nodes.iter_mut().enumerate() {
            if let Some(evidence) = &mut node.evidence
                && evidence
                    .origins
                    .sources()
                    .any(|o| o.source == origin && o.stamp < counter)
                && !evidence.revoked
            {
                evidence.revoked = true;
                sources.push(index);
            }
        }
        let mut taken = Vec::new();
        for (index, node) in self.nodes.iter_mut().enumerate() {
            let Some(source) = node.spec.found_in.filter(|s| sources.contains(s)) else {
                continue;
            };
            node.identities.retain(|identity| {
                let discovered = matches!(identity.by, Identified::Discovery { .. });
                if discovered {
                    taken.push((index, source, identity.path.clone()));
                }
                !discovered
            });
        }
        taken
    }

    /// Every node as `pincer mission status` shows it.
    pub fn status(&self) -> Vec<NodeStatus> {
        self.nodes
            .iter()
            .map(|node| NodeStatus {
                id: node.spec.id.clone(),
                description: node.spec.description.clone(),
                status: node.status(),
                found_in: node
                    .spec
                    .found_in
                    .map(|source| self.nodes[source].spec.id.clone()),
                ops: op_names(node.spec.ops)
                    .into_iter()
                    .map(str::to_owned)
                    .collect(),
                extent: node.spec.extent,
                identities: node.identities.clone(),
                evidence: node.evidence.as_ref().map(|e| EvidenceStatus {
                    path: e.path.clone(),
                    bytes: e.bytes.len(),
                    size: e.size,
                    sha256: e.digest.clone(),
                    request: e.request,
                    revoked: e.revoked,
                }),
                dropped: node.dropped,
            })
            .collect()
    }
}

/// A node as listed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeStatus {
    /// Its id.
    pub id: String,
    /// What the task says of it.
    pub description: String,
    /// Where it stands.
    pub status: Status,
    /// The node it may be found in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub found_in: Option<String>,
    /// Its operations.
    pub ops: Vec<String>,
    /// Its extent.
    pub extent: Extent,
    /// What it became.
    pub identities: Vec<Identity>,
    /// Its evidence, when it is a fetched source.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evidence: Option<EvidenceStatus>,
    /// Whether the owner dropped it.
    pub dropped: bool,
}

/// A fetched source's evidence as listed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvidenceStatus {
    /// The file.
    pub path: PathBuf,
    /// How much was kept.
    pub bytes: usize,
    /// The file's size when read.
    pub size: u64,
    /// SHA-256 of what was kept.
    pub sha256: String,
    /// The request whose read observed it.
    pub request: u64,
    /// Whether the owner revoked the source its content came from.
    pub revoked: bool,
}

/// What kind the object `path` is, for the access: a new name is what the
/// access makes (a directory for `mkdir`); an existing object is looked
/// up, `None` when it is neither a regular file nor a directory.
fn kind_of(path: &Path, access: &Access<'_>) -> Option<AssetKind> {
    if access.new_name && path == access.path {
        return Some(if access.ops & ops::MKDIR != 0 {
            AssetKind::Directory
        } else {
            AssetKind::File
        });
    }
    let metadata = std::fs::symlink_metadata(path).ok()?;
    if metadata.is_dir() {
        Some(AssetKind::Directory)
    } else if metadata.is_file() {
        Some(AssetKind::File)
    } else {
        None
    }
}

fn kind_name(kind: AssetKind) -> &'static str {
    match kind {
        AssetKind::File => "regular file",
        AssetKind::Directory => "directory",
    }
}

/// Whether `path` is the object the kernel saw.
fn same_object(path: &Path, access: &Access<'_>) -> bool {
    path == access.path
        && std::fs::metadata(path)
            .is_ok_and(|m| kernel_dev(m.dev()) == access.dev && m.ino() == access.ino)
}

#[cfg(test)]
mod tests;
