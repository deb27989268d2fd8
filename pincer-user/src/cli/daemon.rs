//! `pincer status`, `agents`, `grants`, `revoke` and `log`: asking the
//! daemon.

use std::{collections::VecDeque, io::BufReader, path::Path, process::ExitCode};

use pincer_model::{
    audit::{self, AuditError},
    control::{ControlRequest, ControlResponse, DaemonStatus, Integrity},
    escape::for_terminal,
};

use super::{ask, print_json, print_list, requests::done, unexpected};

fn status_of(socket: &Path) -> anyhow::Result<DaemonStatus> {
    match ask(socket, &ControlRequest::Status)? {
        ControlResponse::Daemon { daemon } => Ok(*daemon),
        other => Err(unexpected(socket, &other)),
    }
}

/// Shows the daemon's state; exit status 1 when its last integrity check
/// found a problem (what the kernel holds is not what it wrote, or the
/// programs do not decide), 0 otherwise.
pub(super) fn status(socket: &Path, json: bool) -> anyhow::Result<ExitCode> {
    let status = status_of(socket)?;
    let healthy = status.integrity.as_ref().is_none_or(Integrity::healthy);
    if json {
        print_json(&status)?;
    } else {
        print_status(status);
    }
    Ok(if healthy {
        ExitCode::SUCCESS
    } else {
        eprintln!("pincer: the kernel does not enforce what the daemon was told (see integrity)");
        ExitCode::FAILURE
    })
}

fn print_status(status: DaemonStatus) {
    let or_dash = |value: Option<String>| value.unwrap_or_else(|| "-".to_owned());
    let rows = [
        ("pid", status.pid.to_string()),
        ("config", status.config.display().to_string()),
        ("pins", status.pins.display().to_string()),
        ("socket", status.socket.display().to_string()),
        ("audit", status.audit.display().to_string()),
        ("metrics", or_dash(status.metrics)),
        ("reattached", status.reattached.to_string()),
        ("uptime_seconds", status.uptime_seconds.to_string()),
        ("agents", status.agents.to_string()),
        ("pending", status.pending.to_string()),
        ("reloads", status.reloads.to_string()),
        ("last_reload_error", or_dash(status.last_reload_error)),
    ];
    for (name, value) in rows {
        println!("{name:<18} {value}");
    }
    if let Some(counters) = status.counters {
        let line: Vec<String> = counters.iter().map(|(k, v)| format!("{k}={v}")).collect();
        println!("{:<18} {}", "counters", line.join(" "));
    }
    let Some(integrity) = status.integrity else {
        println!("{:<18} not checked yet", "integrity");
        return;
    };
    let verdict = if integrity.healthy() {
        "ok".to_owned()
    } else {
        format!("{} PROBLEMS", integrity.problems.len())
    };
    println!(
        "{:<18} {verdict} ({} programs attached; checked at {})",
        "integrity",
        integrity.programs,
        humantime::format_rfc3339_seconds(
            std::time::UNIX_EPOCH + std::time::Duration::from_secs(integrity.checked)
        )
    );
    for agent in &integrity.agents {
        println!(
            "  {} (cgroup {}): {} grants written, {} held, digest {} / {}, canary {}",
            for_terminal(&agent.agent),
            agent.cgroup,
            agent.grants,
            agent.live,
            agent.digest,
            agent.live_digest,
            agent.canary.as_deref().unwrap_or("-"),
        );
    }
    for problem in &integrity.problems {
        println!("  PROBLEM: {}", for_terminal(problem));
    }
}

/// Lists the confined agent cgroups.
pub(super) fn agents(socket: &Path, json: bool) -> anyhow::Result<()> {
    print_list(
        socket,
        &ControlRequest::Agents,
        json,
        "no agent cgroup is confined",
        pick!(Agents { agents }),
        |agent| {
            println!(
                "{} {} (cgroup id {}, slot {}) mission {} [{}]",
                agent.agent, agent.cgroup, agent.id, agent.slot, agent.mission, agent.mode,
            );
        },
    )
}

/// Lists the grants of one agent, or of all.
pub(super) fn grants(socket: &Path, agent: Option<String>, json: bool) -> anyhow::Result<()> {
    print_list(
        socket,
        &ControlRequest::Grants { agent },
        json,
        "",
        pick!(Grants { grants }),
        |agent| {
            println!("{} {}", agent.agent, agent.cgroup);
            for grant in agent.grants {
                println!(
                    "  {} [{}] {} by {}{}",
                    grant.path,
                    grant.ops.join(","),
                    grant.extent,
                    grant.by,
                    grant
                        .expires_in_seconds
                        .map(|s| format!(" ({s} s left)"))
                        .unwrap_or_default()
                );
            }
        },
    )
}

/// Withdraws the vote grants of an agent.
pub(super) fn revoke(socket: &Path, agent: String, path: Option<String>) -> anyhow::Result<()> {
    done(socket, &ControlRequest::Revoke { agent, path })
}

/// Prints the last `lines` lines of the daemon's audit log, read a line at a
/// time so that a log of any size is shown in bounded memory.
pub(super) fn log(socket: &Path, lines: usize) -> anyhow::Result<()> {
    let path = status_of(socket)?.audit;
    let read = || -> Result<VecDeque<String>, AuditError> {
        let mut reader = BufReader::new(audit::open_log(&path)?);
        let mut last = VecDeque::with_capacity(lines.min(1 << 16));
        let mut line = Vec::new();
        loop {
            let end =
                audit::read_line(&mut reader, &mut line).map_err(|source| AuditError::Read {
                    path: path.clone(),
                    source,
                })?;
            let Some(end) = end else {
                return Ok(last);
            };
            if lines == 0 {
                continue;
            }
            if last.len() == lines {
                last.pop_front();
            }
            last.push_back(match end.overlong {
                Some((len, _)) => format!("(a line of {len} bytes, not shown)"),
                None => for_terminal(&String::from_utf8_lossy(&line)),
            });
        }
    };
    for line in read()? {
        println!("{line}");
    }
    Ok(())
}
