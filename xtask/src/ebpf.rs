//! Building the eBPF object.

use std::path::PathBuf;

use anyhow::{Context, Result};

use crate::{process, say, setup, workspace_root};

const TARGET: &str = "bpfel-unknown-none";

/// Debian's compiler, the one that ships a prebuilt `core` for the BPF target.
const BPF_RUSTC: &str = "/usr/bin/rustc";

fn target_dir() -> PathBuf {
    workspace_root().join("target").join("ebpf")
}

/// Where `build` leaves the object (absolute).
pub fn object_path() -> PathBuf {
    target_dir()
        .join(TARGET)
        .join("release")
        .join("pincer-ebpf")
}

/// Builds `pincer-ebpf` for the BPF target and returns the object's path.
pub fn build() -> Result<PathBuf> {
    setup::ensure_toolchain()?;
    say!("building the eBPF object");
    let mut cmd = process::cargo();
    cmd.current_dir(workspace_root())
        .args(["build", "--locked", "--release", "-p", "pincer-ebpf"])
        .args(["--target", TARGET, "--target-dir"])
        .arg(target_dir())
        .env("RUSTC", BPF_RUSTC)
        // aya-ebpf enables a nightly feature on the BPF target.
        .env("RUSTC_BOOTSTRAP", "1")
        // A wrapper would run rustup's compiler, which has no BPF `core`.
        .env_remove("RUSTC_WRAPPER")
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        // These would replace the target's rustflags (linker args for BTF).
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS");
    process::run(&mut cmd).context("building the eBPF object")?;
    let object = object_path();
    if !object.is_file() {
        anyhow::bail!("the eBPF build left no object at {}", object.display());
    }
    say!("eBPF object: {}", object.display());
    Ok(object)
}
