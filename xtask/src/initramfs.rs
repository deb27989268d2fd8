//! The guest's initramfs: busybox, pincer's binaries and an `/init` that runs
//! a script. For the Debian guest it is only the first stage: its `/init`
//! moves the binaries and the script into the Debian root and switches to it.
//!
//! The binaries go into one base archive; each run appends a small archive
//! holding its script (the kernel unpacks concatenated archives in order), so
//! VMs running different scripts share the base.

use std::{
    fs,
    io::Write,
    os::unix::fs::{PermissionsExt, symlink},
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use anyhow::{Context, Result, bail};
use tempfile::{TempDir, TempPath};

use crate::{binaries::Binary, cache_dir, process, rootfs::Rootfs, say};

const INIT: &str = include_str!("../guest/init");
const DEBIAN_BOOT: &str = include_str!("../guest/debian-boot");
const DEBIAN_INIT: &str = include_str!("../guest/debian-init");
const BUSYBOX: &str = "/bin/busybox";

const PASSWD: &str = "root:x:0:0:root:/root:/bin/sh\n\
                      nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n";
const GROUP: &str = "root:x:0:\nnogroup:x:65534:\n";

/// A base archive, removed with its staging directory when dropped.
pub struct Initramfs {
    dir: TempDir,
    base: PathBuf,
}

impl Initramfs {
    /// Stages and packs the base archive with `binaries` in `/bin` (for the
    /// Debian guest in `/pincer/bin`, from where they go into its root).
    pub fn build(binaries: &[Binary], rootfs: Rootfs) -> Result<Self> {
        let dir = crate::build_dir(&cache_dir().join("initramfs"))?;
        let root = dir.path().join("root");
        say!("staging the initramfs in {}", root.display());
        stage(&root, binaries, rootfs)?;
        let base = dir.path().join("base.cpio");
        pack(&root, &base)?;
        let size = fs::metadata(&base)?.len();
        say!("initramfs base: {:.1} MiB", size as f64 / (1 << 20) as f64);
        Ok(Self { dir, base })
    }

    /// The complete archive for one run of `script`; removed when dropped.
    pub fn with_script(&self, script: &str) -> Result<TempPath> {
        let staging = tempfile::Builder::new()
            .prefix("script-")
            .tempdir_in(self.dir.path())?;
        let root = staging.path().join("root");
        fs::create_dir_all(root.join("pincer"))?;
        write_file(&root.join("pincer/script"), script, 0o755)?;
        let script_cpio = staging.path().join("script.cpio");
        pack(&root, &script_cpio)?;

        let (mut out, path) = tempfile::Builder::new()
            .prefix("initramfs-")
            .suffix(".cpio")
            .tempfile_in(self.dir.path())?
            .into_parts();
        for part in [&self.base, &script_cpio] {
            let mut input = fs::File::open(part)?;
            std::io::copy(&mut input, &mut out)
                .with_context(|| format!("appending {}", part.display()))?;
        }
        out.flush()?;
        Ok(path)
    }
}

fn stage(root: &Path, binaries: &[Binary], rootfs: Rootfs) -> Result<()> {
    for dir in [
        "bin", "sbin", "usr/bin", "usr/sbin", "etc", "root", "dev", "proc", "sys", "run", "tmp",
        "pincer",
    ] {
        fs::create_dir_all(root.join(dir))?;
    }
    fs::set_permissions(root.join("tmp"), fs::Permissions::from_mode(0o1777))?;
    fs::set_permissions(root.join("root"), fs::Permissions::from_mode(0o700))?;

    copy_exe(Path::new(BUSYBOX), &root.join("bin/busybox"))?;
    let applets = process::output(Command::new(BUSYBOX).arg("--list-full"))?;
    for applet in applets.lines().map(str::trim) {
        // Only applets in a bin directory: `linuxrc` would shadow nothing useful.
        if !applet.contains("bin/") || applet == "bin/busybox" {
            continue;
        }
        let link = root.join(applet);
        if let Some(parent) = link.parent() {
            fs::create_dir_all(parent)?;
        }
        symlink("/bin/busybox", &link).with_context(|| format!("linking {applet}"))?;
    }

    match rootfs {
        Rootfs::Busybox => {
            for binary in binaries {
                copy_exe(&binary.path, &root.join("bin").join(&binary.name))?;
            }
            write_file(&root.join("init"), INIT, 0o755)?;
        }
        Rootfs::Debian => {
            fs::create_dir_all(root.join("pincer/bin"))?;
            for binary in binaries {
                copy_exe(&binary.path, &root.join("pincer/bin").join(&binary.name))?;
            }
            write_file(&root.join("init"), DEBIAN_BOOT, 0o755)?;
            write_file(&root.join("pincer/init"), DEBIAN_INIT, 0o755)?;
        }
    }
    write_file(&root.join("etc/passwd"), PASSWD, 0o644)?;
    write_file(&root.join("etc/group"), GROUP, 0o644)?;
    Ok(())
}

fn copy_exe(from: &Path, to: &Path) -> Result<()> {
    fs::copy(from, to).with_context(|| format!("copying {}", from.display()))?;
    fs::set_permissions(to, fs::Permissions::from_mode(0o755))?;
    Ok(())
}

fn write_file(path: &Path, text: &str, mode: u32) -> Result<()> {
    fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    fs::set_permissions(path, fs::Permissions::from_mode(mode))?;
    Ok(())
}

/// Every path under `root`, relative, parents before children, sorted so
/// that the archive is reproducible.
fn walk(root: &Path, rel: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let mut entries: Vec<_> = fs::read_dir(root.join(rel))?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<Result<_, _>>()?;
    entries.sort();
    for name in entries {
        let path = rel.join(name);
        out.push(path.clone());
        if fs::symlink_metadata(root.join(&path))?.is_dir() {
            walk(root, &path, out)?;
        }
    }
    Ok(())
}

/// Packs `root` into a `newc` archive owned by root.
fn pack(root: &Path, out: &Path) -> Result<()> {
    let mut paths = Vec::new();
    walk(root, Path::new(""), &mut paths)?;
    let mut list = Vec::new();
    for p in &paths {
        list.extend_from_slice(p.as_os_str().as_encoded_bytes());
        list.push(0);
    }
    let file = fs::File::create(out).with_context(|| format!("creating {}", out.display()))?;
    let mut child = Command::new("cpio")
        .args(["--quiet", "--null", "-o", "-H", "newc", "-R", "0:0"])
        .current_dir(root)
        .stdin(Stdio::piped())
        .stdout(file)
        .spawn()
        .context("starting cpio")?;
    // cpio writes to a file, never to us, so writing the whole list first
    // cannot deadlock.
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(&list)
        .context("writing the file list to cpio")?;
    let status = child.wait()?;
    if !status.success() {
        bail!("cpio failed ({status}) packing {}", root.display());
    }
    Ok(())
}
