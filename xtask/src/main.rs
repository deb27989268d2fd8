//! `cargo xtask`: set-up, eBPF build, VM runner, tests, fuzzing, demo and benchmarks for pincer.

mod apt;
mod bench;
mod binaries;
// A test only: the documentation's links and section references.
#[cfg(test)]
mod docs;
mod ebpf;
mod fuzz;
mod initramfs;
mod kernels;
mod process;
mod rootfs;
mod scenario;
mod setup;
mod test;
mod vm;

use std::{
    path::{Path, PathBuf},
    process::ExitCode,
    time::Duration,
};

use anyhow::Result;
use clap::{Parser, Subcommand};

use crate::{kernels::Kernel, rootfs::Rootfs, scenario::Scenario};

/// Prints one progress line; on stderr so that a guest's output on stdout
/// stays clean to pipe.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {
        eprintln!("xtask [{}]: {}", $crate::elapsed(), format_args!($($arg)*))
    };
}

/// When this command started.
static STARTED: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();

/// Minutes and seconds since this command started: every line it prints
/// carries them, so a log shows where a run's time went.
fn elapsed() -> String {
    let seconds = STARTED
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_secs();
    format!("{}:{:02}", seconds / 60, seconds % 60)
}

#[derive(Parser)]
#[command(name = "cargo xtask", about = "Build, run and test pincer")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Install what the build and the VM need, and fetch the test kernels.
    Setup {
        /// Also build the root of this guest (the busybox one needs nothing).
        #[arg(long, value_enum, default_value_t)]
        rootfs: Rootfs,
    },
    /// Build the eBPF object.
    BuildEbpf,
    /// Boot a test kernel with pincer's binaries and run a script or a command.
    Vm {
        /// Kernel to boot.
        #[arg(long, value_enum, default_value = "6.12")]
        kernel: Kernel,
        /// Root of the guest: busybox in the initramfs, or a Debian root
        /// with git, python3, gcc, node and the like.
        #[arg(long, value_enum, default_value_t)]
        rootfs: Rootfs,
        /// Shell script to run in the guest.
        #[arg(long, conflicts_with = "command")]
        script: Option<PathBuf>,
        /// Seconds before the VM is killed.
        #[arg(long, default_value_t = 1800)]
        timeout: u64,
        /// Boot with whatever binaries were built before instead of building.
        #[arg(long)]
        no_build: bool,
        /// Command to run in the guest (after `--`).
        #[arg(last = true)]
        command: Vec<String>,
    },
    /// Run the host checks, unit tests and fuzz targets (briefly), then the
    /// privileged tests in VMs.
    Test {
        /// Run the guest tests on this kernel only.
        #[arg(long, value_enum)]
        kernel: Option<Kernel>,
        /// Run every suite in guests of this root. By default the busybox
        /// guests run the enforcement suites on every kernel and a Debian
        /// guest runs the real-tools suite on 6.12.
        #[arg(long, value_enum)]
        rootfs: Option<Rootfs>,
        /// Skip the guest tests.
        #[arg(long, conflicts_with = "guest_only")]
        host_only: bool,
        /// Skip the host checks and tests.
        #[arg(long)]
        guest_only: bool,
        /// Seconds before a VM is killed. The 6.1 guest runs every suite
        /// in 19 to 26 minutes under emulation, side by side with 6.12 and
        /// the host's checks on two cores (its ten or so program loads, 45 s
        /// each on a quiet machine and more beside the rest, take most of
        /// it); each test has its own limit inside the guest
        /// (`PINCER_TEST_LIMIT`, 450 s). This leaves room on a slow machine.
        #[arg(long, default_value_t = 3600)]
        timeout: u64,
        /// Test-name filter passed to the guest test executables (after `--`).
        #[arg(last = true)]
        filter: Vec<String>,
    },
    /// Build the fuzz targets and run each from a copy of its committed
    /// corpus.
    Fuzz {
        /// Only this target (every one by default).
        #[arg(long)]
        target: Option<String>,
        /// Seconds each target runs.
        #[arg(long, default_value_t = fuzz::BRIEF_SECONDS)]
        seconds: u64,
    },
    /// Run the demo scenario in a VM.
    Demo {
        /// Kernel to boot.
        #[arg(long, value_enum, default_value = "6.12")]
        kernel: Kernel,
        /// Seconds before the VM is killed.
        #[arg(long, default_value_t = 1800)]
        timeout: u64,
    },
    /// Rewrite the generated tables of README.md and docs/: bad input, from
    /// the cases of `pincer-user/tests/bad_input.rs` (their snapshots are
    /// checked as usual: accept changed ones with `INSTA_UPDATE=always`),
    /// and the runtime baseline, the default policy set and the secrets,
    /// from their lists.
    #[command(alias = "bad-input-table")]
    ReadmeTables,
    /// Print benchmark figures: decisions per second in the twin (host),
    /// then in a VM the cost of a granted open and a parked request's round
    /// trip, then in the Debian guest real work with and without pincer and
    /// each program's cost from the kernel's statistics (drawn in
    /// docs/bench-real-work.svg).
    Bench {
        /// Kernel to boot.
        #[arg(long, value_enum, default_value = "6.12")]
        kernel: Kernel,
        /// Seconds before the VM is killed.
        #[arg(long, default_value_t = 1800)]
        timeout: u64,
        /// Only the host benchmark.
        #[arg(long, conflicts_with = "guest")]
        host: bool,
        /// Only the guest benchmarks.
        #[arg(long)]
        guest: bool,
        /// Only the real-work benchmark.
        #[arg(long, conflicts_with = "host")]
        real: bool,
        /// Rounds of the real-work benchmark.
        #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=50))]
        rounds: u32,
        /// Only a parked request's round trip, in the guest (no open costs,
        /// tree walk or real work), and the programs' cost per parked open
        /// from the kernel's statistics over one more run.
        #[arg(long, conflicts_with_all = ["host", "real"])]
        round_trip: bool,
        /// Runs of the parked round trip in one boot, each interleaved with
        /// its own pipe ping-pong and a child's stop and continue (the
        /// parking mechanism with nothing of pincer in it).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=50))]
        round_trips: u32,
    },
}

