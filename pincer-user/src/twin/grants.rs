//! The grants the twin keeps: every agent's mission grants, and the grants
//! votes made (for the session or a time), so the kernel value of a key is
//! always the mission's grant plus every live vote grant on it.

use std::{collections::HashMap, path::Path};

use pincer_common::{AccessEvent, GrantKey, GrantValue, NAME_LEN, NameGrantKey, event_flags};
use pincer_model::{
    control::{GrantSource, ListedGrant},
    events,
    mission::ResolvedGrants,
    vote::Extent,
};
use tokio::time::Instant;

use crate::loader::SlotGrants;

/// What a grant is on: an object by identity, or a name in a directory
/// (a file not created yet).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// An inode.
    Inode(GrantKey),
    /// A name in a directory.
    Name(Box<NameGrantKey>),
}

impl Target {
    /// The slot of the agent it belongs to.
    pub fn slot(&self) -> u32 {
        match self {
            Target::Inode(key) => key.slot,
            Target::Name(key) => key.slot,
        }
    }
}

/// A grant made by a vote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VoteGrant {
    /// What it is on.
    pub target: Target,
    /// The path it was asked for (a tree's directory for a tree grant).
    pub path: String,
    /// Operations granted.
    pub ops: u32,
    /// Whether it covers the tree below `target`.
    pub tree: bool,
    /// When it ends; `None` for the rest of the session.
    pub expires: Option<Instant>,
}

/// Every grant the twin knows, by slot.
#[derive(Debug, Default)]
pub struct Grants {
    /// The mission grants of every agent (keys carry the slot).
    mission: HashMap<GrantKey, GrantValue>,
    mission_names: HashMap<NameGrantKey, GrantValue>,
    votes: Vec<VoteGrant>,
}

impl Grants {
    /// Keeps a mission's resolved grants (already written to the kernel).
    pub fn add_mission(&mut self, grants: &ResolvedGrants) {
        self.mission
            .extend(grants.inode.iter().map(|(k, v, _)| (*k, *v)));
        self.mission_names
            .extend(grants.names.iter().map(|(k, v, _)| (*k, *v)));
    }

    /// Forgets every grant of a slot, mission and votes.
    pub fn drop_slot(&mut self, slot: u32) {
        self.mission.retain(|k, _| k.slot != slot);
        self.mission_names.retain(|k, _| k.slot != slot);
        self.votes.retain(|g| g.target.slot() != slot);
    }

    /// What a parked access would be granted on, for `slot` and this
    /// extent; `None` when it cannot be granted beyond once (a created name
    /// too long to keep).
    pub fn target_for(event: &AccessEvent, slot: u32, extent: Extent) -> Option<(Target, bool)> {
        let inode = |ino| {
            Target::Inode(GrantKey {
                slot,
                _pad: 0,
                dev: event.dev,
                ino,
            })
        };
        let new_name = event.flags & event_flags::NEW_NAME != 0;
        Some(match (new_name, extent) {
            // A tree on the object's directory; for a new name the event
            // already names the directory.
            (true, Extent::Tree) => (inode(event.ino), true),
            (false, Extent::Tree) if event.parent_ino != 0 => (inode(event.parent_ino), true),
            (true, _) => {
                let name = events::created_name(event).filter(|n| n.len() < NAME_LEN)?;
                let mut key = NameGrantKey::zeroed();
                key.slot = slot;
                key.parent_dev = event.dev;
                key.parent_ino = event.ino;
                key.name_len = name.len() as u32;
                key.name[..name.len()].copy_from_slice(&name);
                (Target::Name(Box::new(key)), false)
            }
            _ => (inode(event.ino), false),
        })
    }

    /// Adds a vote grant; returns its target, whose kernel value must be
    /// written again.
    pub fn add_vote(&mut self, grant: VoteGrant) -> &Target {
        self.votes.push(grant);
        &self.votes[self.votes.len() - 1].target
    }

