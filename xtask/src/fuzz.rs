//! `cargo xtask fuzz`: builds the fuzz targets of `fuzz/` with cargo-fuzz and
//! runs each for a while from a copy of its committed corpus.

use std::{
    fs,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Instant,
};

use anyhow::{Context, Result, bail};

use crate::{process, say, setup, workspace_root};

/// The fuzz targets, as named in `fuzz/Cargo.toml`.
pub const TARGETS: &[&str] = &[
    "ring_record",
    "mission",
    "daemon_config",
    "control_line",
    "webhook_answer",
    "audit_chain",
    "git_config",
];

/// Seconds each target runs in `cargo xtask test`: enough to replay the
/// corpus and try a few hundred thousand inputs, little next to the build.
pub const BRIEF_SECONDS: u64 = 5;

/// Seconds one input may take before it counts as a hang. libFuzzer's
/// default is twenty minutes; the slowest input of the corpus takes
/// milliseconds.
const INPUT_TIMEOUT_SECONDS: u64 = 10;

/// libFuzzer's coverage and comparison tracing only. AddressSanitizer finds
/// nothing more in this safe code (the one `unsafe` read is bounds-checked
/// before it happens) and its instrumented build of every dependency takes
/// several times longer on two cores.
const SANITIZER: &str = "none";

fn fuzz_dir() -> PathBuf {
    workspace_root().join("fuzz")
}

/// Where the instrumented build goes: under `target/`, with everything the
/// workspace builds, so that it is cached with it.
fn target_dir() -> PathBuf {
    workspace_root().join("target").join("fuzz")
}

/// The host's target triple, which cargo-fuzz builds for by default and
/// names its output directory after.
fn host_triple() -> Result<String> {
    let info = process::output(Command::new("rustc").arg("-vV"))?;
    info.lines()
        .find_map(|line| line.strip_prefix("host: "))
        .map(str::to_owned)
        .context("`rustc -vV` names no host")
}

/// The BPF object the targets embed: an empty one. They never load the
/// programs, and the default path (a file `cargo xtask build-ebpf` may or
/// may not have made) would rebuild pincer's library whenever it is
/// missing or rebuilt. Made once and never touched, so it never looks
/// changed.
fn stub_object() -> Result<PathBuf> {
    let path = target_dir().join("no-ebpf-object");
    if !path.exists() {
        fs::create_dir_all(target_dir())?;
        fs::write(&path, b"").with_context(|| format!("creating {}", path.display()))?;
    }
    Ok(path)
}

/// A cargo command with what every fuzz build needs.
fn cargo_fuzz(stub: &Path) -> Command {
    let mut cmd = process::cargo();
    cmd.current_dir(workspace_root())
        // cargo-fuzz passes `-Z` flags (sanitizer coverage options) that
        // only a nightly compiler takes; the stable toolchain takes them
        // too when it is told it may, as the eBPF build is.
        .env("RUSTC_BOOTSTRAP", "1")
        .env("PINCER_EBPF_OBJECT", stub);
    cmd
}

/// How the targets are compiled.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Build {
    /// Optimized, for long runs (`cargo xtask fuzz`).
    Optimized,
    /// Unoptimized, for the test command's brief runs: the instrumented
    /// build of every dependency takes about half as long, and a few
    /// seconds replay the corpus and try thousands of inputs either way.
    Quick,
}

/// Checks the fuzz crate's formatting and lints, and builds every target.
pub fn build(how: Build) -> Result<PathBuf> {
    setup::ensure_cargo_fuzz()?;
    let stub = stub_object()?;
    let manifest = fuzz_dir().join("Cargo.toml");
    say!("fuzz: checking the fuzz crate");
    process::run(
        process::cargo()
            .args(["fmt", "--check", "--manifest-path"])
            .arg(&manifest),
    )
    .context("the fuzz crate is not formatted")?;
    // The lints build no instrumented code: the check build shares the
    // workspace's `target/` and settings, so what the workspace's own lints
    // checked is not checked again.
    process::run(
        process::cargo()
            .args(["clippy", "--locked", "--manifest-path"])
            .arg(&manifest)
            .arg("--target-dir")
            .arg(workspace_root().join("target"))
            .args(["--", "-D", "warnings"]),
    )
    .context("linting the fuzz crate")?;
    say!("fuzz: building the targets");
    // `cargo fuzz build` takes no `--locked`: the lints above, which do, have
    // checked that `fuzz/Cargo.lock` is up to date.
    let mut cmd = cargo_fuzz(&stub);
    cmd.args(["fuzz", "build", "--sanitizer", SANITIZER, "--fuzz-dir"])
        .arg(fuzz_dir())
        .arg("--target-dir")
        .arg(target_dir());
    let profile = match how {
        Build::Optimized => "release",
        Build::Quick => {
            cmd.arg("--dev");
            "debug"
        }
    };
    process::run(&mut cmd).context("building the fuzz targets")?;
    Ok(target_dir().join(host_triple()?).join(profile))
}

