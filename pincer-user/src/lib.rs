//! pincer's userspace: it loads the BPF LSM programs, puts agents in their
//! cgroups, turns missions into kernel grants and audits every decision.
//!
//! One module per concern: [`mission`] (the mission file and its grants),
//! [`cgroup`] (agent cgroups), [`btf`] (kernel struct offsets), [`loader`]
//! (the BPF object and its maps), [`events`] (sanitizing kernel records),
//! [`audit`] (the audit log), [`run`] (`pincer run`), [`doctor`] (kernel
//! support checks).

pub mod audit;
pub mod btf;
pub mod cgroup;
pub mod control;
pub mod daemon;
pub mod doctor;
pub mod events;
pub mod loader;
pub mod metrics;
pub mod mission;
pub mod procfs;
pub mod request;
pub mod run;
pub mod toml_file;
pub mod twin;
pub mod vote;
pub mod voters;
pub mod watchdog;
