//! `pincer doctor`: can this machine enforce, and if not, what is missing.

use std::process::ExitCode;

use crate::{
    doctor::{self, Check, SystemPaths},
    loader::Enforcer,
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
fn load_check() -> Check {
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
