//! Labels: what pincer knows of an object's content (its authority, the
//! sources it was derived from) and of an agent's level.

/// Authority levels of content (see [`Label`]), lowest first: what it may
/// justify. Zero is "not labelled": content pincer knows nothing of counts
/// as [`authority::USER`]'s (the host's own files).
pub mod authority {
    named! {
        /// Names in missions, audit lines and `pincer label`, by level.
        NAMES;

        /// Read, never acted on: fetched pages, tool output, and everything an
        /// agent wrote (the model is a lowest-authority input).
        EVIDENCE = 1 => "evidence";
        /// The user's own content and what the owner raised to it.
        USER = 2 => "user";
        /// What the owner approved: instructions and settings agents obey.
        POLICY = 3 => "policy";
    }

    /// The name of a level (`unlabelled` for zero or an unknown value).
    pub const fn name(level: u32) -> &'static str {
        match crate::text::name_of(&NAMES, level) {
            Some(name) => name,
            None => "unlabelled",
        }
    }
}

/// Bits of [`Label::flags`].
pub mod label_flags {
    named! {
        /// The flags' names, as `pincer label` shows them.
        NAMES;

        /// An agent created it, or last changed its content: it is evidence,
        /// and a name under it is never a policy object by its name alone (a
        /// repository the agent made is the agent's, hooks and all).
        AGENT_MADE = 1 << 0 => "agent-made";
        /// A policy object: only the owner changes it.
        POLICY = 1 << 1 => "policy";
        /// With [`POLICY`]: everything below the directory is policy too.
        TREE = 1 << 2 => "tree";
        /// A declared source (`[[source]]`): its content has the label's
        /// authority, and reading it lowers the reader to that level. With
        /// [`TREE`], an object made in the directory is a source too.
        SOURCE = 1 << 3 => "source";
        /// The twin's copy of content it inspected (git configuration on its
        /// way in): it may be read, renamed and removed, never changed, so
        /// what lands is what was inspected.
        SEALED = 1 << 4 => "sealed";
        /// With [`POLICY`]: a placeholder a sandbox of the agent's own made
        /// (empty, at a policy name). The agent whose label it is may remove
        /// it while it is still empty, as bubblewrap's users tidy up after it.
        PLACEHOLDER = 1 << 5 => "placeholder";
    }
}

/// An object by identity, for [`crate::names::LABELS`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// Device (kernel encoding).
    pub dev: u64,
    /// Inode number.
    pub ino: u64,
}

/// What pincer knows of an object's content: the value of
/// [`crate::names::LABELS`]. The full descriptor (owner, scope, origins, their
/// revocation counters) is the twin's; the kernel keeps what it decides on.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Label {
    /// One of [`authority`] (zero: none given, the object's own).
    pub authority: u32,
    /// Bits of [`label_flags`].
    pub flags: u32,
    /// The inode's generation when it was labelled: a label whose object
    /// was deleted and whose inode number was reused does not carry over
    /// (zero matches any generation, for file systems that keep none).
    pub generation: u32,
    /// The lowest authority of what the content was derived from (zero:
    /// nothing below the reader's own): reading the object lowers the
    /// reader's level to it. A source's is its authority; an agent's write
    /// leaves the writer's level.
    pub taint: u32,
    /// The cgroup id of the agent that made or last changed it (zero: no
    /// agent).
    pub agent: u64,
    /// The sources the content was derived from, with their counters then
    /// ([`Origins`]): a later revocation of any of them revokes the object.
    pub origins: Origins,
}

