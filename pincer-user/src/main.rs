//! The `pincer` command.

use std::{path::PathBuf, process::ExitCode};

use anyhow::Context;
use clap::{Parser, Subcommand};
use pincer::{
    control::{self, ControlRequest, ControlResponse},
    doctor::{self, Check, Status, SystemPaths},
    loader::Enforcer,
    mission::Mission,
    run::{self, RunOptions},
    vote::Lifetime,
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
    Run(RunOptions),
    /// List the parked requests waiting for a person.
    Pending {
        /// Print JSON instead of one line per request.
        #[arg(long)]
        json: bool,
        /// The control socket of the `pincer run` to ask.
        #[arg(long, env = "PINCER_SOCKET", default_value = control::DEFAULT_SOCKET)]
        socket: PathBuf,
    },
    /// Allow a parked request (once, unless told otherwise).
    Approve {
        /// The request id (see `pincer pending`).
        id: u64,
        /// Allow this one access (the default).
        #[arg(long, group = "lifetime")]
        once: bool,
        /// Allow it until `pincer run` ends.
        #[arg(long, group = "lifetime")]
        session: bool,
        /// Allow it for a time, such as `10m` or `1h30m`.
        #[arg(long, group = "lifetime", value_name = "DURATION", value_parser = control::parse_ttl)]
        ttl: Option<std::time::Duration>,
        /// The control socket of the `pincer run` to answer.
        #[arg(long, env = "PINCER_SOCKET", default_value = control::DEFAULT_SOCKET)]
        socket: PathBuf,
    },
    /// Refuse a parked request.
    Deny {
        /// The request id (see `pincer pending`).
        id: u64,
        /// Why, for the audit log.
        #[arg(long)]
        reason: Option<String>,
        /// The control socket of the `pincer run` to answer.
        #[arg(long, env = "PINCER_SOCKET", default_value = control::DEFAULT_SOCKET)]
        socket: PathBuf,
    },
    /// Confine every agent of the host: the programs are pinned under
    /// /sys/fs/bpf/pincer and agents are cgroups matching the configured
    /// patterns (see the README's "Host-wide daemon").
    Daemon(pincer::daemon::DaemonOptions),
    /// Show the daemon's state: pins, agents, pending requests, counters.
    Status {
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// The daemon's control socket.
        #[arg(long, env = "PINCER_SOCKET", default_value = control::DEFAULT_SOCKET)]
        socket: PathBuf,
    },
    /// List the agent cgroups the daemon confines.
    Agents {
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// The daemon's control socket.
        #[arg(long, env = "PINCER_SOCKET", default_value = control::DEFAULT_SOCKET)]
        socket: PathBuf,
    },
    /// List the grants of the daemon's agents (mission and vote grants).
    Grants {
        /// Only this agent's.
        #[arg(long)]
        agent: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// The daemon's control socket.
        #[arg(long, env = "PINCER_SOCKET", default_value = control::DEFAULT_SOCKET)]
        socket: PathBuf,
    },
    /// Withdraw the grants votes made for an agent (its mission's stay).
    Revoke {
        /// The agent.
        #[arg(long)]
        agent: String,
        /// Only the grants made for this path.
        #[arg(long)]
        path: Option<String>,
        /// The daemon's control socket.
        #[arg(long, env = "PINCER_SOCKET", default_value = control::DEFAULT_SOCKET)]
        socket: PathBuf,
    },
    /// Print the last lines of the daemon's audit log.
    Log {
        /// How many lines.
        #[arg(long, short = 'n', default_value_t = 20)]
        lines: usize,
        /// The daemon's control socket.
        #[arg(long, env = "PINCER_SOCKET", default_value = control::DEFAULT_SOCKET)]
        socket: PathBuf,
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

#[derive(Debug, Subcommand)]
enum MissionCommand {
    /// Validate a mission and print the grants it resolves to on this machine.
    Check {
        /// The mission file (TOML).
        file: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The daemon sets up its own logging, as its configuration says.
    if !matches!(cli.command, Command::Daemon(_)) {
        tracing_subscriber::fmt()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_env("PINCER_LOG")
                    .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
            )
            .with_writer(std::io::stderr)
            .init();
    }
    match cli.command {
        Command::Daemon(options) => match pincer::daemon::main(&options) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("pincer: {:#}", anyhow::Error::new(error));
                ExitCode::from(2)
            }
        },
        Command::Status { json, socket } => {
            report(query(&socket, &ControlRequest::Status, json, print_status))
        }
        Command::Agents { json, socket } => {
            report(query(&socket, &ControlRequest::Agents, json, print_agents))
        }
        Command::Grants {
            agent,
            json,
            socket,
        } => report(query(
            &socket,
            &ControlRequest::Grants { agent },
            json,
            print_grants,
        )),
        Command::Revoke {
            agent,
            path,
            socket,
        } => report(answer(&socket, &ControlRequest::Revoke { agent, path })),
        Command::Log { lines, socket } => report(log(&socket, lines)),
        Command::Run(options) => match run::run(&options) {
            Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
            Err(error) => {
                let code = error.exit_code();
                eprintln!("pincer: {:#}", anyhow::Error::new(error));
                ExitCode::from(code as u8)
            }
        },
        Command::Pending { json, socket } => report(pending(&socket, json)),
        Command::Approve {
            id,
            once: _,
            session,
            ttl,
            socket,
        } => {
            let lifetime = match (session, ttl) {
                (true, _) => Lifetime::Session,
                (_, Some(ttl)) => Lifetime::Ttl(ttl),
                _ => Lifetime::Once,
            };
            report(answer(&socket, &ControlRequest::Approve { id, lifetime }))
        }
        Command::Deny { id, reason, socket } => {
            report(answer(&socket, &ControlRequest::Deny { id, reason }))
        }
        Command::Doctor => doctor(),
        Command::Mission(MissionCommand::Check { file }) => report(check_mission(&file)),
        Command::Audit(AuditCommand::Verify { file, key }) => {
            let key = key.unwrap_or_else(|| pincer::audit::default_key_path(&file));
            let checked =
                pincer::audit::read_key(&key).and_then(|key| pincer::audit::verify(&file, &key));
            match checked {
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

fn pending(socket: &std::path::Path, json: bool) -> anyhow::Result<()> {
    match control::call(socket, &ControlRequest::Pending)? {
        ControlResponse::Pending { requests } if json => {
            println!("{}", serde_json::to_string_pretty(&requests)?);
            Ok(())
        }
        ControlResponse::Pending { requests } => {
            if requests.is_empty() {
                println!("no request is waiting");
            }
            for request in requests {
                println!("{request}");
            }
            Ok(())
        }
        ControlResponse::Error { message } => anyhow::bail!("{message}"),
        other => anyhow::bail!("unexpected answer from {}: {other:?}", socket.display()),
    }
}

fn answer(socket: &std::path::Path, request: &ControlRequest) -> anyhow::Result<()> {
    match control::call(socket, request)? {
        ControlResponse::Ok { message } => {
            println!("{message}");
            Ok(())
        }
        ControlResponse::Error { message } => anyhow::bail!("{message}"),
        other => anyhow::bail!("unexpected answer from {}: {other:?}", socket.display()),
    }
}

/// Asks the daemon a query and prints the answer (JSON, or as `human`
/// renders it).
fn query(
    socket: &std::path::Path,
    request: &ControlRequest,
    json: bool,
    human: fn(&serde_json::Value),
) -> anyhow::Result<()> {
    match control::call(socket, request)? {
        ControlResponse::Info { info } if json => {
            println!("{}", serde_json::to_string_pretty(&info)?);
            Ok(())
        }
        ControlResponse::Info { info } => {
            human(&info);
            Ok(())
        }
        ControlResponse::Error { message } => anyhow::bail!("{message}"),
        other => anyhow::bail!("unexpected answer from {}: {other:?}", socket.display()),
    }
}

fn print_status(info: &serde_json::Value) {
    let field = |name: &str| match &info[name] {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Null => "-".to_owned(),
        other => other.to_string(),
    };
    for name in [
        "pid",
        "config",
        "pins",
        "socket",
        "audit",
        "metrics",
        "reattached",
        "uptime_seconds",
        "agents",
        "pending",
        "reloads",
        "last_reload_error",
    ] {
        println!("{name:<18} {}", field(name));
    }
    if let Some(counters) = info["counters"].as_object() {
        let line: Vec<String> = counters.iter().map(|(k, v)| format!("{k}={v}")).collect();
        println!("{:<18} {}", "counters", line.join(" "));
    }
}

fn print_agents(info: &serde_json::Value) {
    let agents = info.as_array().cloned().unwrap_or_default();
    if agents.is_empty() {
        println!("no agent cgroup is confined");
    }
    for agent in agents {
        println!(
            "{} {} (cgroup id {}, slot {}) mission {} [{}]",
            agent["agent"].as_str().unwrap_or("?"),
            agent["cgroup"].as_str().unwrap_or("?"),
            agent["id"],
            agent["slot"],
            agent["mission"].as_str().unwrap_or("?"),
            agent["mode"].as_str().unwrap_or("?"),
        );
    }
}

fn print_grants(info: &serde_json::Value) {
    for agent in info.as_array().cloned().unwrap_or_default() {
        println!(
            "{} {}",
            agent["agent"].as_str().unwrap_or("?"),
            agent["cgroup"].as_str().unwrap_or("?")
        );
        for grant in agent["grants"].as_array().cloned().unwrap_or_default() {
            let ops: Vec<&str> = grant["ops"]
                .as_array()
                .map(|ops| ops.iter().filter_map(|o| o.as_str()).collect())
                .unwrap_or_default();
            println!(
                "  {} [{}] {} by {}{}",
                grant["path"].as_str().unwrap_or("?"),
                ops.join(","),
                grant["extent"].as_str().unwrap_or("?"),
                grant["by"].as_str().unwrap_or("?"),
                grant["expires_in_seconds"]
                    .as_u64()
                    .map(|s| format!(" ({s} s left)"))
                    .unwrap_or_default()
            );
        }
    }
}

/// Prints the last `lines` lines of the daemon's audit log.
fn log(socket: &std::path::Path, lines: usize) -> anyhow::Result<()> {
    let info = match control::call(socket, &ControlRequest::Status)? {
        ControlResponse::Info { info } => info,
        ControlResponse::Error { message } => anyhow::bail!("{message}"),
        other => anyhow::bail!("unexpected answer from {}: {other:?}", socket.display()),
    };
    let path = info["audit"]
        .as_str()
        .ok_or_else(|| anyhow::anyhow!("the daemon did not name its audit log"))?;
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("failed to read audit log {path}"))?;
    let all: Vec<&str> = text.lines().collect();
    for line in &all[all.len().saturating_sub(lines)..] {
        println!("{line}");
    }
    Ok(())
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
