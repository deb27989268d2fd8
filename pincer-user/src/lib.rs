//! pincer's userspace: it loads the BPF LSM programs, puts agents in their
//! cgroups, turns missions into kernel grants, decides parked requests and
//! audits every decision.
//!
//! The modules, roughly in the order a decision travels (see the README's
//! "Architecture"):
//!
//! - what the agent may do: [`mission`] (the mission file and its grants);
//!   what content may justify: [`labels`] (policy objects, labels);
//! - the kernel: [`btf`] (struct offsets), [`loader`] (the programs and their
//!   maps), [`cgroup`] (agent cgroups), [`watchdog`] (what enforces when the
//!   twin dies);
//! - the twin: [`events`] (sanitizing kernel records), [`request`] (a parked
//!   request as voters see it), [`twin`] (the decisions, and the service both
//!   shells drive), [`vote`] (combining votes), [`voters`] (mission, prompt,
//!   webhook), [`audit`] (the HMAC-chained log), [`metrics`];
//! - the shells: [`run`] (`pincer run`), [`daemon`] (`pincer daemon`),
//!   [`control`] (the control socket), [`cli`] (the command line),
//!   [`doctor`] (kernel support checks), [`approvals`] (one approval service
//!   for the webhooks of many nodes);
//! - learning from a run: [`recommend`] (a minimal mission from an audit
//!   log);
//! - [`paths`]: default paths, in one place.

pub mod approvals;
pub mod assets;
pub mod audit;
pub mod btf;
pub mod cgroup;
pub mod cli;
pub mod control;
pub mod daemon;
pub mod doctor;
pub mod escape;
pub mod events;
pub mod files;
pub mod gitconfig;
pub mod labels;
pub mod loader;
pub mod metrics;
pub mod mission;
pub mod paths;
pub mod procfs;
#[cfg(test)]
pub mod readme;
pub mod recommend;
pub mod request;
pub mod run;
pub mod toml_file;
pub mod twin;
pub mod vote;
pub mod voters;
pub mod watchdog;
