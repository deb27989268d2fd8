//! `pincer approvals`: the approval service for a fleet, and the operators'
//! commands against it.

use std::{net::SocketAddr, path::PathBuf};

use anyhow::Context;
use clap::Subcommand;
use pincer_model::vote::Extent;

use super::print_json;
use crate::approvals::{Decision, client::Client, server};

/// Where the service is, and the operator's token.
#[derive(Debug, clap::Args)]
pub(super) struct Server {
    /// The approval service's URL.
    #[arg(
        long,
        env = "PINCER_APPROVALS_SERVER",
        default_value = "http://127.0.0.1:8443"
    )]
    server: String,
    /// The file holding the operator token (the service's `token_file`).
    #[arg(long, env = "PINCER_APPROVALS_TOKEN_FILE", value_name = "FILE")]
    token_file: PathBuf,
}

/// Subcommands of `pincer approvals`.
#[derive(Debug, Subcommand)]
pub(super) enum ApprovalsCommand {
    /// Serve approvals for many nodes: their webhook voters post parked
    /// requests here, operators decide on the page at `/` or with the
    /// commands below (plain HTTP: put a TLS proxy in front).
    Serve {
        /// The address to listen on.
        #[arg(long, default_value = "127.0.0.1:8443")]
        listen: SocketAddr,
        /// The service's configuration (TOML: secrets, token, limits).
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
    },
    /// List the requests waiting for an operator.
    Pending {
        /// Print JSON instead of one line per request.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        server: Server,
    },
    /// Allow a request (once, unless told otherwise).
    Approve {
        /// The request's id on the service (see `pincer approvals pending`).
        id: u64,
        #[command(flatten)]
        lifetime: super::LifetimeArgs,
        /// Allow the object's directory tree, not the object alone (the
        /// node's mission may cap it).
        #[arg(long)]
        tree: bool,
        #[command(flatten)]
        server: Server,
    },
    /// Refuse a request.
    Deny {
        /// The request's id on the service (see `pincer approvals pending`).
        id: u64,
        /// Why, for the node's audit log.
        #[arg(long)]
        reason: Option<String>,
        #[command(flatten)]
        server: Server,
    },
}

/// Runs a `pincer approvals` subcommand.
pub(super) fn main(command: ApprovalsCommand) -> anyhow::Result<()> {
    match command {
        ApprovalsCommand::Serve { listen, config } => Ok(server::serve(listen, &config)?),
        ApprovalsCommand::Pending { json, server } => {
            let client = Client::new(&server.server, &server.token_file)?;
            let requests = block_on(client.pending())??;
            if json {
                return print_json(&requests);
            }
            if requests.is_empty() {
                println!("no request is waiting");
            }
            for pending in requests {
                let gone = if pending.waiting {
                    ""
                } else {
                    " (the node is not waiting now)"
                };
                println!(
                    "{} on {}, {} s{gone}: {}",
                    pending.id, pending.node, pending.age_seconds, pending.request
                );
            }
            Ok(())
        }
        ApprovalsCommand::Approve {
            id,
            lifetime,
            tree,
            server,
        } => {
            let lifetime = lifetime.lifetime();
            let extent = if tree { Extent::Tree } else { Extent::File };
            decide(&server, id, Decision::Allow { lifetime, extent })
        }
        ApprovalsCommand::Deny { id, reason, server } => {
            decide(&server, id, Decision::Deny { reason })
        }
    }
}

fn decide(server: &Server, id: u64, decision: Decision) -> anyhow::Result<()> {
    let client = Client::new(&server.server, &server.token_file)?;
    println!("{}", block_on(client.decide(id, decision))??);
    Ok(())
}

/// Runs one exchange on a runtime of its own: the commands are one-shot.
fn block_on<F: std::future::Future>(future: F) -> anyhow::Result<F::Output> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    Ok(runtime.block_on(future))
}
