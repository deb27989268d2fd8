//! The `pincer` command line: the subcommands, their help text (the doc
//! comments), and what each prints. One file per group of subcommands:
//! `requests` (answering parked requests), `daemon` (asking the
//! daemon), `approvals` (the approval service of a fleet), `mission`,
//! `audit`, `recommend` and `doctor`.

/// The `pick` of [`list`] for answers of kind `$kind`, whose list is their
/// field `$field`.
macro_rules! pick {
    ($kind:ident { $field:ident }) => {
        |answer| match answer {
            ControlResponse::$kind { $field } => Ok($field),
            other => Err(other),
        }
    };
}

mod approvals;
mod audit;
mod daemon;
mod doctor;
mod label;
mod mission;
mod recommend;
mod requests;

use std::{path::PathBuf, process::ExitCode};

use clap::{Parser, Subcommand};
use pincer_model::{
    control::{ControlRequest, ControlResponse},
    paths,
    vote::Lifetime,
};

use crate::{control, run::RunOptions};

/// Confine a tool-using AI agent to the files its mission needs, in the kernel.
#[derive(Debug, Parser)]
#[command(name = "pincer", version, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// The control socket, for every subcommand that uses it.
#[derive(Debug, clap::Args)]
struct Socket {
    /// The control socket of the `pincer run` or `pincer daemon` to ask.
    #[arg(long, env = paths::SOCKET_ENV, default_value = paths::DEFAULT_SOCKET)]
    socket: PathBuf,
}

/// A question to the daemon about its agents, or one of them.
#[derive(Debug, clap::Args)]
struct AgentQuery {
    /// Only this agent's.
    #[arg(long)]
    agent: Option<String>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    socket: Socket,
}

/// How long an approval lasts: `pincer approve`'s and `pincer approvals
/// approve`'s, one choice of three.
#[derive(Debug, clap::Args)]
#[group(multiple = false)]
struct LifetimeArgs {
    /// Allow this one access (the default).
    #[arg(long)]
    once: bool,
    /// Allow it for the agent's session (until its `pincer run` ends, or
    /// the daemon stops confining it).
    #[arg(long)]
    session: bool,
    /// Allow it for a time, such as `10m` or `1h30m`.
    #[arg(long, value_name = "DURATION", value_parser = control::client::parse_ttl)]
    ttl: Option<std::time::Duration>,
}

