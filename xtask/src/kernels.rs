//! Test kernels: Debian's cloud kernels, unpacked from their packages (never
//! installed) into a cache.

use std::{
    fmt, fs,
    path::{Path, PathBuf},
    time::Instant,
};

use anyhow::{Context, Result, bail};

use crate::{apt, cache_dir, process, say};

/// The kernels pincer is tested on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Kernel {
    #[value(name = "6.1")]
    V6_1,
    #[value(name = "6.12")]
    V6_12,
}

impl Kernel {
    pub const ALL: [Kernel; 2] = [Kernel::V6_1, Kernel::V6_12];

    pub fn name(self) -> &'static str {
        match self {
            Kernel::V6_1 => "6.1",
            Kernel::V6_12 => "6.12",
        }
    }

    /// The Debian release whose cloud kernel is this version.
    fn suite(self) -> &'static str {
        match self {
            Kernel::V6_1 => "bookworm",
            Kernel::V6_12 => "trixie",
        }
    }

    fn dir(self) -> PathBuf {
        cache_dir().join("kernels").join(self.name())
    }

    /// The cached kernel image.
    pub fn vmlinuz(self) -> PathBuf {
        self.dir().join("vmlinuz")
    }

    fn version_file(self) -> PathBuf {
        self.dir().join("version")
    }

    fn is_cached(self) -> bool {
        self.vmlinuz().is_file() && self.version_file().is_file()
    }
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The flavour's metapackage depends on the current versioned image package.
const METAPACKAGE: &str = "linux-image-cloud-amd64";

/// Fetches `kernel` into the cache unless it is there already.
pub fn ensure(kernel: Kernel) -> Result<PathBuf> {
    if kernel.is_cached() {
        return Ok(kernel.vmlinuz());
    }
    let started = Instant::now();
    say!("fetching Linux {kernel} from Debian {}", kernel.suite());
    fetch(kernel).with_context(|| format!("fetching the Linux {kernel} test kernel"))?;
    say!(
        "Linux {kernel} cached in {} ({:.1} s)",
        kernel.dir().display(),
        started.elapsed().as_secs_f64()
    );
    Ok(kernel.vmlinuz())
}

fn fetch(kernel: Kernel) -> Result<()> {
    let apt_dir = cache_dir().join("apt").join(kernel.suite());
    let apt = apt::Apt::new(&apt_dir, kernel.suite())?;
    apt.update()?;

    let meta = apt.show(METAPACKAGE)?;
    let depends = apt::control_field(&meta, "Depends")
        .with_context(|| format!("{METAPACKAGE} has no Depends field"))?;
    let package = image_package(&depends)
        .with_context(|| format!("{METAPACKAGE} depends on no kernel image: {depends}"))?;
    let version = apt::control_field(&apt.show(&package)?, "Version")
        .with_context(|| format!("{package} has no Version field"))?;
    say!("Linux {kernel}: {package} {version}");

    let tmp = tempfile::Builder::new()
        .prefix("download-")
        .tempdir_in(&apt_dir)
        .context("creating a download directory")?;
    let deb = apt.download(&package, tmp.path())?;
    let unpacked = tmp.path().join("root");
    process::run(
        std::process::Command::new("dpkg")
            .arg("-x")
            .arg(&deb)
            .arg(&unpacked),
    )?;
    let image = find_image(&unpacked.join("boot"))?;

    let dir = kernel.dir();
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    // The image is renamed into place last: its presence means complete.
    let partial = dir.join("vmlinuz.partial");
    fs::copy(&image, &partial).with_context(|| format!("copying {}", image.display()))?;
    fs::write(kernel.version_file(), format!("{package} {version}\n"))
        .context("writing the version file")?;
    fs::rename(&partial, kernel.vmlinuz()).context("moving the kernel into place")?;
    Ok(())
}

/// The versioned image package named in a metapackage's Depends.
fn image_package(depends: &str) -> Option<String> {
    depends
        .split([',', '|'])
        .filter_map(|dep| dep.split_whitespace().next())
        .find(|name| name.starts_with("linux-image-") && *name != METAPACKAGE)
        .map(str::to_owned)
}

fn find_image(boot: &Path) -> Result<PathBuf> {
    let entries = fs::read_dir(boot).with_context(|| format!("reading {}", boot.display()))?;
    for entry in entries {
        let path = entry?.path();
        if path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("vmlinuz-"))
        {
            return Ok(path);
        }
    }
    bail!("no vmlinuz-* in {}", boot.display())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_the_image_package() {
        assert_eq!(
            image_package("linux-image-6.1.0-57-cloud-amd64 (= 6.1.158-1)").as_deref(),
            Some("linux-image-6.1.0-57-cloud-amd64")
        );
        assert_eq!(
            image_package("foo, linux-image-6.12.118+deb13-cloud-amd64 (= 6.12.118-1)").as_deref(),
            Some("linux-image-6.12.118+deb13-cloud-amd64")
        );
        assert_eq!(image_package("initramfs-tools"), None);
    }
}
