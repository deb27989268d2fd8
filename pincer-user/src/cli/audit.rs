//! `pincer audit verify` and `pincer audit summary`.

use std::{path::PathBuf, process::ExitCode};

use anyhow::Context;
use clap::Subcommand;

use super::report;
use crate::audit::{self, Summary};

/// Subcommands of `pincer audit`.
#[derive(Debug, Subcommand)]
pub(super) enum AuditCommand {
    /// Count the decisions of an audit log and list what was not granted.
    Summary {
        /// The audit log (JSON lines).
        file: PathBuf,
    },
    /// Check the log's HMAC chain; name the first line edited, removed or
    /// reordered. Exits 0 only when the log is intact.
    Verify {
        /// The audit log (JSON lines).
        file: PathBuf,
        /// The chain's key file (default: `<FILE>.key`).
        #[arg(long, value_name = "KEY")]
        key: Option<PathBuf>,
    },
}

pub(super) fn main(command: AuditCommand) -> ExitCode {
    match command {
        AuditCommand::Verify { file, key } => {
            let key = key.unwrap_or_else(|| audit::default_key_path(&file));
            match audit::read_key(&key).and_then(|key| audit::verify(&file, &key)) {
                Ok(report) => {
                    println!("{}: {report}", file.display());
                    if report.is_intact() {
                        ExitCode::SUCCESS
                    } else {
                        ExitCode::FAILURE
                    }
                }
                Err(error) => {
                    eprintln!("pincer: {:#}", anyhow::Error::new(error));
                    ExitCode::from(2)
                }
            }
        }
        AuditCommand::Summary { file } => report(
            std::fs::read_to_string(&file)
                .with_context(|| format!("failed to read audit log {}", file.display()))
                .map(|text| print!("{}", Summary::from_lines(text.lines()))),
        ),
    }
}