impl LifetimeArgs {
    /// The lifetime chosen; `--once` is the default's name.
    fn lifetime(&self) -> Lifetime {
        match (self.session, self.ttl) {
            (true, _) => Lifetime::Session,
            (_, Some(ttl)) => Lifetime::Ttl(ttl),
            _ => Lifetime::Once,
        }
    }
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a command confined to a mission; exits with the command's status
    /// (125 when pincer itself fails, 126/127 when the command cannot start).
    Run(RunOptions),
    /// List the parked requests waiting for a person.
    Pending {
        /// Print JSON instead of one line per request.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        socket: Socket,
    },
    /// Allow a parked request (once, unless told otherwise).
    Approve {
        /// The request id (see `pincer pending`).
        id: u64,
        #[command(flatten)]
        lifetime: LifetimeArgs,
        #[command(flatten)]
        socket: Socket,
    },
    /// Refuse a parked request.
    Deny {
        /// The request id (see `pincer pending`).
        id: u64,
        /// Why, for the audit log.
        #[arg(long)]
        reason: Option<String>,
        #[command(flatten)]
        socket: Socket,
    },
    /// Confine every agent of the host: the programs are pinned under
    /// /sys/fs/bpf/pincer and agents are cgroups matching the configured
    /// patterns (see docs/daemon.md, "Host-wide daemon").
    Daemon(crate::daemon::DaemonOptions),
    /// Show the daemon's state: pins, agents, pending requests, counters,
    /// and its last integrity check (exit status 1 when that found the
    /// kernel holding something else than the daemon wrote).
    Status {
        /// Print JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        socket: Socket,
    },
    /// List the agent cgroups the daemon confines.
    Agents {
        /// Print JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        socket: Socket,
    },
    /// List the grants of the daemon's agents (mission and vote grants).
    Grants(AgentQuery),
    /// Withdraw the grants votes made for an agent (its mission's stay).
    Revoke {
        /// The agent.
        #[arg(long)]
        agent: String,
        /// Only the grants made for this path.
        #[arg(long)]
        path: Option<String>,
        #[command(flatten)]
        socket: Socket,
    },
    /// Print the last lines of the daemon's audit log.
    Log {
        /// How many lines.
        #[arg(long, short = 'n', default_value_t = 20)]
        lines: usize,
        #[command(flatten)]
        socket: Socket,
    },
    /// Approvals across a fleet: serve the nodes' webhook requests to
    /// operators, and answer them (see
    /// docs/votes.md, "Approvals across a fleet").
    #[command(subcommand)]
    Approvals(approvals::ApprovalsCommand),
    /// Check whether this machine can enforce, and say what is missing.
    Doctor {
        #[command(flatten)]
        socket: Socket,
    },
    /// Work with mission files.
    #[command(subcommand)]
    Mission(mission::MissionCommand),
    /// Work with audit logs.
    #[command(subcommand)]
    Audit(audit::AuditCommand),
    /// Write the smallest mission that lets a workload run again in
    /// enforce mode, from the audit log of its run in audit mode (secrets
    /// and policy objects are never granted: they are listed as comments).
    /// Exits 1 when the log's chain is broken, 2 on other bad input.
    Recommend(recommend::RecommendArgs),
    /// Show or promote what pincer knows of a file's content (its
    /// authority label).
    #[command(subcommand)]
    Label(label::LabelCommand),
    /// Explain, from an audit log, why an access came out as it did: the
    /// decision or verdict, its reason, the votes, and what the agent had
    /// read that lowered its level. Exits 1 when the log holds nothing on
    /// it.
    Explain {
        /// A parked request's id, or a path (its last access).
        what: String,
        /// The audit log.
        #[arg(long, default_value = paths::DEFAULT_AUDIT)]
        audit: PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Runs the `pincer` command.
pub fn main() -> ExitCode {
    let cli = Cli::try_parse().unwrap_or_else(|error| {
        with_run_tip(error, &std::env::args_os().collect::<Vec<_>>()).exit()
    });
    // The daemon sets up its own logging, as its configuration says.
    if !matches!(cli.command, Command::Daemon(_)) {
        tracing_subscriber::fmt()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_env("PINCER_LOG")
                    .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
            )
            .with_writer(std::io::stderr)
            // Colour codes only where a terminal shows them: a log file or
            // a pipe gets plain text.
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init();
    }
    match cli.command {
        Command::Run(options) => match crate::run::run(&options) {
            Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
            Err(error) => {
                let code = error.exit_code();
                eprintln!("pincer: {:#}", anyhow::Error::new(error));
                ExitCode::from(code as u8)
            }
        },
        Command::Daemon(options) => match crate::daemon::main(&options) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("pincer: {:#}", anyhow::Error::new(error));
                ExitCode::from(2)
            }
        },
        Command::Pending { json, socket } => report(requests::pending(&socket.socket, json)),
        Command::Approve {
            id,
            lifetime,
            socket,
        } => report(requests::approve(&socket.socket, id, lifetime.lifetime())),
        Command::Deny { id, reason, socket } => report(requests::deny(&socket.socket, id, reason)),
        Command::Status { json, socket } => match daemon::status(&socket.socket, json) {
            Ok(code) => code,
            Err(error) => report(Err(error)),
        },
        Command::Agents { json, socket } => report(daemon::agents(&socket.socket, json)),
        Command::Grants(AgentQuery {
            agent,
            json,
            socket,
        }) => report(daemon::grants(&socket.socket, agent, json)),
        Command::Revoke {
            agent,
            path,
            socket,
        } => report(daemon::revoke(&socket.socket, agent, path)),
        Command::Log { lines, socket } => report(daemon::log(&socket.socket, lines)),
        Command::Approvals(command) => report(approvals::main(command)),
        Command::Doctor { socket } => doctor::main(&socket.socket),
        Command::Mission(command) => report(mission::main(command)),
        Command::Audit(command) => audit::main(command),
        Command::Recommend(args) => recommend::main(args),
        Command::Label(command) => report(label::main(command)),
        Command::Explain { what, audit, json } => explain(&what, &audit, json),
    }
}

/// `pincer explain`: 0 explained, 1 nothing on it in the log, 2 the log
/// could not be read.
fn explain(what: &str, audit: &std::path::Path, json: bool) -> ExitCode {
    use pincer_model::audit::explain::{Target, explain};
    let explained = std::fs::File::open(audit)
        .and_then(|file| explain(std::io::BufReader::new(file), &Target::parse(what)));
    match explained {
        Ok(Some(explanation)) => {
            if json {
                match serde_json::to_string(&explanation) {
                    Ok(text) => println!("{text}"),
                    Err(error) => {
                        eprintln!("pincer: {error}");
                        return ExitCode::from(2);
                    }
                }
            } else {
                print!("{}", explanation.text());
            }
            ExitCode::SUCCESS
        }
        Ok(None) => {
            eprintln!("pincer: {}: nothing on {what}", audit.display());
            ExitCode::from(1)
        }
        Err(error) => {
            eprintln!("pincer: {}: {error}", audit.display());
            ExitCode::from(2)
        }
    }
}