/// The id of a source by its path (absolute, links resolved): FNV-1a over
/// its bytes, never zero and never [`ANY_SOURCE`]. Revocation counters are
/// kept by it.
pub fn source_id(path: &[u8]) -> u32 {
    let mut hash = 0x811c_9dc5u32;
    for byte in path {
        hash ^= u32::from(*byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    let id = hash | 1;
    if id == ANY_SOURCE { ANY_SOURCE - 2 } else { id }
}

/// How many sources a label or an agent's level records by name.
pub const MAX_ORIGINS: usize = 4;

/// Stands for every source in an [`Origins`] position where two sources
/// met: its counter in [`crate::names::REVOKED`] counts every revocation on the
/// host, so content derived from more sources than a position can name is
/// revoked by a revocation of any source (never by none).
pub const ANY_SOURCE: u32 = u32::MAX;

/// One source content was derived from: its id ([`source_id`], zero for
/// none) and its revocation counter when the content was derived from it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Origin {
    /// [`source_id`] of the source, [`ANY_SOURCE`], or zero for none.
    pub source: u32,
    /// Its counter then: a higher one in [`crate::names::REVOKED`] revokes.
    pub stamp: u32,
}

/// The sources content was derived from (or an agent has read), one per
/// position: a source always takes the position [`Origins::position`]
/// gives it, so the union of two sets is taken position by position
/// without searching (which keeps the programs' verification small).
/// Two sources that meet in one position become [`ANY_SOURCE`] there.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Origins {
    /// By position.
    pub at: [Origin; MAX_ORIGINS],
}

impl Origins {
    /// No source.
    pub const NONE: Origins = Origins {
        at: [Origin {
            source: 0,
            stamp: 0,
        }; MAX_ORIGINS],
    };

    /// The position of a source (ids are odd: their lowest bit says
    /// nothing).
    pub const fn position(source: u32) -> usize {
        ((source >> 1) as usize) % MAX_ORIGINS
    }

    /// One source with its counter.
    pub fn one(source: u32, stamp: u32) -> Origins {
        let mut origins = Origins::NONE;
        if source != 0 {
            origins.at[Origins::position(source)] = Origin { source, stamp };
        }
        origins
    }

    /// Whether a source with the counters `counter` gives revoked any of
    /// these.
    #[inline(always)]
    pub fn revoked(&self, counter: impl Fn(u32) -> u32) -> bool {
        let mut revoked = false;
        for origin in &self.at {
            revoked |= origin.source != 0 && origin.stamp < counter(origin.source);
        }
        revoked
    }

    /// The union of two sets, `counter` giving the counters now: a source
    /// in both keeps the earlier stamp (revoked by more, never by less);
    /// two sources in one position become [`ANY_SOURCE`], stamped with
    /// the count of revocations now, or zero (revoked already) when either
    /// was revoked already.
    #[inline(always)]
    pub fn union(&self, other: &Origins, counter: impl Fn(u32) -> u32) -> Origins {
        let mut union = *self;
        for (mine, theirs) in union.at.iter_mut().zip(other.at.iter()) {
            if theirs.source == 0 {
                continue;
            }
            if mine.source == 0 {
                *mine = *theirs;
            } else if mine.source == theirs.source {
                if theirs.stamp < mine.stamp {
                    mine.stamp = theirs.stamp;
                }
            } else {
                let revoked =
                    mine.stamp < counter(mine.source) || theirs.stamp < counter(theirs.source);
                *mine = Origin {
                    source: ANY_SOURCE,
                    stamp: if revoked { 0 } else { counter(ANY_SOURCE) },
                };
            }
        }
        union
    }

    /// The sources named, ids other than zero.
    pub fn sources(&self) -> impl Iterator<Item = &Origin> {
        self.at.iter().filter(|origin| origin.source != 0)
    }

    /// Whether no source is named.
    pub fn is_empty(&self) -> bool {
        self.at.iter().all(|origin| origin.source == 0)
    }
}

/// An agent's level: the value of [`crate::names::TAINTS`]. An agent starts with
/// none (zero: nothing it read was below the user's own content); each
/// read of content of lower authority lowers it for the whole cgroup,
/// children and programs it executes included (the low-water mark), and
/// only a new run raises it again.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Taint {
    /// One of [`authority`], or zero for none.
    pub level: u32,
    /// Explicit padding; always zero.
    pub _pad: u32,
    /// The object whose read brought the agent to `level`.
    pub dev: u64,
    /// Its inode number.
    pub ino: u64,
    /// Every source the agent has read content of, with their counters
    /// then ([`Label::origins`]): what it writes is derived from them all.
    pub origins: Origins,
}

