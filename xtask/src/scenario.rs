//! Guest scenarios: `cargo xtask demo` (in the Debian guest, with real
//! tools) and `cargo xtask bench`, each a script run in a VM by the same
//! runner the tests use.

use std::time::Duration;

use anyhow::Result;

use crate::{kernels::Kernel, rootfs::Rootfs, say, vm};

/// A scripted run in the guest.
#[derive(Clone, Copy, Debug)]
pub enum Scenario {
    /// An agent confined by `pincer run`, one access parked and approved,
    /// an injected one parked and denied (the README's main job).
    Demo,
    /// The cost of a granted open, with and without the programs, the tree
    /// walk and a parked request's round trip.
    Bench,
}

impl Scenario {
    fn script(self) -> &'static str {
        match self {
            Scenario::Demo => include_str!("../guest/demo.sh"),
            Scenario::Bench => include_str!("../guest/bench.sh"),
        }
    }

    fn rootfs(self) -> Rootfs {
        match self {
            Scenario::Demo => Rootfs::Debian,
            Scenario::Bench => Rootfs::Busybox,
        }
    }
}

/// Runs a scenario, its script after `variables` (shell assignments, one a
/// line), and returns the guest script's exit status.
pub fn command(
    scenario: Scenario,
    kernel: Kernel,
    timeout: Duration,
    variables: &str,
) -> Result<u8> {
    say!("{scenario:?} on Linux {kernel}");
    let code = vm::run_vm(
        kernel,
        scenario.rootfs(),
        &format!("{variables}{}", scenario.script()),
        timeout,
        &|line| {
            println!("{line}");
        },
    )?;
    Ok(u8::try_from(code).unwrap_or(1))
}