    /// The kernel value of a target: the mission's grant plus every live
    /// vote grant on it.
    pub fn inode_value(&self, key: &GrantKey) -> GrantValue {
        let mut value = self.mission.get(key).copied().unwrap_or_default();
        for grant in self
            .votes
            .iter()
            .filter(|g| g.target == Target::Inode(*key))
        {
            if grant.tree {
                value.tree_ops |= grant.ops;
            } else {
                value.file_ops |= grant.ops;
            }
        }
        value
    }

    /// Every grant of `slot` as the kernel should hold it: the mission's
    /// and the live votes', one value per key (what the integrity check
    /// compares with the maps).
    /// Prefix grants are the mission's alone and not kept here: `prefixes`
    /// is zero.
    pub fn expected(&self, slot: u32) -> SlotGrants {
        let mut inode: Vec<GrantKey> = self
            .mission
            .keys()
            .copied()
            .chain(self.votes.iter().filter_map(|g| match &g.target {
                Target::Inode(key) => Some(*key),
                Target::Name(_) => None,
            }))
            .filter(|key| key.slot == slot)
            .collect();
        inode.sort_unstable_by_key(|k| (k.dev, k.ino));
        inode.dedup();
        let mut names: Vec<NameGrantKey> = self
            .mission_names
            .keys()
            .copied()
            .chain(self.votes.iter().filter_map(|g| match &g.target {
                Target::Name(key) => Some(**key),
                Target::Inode(_) => None,
            }))
            .filter(|key| key.slot == slot)
            .collect();
        names.sort_unstable_by_key(|k| (k.parent_dev, k.parent_ino, k.name));
        names.dedup();
        let empty = GrantValue::default();
        SlotGrants {
            inode: inode
                .into_iter()
                .map(|k| (k, self.inode_value(&k)))
                .filter(|(_, v)| *v != empty)
                .collect(),
            names: names
                .into_iter()
                .map(|k| (k, self.name_value(&k)))
                .filter(|(_, v)| *v != empty)
                .collect(),
            prefixes: 0,
        }
    }

    /// The kernel value of a name target.
    pub fn name_value(&self, key: &NameGrantKey) -> GrantValue {
        let mut value = self.mission_names.get(key).copied().unwrap_or_default();
        for grant in &self.votes {
            if let Target::Name(on) = &grant.target
                && **on == *key
            {
                value.file_ops |= grant.ops;
            }
        }
        value
    }

    /// Takes out the vote grants of `slot` (only those made for `path`,
    /// when given); returns them, whose targets must be written again.
    pub fn revoke(&mut self, slot: u32, path: Option<&str>) -> Vec<VoteGrant> {
        let (gone, kept) = std::mem::take(&mut self.votes)
            .into_iter()
            .partition(|g| g.target.slot() == slot && path.is_none_or(|p| p == g.path));
        self.votes = kept;
        gone
    }

    /// Takes out the time-limited grants that have ended by `now`.
    pub fn expire(&mut self, now: Instant) -> Vec<VoteGrant> {
        let (ended, live) = std::mem::take(&mut self.votes)
            .into_iter()
            .partition(|g| g.expires.is_some_and(|e| e <= now));
        self.votes = live;
        ended
    }

    /// When the next time-limited grant ends, if any.
    pub fn next_expiry(&self) -> Option<Instant> {
        self.votes.iter().filter_map(|g| g.expires).min()
    }

    /// The vote grants of `slot` that still last at `now`, as listed.
    pub fn listed_votes(&self, slot: u32, now: Instant) -> Vec<ListedGrant> {
        self.votes
            .iter()
            .filter(|g| g.target.slot() == slot && g.expires.is_none_or(|e| e > now))
            .map(|g| ListedGrant {
                path: g.path.clone(),
                ops: events::op_names(g.ops)
                    .into_iter()
                    .map(String::from)
                    .collect(),
                extent: if g.tree { Extent::Tree } else { Extent::File },
                by: GrantSource::Vote,
                expires_in_seconds: g
                    .expires
                    .map(|e| e.saturating_duration_since(now).as_secs()),
            })
            .collect()
    }
}

/// The directory a tree grant made for `path` covers.
pub fn tree_of(path: &str) -> String {
    Path::new(path)
        .parent()
        .map_or_else(|| path.to_owned(), |p| p.display().to_string())
}
