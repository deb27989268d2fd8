//! The guest's root file system: busybox in the initramfs (the default, and
//! the fastest to boot), or a Debian root built from Debian's packages for
//! tasks that need real tools (git, python3, gcc, node, ...).
//!
//! The Debian root is built once with mmdebstrap through the host's own apt
//! sources (apt verifies every index against the archive keyring), packed
//! into an ext4 image without mounting anything (`mke2fs -d`) and cached
//! under a key that hashes everything that shapes it. A boot never writes
//! to the image: QEMU keeps the boot's changes in a throwaway snapshot.

use std::{
    fmt, fs,
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
    process::Command,
    time::Instant,
};

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};

use crate::{apt, cache_dir, process, say, setup};

/// What the guest boots into.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Rootfs {
    /// busybox and pincer's binaries in the initramfs.
    #[default]
    Busybox,
    /// A Debian bookworm root on a disk, with pincer's binaries added at boot.
    Debian,
}

impl fmt::Display for Rootfs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Rootfs::Busybox => "busybox",
            Rootfs::Debian => "debian",
        })
    }
}

/// The Debian release of the root (the 6.1 kernel's; the 6.12 kernel runs
/// its user space just as well).
const SUITE: &str = "bookworm";

const KEYRING: &str = "/usr/share/keyrings/debian-archive-keyring.gpg";

/// Installed on top of the `minbase` variant (which already has dpkg, apt,
/// bash, coreutils, mount, ...): the tools agents run. `libc6-dev` because
/// gcc alone cannot link a program; bubblewrap and socat because agents'
/// own sandboxes are made of them (Claude Code's on Linux).
const PACKAGES: &[&str] = &[
    "git",
    "python3",
    "python3-pip",
    "make",
    "gcc",
    "libc6-dev",
    "patch",
    "tar",
    "sed",
    "findutils",
    "diffutils",
    "procps",
    "nodejs",
    "npm",
    "python3-pytest",
    "black",
    "bubblewrap",
    "socat",
];

/// Agent command-line programs installed into the root's `/usr/local` from
/// the npm registry, by the host's npm, at versions pinned here (both ship
/// native x86-64 programs: Claude Code needs no Node.js at run time, Codex's
/// launcher runs on the root's).
const AGENTS: &[&str] = &["@anthropic-ai/claude-code@2.1.332", "@openai/codex@0.171.0"];

/// aider and the packages it runs with, from the Python package index, each
/// wheel pinned by its SHA-256. It is installed into its own virtual
/// environment, [`AIDER_VENV`], by the root's Python (the host's may be
/// another build), so its packages never shadow the ones the tasks use.
const AIDER_REQUIREMENTS: &str = include_str!("../agents/aider-requirements.txt");

/// Where aider's virtual environment lives in the root: where aider's own
/// installer (`uv tool install aider-chat`) puts it, for the user whose
/// home the guest's aider test uses, so that the test runs aider from where
/// the `aider` profile's grants expect it. Its launcher is linked from
/// `aider` in [`AIDER_BIN_DIR`].
const AIDER_VENV: &str = "/home/agent-aider/.local/share/uv/tools/aider-chat";

/// Where the installer links the launcher.
const AIDER_BIN_DIR: &str = "/home/agent-aider/.local/bin";

/// The root's Python, which the wheels are chosen for: bookworm's 3.11 on
/// x86-64, glibc 2.36.
const AIDER_WHEEL_TARGET: &[&str] = &[
    "--implementation=cp",
    "--python-version=3.11",
    "--platform=manylinux_2_28_x86_64",
    "--platform=manylinux_2_17_x86_64",
    "--platform=manylinux2014_x86_64",
    "--platform=any",
];

/// Options to mmdebstrap besides the package list: recommended packages
/// would double the root's size, and nothing reads manuals or translations
/// in the guest.
const MMDEBSTRAP_OPTIONS: &[&str] = &[
    "--variant=minbase",
    "--mode=root",
    "--format=directory",
    "--aptopt=APT::Install-Recommends \"false\"",
    "--dpkgopt=path-exclude=/usr/share/man/*",
    "--dpkgopt=path-exclude=/usr/share/doc/*",
    "--dpkgopt=path-exclude=/usr/share/info/*",
    "--dpkgopt=path-exclude=/usr/share/locale/*",
    // The guest has no network: the host's name server means nothing there.
    "--customize-hook=rm -f \"$1/etc/resolv.conf\"",
    "--customize-hook=echo pincer-guest >\"$1/etc/hostname\"",
];

/// How the image is made from the tree: no blocks reserved for root (the
/// guest runs everything as root anyway).
const MKE2FS_OPTIONS: &[&str] = &["-q", "-t", "ext4", "-L", "pincer-root", "-m", "0"];

