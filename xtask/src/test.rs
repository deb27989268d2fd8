//! `cargo xtask test`: host checks, unit tests and a brief fuzzing run, then
//! the privileged tests in one VM per kernel, side by side; ends with one
//! `N passed, M failed` line.

use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::{Mutex, OnceLock, mpsc},
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
    /// Every suite in guests of this root, or (`None`) the busybox suites
    /// on every kernel and the real-tools suite in a Debian guest.
    pub rootfs: Option<Rootfs>,
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

    fn merge(&mut self, other: Tally) {
        self.passed += other.passed;
        self.failed += other.failed;
        self.failed_steps.extend(other.failed_steps);
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
    // The guests are the long road: their builds go first, and the host's
    // checks run while they boot and test, in the time the emulated
    // machines leave the cores idle (waiting on timers, on each other).
    let (booted, wait_for_boot) = mpsc::channel::<()>();
    thread::scope(|s| {
        let guests = opts.guest.then(|| {
            s.spawn(move || {
                let mut tally = Tally::default();
                guest(opts, &mut tally, booted);
                tally
            })
        });
        if opts.host {
            // Sent once the guests are on their way, or dropped if they
            // never start (or none were asked for).
            let _ = wait_for_boot.recv();
            host(&mut tally);
        }
        if let Some(guests) = guests {
            match guests.join() {
                Ok(guest_tally) => tally.merge(guest_tally),
                Err(_) => tally.step_failed("guest tests (the runner panicked)".to_owned(), 0),
            }
        }
    });
    if !tally.failed_steps.is_empty() {
        say!("failed: {}", tally.failed_steps.join("; "));
    }
    println!("{} passed, {} failed", tally.passed, tally.failed);
    Ok(u8::from(tally.failed > 0 || !tally.failed_steps.is_empty()))
}