/// What a mission reserves for agents at or above a level: the value of
/// [`crate::names::ACTIONS`], keyed like a grant.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Action {
    /// The operations on the object that are the action (`exec` for a
    /// program, `write`/`create` for a destination).
    pub ops: u32,
    /// The lowest level that may take it without the owner: one of
    /// [`authority`].
    pub authority: u32,
}

/// An object a thread is making: the value of [`crate::names::MAKING`], set when
/// the creation is allowed and spent when the kernel binds the new name to
/// its inode (`d_instantiate`), where the new object is labelled.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Making {
    /// The new (still negative) dentry.
    pub dentry: u64,
    /// The label's [`label_flags`]: `AGENT_MADE` for the agent's own
    /// object, none for one the owner let it make in a policy place.
    pub flags: u32,
    /// Explicit padding; always zero.
    pub _pad: u32,
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::{format, vec::Vec};

    use super::{ANY_SOURCE, Origin, Origins, source_id};

    /// Two source ids that take different positions, and one that meets
    /// the first.
    fn sources() -> (u32, u32, u32) {
        let ids: Vec<u32> = (0..64u32)
            .map(|n| source_id(format!("/srv/s{n}").as_bytes()))
            .collect();
        let a = ids[0];
        let b = *ids
            .iter()
            .find(|id| Origins::position(**id) != Origins::position(a))
            .unwrap();
        let c = *ids[1..]
            .iter()
            .find(|id| **id != a && Origins::position(**id) == Origins::position(a))
            .unwrap();
        (a, b, c)
    }

    #[test]
    fn a_union_names_every_source_and_is_revoked_by_any_of_them() {
        let (a, b, _) = sources();
        let none = |_: u32| 0;
        let union = Origins::one(a, 0).union(&Origins::one(b, 0), none);
        let named: Vec<u32> = union.sources().map(|o| o.source).collect();
        assert_eq!(named.len(), 2);
        assert!(named.contains(&a) && named.contains(&b));
        assert!(!union.revoked(none));
        for revoked in [a, b] {
            assert!(union.revoked(|s| u32::from(s == revoked)), "{revoked}");
        }
        assert!(!union.revoked(|s| u32::from(s == 12345)));
        // The same source twice keeps the earlier stamp.
        let twice = Origins::one(a, 3).union(&Origins::one(a, 1), none);
        assert_eq!(twice, Origins::one(a, 1));
        assert_eq!(Origins::NONE.union(&twice, none), twice);
        assert!(Origins::NONE.is_empty() && !twice.is_empty());
    }

    #[test]
    fn sources_that_meet_in_a_position_are_revoked_by_any_revocation() {
        let (a, _, c) = sources();
        // Two revocations on the host so far, of other sources.
        let counters = |s: u32| if s == ANY_SOURCE { 2 } else { 0 };
        let met = Origins::one(a, 0).union(&Origins::one(c, 0), counters);
        assert_eq!(
            met.at[Origins::position(a)],
            Origin {
                source: ANY_SOURCE,
                stamp: 2
            }
        );
        assert!(!met.revoked(counters));
        // A third revocation, of anything, revokes it.
        assert!(met.revoked(|s| if s == ANY_SOURCE { 3 } else { 0 }));
        // One already revoked when they met: revoked from then on.
        let counters = |s: u32| match s {
            ANY_SOURCE => 2,
            s if s == c => 1,
            _ => 0,
        };
        let met = Origins::one(a, 0).union(&Origins::one(c, 0), counters);
        assert!(met.revoked(counters));
    }

    #[test]
    fn no_path_is_the_id_of_every_source() {
        for n in 0..10_000u32 {
            let id = source_id(&n.to_le_bytes());
            assert!(id != 0 && id != ANY_SOURCE && id & 1 == 1);
        }
    }
}
