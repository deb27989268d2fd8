//! Labels: what content may justify, at the file boundary.
//!
//! Grants answer "may this agent touch this file?". Labels answer "may what
//! this file holds become an instruction?", after the protection
//! descriptors of agent memory: every object has an authority, lowest
//! first `evidence` (fetched pages, tool output, and everything an agent
//! wrote: the model is a lowest-authority input), `user` (the host's own
//! files, and what the owner raised to it), `policy` (what the owner
//! approved). Authority never lifts itself: only the owner raises it.
//!
//! - [`policy`]: the policy set, the objects only the owner changes
//!   (agents' instructions and settings, git hooks and configuration, shell
//!   start-up files, crontabs, pincer's own configuration). The programs
//!   refuse an agent's change to one, or park it for the owner alone,
//!   whatever the grants above it; an object an agent made is its own.
//!
//! The programs keep, per object, what they decide on (`pincer_common::Label`:
//! its authority, whether an agent made it, whether it is policy) in one map
//! shared by every pincer on the host.

pub mod harness;
pub mod policy;
pub mod store;

use pincer_common::{Label, ObjectKey, authority};
pub use policy::{PolicyPattern, PolicySet};
pub use store::{Revoked, Saved, Store, StoreError};

/// The labels of the policy set's objects found by path: policy, by
/// identity, with the generation of the inode when its file system tells.
pub fn policy_labels(set: &PolicySet) -> Vec<(ObjectKey, Label)> {
    set.objects()
        .into_iter()
        .map(|(key, flags, path)| {
            (
                key,
                Label {
                    authority: authority::USER,
                    flags,
                    generation: generation(&path).unwrap_or(0),
                    taint: 0,
                    agent: 0,
                    origins: pincer_common::Origins::NONE,
                },
            )
        })
        .collect()
}

/// The labels of the objects that links through policy names make policy
/// objects, in the trees at `roots` ([`policy::links`]).
pub fn linked_labels(set: &PolicySet, roots: &[std::path::PathBuf]) -> Vec<(ObjectKey, Label)> {
    let scan = policy::links::scan(set, roots);
    if scan.truncated {
        tracing::warn!(
            scanned = scan.scanned,
            "the trees an agent may change hold more entries than pincer looks through for links to policy objects; links beyond were not found"
        );
    }
    scan.linked
        .into_iter()
        .map(|linked| {
            tracing::debug!(target = %linked.path.display(), through = %linked.through.display(), "a policy object by a link");
            (
                linked.key,
                Label {
                    authority: authority::USER,
                    flags: linked.flags,
                    generation: generation(&linked.path).unwrap_or(0),
                    taint: 0,
                    agent: 0,
                    origins: pincer_common::Origins::NONE,
                },
            )
        })
        .collect()
}

/// The inode generation of the object at `path` (`FS_IOC_GETVERSION`), or
/// `None` where its file system keeps none it tells (a label with
/// generation zero matches whatever generation the inode has).
pub fn generation(path: &std::path::Path) -> Option<u32> {
    use std::os::fd::AsRawFd;
    // `FS_IOC_GETVERSION`: `_IOR('v', 1, long)`.
    const FS_IOC_GETVERSION: libc::c_ulong = 0x8008_7601;
    let file = std::fs::File::open(path).ok()?;
    let mut version: libc::c_long = 0;
    // SAFETY: the ioctl writes one `long` to the pointer it is given.
    let done = unsafe { libc::ioctl(file.as_raw_fd(), FS_IOC_GETVERSION, &raw mut version) };
    (done == 0).then_some(version as u32)
}
