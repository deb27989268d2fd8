//! `cargo xtask test`: host checks, unit tests and a brief fuzzing run, then
//! the privileged tests in one VM per kernel, side by side; ends with one
//! `N passed, M failed` line.

use std::{
    io::{BufRead, BufReader},
    process::{Command, Stdio},
    sync::Mutex,
    thread,
    time::Duration,
};

use anyhow::{Context, Result};

use crate::{
    fuzz,
    kernels::Kernel,
    process::{self, shell_quote},
    rootfs::Rootfs,
    say, vm, workspace_root,
};

const RUN_TESTS: &str = include_str!("../guest/run-tests.sh");

pub struct Options {
    pub kernels: Vec<Kernel>,
    pub rootfs: Rootfs,
    pub host: bool,
    pub guest: bool,
    pub timeout: Duration,
    /// libtest arguments for the guest test executables.
    pub filter: Vec<String>,
}

/// Test counts from libtest's `test result:` lines.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Counts {
    passed: u64,
    failed: u64,
}

impl Counts {
    fn add_line(&mut self, line: &str) {
        if let Some(c) = parse_result(line) {
            self.passed += c.passed;
            self.failed += c.failed;
        }
    }
}

/// Parses `test result: ok. 5 passed; 0 failed; 1 ignored; ...`.
fn parse_result(line: &str) -> Option<Counts> {
    let (_, rest) = line.split_once("test result: ")?;
    let words: Vec<&str> = rest
        .split_whitespace()
        .map(|w| w.trim_end_matches([';', '.', ',']))
        .collect();
    let mut counts = Counts::default();
    for pair in words.windows(2) {
        let Ok(n) = pair[0].parse::<u64>() else {
            continue;
        };
        match pair[1] {
            "passed" => counts.passed = n,
            "failed" => counts.failed = n,
            _ => {}
        }
    }
    Some(counts)
}

#[derive(Default)]
struct Tally {
    passed: u64,
    failed: u64,
    failed_steps: Vec<String>,
}

impl Tally {
    fn add(&mut self, counts: Counts) {
        self.passed += counts.passed;
        self.failed += counts.failed;
    }

    /// A failed step; it counts as one failed test unless its own failed
    /// tests were counted already, so the summary never reads "0 failed".
    fn step_failed(&mut self, step: String, counted_failures: u64) {
        if counted_failures == 0 {
            self.failed += 1;
        }
        self.failed_steps.push(step);
    }
}

pub fn command(opts: &Options) -> Result<u8> {
    let mut tally = Tally::default();
    if opts.host {
        host(&mut tally);
    }
    if opts.guest {
        guest(opts, &mut tally);
    }
    if !tally.failed_steps.is_empty() {
        say!("failed: {}", tally.failed_steps.join("; "));
    }
    println!("{} passed, {} failed", tally.passed, tally.failed);
    Ok(u8::from(tally.failed > 0 || !tally.failed_steps.is_empty()))
}

fn host(tally: &mut Tally) {
    // The unit tests use some of them (`systemd-analyze`).
    if let Err(err) = crate::setup::ensure_packages() {
        say!("error: {err:#}");
        tally.step_failed("installing packages".to_owned(), 0);
    }
    let steps: [(&str, &[&str]); 3] = [
        ("cargo fmt", &["fmt", "--all", "--check"]),
        (
            "clippy (host crates)",
            &[
                "clippy",
                "--locked",
                "--workspace",
                "--exclude",
                "pincer-ebpf",
                "--all-targets",
                "--",
                "-D",
                "warnings",
            ],
        ),
        (
            // The eBPF crate also compiles for the host, for linting.
            "clippy (eBPF crate)",
            &[
                "clippy",
                "--locked",
                "-p",
                "pincer-ebpf",
                "--",
                "-D",
                "warnings",
            ],
        ),
    ];
    for (name, args) in steps {
        say!("host: {name}");
        let mut cmd = process::cargo();
        cmd.current_dir(workspace_root()).args(args);
        if let Err(err) = process::run(&mut cmd) {
            say!("error: {err:#}");
            tally.step_failed(name.to_owned(), 0);
        }
    }

    say!("host: unit tests");
    let mut cmd = process::cargo();
    cmd.current_dir(workspace_root()).args([
        "test",
        "--locked",
        "--workspace",
        "--exclude",
        "pincer-ebpf",
        "--exclude",
        "pincer-tests",
        // Every test binary runs, so the counts are complete.
        "--no-fail-fast",
    ]);
    match counted_run(&mut cmd) {
        Ok((counts, success)) => {
            tally.add(counts);
            if !success {
                tally.step_failed("host unit tests".to_owned(), counts.failed);
            }
        }
        Err(err) => {
            say!("error: {err:#}");
            tally.step_failed("host unit tests".to_owned(), 0);
        }
    }

    // A few seconds per target from the committed corpus: what a change
    // broke in a parser or a verifier that the seeds or the first mutations
    // reach. A target that crashes fails this step.
    say!("host: fuzz targets ({} s each)", fuzz::BRIEF_SECONDS);
    match fuzz::run(fuzz::TARGETS, fuzz::BRIEF_SECONDS) {
        Ok(outcomes) => {
            for outcome in outcomes.iter().filter(|o| !o.ok) {
                tally.step_failed(format!("fuzz target {}", outcome.target), 0);
            }
        }
        Err(err) => {
            say!("error: {err:#}");
            tally.step_failed("fuzz targets".to_owned(), 0);
        }
    }
}

