//! The voters that decide parked requests, one file each.

pub mod mission;
pub mod prompt;
pub mod webhook;
