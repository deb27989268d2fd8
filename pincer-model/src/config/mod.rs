//! The configurations of pincer's host-wide services: [`daemon`]
//! (`pincer daemon`'s `daemon.toml`) and [`approvals`] (`pincer approvals
//! serve`'s).

pub mod approvals;
pub mod daemon;
