//! pincer's runtime: it loads the BPF LSM programs, puts agents in their
//! cgroups, turns missions into kernel grants, decides parked requests and
//! audits every decision. What it reads and writes (missions, requests,
//! votes, labels, configurations, the kernel's records, asset nodes, the
//! audit log and the control protocol) is [`pincer_model`], beneath it.
//!
//! The modules, roughly in the order a decision travels (see
//! README.md, "Architecture"):
//!
//! - the kernel: [`btf`] (struct offsets), [`loader`] (the programs and their
//!   maps), [`cgroup`] (agent cgroups), [`procfs`] (what `/proc` tells of a
//!   task), [`watchdog`] (what enforces when the twin dies);
//! - the twin: [`twin`] (the decisions, and the service both shells
//!   drive), [`vote`] (gathering and combining votes), [`voters`] (mission,
//!   prompt, webhook), [`metrics`];
//! - the shells: [`run`] (`pincer run`), [`daemon`] (`pincer daemon`),
//!   [`control`] (the control socket), [`cli`] (the command line),
//!   [`check`] (a start's checks without the start), [`doctor`] (kernel
//!   support checks), [`approvals`] (one approval service for the webhooks
//!   of many nodes);
//! - learning from a run: [`recommend`] (a minimal mission from an audit
//!   log).

pub mod approvals;
pub mod btf;
pub mod cgroup;
pub mod check;
pub mod cli;
pub mod control;
pub mod daemon;
pub mod doctor;
pub mod loader;
pub mod metrics;
pub mod procfs;
pub mod recommend;
pub mod run;
pub mod twin;
pub mod vote;
pub mod voters;
pub mod watchdog;
