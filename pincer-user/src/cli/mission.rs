//! `pincer mission check`: what a mission file says on this machine.

use std::path::PathBuf;

use anyhow::Context;
use clap::Subcommand;
use pincer_model::{
    control::{ControlRequest, ControlResponse},
    escape::for_terminal,
    mission::{Mission, format_ops},
};

use super::{AgentQuery, Socket, print_list, requests::done};
use crate::check::Checked;

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
    /// Show the asset nodes of the running agents: where each stands, what
    /// it became and why, the evidence of each source.
    Status(AgentQuery),
    /// Pin an object as an asset node: it is granted with the node's
    /// operations and extent for the session (audited).
    Admit {
        /// The node's id.
        node: String,
        /// The object.
        path: PathBuf,
        /// The agent, when several have the node.
        #[arg(long)]
        agent: Option<String>,
        #[command(flatten)]
        socket: Socket,
    },
    /// Drop an asset node: nothing more is admitted for it (audited); what
    /// it admitted stays granted for the session.
    Drop {
        /// The node's id.
        node: String,
        /// The agent, when several have the node.
        #[arg(long)]
        agent: Option<String>,
        #[command(flatten)]
        socket: Socket,
    },
}

pub(super) fn main(command: MissionCommand) -> anyhow::Result<()> {
    let file = match command {
        MissionCommand::Check { file } => file,
        MissionCommand::Status(AgentQuery {
            agent,
            json,
            socket,
        }) => return status(&socket.socket, agent, json),
        MissionCommand::Admit {
            node,
            path,
            agent,
            socket,
        } => {
            let path = std::path::absolute(&path)
                .with_context(|| format!("cannot make {} absolute", path.display()))?;
            return done(
                &socket.socket,
                &ControlRequest::Asset {
                    agent,
                    node,
                    path: Some(path),
                },
            );
        }
        MissionCommand::Drop {
            node,
            agent,
            socket,
        } => {
            return done(
                &socket.socket,
                &ControlRequest::Asset {
                    agent,
                    node,
                    path: None,
                },
            );
        }
    };
    let mission = Mission::from_file(&file)?;
    let Checked { grants, warnings } = crate::check::check(&mission)
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

/// Prints every node of the agents asked about.
fn status(socket: &std::path::Path, agent: Option<String>, json: bool) -> anyhow::Result<()> {
    print_list(
        socket,
        &ControlRequest::Assets { agent },
        json,
        "no agent has asset nodes",
        pick!(Assets { agents }),
        |agent| {
            println!("{}", agent.agent);
            for node in agent.nodes {
                let dropped = if node.dropped { ", dropped" } else { "" };
                let from = node
                    .found_in
                    .map(|source| format!(" found in {source}"))
                    .unwrap_or_default();
                println!(
                    "  {} [{}] {}{from}: {:?}{dropped}",
                    node.id,
                    node.ops.join(","),
                    node.extent,
                    node.status
                );
                for identity in &node.identities {
                    let how = match &identity.by {
                        pincer_model::assets::Identified::Mission => {
                            "named by the mission".to_owned()
                        }
                        pincer_model::assets::Identified::Owner => "pinned by the owner".to_owned(),
                        pincer_model::assets::Identified::Discovery {
                            source, excerpt, ..
                        } => format!(
                            "named in {source} at bytes {}..{}: \"{}\"",
                            excerpt.start,
                            excerpt.end,
                            for_terminal(&excerpt.text)
                        ),
                    };
                    println!("    = {} ({how})", identity.path.display());
                }
                if let Some(evidence) = &node.evidence {
                    println!(
                        "    evidence: {} bytes of {} (sha256 {}), read on request {}",
                        evidence.bytes,
                        evidence.path.display(),
                        evidence.sha256,
                        evidence.request
                    );
                }
            }
        },
    )
}
