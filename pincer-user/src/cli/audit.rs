//! `pincer audit verify` and `pincer audit summary`.
//!
//! Exit status, for scripts (both commands):
//!
//! | status | meaning |
//! |--------|---------|
//! | 0 | the chain is intact (with `--strict`: and nothing to warn about) |
//! | 1 | the chain is broken: a line was edited, removed or reordered |
//! | 2 | the log or its key could not be read, so nothing was verified |
//! | 3 | `--strict` only: the chain is intact but does not vouch for everything (no close line at the end: truncated, or its writer killed; a malformed line set aside by a restart; an incomplete last line) |

use std::{io::BufReader, path::PathBuf, process::ExitCode};

use clap::{Args, Subcommand};

use crate::audit::{self, AuditError, Summary, VerifyReport};

/// Subcommands of `pincer audit`.
#[derive(Debug, Subcommand)]
pub(super) enum AuditCommand {
    /// Verify the log's chain, then count its decisions and list what was not
    /// granted. Exits 0 intact, 1 broken, 2 unreadable (3: warnings, with
    /// --strict).
    Summary(LogArgs),
    /// Check the log's HMAC chain; name the first line edited, removed or
    /// reordered. Exits 0 intact, 1 broken, 2 unreadable (3: warnings, with
    /// --strict).
    Verify(LogArgs),
}

/// The log a subcommand reads.
#[derive(Debug, Args)]
pub(super) struct LogArgs {
    /// The audit log (JSON lines).
    file: PathBuf,
    /// The chain's key file (default: `<FILE>.key`).
    #[arg(long, value_name = "KEY")]
    key: Option<PathBuf>,
    /// Exit 3 when the chain is intact but something is not vouched for
    /// (no close line at the end, a line set aside, an incomplete last line).
    #[arg(long)]
    strict: bool,
}

/// Exit status of a log whose chain is intact but carries warnings, under
/// `--strict`.
const WARNINGS: u8 = 3;

pub(super) fn main(command: AuditCommand) -> ExitCode {
    let (args, summarize) = match command {
        AuditCommand::Summary(args) => (args, true),
        AuditCommand::Verify(args) => (args, false),
    };
    let key = args
        .key
        .clone()
        .unwrap_or_else(|| audit::default_key_path(&args.file));
    let report = match audit::verify_file(&args.file, &key) {
        Ok(report) => report,
        Err(error) => return unreadable(error),
    };
    println!("{}: {report}", args.file.display());
    if summarize {
        let summary = audit::open_log(&args.file).and_then(|file| {
            Summary::read(BufReader::new(file)).map_err(|source| AuditError::Read {
                path: args.file.clone(),
                source,
            })
        });
        match summary {
            Ok(summary) => print!("{summary}"),
            Err(error) => return unreadable(error),
        }
    }
    status(&report, args.strict)
}

fn unreadable(error: AuditError) -> ExitCode {
    eprintln!("pincer: {:#}", anyhow::Error::new(error));
    ExitCode::from(2)
}

/// The exit status of a verified log (see the module's table).
fn status(report: &VerifyReport, strict: bool) -> ExitCode {
    match report {
        VerifyReport::Broken { .. } => ExitCode::FAILURE,
        VerifyReport::Intact { warnings, .. } if strict && !warnings.is_empty() => {
            ExitCode::from(WARNINGS)
        }
        VerifyReport::Intact { .. } => ExitCode::SUCCESS,
    }
}
