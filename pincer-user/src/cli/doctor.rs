//! `pincer doctor`: can this machine enforce, and if not, what is missing.

use std::{
    path::{Path, PathBuf},
    process::ExitCode,
};

use crate::{
    doctor::{self, Check, SystemPaths},
    loader::{Enforcer, runs::Pool},
    paths,
};

pub(super) fn main() -> ExitCode {
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
/// Where programs of this very build are already attached (a daemon's, a
/// run's, or a set a finished run left idle), this kernel has loaded them:
/// that answers it without verifying them all again, which takes seconds
/// (minutes under emulation).
fn load_check() -> Check {
    if let Some(dir) = attached_programs() {
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

/// A pin directory whose programs are this build's and attached: the
/// daemon's default one, then the runs' and idle sets. Opening them takes
/// nothing from their owner: the descriptors close when the check ends.
fn attached_programs() -> Option<PathBuf> {
    std::iter::once(Path::new(paths::DEFAULT_PIN_DIR).to_owned())
        .chain(Pool::host().sets())
        .find(|dir| Enforcer::open_pinned(dir).is_ok())
}
