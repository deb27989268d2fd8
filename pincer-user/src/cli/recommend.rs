//! `pincer recommend`: a minimal mission from the audit log of a run (see
//! [`crate::recommend`]).
//!
//! Exit status: 0 written; 1 the log's chain is broken (as `pincer audit
//! verify`); 2 anything else that stops it (the log or its key cannot be
//! read, a malformed line, no decisions, the output cannot be written).

use std::{io::Write, path::PathBuf, process::ExitCode};

use clap::Args;

use crate::recommend::{self, Options, RecommendError};

/// `pincer recommend`'s arguments.
#[derive(Debug, Args)]
pub(super) struct RecommendArgs {
    /// The audit log of the run to learn from (`pincer run --mode audit
    /// --audit FILE`).
    #[arg(long, value_name = "FILE")]
    from: PathBuf,
    /// The chain's key file (default: `<FILE>.key`).
    #[arg(long, value_name = "KEY")]
    key: Option<PathBuf>,
    /// Read the log even when its chain cannot be verified (a broken
    /// chain, a missing key): the mission's header says so.
    #[arg(long)]
    unverified: bool,
    /// What the task is: the mission's name, and a comment at its top
    /// (default: the name of the run's mission).
    #[arg(long)]
    task: Option<String>,
    /// Only the decisions of this mission, in a log several missions share.
    #[arg(long, value_name = "NAME")]
    mission: Option<String>,
    /// Write the mission to this file instead of standard output.
    #[arg(long, short = 'o', value_name = "FILE")]
    output: Option<PathBuf>,
}

pub(super) fn main(args: RecommendArgs) -> ExitCode {
    let options = Options {
        log: args.from,
        key: args.key,
        unverified: args.unverified,
        mission: args.mission,
        task: args.task,
        output: args.output,
    };
    match write(&options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            let code = error.exit_code();
            eprintln!("pincer: {:#}", anyhow::Error::new(error));
            ExitCode::from(code)
        }
    }
}

/// Recommends and writes the mission, warnings on standard error.
fn write(options: &Options) -> Result<(), RecommendError> {
    let recommendation = recommend::recommend(options)?;
    for warning in &recommendation.warnings {
        eprintln!("warning: {warning}");
    }
    match &options.output {
        Some(path) => {
            std::fs::write(path, &recommendation.text).map_err(|source| RecommendError::Write {
                path: path.clone(),
                source,
            })?;
            eprintln!(
                "pincer: wrote {} ({} grant(s))",
                path.display(),
                recommendation.grants
            );
        }
        None => {
            let mut stdout = std::io::stdout().lock();
            stdout
                .write_all(recommendation.text.as_bytes())
                .and_then(|()| stdout.flush())
                .map_err(|source| RecommendError::Write {
                    path: PathBuf::from("standard output"),
                    source,
                })?;
        }
    }
    Ok(())
}
