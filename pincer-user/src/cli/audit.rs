//! `pincer audit verify`, `pincer audit summary` and `pincer audit export`.
//!
//! `export` exits 0 once every event is written, and 2 when the log cannot
//! be read or a line is not an audit line. Exit status of the other two, for
//! scripts:
//!
//! | status | meaning |
//! |--------|---------|
//! | 0 | the chain is intact (with `--strict`: and nothing to warn about) |
//! | 1 | the chain is broken: a line was edited, removed or reordered |
//! | 2 | the log or its key could not be read, so nothing was verified |
//! | 3 | `--strict` only: the chain is intact but does not vouch for everything (no close line at the end: truncated, or its writer killed; a malformed line set aside by a restart; an incomplete last line) |

use std::{
    io::{BufReader, Write},
    path::PathBuf,
    process::ExitCode,
};

use clap::{Args, Subcommand};
use pincer_model::audit::{self, AuditError, Summary, VerifyReport, ocsf};

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
    /// Print the log's records as SIEM events (OCSF 1.5.0, one JSON object
    /// a line) on standard output. The chain is not checked: verify the log
    /// first. Exits 2 at the first line that is not an audit line.
    Export(ExportArgs),
}

/// `pincer audit export`.
#[derive(Debug, Args)]
pub(super) struct ExportArgs {
    /// The event format.
    #[arg(long, value_enum, default_value = "ocsf")]
    format: ExportFormat,
    /// The audit log (JSON lines).
    #[arg(long, value_name = "FILE")]
    from: PathBuf,
    /// The host the log was written on, for the events' `device.hostname`
    /// (default: this host's name).
    #[arg(long, value_name = "NAME")]
    hostname: Option<String>,
}

/// Formats of `pincer audit export`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum ExportFormat {
    /// OCSF 1.5.0 events.
    Ocsf,
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
        AuditCommand::Export(args) => return export(&args),
    };
    let key = args
        .key
        .clone()
        .unwrap_or_else(|| pincer_model::paths::default_key_path(&args.file));
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

fn export(args: &ExportArgs) -> ExitCode {
    let ExportFormat::Ocsf = args.format;
    let file = match audit::open_log(&args.from) {
        Ok(file) => file,
        Err(error) => return unreadable(error),
    };
    let origin = ocsf::Origin {
        hostname: args.hostname.clone().unwrap_or_else(ocsf::local_hostname),
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let exported = ocsf::export(BufReader::new(file), &origin, &mut out)
        .and_then(|events| Ok(out.flush().map(|()| events)?));
    match exported {
        Ok(_) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("pincer: {}: {error}", args.from.display());
            ExitCode::from(2)
        }
    }
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
