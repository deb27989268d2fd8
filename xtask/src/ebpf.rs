//! Building the eBPF object.

use std::{
    collections::{BTreeSet, HashMap},
    fs,
    path::{Path, PathBuf},
};

use anyhow::{Context, Result, bail};
use pincer_common::names;

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
    check_names(&object)?;
    say!("eBPF object: {}", object.display());
    Ok(object)
}

/// Checks the object's names against `pincer_common::names`, reading it as
/// the loader does: its maps are the list's maps, no more and no fewer, and
/// the loader can set each of its globals. The programs name every map
/// they declare through the list; this catches a map declared around it,
/// or one the list names that the programs no longer have (which a daemon
/// that reopens its predecessor's pins would not find).
fn check_names(object: &Path) -> Result<()> {
    let bytes = fs::read(object).with_context(|| format!("reading {}", object.display()))?;
    let mut parsed = aya_obj::Object::parse(&bytes)
        .with_context(|| format!("parsing the eBPF object {}", object.display()))?;
    // Data sections (`.rodata`, `.bss`) are maps too, named after them.
    let found: BTreeSet<String> = parsed
        .maps
        .keys()
        .filter(|name| !name.starts_with('.'))
        .cloned()
        .collect();
    let listed: BTreeSet<String> = names::MAPS.iter().map(|&name| name.to_owned()).collect();
    let unlisted: Vec<&String> = found.difference(&listed).collect();
    let missing: Vec<&String> = listed.difference(&found).collect();
    if !unlisted.is_empty() || !missing.is_empty() {
        bail!(
            "the eBPF object's maps are not pincer_common::names::MAPS: \
             not in the list {unlisted:?}, not in the object {missing:?} \
             (declare maps with `maps::declare_maps!`, named by the list)"
        );
    }
    // The loader's own patch, on this copy: it fails for a global the object
    // lacks or of another size.
    let sizes = [(names::OFFSETS, size_of::<pincer_common::KernelOffsets>())];
    for global in names::GLOBALS {
        let Some(&(_, size)) = sizes.iter().find(|(name, _)| name == global) else {
            bail!("no size known here for the global {global}");
        };
        let zeros = vec![0; size];
        parsed
            .patch_map_data(HashMap::from([(*global, (&zeros[..], true))]))
            .with_context(|| format!("the eBPF object's global {global}"))?;
    }
    Ok(())
}
