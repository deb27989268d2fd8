//! `pincer doctor`: can this machine enforce, and if not, what is missing.

use std::{
    path::{Path, PathBuf},
    process::ExitCode,
};

use pincer_model::{
    control::{ControlRequest, ControlResponse, DaemonStatus},
    paths,
};

use crate::{
    control, doctor,
    doctor::{Check, SystemPaths},
    loader::{Enforcer, runs::Pool},
};

pub(super) fn main(socket: &Path) -> ExitCode {
    let mut checks = doctor::run_checks(&SystemPaths::default());
    let daemon = daemon_status(socket);
    if doctor::can_enforce(&checks) {
        let pins = match &daemon {
            Some(Ok(status)) => Some(status.pins.as_path()),
            _ => None,
        };
        checks.push(load_check(pins));
    }
    checks.extend(daemon.map(|status| integrity_check(socket, status)));
    print!("{}", doctor::render(&checks));
    if doctor::can_enforce(&checks) {
        println!("pincer can enforce on this machine.");
        ExitCode::SUCCESS
    } else {
        println!("pincer cannot enforce on this machine: fix what is MISSING above.");
        ExitCode::FAILURE
    }
}

/// The status of the daemon listening on `socket`, if one does.
fn daemon_status(socket: &Path) -> Option<Result<DaemonStatus, String>> {
    if !socket.exists() {
        return None;
    }
    match control::call(socket, &ControlRequest::Status) {
        Ok(ControlResponse::Daemon { daemon }) => Some(Ok(*daemon)),
        Ok(_) => None,
        Err(error) => Some(Err(error.to_string())),
    }
}

/// Whether the daemon on `socket` enforces what it was told: its last
/// integrity check ([`crate::twin::integrity`]).
fn integrity_check(socket: &Path, status: Result<DaemonStatus, String>) -> Check {
    const NAME: &str = "enforcement integrity";
    let status = match status {
        Ok(status) => status,
        Err(error) => {
            return Check::warn(
                NAME,
                format!(
                    "the daemon at {} does not answer: {error}",
                    socket.display()
                ),
                None,
            );
        }
    };
    match status.integrity {
        None => Check::ok(NAME, "the daemon has not checked yet"),
        Some(integrity) if integrity.healthy() => Check::ok(
            NAME,
            format!(
                "{} programs attached; {} agent cgroups hold the grants written and refuse the canary",
                integrity.programs,
                integrity.agents.len()
            ),
        ),
        Some(integrity) => Check::missing(
            NAME,
            integrity.problems.join("; "),
            Some(format!(
                "restart the daemon so that it attaches and writes again, and find who changed \
                 the kernel's state: the audit log {} has an integrity record",
                status.audit.display()
            )),
        ),
    }
}

/// The last word: actually load and attach the programs (then drop them).
/// Some kernels list `bpf` among their LSMs yet refuse to load LSM programs.
/// Where programs of this very build are already attached (a daemon's, a
/// run's, or a set a finished run left idle), this kernel has loaded them:
/// that answers it without verifying them all again, which takes seconds
/// (minutes under emulation).
fn load_check(daemon_pins: Option<&Path>) -> Check {
    if let Some(dir) = attached_programs(daemon_pins) {
        return Check::ok(
            "load LSM programs",
            format!(
                "the programs of this build are attached here (pinned under {})",
                dir.display()
            ),
        );
    }
    match Enforcer::load() {
        Ok(_enforcer) => Check::ok(
            "load LSM programs",
            "the programs load and attach".to_owned(),
        ),
        Err(error) => Check::missing(
            "load LSM programs",
            format!("{:#}", anyhow::Error::new(error)),
            Some(
                "a kernel that refuses every LSM program answers EPERM before verifying \
                 (sandboxed or locked-down kernels do): run pincer on a host or VM kernel \
                 that allows them; any other refusal shows the verifier's log above"
                    .to_owned(),
            ),
        ),
    }
}

/// A pin directory whose programs are this build's and attached: those of
/// the daemon answering on the socket, the default one, then the runs' and
/// idle sets. Opening them takes
/// nothing from their owner: the descriptors close when the check ends.
fn attached_programs(daemon_pins: Option<&Path>) -> Option<PathBuf> {
    daemon_pins
        .map(Path::to_owned)
        .into_iter()
        .chain(std::iter::once(
            Path::new(paths::DEFAULT_PIN_DIR).to_owned(),
        ))
        .chain(Pool::host().sets())
        .find(|dir| Enforcer::open_pinned(dir).is_ok())
}