/// `pincer run -m m.toml ls -l` (no `--`) is refused for `ls` as an
/// "unexpected argument", which does not say what to do: the error gets a
/// tip with the command line as it should be. Only for a word that is not
/// an option (a mistyped option keeps clap's own tip), in a `run` without
/// `--`.
fn with_run_tip(mut error: clap::Error, args: &[std::ffi::OsString]) -> clap::Error {
    use clap::{
        CommandFactory,
        error::{ContextKind, ContextValue, ErrorKind},
    };
    if error.kind() != ErrorKind::UnknownArgument || args.iter().any(|arg| arg == "--") {
        return error;
    }
    let Some(ContextValue::String(word)) = error.get(ContextKind::InvalidArg) else {
        return error;
    };
    let Some(run) = args.iter().position(|arg| arg == "run") else {
        return error;
    };
    if word.starts_with('-') {
        return error;
    }
    // Options of `run` whose value is the next word: that word is not the
    // command even when it is spelled like it.
    let command = Cli::command();
    let Some(options) = command.find_subcommand("run") else {
        return error;
    };
    let takes_value = |arg: &std::ffi::OsStr| {
        options.get_arguments().any(|option| {
            option.get_action().takes_values()
                && (option
                    .get_long()
                    .is_some_and(|long| arg == format!("--{long}").as_str())
                    || option
                        .get_short()
                        .is_some_and(|short| arg == format!("-{short}").as_str()))
        })
    };
    let Some(at) =
        (run + 1..args.len()).find(|&i| args[i] == word.as_str() && !takes_value(&args[i - 1]))
    else {
        return error;
    };
    let mut fixed: Vec<String> = vec!["pincer".to_owned()];
    fixed.extend(
        args[1..at]
            .iter()
            .map(|arg| arg.to_string_lossy().into_owned()),
    );
    fixed.push("--".to_owned());
    fixed.extend(
        args[at..]
            .iter()
            .map(|arg| arg.to_string_lossy().into_owned()),
    );
    error.insert(
        ContextKind::Suggested,
        ContextValue::StyledStrs(vec![
            format!(
                "the command to confine goes after '--': '{}'",
                fixed.join(" ")
            )
            .into(),
        ]),
    );
    error
}

/// Exit status 0, or 2 with the error on standard error.
fn report(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("pincer: {error:#}");
            ExitCode::from(2)
        }
    }
}

/// Sends a request; an `error` answer becomes the error.
fn ask(socket: &std::path::Path, request: &ControlRequest) -> anyhow::Result<ControlResponse> {
    match control::call(socket, request)? {
        ControlResponse::Error { message } => anyhow::bail!("{message}"),
        response => Ok(response),
    }
}

/// The error for an answer of the wrong kind, shown as it came on the
/// wire (the JSON line), not as pincer's types.
fn unexpected(socket: &std::path::Path, response: &ControlResponse) -> anyhow::Error {
    let wire = serde_json::to_string(response).unwrap_or_else(|_| format!("{response:?}"));
    anyhow::anyhow!("unexpected answer from {}: {wire}", socket.display())
}

/// Asks for a list and prints it: as JSON with `json`; otherwise each item
/// with `show`, or `empty` (unless blank) when there is none. `pick` takes
/// the list out of the answer of the kind asked for, and gives back any
/// other answer.
fn print_list<T: serde::Serialize>(
    socket: &std::path::Path,
    request: &ControlRequest,
    json: bool,
    empty: &str,
    pick: impl FnOnce(ControlResponse) -> Result<Vec<T>, ControlResponse>,
    show: impl FnMut(T),
) -> anyhow::Result<()> {
    let items = pick(ask(socket, request)?).map_err(|other| unexpected(socket, &other))?;
    if json {
        return print_json(&items);
    }
    if items.is_empty() && !empty.is_empty() {
        println!("{empty}");
    }
    items.into_iter().for_each(show);
    Ok(())
}

/// Prints a value as pretty JSON.
fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn the_command_line_is_consistent() {
        // Duplicate argument names, bad defaults and the like.
        Cli::command().debug_assert();
    }

    #[test]
    fn every_subcommand_parses_its_socket() {
        let parse =
            |args: &[&str]| Cli::try_parse_from(args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
        let Command::Revoke {
            agent,
            path,
            socket,
        } = parse(&[
            "pincer", "revoke", "--agent", "a", "--path", "/x", "--socket", "/s",
        ])
        .command
        else {
            panic!("not revoke");
        };
        assert_eq!(
            (agent.as_str(), path.as_deref(), socket.socket.to_str()),
            ("a", Some("/x"), Some("/s"))
        );
        for args in [
            &["pincer", "pending", "--json"][..],
            &["pincer", "approve", "7", "--ttl", "10m"],
            &["pincer", "deny", "7", "--reason", "no"],
            &["pincer", "status"],
            &["pincer", "agents", "--json"],
            &["pincer", "grants", "--agent", "a"],
            &["pincer", "log", "-n", "3"],
            &["pincer", "approvals", "serve", "--config", "a.toml"],
            &["pincer", "approvals", "pending", "--token-file", "t"],
            &[
                "pincer",
                "approvals",
                "approve",
                "3",
                "--ttl",
                "10m",
                "--tree",
                "--token-file",
                "t",
            ],
            &[
                "pincer",
                "approvals",
                "deny",
                "3",
                "--reason",
                "no",
                "--token-file",
                "t",
            ],
        ] {
            parse(args);
        }
        assert!(Cli::try_parse_from(["pincer", "approve", "7", "--ttl", "0s"]).is_err());
        assert!(Cli::try_parse_from(["pincer", "approve", "7", "--session", "--once"]).is_err());
    }
}
