//! `pincer mission check`: what a mission file says on this machine.

use std::path::PathBuf;

use anyhow::Context;
use clap::Subcommand;

use crate::mission::{self, Checked, Mission, format_ops};

/// Subcommands of `pincer mission`.
#[derive(Debug, Subcommand)]
pub(super) enum MissionCommand {
    /// Validate a mission as a start would (grants resolved, webhook secret
    /// read and private), print the grants it resolves to on this machine,
    /// and warn about risky ones.
    Check {
        /// The mission file (TOML).
        file: PathBuf,
    },
}

pub(super) fn main(command: MissionCommand) -> anyhow::Result<()> {
    let MissionCommand::Check { file } = command;
    let mission = Mission::from_file(&file)?;
    let Checked { grants, warnings } = mission::check(&mission)
        .with_context(|| format!("mission {} would not start", file.display()))?;
    println!("mission: {}", mission.name);
    for (key, value, reason) in &grants.inode {
        println!(
            "  {}:{} ino {:<10} file [{}] tree [{}]  ({})",
            key.dev >> 20,
            key.dev & 0xf_ffff,
            key.ino,
            format_ops(value.file_ops),
            format_ops(value.tree_ops),
            reason.0
        );
    }
    for (key, value, reason) in &grants.names {
        let name = String::from_utf8_lossy(&key.name[..key.name_len as usize]);
        println!(
            "  {}:{} ino {:<10} name {name:?} [{}]  ({})",
            key.parent_dev >> 20,
            key.parent_dev & 0xf_ffff,
            key.parent_ino,
            format_ops(value.file_ops),
            reason.0
        );
    }
    for (key, value, reason) in &grants.prefixes {
        let name = &key.name;
        let dev = u64::from_ne_bytes(name.dev);
        let prefix = String::from_utf8_lossy(&name.name[..key.prefix_len()]);
        println!(
            "  {}:{} ino {:<10} names starting {prefix:?} [{}]  ({})",
            dev >> 20,
            dev & 0xf_ffff,
            u64::from_ne_bytes(name.ino),
            format_ops(value.file_ops),
            reason.0
        );
    }
    for warning in &warnings {
        eprintln!("warning: {warning}");
    }
    Ok(())
}