/// Free space in the image beyond what the root uses, for what tests create
/// outside the tmpfs `/tmp` (the image file is sparse: free space costs no
/// disk on the host).
const HEADROOM_MIB: u64 = 1024;

/// Bumped whenever the way the image is made changes in a way the lines
/// above do not show (the hooks of [`install_aider_hooks`], for one).
const FORMAT: u32 = 3;

/// The Debian-root image for the guest, cached.
pub struct DebianRoot {
    pub image: PathBuf,
}

/// Everything that shapes the image, one item a line; its hash names the
/// cache entry.
fn recipe() -> String {
    let mut packages = PACKAGES.to_vec();
    packages.sort_unstable();
    let mut text = format!("format {FORMAT}\nsuite {SUITE}\nheadroom {HEADROOM_MIB} MiB\n");
    for option in MMDEBSTRAP_OPTIONS {
        text.push_str(&format!("option {option}\n"));
    }
    for option in MKE2FS_OPTIONS {
        text.push_str(&format!("mke2fs {option}\n"));
    }
    for package in packages {
        text.push_str(&format!("package {package}\n"));
    }
    for agent in AGENTS {
        text.push_str(&format!("agent {agent}\n"));
    }
    text.push_str(&format!("aider-venv {AIDER_VENV}\n"));
    for line in AIDER_REQUIREMENTS
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        text.push_str(&format!("aider {line}\n"));
    }
    text
}