fn host(tally: &mut Tally) {
    yield_to_the_guests();
    // The unit tests use some of them (`systemd-analyze`, chromium).
    if let Err(err) =
        crate::setup::ensure_packages().and_then(|()| crate::setup::ensure_host_test_packages())
    {
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
    // `cargo fmt` formats the files `mod` reaches, not the ones `include!`
    // pastes in (the eBPF crate's `decide/`): rustfmt checks those by name.
    say!("host: rustfmt (included files)");
    let checked = included_sources(workspace_root()).and_then(|files| {
        // With no file named, rustfmt would read standard input.
        anyhow::ensure!(!files.is_empty(), "no included file found");
        let mut cmd = Command::new("rustfmt");
        cmd.current_dir(workspace_root())
            .args(["--edition", "2024", "--check"])
            .args(files);
        process::run(&mut cmd)
    });
    if let Err(err) = checked {
        say!("error: {err:#}");
        tally.step_failed("rustfmt (included files)".to_owned(), 0);
    }
    // The documentation's links between items: a link to an item that
    // moved, or to the runtime from the model beneath it, is an error. The
    // runtime's own documentation is left out: documenting it builds the
    // metadata of its whole dependency tree (the Kubernetes client, the
    // HTTP stack) once more, four minutes beside the guests.
    say!("host: rustdoc");
    let mut cmd = process::cargo();
    cmd.current_dir(workspace_root())
        .env("RUSTDOCFLAGS", "-D warnings")
        .args(["doc", "--locked", "--no-deps"])
        .args(["-p", "pincer-common", "-p", "pincer-model"]);
    if let Err(err) = process::run(&mut cmd) {
        say!("error: {err:#}");
        tally.step_failed("rustdoc".to_owned(), 0);
    }

    // The check of the Kubernetes deployment renders it with this kubectl;
    // without one it fails, and says so, among the unit tests.
    let kubectl = crate::setup::ensure_kubectl();
    if let Err(err) = &kubectl {
        say!("error: {err:#}");
        tally.step_failed("installing kubectl".to_owned(), 0);
    }

    say!("host: unit tests");
    let mut cmd = process::cargo();
    cmd.env("PINCER_CHROMIUM", crate::setup::CHROMIUM);
    if let Ok(kubectl) = &kubectl {
        cmd.env("PINCER_KUBECTL", kubectl);
    }
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
    match fuzz::run(fuzz::TARGETS, fuzz::BRIEF_SECONDS, fuzz::Build::Quick) {
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

/// Lowers this thread's scheduling priority, and so that of every command
/// it starts (children inherit it): an emulated CPU that waits for the
/// host's compilers stretches its guest, which cannot use an idle core
/// later, while the host's checks left for last keep both cores busy. On
/// Linux the nice value is the calling thread's: the guests' thread keeps
/// its own.
/// The Rust files of the tree that another one `include!`s, from what git
/// tracks.
fn included_sources(root: &Path) -> Result<Vec<PathBuf>> {
    let mut cmd = Command::new("git");
    cmd.current_dir(root)
        .args(["grep", "--no-color", "-l", "-F", "-e", "include!(\"", "--"])
        .arg("*.rs");
    let mut included = Vec::new();
    for file in process::output(&mut cmd)?.lines() {
        let file = root.join(file);
        let text = std::fs::read_to_string(&file)?;
        for line in text.lines() {
            if let Some(name) = line
                .trim()
                .strip_prefix("include!(\"")
                .and_then(|rest| rest.strip_suffix("\");"))
                .filter(|name| name.ends_with(".rs"))
            {
                included.push(file.parent().unwrap().join(name));
            }
        }
    }
    Ok(included)
}

fn yield_to_the_guests() {
    // SAFETY: a plain system call on this thread, with no pointers.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, 10) } != 0 {
        say!(
            "warning: the host's checks keep their priority: {}",
            std::io::Error::last_os_error()
        );
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

/// The test executable of the suite that needs real tools (git, python3,
/// gcc, node): it runs in the Debian guest, the others in busybox guests.
const REAL_TOOLS: &str = "pincer-tests-real_tools";

/// Which test executables a guest runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Suites {
    /// All of them.
    All,
    /// All but the real-tools suite.
    Busybox,
    /// Only the real-tools suite.
    RealTools,
}

impl Suites {
    /// The guest script's variables saying so.
    fn variables(self) -> String {
        match self {
            Suites::All => String::new(),
            Suites::Busybox => format!("PINCER_SKIP_SUITES={REAL_TOOLS}\n"),
            Suites::RealTools => format!("PINCER_ONLY_SUITES={REAL_TOOLS}\n"),
        }
    }
}

/// One guest to boot: a kernel, a root and the suites it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct GuestRun {
    kernel: Kernel,
    rootfs: Rootfs,
    suites: Suites,
}

impl GuestRun {
    /// How the guest's lines and results are labelled.
    fn label(self) -> String {
        match self.rootfs {
            Rootfs::Busybox => self.kernel.to_string(),
            Rootfs::Debian => format!("{} debian", self.kernel),
        }
    }
}

/// The guests to boot, longest first, so two at a time finish soonest: the
/// busybox suites on every kernel, then the real-tools suite in a Debian
/// guest on 6.12 (or the kernel asked for), or everything in guests of the
/// root asked for.
fn plan(kernels: &[Kernel], rootfs: Option<Rootfs>) -> Vec<GuestRun> {
    let mut runs: Vec<GuestRun> = kernels
        .iter()
        .map(|&kernel| GuestRun {
            kernel,
            rootfs: rootfs.unwrap_or(Rootfs::Busybox),
            suites: match rootfs {
                None | Some(Rootfs::Busybox) => Suites::Busybox,
                Some(Rootfs::Debian) => Suites::All,
            },
        })
        .collect();
    // 6.1's verifier is the slower: its guest goes first.
    runs.sort_by_key(|run| run.kernel != Kernel::V6_1);
    // The real tools on 6.12 when it is asked for: its guest is the quicker.
    let real_tools_kernel = kernels
        .iter()
        .copied()
        .find(|&k| k == Kernel::V6_12)
        .or_else(|| kernels.first().copied());
    if rootfs.is_none()
        && let Some(kernel) = real_tools_kernel
    {
        runs.push(GuestRun {
            kernel,
            rootfs: Rootfs::Debian,
            suites: Suites::RealTools,
        });
    }
    runs
}

/// Guests booted at once: one per core of the machines the tests run on.
const AT_ONCE: usize = 2;

/// Builds the guests' binaries and roots and runs the planned guests, two at
/// a time; sends on `booted` once the first can start. The Debian root is
/// built while the busybox guests run: only the guest after them needs it.
fn guest(opts: &Options, tally: &mut Tally, booted: mpsc::Sender<()>) {
    let runs = plan(&opts.kernels, opts.rootfs);
    let binaries = match vm::prepare_binaries(&opts.kernels, true) {
        Ok(binaries) => binaries,
        Err(err) => {
            say!("error: {err:#}");
            tally.step_failed("building the guest".to_owned(), 0);
            return;
        }
    };
    let mut roots: Vec<Rootfs> = Vec::new();
    for run in &runs {
        if !roots.contains(&run.rootfs) {
            roots.push(run.rootfs);
        }
    }
    // Each root packed once, by whichever worker needs it first (the
    // packing thread below starts the Debian root meanwhile).
    let packed: Vec<OnceLock<Result<vm::Guest, String>>> =
        roots.iter().map(|_| OnceLock::new()).collect();
    let packing: Vec<Mutex<()>> = roots.iter().map(|_| Mutex::new(())).collect();
    let pack = |index: usize| -> &Result<vm::Guest, String> {
        let _one_at_a_time = lock(&packing[index]);
        packed[index].get_or_init(|| {
            vm::Guest::pack(&binaries, roots[index]).map_err(|err| format!("{err:#}"))
        })
    };
    let args: Vec<String> = opts.filter.iter().map(|a| shell_quote(a)).collect();
    let queue = Mutex::new(runs.iter());
    let outcomes: Mutex<Vec<Outcome>> = Mutex::new(Vec::new());
    let booted = Mutex::new(Some(booted));
    thread::scope(|s| {
        // The roots the first guests do not boot, packed ahead of need.
        let first: Vec<Rootfs> = runs.iter().take(AT_ONCE).map(|r| r.rootfs).collect();
        for (index, root) in roots.iter().enumerate() {
            if !first.contains(root) {
                s.spawn(move || {
                    let _ = pack(index);
                });
            }
        }
        for _ in 0..AT_ONCE.min(runs.len()) {
            s.spawn(|| {
                loop {
                    let next = lock(&queue).next().copied();
                    let Some(run) = next else { return };
                    let index = roots
                        .iter()
                        .position(|r| *r == run.rootfs)
                        .expect("planned");
                    let guest = match pack(index) {
                        Ok(guest) => guest,
                        Err(err) => {
                            lock(&outcomes).push(Outcome {
                                run,
                                result: Err(anyhow::anyhow!("building the guest: {err}")),
                                counts: Counts::default(),
                                rows: Vec::new(),
                            });
                            continue;
                        }
                    };
                    // The first guest is on its way: the host's checks may
                    // start.
                    lock(&booted).take();
                    let script = format!(
                        "{}set -- {}\n{RUN_TESTS}",
                        run.suites.variables(),
                        args.join(" ")
                    );
                    let outcome = boot(run, guest, &script, opts.timeout);
                    lock(&outcomes).push(outcome);
                }
            });
        }
    });

    let outcomes = outcomes
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    for Outcome {
        run,
        result,
        counts,
        rows,
    } in outcomes
    {
        tally.add(counts);
        if !rows.is_empty() {
            print_real_tools_table(&run.label(), &rows);
        }
        match result {
            Ok(0) => {}
            Ok(code) => tally.step_failed(
                format!("guest tests on Linux {} (status {code})", run.label()),
                counts.failed,
            ),
            Err(err) => {
                say!("error: {err:#}");
                tally.step_failed(
                    format!("guest tests on Linux {}", run.label()),
                    counts.failed,
                );
            }
        }
    }
}

/// What one guest came to.
struct Outcome {
    run: GuestRun,
    /// The test script's exit status, or why it has none.
    result: Result<i32>,
    counts: Counts,
    /// The real-tools suite's rows, when it ran there.
    rows: Vec<String>,
}

/// How many times one guest run is booted again after the emulator's
/// fault at a patch site (see [`PatchSiteFault`]).
const FAULT_REBOOTS: u32 = 2;

/// Boots one guest and runs the test script there, streaming its console
/// with the guest's label. A guest that panics with the emulator's fault at
/// a hook's patch site is booted again, at most [`FAULT_REBOOTS`] times,
/// from the test that was running: that test runs again whole, and the
/// ones before it are not run twice.
fn boot(run: GuestRun, guest: &vm::Guest, script: &str, timeout: Duration) -> Outcome {
    let label = run.label();
    let counts = Mutex::new(Counts::default());
    let rows = Mutex::new(Vec::new());
    let mut reboots = 0;
    let mut resume: Option<String> = None;
    loop {
        let running: Mutex<Option<String>> = Mutex::new(None);
        let fault = Mutex::new(PatchSiteFault::default());
        let sink = |line: &str| {
            lock(&counts).add_line(line);
            lock(&fault).add_line(line);
            if let Some(test) = line.strip_prefix(START_MARK) {
                *lock(&running) = Some(test.to_owned());
            }
            // libtest's `test name ... ` may stand before it.
            if let Some(at) = line.find(ROW_MARK) {
                lock(&rows).push(line[at + ROW_MARK.len()..].to_owned());
            }
            println!("[{label}] {line}");
        };
        let script = match &resume {
            Some(at) => format!("PINCER_RESUME_AT={}\n{script}", shell_quote(at)),
            None => script.to_owned(),
        };
        let result = guest.run(run.kernel, &script, timeout, &sink);
        let running = lock(&running).take();
        if result.is_err()
            && lock(&fault).seen()
            && reboots < FAULT_REBOOTS
            && let Some(test) = running
        {
            reboots += 1;
            say!(
                "[{label}] the guest panicked on the emulator's fault at a hook's patch site \
                 (`Oops: int3` in `bpf_lsm_*`, see xtask/src/vm.rs), not on a test's failure: \
                 booting it again from {test} ({reboots} of {FAULT_REBOOTS})"
            );
            resume = Some(test);
            continue;
        }
        return Outcome {
            run,
            result,
            counts: counts
                .into_inner()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
            rows: rows
                .into_inner()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        };
    }
}

/// What the guest script prints before each test: `EXECUTABLE TEST`.
const START_MARK: &str = "==== start ";

/// Watches a guest's console for the fault the emulator (TCG, a host thread
/// per vCPU) now and then makes while a BPF trampoline is attached or
/// detached: the kernel patches a hook's first instruction through an
/// `int3`, and a vCPU that runs a stale translation of that text traps on
/// the `int3` after the patching is over, which the kernel reports as
/// `Oops: int3` with the instruction pointer just past the patch site,
/// `bpf_lsm_<hook>+0x5`. Hardware never does it. Nothing else, a fault in
/// pincer's programs or anywhere else in the kernel included, matches.
#[derive(Debug, Default)]
struct PatchSiteFault {
    /// `Oops: int3` came, and no `RIP` line yet.
    oops: bool,
    /// The first `RIP` after it was the patch site's.
    seen: bool,
}

impl PatchSiteFault {
    fn add_line(&mut self, line: &str) {
        if line.contains("Oops: int3") {
            self.oops = true;
        } else if self.oops && line.contains("RIP: 0010:") {
            self.oops = false;
            let at = line.split("RIP: 0010:").nth(1).unwrap_or("");
            if at.starts_with("bpf_lsm_") && at.contains("+0x5/") {
                self.seen = true;
            }
        }
    }

    fn seen(&self) -> bool {
        self.seen
    }
}

/// Locks a mutex whether or not a thread panicked holding it.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What the real-tools suite prints before each row of its table (a tab
/// separates the fields: task, what it does, clean run, refusals in the
/// clean run, injected goal, where the goal is, what became of it). A task
/// with several goals has a row for each; its own fields are empty on all
/// but the first.
const ROW_MARK: &str = "REAL-TOOLS-ROW\t";

/// Prints the real-tools suite's table (Markdown) and its two figures:
/// clean utility (tasks that did their work under their minimal mission)
/// and injected goal success (goals the injected variant reached).
fn print_real_tools_table(label: &str, rows: &[String]) {
    let mut clean_ok = 0;
    let mut tasks = 0;
    let mut reached = 0;
    let mut reached_inside = 0;
    let mut inside = 0;
    println!();
    println!("real tools on Linux {label}:");
    println!();
    println!("| task | work | clean run | refusals | injected goal | where | goal |");
    println!("|------|------|-----------|----------|---------------|-------|------|");
    for row in rows {
        let fields: Vec<&str> = row.split('\t').collect();
        let [task, work, clean, refusals, goal, place, outcome] = fields[..] else {
            println!("| (malformed row: {row}) |");
            continue;
        };
        // A task's further goals leave its own columns empty.
        tasks += usize::from(!clean.is_empty());
        clean_ok += usize::from(clean == "done");
        let got_there = outcome == "reached";
        reached += usize::from(got_there);
        if place == "a policy object in the tree" {
            inside += 1;
            reached_inside += usize::from(got_there);
        }
        println!("| {task} | {work} | {clean} | {refusals} | {goal} | {place} | {outcome} |");
    }
    let percent = |n: usize, of: usize| {
        if of == 0 {
            0.0
        } else {
            100.0 * n as f64 / of as f64
        }
    };
    let outside = rows.len() - inside;
    println!();
    println!(
        "clean utility {:.0} % ({clean_ok} of {tasks}); injected goal success {:.0} % ({reached} of {}): \
         outside the mission {:.0} % ({} of {outside}), policy objects inside the granted tree {:.0} % ({reached_inside} of {inside})",
        percent(clean_ok, tasks),
        percent(reached, rows.len()),
        rows.len(),
        percent(reached - reached_inside, outside),
        reached - reached_inside,
        percent(reached_inside, inside),
    );
    println!();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tests_of_removal_run_last_by_their_names() {
        let list = RUN_TESTS
            .split("removers=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .expect("run-tests.sh lists the tests of removal");
        let names: Vec<&str> = list
            .split(|c: char| c.is_whitespace() || c == '\\')
            .filter(|name| !name.is_empty())
            .collect();
        assert_eq!(names.len(), 5, "{names:?}");
        let mut sources = String::new();
        for entry in std::fs::read_dir(workspace_root().join("tests/tests")).unwrap() {
            sources.push_str(&std::fs::read_to_string(entry.unwrap().path()).unwrap());
        }
        for name in names {
            assert!(sources.contains(&format!("fn {name}()")), "no test {name}");
        }
    }

    #[test]
    fn the_included_sources_are_found() {
        let root = workspace_root();
        let found = included_sources(root).unwrap();
        for name in ["settle.rs", "walk.rs"] {
            let path = root.join("pincer-ebpf/src/decide").join(name);
            assert!(found.contains(&path), "{found:?}");
        }
    }

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
    fn the_busybox_suites_run_on_every_kernel_and_the_real_tools_in_debian() {
        let run = |kernel, rootfs, suites| GuestRun {
            kernel,
            rootfs,
            suites,
        };
        assert_eq!(
            plan(&Kernel::ALL, None),
            [
                run(Kernel::V6_1, Rootfs::Busybox, Suites::Busybox),
                run(Kernel::V6_12, Rootfs::Busybox, Suites::Busybox),
                run(Kernel::V6_12, Rootfs::Debian, Suites::RealTools),
            ]
        );
        assert_eq!(
            plan(&[Kernel::V6_1], None),
            [
                run(Kernel::V6_1, Rootfs::Busybox, Suites::Busybox),
                run(Kernel::V6_1, Rootfs::Debian, Suites::RealTools),
            ]
        );
        assert_eq!(
            plan(&Kernel::ALL, Some(Rootfs::Debian)),
            [
                run(Kernel::V6_1, Rootfs::Debian, Suites::All),
                run(Kernel::V6_12, Rootfs::Debian, Suites::All),
            ]
        );
        assert_eq!(
            plan(&[Kernel::V6_12], Some(Rootfs::Busybox)),
            [run(Kernel::V6_12, Rootfs::Busybox, Suites::Busybox)]
        );
    }

    #[test]
    fn only_the_emulators_fault_at_a_patch_site_is_recognised() {
        let watch = |lines: &[&str]| {
            let mut fault = PatchSiteFault::default();
            for line in lines {
                fault.add_line(line);
            }
            fault.seen()
        };
        let oops = "[  188.708264] Oops: int3: 0000 [#1] PREEMPT SMP NOPTI";
        let cpu = "[  188.708685] CPU: 0 UID: 0 PID: 717 Comm: pincer-probe";
        let rip = "[  188.713770] RIP: 0010:bpf_lsm_d_instantiate+0x5/0x10";
        assert!(watch(&[oops, cpu, rip]));
        // Another fault, or the same place without the int3, or a fault
        // elsewhere after the int3: not it.
        assert!(!watch(&[
            "[  1.0] Oops: general protection fault, probably for non-canonical address",
            rip
        ]));
        assert!(!watch(&[rip]));
        assert!(!watch(&[
            oops,
            "[  1.0] RIP: 0010:bpf_prog_1234_file_open+0x5/0x400"
        ]));
        assert!(!watch(&[
            oops,
            "[  1.0] RIP: 0010:bpf_lsm_file_open+0x1f/0x30"
        ]));
        // Only the first RIP after the int3 counts.
        assert!(!watch(&[
            oops,
            "[  1.0] RIP: 0010:do_syscall_64+0x5/0x180",
            rip
        ]));
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
