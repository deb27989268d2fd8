//! Host prerequisites: Debian packages, bpf-linker, cargo-fuzz and the test kernels.

use std::process::Command;

use anyhow::{Context, Result};

use crate::{
    kernels::{self, Kernel},
    process,
    rootfs::{self, Rootfs},
    say,
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
/// The cargo-fuzz that builds the fuzz targets (`cargo xtask fuzz`).
const CARGO_FUZZ_VERSION: &str = "0.13.2";
const LLVM_PREFIX: &str = "/usr/lib/llvm-22";

/// Everything: packages, linker and both kernels, and the Debian root if
/// that guest is asked for.
pub fn setup_all(rootfs: Rootfs) -> Result<()> {
    ensure_toolchain()?;
    ensure_host_test_packages()?;
    for kernel in Kernel::ALL {
        kernels::ensure(kernel)?;
    }
    if rootfs == Rootfs::Debian {
        rootfs::ensure_debian()?;
    }
    say!("setup complete");
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

fn install(packages: &[&str]) -> Result<()> {
    let missing: Vec<&str> = packages
        .iter()
        .copied()
        .filter(|p| !is_installed(p))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    say!("installing packages: {}", missing.join(" "));
    process::run(Command::new("apt-get").arg("update")).context("apt-get update")?;
    process::run(
        Command::new("apt-get")
            .env("DEBIAN_FRONTEND", "noninteractive")
            .args(["install", "-y"])
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