fn key(recipe: &str) -> String {
    let digest = Sha256::digest(recipe.as_bytes());
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

fn root_dir() -> PathBuf {
    cache_dir().join("debian-root")
}

/// The cached image for the current recipe, built first if it is missing.
pub fn ensure_debian() -> Result<DebianRoot> {
    let recipe = recipe();
    let dir = root_dir().join(key(&recipe));
    let image = dir.join("root.ext4");
    if image.is_file() {
        return Ok(DebianRoot { image });
    }
    let started = Instant::now();
    say!("building the Debian {SUITE} root (takes a few minutes)");
    setup::ensure_debian_root_tools()?;
    build(&dir, &recipe).context("building the Debian root")?;
    let meta = fs::metadata(&image)?;
    say!(
        "Debian root cached in {} ({} MiB image, {} MiB of it on disk; {:.1} s)",
        dir.display(),
        meta.len() >> 20,
        // The image is sparse: its free space takes no room on the host.
        (meta.blocks() * 512) >> 20,
        started.elapsed().as_secs_f64()
    );
    remove_stale(&dir);
    Ok(DebianRoot { image })
}

fn build(dir: &Path, recipe: &str) -> Result<()> {
    let tmp = crate::build_dir(&root_dir())?;
    let tree = tmp.path().join("root");

    let started = Instant::now();
    let wheels = download_aider(tmp.path())?;
    say!(
        "aider's wheels downloaded and checked ({:.1} s)",
        started.elapsed().as_secs_f64()
    );

    let started = Instant::now();
    let mut cmd = Command::new("mmdebstrap");
    cmd.args(MMDEBSTRAP_OPTIONS)
        .args(install_aider_hooks(&wheels))
        .arg(format!("--include={}", PACKAGES.join(",")))
        .arg(SUITE)
        .arg(&tree)
        .args(sources()?);
    process::run(&mut cmd)?;
    say!("mmdebstrap done ({:.1} s)", started.elapsed().as_secs_f64());

    let started = Instant::now();
    install_agents(&tree)?;
    say!(
        "agent programs installed ({:.1} s)",
        started.elapsed().as_secs_f64()
    );

    // What went in, for whoever wonders which versions a guest ran.
    let manifest = process::output(
        Command::new("dpkg-query")
            .arg(format!(
                "--admindir={}",
                tree.join("var/lib/dpkg").display()
            ))
            .args(["-W", "-f=${Package} ${Version}\n"]),
    )?;

    let used_mib = process::output(Command::new("du").args(["-s", "-m", "-x"]).arg(&tree))?
        .split_whitespace()
        .next()
        .and_then(|n| n.parse::<u64>().ok())
        .context("reading the root's size from du")?;
    // ext4's own metadata takes a share of the blocks.
    let size_mib = used_mib + used_mib / 4 + HEADROOM_MIB;
    let partial = tmp.path().join("root.ext4");
    let started = Instant::now();
    process::run(
        Command::new("mke2fs")
            .args(MKE2FS_OPTIONS)
            .arg("-d")
            .arg(&tree)
            .arg(&partial)
            .arg(format!("{size_mib}M")),
    )?;
    say!(
        "ext4 image of {used_mib} MiB of files made ({:.1} s)",
        started.elapsed().as_secs_f64()
    );

    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    fs::write(dir.join("recipe"), recipe).context("writing the recipe")?;
    fs::write(dir.join("packages"), manifest).context("writing the package list")?;
    // Read-only on the host too: a boot that lost its snapshot would fail
    // instead of changing the cache.
    let mut perms = fs::metadata(&partial)?.permissions();
    perms.set_readonly(true);
    fs::set_permissions(&partial, perms)?;
    // The image is renamed into place last: its presence means complete.
    fs::rename(&partial, dir.join("root.ext4")).context("moving the image into place")?;
    Ok(())
}

/// Installs [`AGENTS`] into the root's `/usr/local` (their `bin` links are
/// relative, so they work inside the guest), with the npm cache kept out of
/// the root.
fn install_agents(tree: &Path) -> Result<()> {
    setup::ensure_npm()?;
    let cache = tree.with_file_name("npm-cache");
    process::run(
        Command::new("npm")
            .args(["install", "--global", "--no-audit", "--no-fund", "--prefix"])
            .arg(tree.join("usr/local"))
            .arg("--cache")
            .arg(&cache)
            .args(AGENTS),
    )?;
    let _ = fs::remove_dir_all(&cache);
    Ok(())
}

/// Downloads aider's wheels into `dir/aider-wheels` with the host's pip,
/// which checks each against its pinned SHA-256, and puts the requirements
/// beside them for the install in the root.
fn download_aider(dir: &Path) -> Result<PathBuf> {
    setup::ensure_pip()?;
    let wheels = dir.join("aider-wheels");
    fs::create_dir_all(&wheels).with_context(|| format!("creating {}", wheels.display()))?;
    let requirements = wheels.join("requirements.txt");
    fs::write(&requirements, AIDER_REQUIREMENTS).context("writing aider's requirements")?;
    process::run(
        Command::new("python3")
            .args([
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--require-hashes",
                "--only-binary=:all:",
            ])
            .args(AIDER_WHEEL_TARGET)
            .arg("-r")
            .arg(&requirements)
            .arg("-d")
            .arg(&wheels),
    )?;
    Ok(wheels)
}

/// mmdebstrap hooks that install aider from `wheels` (see
/// [`download_aider`]) with the root's own Python and pip, offline and
/// checking every hash again, then take the wheels out of the root.
fn install_aider_hooks(wheels: &Path) -> Vec<String> {
    let inside = "/tmp/aider-wheels";
    // The host's Python settings (`PIP_*`, `PYTHONDONTWRITEBYTECODE`) stay
    // out: pip compiles every module here, since the guest's agents may not
    // write caches into the environment.
    let chroot = "chroot \"$1\" env -i PATH=/usr/bin:/bin LC_ALL=C.UTF-8";
    vec![
        format!("--customize-hook=mkdir -p \"$1{inside}\""),
        format!("--customize-hook=sync-in {} {inside}", wheels.display()),
        format!("--customize-hook={chroot} python3 -m venv --without-pip {AIDER_VENV}"),
        format!(
            "--customize-hook={chroot} python3 -m pip --python {AIDER_VENV}/bin/python \
             install --quiet --no-index --no-deps --require-hashes --only-binary=:all: \
             --disable-pip-version-check --find-links {inside} -r {inside}/requirements.txt"
        ),
        format!("--customize-hook=mkdir -p \"$1{AIDER_BIN_DIR}\""),
        format!("--customize-hook=ln -s {AIDER_VENV}/bin/aider \"$1{AIDER_BIN_DIR}/aider\""),
        format!("--customize-hook=rm -rf \"$1{inside}\""),
    ]
}

/// mmdebstrap's sources: the host's Debian mirrors for the suite, its
/// updates and its security suite, each checked against the archive keyring.
fn sources() -> Result<Vec<String>> {
    let mirrors = apt::host_mirrors()?;
    let line = |uri: &str, suite: &str| format!("deb [signed-by={KEYRING}] {uri} {suite} main");
    let mut lines = vec![
        line(&mirrors.archive, SUITE),
        line(&mirrors.archive, &format!("{SUITE}-updates")),
    ];
    if let Some(security) = &mirrors.security {
        lines.push(line(security, &format!("{SUITE}-security")));
    }
    if !Path::new(KEYRING).is_file() {
        bail!("{KEYRING} is missing: install debian-archive-keyring");
    }
    Ok(lines)
}

/// Removes images of older recipes: only the current one is ever booted.
fn remove_stale(current: &Path) {
    let Ok(entries) = fs::read_dir(root_dir()) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        let name = entry.file_name();
        // Build directories of concurrent runs start with `build-`.
        if path != current && !name.to_string_lossy().starts_with("build-") && path.is_dir() {
            say!("removing the outdated Debian root {}", path.display());
            let _ = fs::remove_dir_all(&path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_changes_with_the_package_list() {
        let current = recipe();
        assert_eq!(key(&current).len(), 16);
        assert!(current.contains("package git\n"));
        assert_eq!(key(&current), key(&recipe()));
        assert_ne!(key(&current), key(&current.replace("package git\n", "")));
    }
}
