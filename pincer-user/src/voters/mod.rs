//! The voters that decide parked requests, one file each.

pub mod webhook;
