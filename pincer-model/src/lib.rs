//! What pincer reads and writes, beneath the runtime that acts on it: no
//! module here loads a program, talks to the kernel's maps or runs a task.
//!
//! - the ground: [`toml_file`] (TOML read with file, line and field in
//!   every error), [`files`] (regular files only, bounded), [`escape`]
//!   (names as they may be shown), [`paths`] (default places), [`duration`]
//!   (durations as files and command lines write them, within bounds);
//! - what the agent may do: [`mission`] (the mission file, its grants and
//!   the profiles of agent programs); what content may justify: [`labels`]
//!   (policy sets, label snapshots, the harness API's labels);
//! - a parked request and its vote: [`request`], [`vote`] (the nouns, the
//!   mission voter's rules, the webhook's wire);
//! - the host-wide services' files: [`config`] (the daemon's and the
//!   approval service's configurations);
//! - [`gitconfig`]: what git's configuration files say, for the inspection
//!   of changes to them.

pub mod assets;
pub mod audit;
pub mod config;
pub mod control;
pub mod duration;
pub mod escape;
pub mod events;
#[doc(hidden)]
pub mod examples;
pub mod files;
pub mod gitconfig;
pub mod labels;
pub mod mission;
pub mod paths;
#[doc(hidden)]
pub mod readme;
pub mod request;
pub mod toml_file;
pub mod vote;

#[cfg(test)]
mod test_support;