/// Runs a command, echoing and counting its `test result:` lines.
fn counted_run(cmd: &mut Command) -> Result<(Counts, bool)> {
    say!("running {}", process::describe(cmd));
    let mut child = cmd
        .stdout(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {}", process::describe(cmd)))?;
    let mut counts = Counts::default();
    let stdout = child.stdout.take().expect("piped");
    for line in BufReader::new(stdout).lines() {
        let line = line?;
        println!("{line}");
        counts.add_line(&line);
    }
    Ok((counts, child.wait()?.success()))
}

fn guest(opts: &Options, tally: &mut Tally) {
    let guest = match vm::prepare(&opts.kernels, true, opts.rootfs) {
        Ok(guest) => guest,
        Err(err) => {
            say!("error: {err:#}");
            tally.step_failed("building the guest".to_owned(), 0);
            return;
        }
    };
    let args: Vec<String> = opts.filter.iter().map(|a| shell_quote(a)).collect();
    let script = format!("set -- {}\n{RUN_TESTS}", args.join(" "));

    let outcomes: Vec<(Kernel, Result<i32>, Counts)> = thread::scope(|s| {
        let runs: Vec<_> = opts
            .kernels
            .iter()
            .map(|&kernel| {
                let (guest, script) = (&guest, &script);
                s.spawn(move || {
                    let counts = Mutex::new(Counts::default());
                    let sink = |line: &str| {
                        counts
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .add_line(line);
                        println!("[{kernel}] {line}");
                    };
                    let result = guest.run(kernel, script, opts.timeout, &sink);
                    (
                        kernel,
                        result,
                        counts
                            .into_inner()
                            .unwrap_or_else(std::sync::PoisonError::into_inner),
                    )
                })
            })
            .collect();
        runs.into_iter()
            .map(|run| run.join().expect("a VM thread panicked"))
            .collect()
    });

    for (kernel, result, counts) in outcomes {
        tally.add(counts);
        match result {
            Ok(0) => {}
            Ok(code) => tally.step_failed(
                format!("guest tests on Linux {kernel} (status {code})"),
                counts.failed,
            ),
            Err(err) => {
                say!("error: {err:#}");
                tally.step_failed(format!("guest tests on Linux {kernel}"), counts.failed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_libtest_results() {
        let ok = "test result: ok. 12 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.01s";
        assert_eq!(
            parse_result(ok),
            Some(Counts {
                passed: 12,
                failed: 0
            })
        );
        let bad =
            "[6.1] test result: FAILED. 3 passed; 2 failed; 0 ignored; 0 measured; 0 filtered out";
        assert_eq!(
            parse_result(bad).map(|c| (c.passed, c.failed)),
            Some((3, 2))
        );
        assert_eq!(parse_result("running 3 tests"), None);
    }

    #[test]
    fn a_failed_step_without_counts_is_one_failure() {
        let mut tally = Tally::default();
        tally.step_failed("vm".into(), 0);
        tally.step_failed("tests".into(), 2);
        assert_eq!(tally.failed, 1);
        assert_eq!(tally.failed_steps.len(), 2);
    }
}