/// What a run of one target did.
pub struct Outcome {
    pub target: &'static str,
    /// Whether it ended without a crash, a failed assertion or a hang.
    pub ok: bool,
}

/// Builds the targets and runs each of `targets` for `seconds`, from a copy
/// of its committed corpus; returns one outcome per target.
pub fn run(targets: &[&'static str], seconds: u64, how: Build) -> Result<Vec<Outcome>> {
    let started = Instant::now();
    let binaries = build(how)?;
    say!("fuzz: built in {:.0} s", started.elapsed().as_secs_f64());
    targets
        .iter()
        .map(|&target| run_one(&binaries, target, seconds))
        .collect()
}

fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    fs::create_dir_all(to)?;
    for entry in fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let entry = entry?;
        fs::copy(entry.path(), to.join(entry.file_name()))?;
    }
    Ok(())
}

fn run_one(binaries: &Path, target: &'static str, seconds: u64) -> Result<Outcome> {
    // A scratch copy: the fuzzer adds what it finds to its corpus, and the
    // committed one only changes by hand.
    let scratch = target_dir().join("run").join(target);
    if scratch.exists() {
        fs::remove_dir_all(&scratch)?;
    }
    let corpus = scratch.join("corpus");
    let artifacts = scratch.join("artifacts");
    copy_dir(&fuzz_dir().join("corpus").join(target), &corpus)?;
    fs::create_dir_all(&artifacts)?;
    let log = scratch.join("log");

    let mut cmd = Command::new(binaries.join(target));
    cmd.arg(format!("-max_total_time={seconds}"))
        .arg(format!("-timeout={INPUT_TIMEOUT_SECONDS}"))
        .arg(format!("-artifact_prefix={}/", artifacts.display()))
        .arg("-print_final_stats=1")
        .arg(&corpus)
        .stdin(Stdio::null());
    // libFuzzer's progress lines, hundreds of them, go to a file; the
    // summary or, on a failure, the end of it is shown.
    let file = fs::File::create(&log)?;
    cmd.stdout(Stdio::from(file.try_clone()?))
        .stderr(Stdio::from(file));
    say!(
        "fuzz: {target} for {seconds} s ({})",
        process::describe(&cmd)
    );
    let status = cmd
        .status()
        .with_context(|| format!("starting the {target} fuzz target"))?;
    let output = fs::read_to_string(&log).unwrap_or_default();
    let stat = |name: &str| {
        output
            .lines()
            .find_map(|line| line.strip_prefix(&format!("stat::{name}:")))
            .map_or("?", str::trim)
            .to_owned()
    };
    let found = fs::read_dir(&artifacts)?.count();
    if status.success() && found == 0 {
        say!(
            "fuzz: {target}: ok, {} runs, corpus {} -> {} inputs",
            stat("number_of_executed_units"),
            fs::read_dir(fuzz_dir().join("corpus").join(target))?.count(),
            fs::read_dir(&corpus)?.count(),
        );
        return Ok(Outcome { target, ok: true });
    }
    let tail: Vec<&str> = output.lines().rev().take(60).collect();
    for line in tail.into_iter().rev() {
        eprintln!("{line}");
    }
    say!(
        "fuzz: {target} FAILED ({status}); the input is in {} (full log: {})",
        artifacts.display(),
        log.display()
    );
    Ok(Outcome { target, ok: false })
}

/// `cargo xtask fuzz`: exits non-zero when a target failed.
pub fn command(target: Option<&str>, seconds: u64) -> Result<u8> {
    let targets: Vec<&'static str> = match target {
        Some(name) => match TARGETS.iter().find(|&&t| t == name) {
            Some(&t) => vec![t],
            None => bail!("no fuzz target {name}; there are {}", TARGETS.join(", ")),
        },
        None => TARGETS.to_vec(),
    };
    let outcomes = run(&targets, seconds, Build::Optimized)?;
    let failed: Vec<&str> = outcomes
        .iter()
        .filter(|o| !o.ok)
        .map(|o| o.target)
        .collect();
    if failed.is_empty() {
        say!("fuzz: every target ran without a failure");
        Ok(0)
    } else {
        say!("fuzz: failed: {}", failed.join(", "));
        Ok(1)
    }
}