/// The workspace this xtask belongs to.
pub fn workspace_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives inside the workspace")
}

/// Where downloaded kernels, apt state and initramfs staging live.
pub fn cache_dir() -> PathBuf {
    workspace_root().join("target").join("pincer-cache")
}

/// A fresh `build-*` directory under `parent` (made if missing), removed on
/// drop: one per build, so concurrent xtask runs never share one.
pub fn build_dir(parent: &Path) -> Result<tempfile::TempDir> {
    use anyhow::Context;
    std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    tempfile::Builder::new()
        .prefix("build-")
        .tempdir_in(parent)
        .with_context(|| format!("creating a build directory in {}", parent.display()))
}

fn run(cli: Cli) -> Result<u8> {
    match cli.command {
        Command::Setup { rootfs } => {
            setup::setup_host()?;
            if rootfs == Rootfs::Debian {
                rootfs::ensure_debian()?;
            }
            say!("setup complete");
            Ok(0)
        }
        Command::BuildEbpf => {
            ebpf::build()?;
            Ok(0)
        }
        Command::Vm {
            kernel,
            rootfs,
            script,
            timeout,
            no_build,
            command,
        } => vm::command(
            kernel,
            rootfs,
            script.as_deref(),
            &command,
            Duration::from_secs(timeout),
            no_build,
        ),
        Command::Test {
            kernel,
            rootfs,
            host_only,
            guest_only,
            timeout,
            filter,
        } => test::command(&test::Options {
            kernels: kernel.map_or(Kernel::ALL.to_vec(), |k| vec![k]),
            rootfs,
            host: !guest_only,
            guest: !host_only,
            timeout: Duration::from_secs(timeout),
            filter,
        }),
        Command::ReadmeTables => {
            // Each test renders its table, and writes it instead of
            // comparing when asked to.
            for test in [
                &["-p", "pincer-user", "--test", "bad_input"][..],
                // The baseline's, the policy set's and the secrets' tables.
                &[
                    "-p",
                    "pincer-model",
                    "-p",
                    "pincer-user",
                    "--lib",
                    "the_readme_table_is_the_",
                ],
            ] {
                process::run(
                    process::cargo()
                        .args(["test", "--locked"])
                        .args(test)
                        .env("PINCER_WRITE_README", "1")
                        .current_dir(workspace_root()),
                )?;
            }
            Ok(0)
        }
        Command::Fuzz { target, seconds } => fuzz::command(target.as_deref(), seconds),
        Command::Demo { kernel, timeout } => {
            scenario::command(Scenario::Demo, kernel, Duration::from_secs(timeout), "")
        }
        Command::Bench {
            kernel,
            timeout,
            host,
            guest,
            real,
            rounds,
            round_trip,
            round_trips,
        } => {
            let timeout = Duration::from_secs(timeout);
            if real {
                return bench::real_work(kernel, rounds, timeout);
            }
            let mut variables = format!("ROUND_TRIPS={round_trips}\n");
            if round_trip {
                variables.push_str("BENCH_PARTS=round-trip\n");
                let code = scenario::command(Scenario::Bench, kernel, timeout, &variables)?;
                return Ok(code);
            }
            if !guest {
                say!("decisions per second in the twin (host, one core)");
                process::run(process::cargo().args([
                    "bench",
                    "--locked",
                    "-p",
                    "pincer-user",
                    "--bench",
                    "decisions",
                ]))?;
            }
            if host {
                return Ok(0);
            }
            let code = scenario::command(Scenario::Bench, kernel, timeout, &variables)?;
            if code != 0 {
                return Ok(code);
            }
            bench::real_work(kernel, rounds, timeout)
        }
    }
}

fn main() -> ExitCode {
    STARTED.get_or_init(std::time::Instant::now);
    match run(Cli::parse()) {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            say!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
