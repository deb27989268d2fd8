//! The `pincer` command.

use std::{ffi::OsString, path::PathBuf, process::ExitCode};

use anyhow::Context;
use clap::{Parser, Subcommand};
use pincer::{
    doctor::{self, Check, Status, SystemPaths},
    loader::Enforcer,
    mission::Mission,
    run::{self, Mode, RunOptions},
};

/// Confine a tool-using AI agent to the files its mission needs, in the kernel.
#[derive(Debug, Parser)]
#[command(name = "pincer", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a command confined to a mission; exits with the command's status
    /// (125 when pincer itself fails, 126/127 when the command cannot start).
    Run {
        /// The mission file (TOML).
        #[arg(long, short = 'm', value_name = "FILE")]
        mission: PathBuf,
        /// `enforce` denies what the mission does not grant; `audit` allows it
        /// and logs what would have been denied.
        #[arg(long, value_enum, default_value_t = Mode::Enforce)]
        mode: Mode,
        /// Append audit lines (JSON) to this file instead of standard error.
        #[arg(long, value_name = "FILE")]
        audit: Option<PathBuf>,
        /// Audit granted accesses too (verbose).
        #[arg(long)]
        log_allowed: bool,
        /// The command to confine and its arguments.
        #[arg(last = true, required = true, value_name = "CMD")]
        command: Vec<OsString>,
    },
    /// Check whether this machine can enforce, and say what is missing.
    Doctor,
    /// Work with mission files.
    #[command(subcommand)]
    Mission(MissionCommand),
    /// Work with audit logs.
    #[command(subcommand)]
    Audit(AuditCommand),
}

#[derive(Debug, Subcommand)]
enum AuditCommand {
    /// Count the decisions of an audit log and list what was not granted.
    Summary {
        /// The audit log (JSON lines).
        file: PathBuf,
    },
}

#[derive(Debug, Subcommand)]
enum MissionCommand {
    /// Validate a mission and print the grants it resolves to on this machine.
    Check {
        /// The mission file (TOML).
        file: PathBuf,
    },
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("PINCER_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match cli.command {
        Command::Run {
            mission,
            mode,
            audit,
            log_allowed,
            command,
        } => {
            let options = RunOptions {
                mission,
                mode,
                audit,
                log_allowed,
                command,
            };
            match run::run(&options) {
                Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
                Err(error) => {
                    let code = error.exit_code();
                    eprintln!("pincer: {:#}", anyhow::Error::new(error));
                    ExitCode::from(code as u8)
                }
            }
        }
        Command::Doctor => doctor(),
        Command::Mission(MissionCommand::Check { file }) => report(check_mission(&file)),
        Command::Audit(AuditCommand::Summary { file }) => report(
            std::fs::read_to_string(&file)
                .with_context(|| format!("failed to read audit log {}", file.display()))
                .map(|text| print!("{}", pincer::audit::Summary::from_lines(text.lines()))),
        ),
    }
}

fn report(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("pincer: {error:#}");
            ExitCode::from(2)
        }
    }
}

fn check_mission(file: &std::path::Path) -> anyhow::Result<()> {
    let mission = Mission::from_file(file)?;
    let grants = mission
        .resolve(1)
        .with_context(|| format!("failed to resolve the grants of {}", file.display()))?;
    println!("mission: {}", mission.name);
    for (key, value, reason) in &grants.inode {
        println!(
            "  {}:{} ino {:<10} file [{}] tree [{}]  ({})",
            key.dev >> 20,
            key.dev & 0xf_ffff,
            key.ino,
            pincer::mission::format_ops(value.file_ops),
            pincer::mission::format_ops(value.tree_ops),
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
            pincer::mission::format_ops(value.file_ops),
            reason.0
        );
    }
    Ok(())
}

fn doctor() -> ExitCode {
    let mut checks = doctor::run_checks(&SystemPaths::default());
    if doctor::can_enforce(&checks) {
        checks.push(load_check());
    }
    print!("{}", doctor::render(&checks));
    if doctor::can_enforce(&checks) {
        println!("pincer can enforce on this machine.");
        ExitCode::SUCCESS
    } else {
        println!("pincer cannot enforce on this machine: fix what is MISSING above.");
        ExitCode::FAILURE
    }
}

/// The last word: actually load and attach the programs (then drop them).
/// Some kernels list `bpf` among their LSMs yet refuse to load LSM programs.
fn load_check() -> Check {
    match Enforcer::load() {
        Ok(_enforcer) => Check {
            name: "load LSM programs",
            status: Status::Ok,
            detail: "the programs load and attach".to_owned(),
            fix: None,
        },
        Err(error) => Check {
            name: "load LSM programs",
            status: Status::Missing,
            detail: format!("{:#}", anyhow::Error::new(error)),
            fix: Some(
                "a kernel that refuses every LSM program answers EPERM before verifying \
                 (sandboxed or locked-down kernels do): run pincer on a host or VM kernel \
                 that allows them; any other refusal shows the verifier's log above"
                    .to_owned(),
            ),
        },
    }
}
