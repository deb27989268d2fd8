//! Booting a test kernel in QEMU and running a script in it.

use std::{
    fs,
    io::{BufRead, BufReader, Read},
    path::Path,
    process::{Child, Command, Stdio},
    sync::Mutex,
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};

use crate::{
    binaries, ebpf,
    initramfs::Initramfs,
    kernels::Kernel,
    process::shell_quote,
    rootfs::{self, DebianRoot, Rootfs},
    say, setup,
};

/// What `/init` prints after the script; never shown to the sink.
const MARKER: &str = "PINCER-VM-EXIT ";

/// `lsm=` must name bpf, which the distribution kernels leave out by default.
/// A soft lockup panics at once with every CPU's backtrace (`loglevel=5`
/// lets the backtraces through to the console): a hung guest then fails
/// its run in seconds, saying where, instead of at the VM timeout.
const APPEND: &str = "console=ttyS0 lsm=lockdown,capability,bpf loglevel=5 \
                      softlockup_panic=1 softlockup_all_cpu_backtrace=1 panic=-1 rdinit=/init";

/// How long QEMU may take to exit once the script has reported its status.
const POWEROFF_GRACE: Duration = Duration::from_secs(30);

/// Where a guest's console lines go (already without `\r` and escapes).
pub type Sink<'a> = &'a (dyn Fn(&str) + Sync);

/// Memory of the busybox guest, whose whole root lives in it.
const MEMORY_MIB: u32 = 1024;

/// Memory of the Debian guest: compilers and node want more than busybox,
/// and the root's files are read through the page cache.
const DEBIAN_MEMORY_MIB: u32 = 2048;

/// Built binaries packed into an initramfs (and the Debian root when that
/// guest is asked for), ready to boot any number of VMs, one after the other
/// or side by side.
pub struct Guest {
    initramfs: Initramfs,
    debian: Option<DebianRoot>,
}

/// Makes sure the kernels, tools and root are present, builds the eBPF
/// object and the guest binaries (unless `build` is false: then whatever was
/// built before is used), and packs them.
pub fn prepare(kernels: &[Kernel], build: bool, rootfs: Rootfs) -> Result<Guest> {
    let mut guests = prepare_roots(kernels, build, &[rootfs])?;
    Ok(guests.remove(0))
}

/// Like [`prepare`], for a guest of each root in `roots` (in that order),
/// building the binaries once.
pub fn prepare_roots(kernels: &[Kernel], build: bool, roots: &[Rootfs]) -> Result<Vec<Guest>> {
    let binaries = prepare_binaries(kernels, build)?;
    roots
        .iter()
        .map(|&rootfs| Guest::pack(&binaries, rootfs))
        .collect()
}

/// Makes sure the kernels and tools are present and builds the eBPF object
/// and the guest binaries (unless `build` is false: then whatever was built
/// before is used).
pub fn prepare_binaries(kernels: &[Kernel], build: bool) -> Result<Vec<binaries::Binary>> {
    for &kernel in kernels {
        setup::ensure_vm(kernel)?;
    }
    if build {
        let object = ebpf::build()?;
        return binaries::build(&object);
    }
    let found = binaries::existing()?;
    say!(
        "not building; using {} binaries found in the static target directory",
        found.len()
    );
    Ok(found)
}

/// Builds everything and runs `script` in a VM booting `kernel`; returns the
/// script's exit status.
pub fn run_vm(
    kernel: Kernel,
    rootfs: Rootfs,
    script: &str,
    timeout: Duration,
    sink: Sink,
) -> Result<i32> {
    prepare(&[kernel], true, rootfs)?.run(kernel, script, timeout, sink)
}

/// What the console told us.
#[derive(Default)]
struct Console {
    exit: Option<i32>,
    exit_seen_at: Option<Instant>,
    panicked: bool,
}

impl Guest {
    /// Packs `binaries` for guests of `rootfs`, building the Debian root
    /// first when that is the root.
    pub fn pack(binaries: &[binaries::Binary], rootfs: Rootfs) -> Result<Guest> {
        let debian = match rootfs {
            Rootfs::Busybox => None,
            Rootfs::Debian => Some(rootfs::ensure_debian()?),
        };
        Ok(Guest {
            initramfs: Initramfs::build(binaries, rootfs)?,
            debian,
        })
    }

    /// Boots `kernel`, runs `script` with `sh` as root, streams the console
    /// to `sink` and returns the script's exit status. Fails if the guest
    /// panics, powers off without a status or outlives `timeout`.
    pub fn run(&self, kernel: Kernel, script: &str, timeout: Duration, sink: Sink) -> Result<i32> {
        let initrd = self.initramfs.with_script(script)?;
        let mut cmd = Command::new("qemu-system-x86_64");
        let memory = if self.debian.is_some() {
            DEBIAN_MEMORY_MIB
        } else {
            MEMORY_MIB
        };
        // KVM guests hang on these hosts: TCG is slower but dependable.
        // A host thread per vCPU. A rare guest panic (`Oops: int3` at a
        // hook's patch site while a trampoline is attached or detached) may
        // come from one vCPU running a stale translation of text the other
        // just patched; running both on one thread (`thread=single`) is the
        // candidate fix, not yet measured over a whole run. Meanwhile the
        // test runner recognises that panic and boots the guest again from
        // the test it interrupted (`PatchSiteFault` in test.rs).
        cmd.args(["-accel", "tcg", "-cpu", "max", "-smp", "2", "-m"])
            .arg(memory.to_string());
        if let Some(debian) = &self.debian {
            // NVMe because both kernels have its driver built in. With
            // `snapshot=on` the boot's writes go to a temporary file that
            // QEMU deletes: the cached image is opened read-only, and guests
            // booted side by side share it.
            let mut drive = std::ffi::OsString::from(
                "if=none,id=root,format=raw,snapshot=on,cache=unsafe,file=",
            );
            drive.push(&debian.image);
            cmd.arg("-drive")
                .arg(drive)
                .args(["-device", "nvme,drive=root,serial=pincer-root"]);
        }
        cmd.args(["-nographic", "-no-reboot", "-nic", "none", "-kernel"])
            .arg(kernel.vmlinuz())
            .arg("-initrd")
            .arg(&*initrd)
            .args(["-append", APPEND])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        say!(
            "[{kernel}] booting Linux {kernel} (timeout {} s)",
            timeout.as_secs()
        );
        let started = Instant::now();
        let mut child = cmd.spawn().context("starting qemu-system-x86_64")?;
        let stdout = child.stdout.take().expect("piped");
        let stderr = child.stderr.take().expect("piped");
        let console = Mutex::new(Console::default());

        let (status, timed_out) = thread::scope(|s| {
            s.spawn(|| read_console(stdout, &console, sink));
            s.spawn(|| {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    sink(&format!("qemu: {line}"));
                }
            });
            wait(&mut child, started + timeout, &console)
        });
        let elapsed = started.elapsed().as_secs_f64();
        let console = console
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner);

        if let Some(code) = console.exit {
            say!("[{kernel}] script exited with status {code} ({elapsed:.1} s)");
            return Ok(code);
        }
        if timed_out {
            bail!(
                "[{kernel}] the VM did not finish within {} s; killed it",
                timeout.as_secs()
            );
        }
        if console.panicked {
            bail!("[{kernel}] the guest kernel panicked ({elapsed:.1} s)");
        }
        bail!(
            "[{kernel}] the guest stopped without reporting the script's exit status \
             (qemu: {}, {elapsed:.1} s)",
            status.map_or("status unknown".to_owned(), |s| s.to_string())
        )
    }
}

/// Waits for QEMU, killing it at the deadline or when it lingers after the
/// script has finished. Returns its status and whether it timed out.
fn wait(
    child: &mut Child,
    deadline: Instant,
    console: &Mutex<Console>,
) -> (Option<std::process::ExitStatus>, bool) {
    let mut timed_out = false;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return (Some(status), timed_out),
            Ok(None) => {}
            // The readers only finish once QEMU is gone: never leave it running.
            Err(_) => {
                let _ = child.kill();
                return (child.wait().ok(), timed_out);
            }
        }
        let now = Instant::now();
        let lingering = console
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .exit_seen_at
            .is_some_and(|at| now > at + POWEROFF_GRACE);
        if (now >= deadline && !timed_out) || lingering {
            timed_out = !lingering;
            let _ = child.kill();
        }
        thread::sleep(Duration::from_millis(100));
    }
}

/// The firmware's last line before the kernel starts.
const FIRMWARE_DONE: &str = "Booting from ROM";

/// Firmware lines held back at most, in case its last line never comes.
const FIRMWARE_LINES: usize = 20;

fn read_console(stdout: impl Read, console: &Mutex<Console>, sink: Sink) {
    let mut reader = BufReader::new(stdout);
    let mut raw = Vec::new();
    // The firmware's banner is noise, shown only if the kernel never starts.
    let mut firmware = Some(Vec::new());
    loop {
        raw.clear();
        match reader.read_until(b'\n', &mut raw) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let mut text = String::from_utf8_lossy(&raw);
        if let Some(held) = &mut firmware {
            if let Some(at) = text.find(FIRMWARE_DONE) {
                firmware = None;
                // The guest's first line follows on the same line, after the
                // firmware's dots and a terminal reset.
                let rest = text[at + FIRMWARE_DONE.len()..].trim_start_matches('.');
                if clean(rest).is_empty() {
                    continue;
                }
                text = rest.to_owned().into();
            } else {
                if held.len() < FIRMWARE_LINES {
                    held.push(clean(&text));
                    continue;
                }
                for l in held.drain(..) {
                    sink(&l);
                }
                firmware = None;
            }
        }
        let line = clean(&text);
        if line.contains("Kernel panic") {
            console
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .panicked = true;
        }
        if let Some(at) = line.find(MARKER) {
            let code = line[at + MARKER.len()..]
                .split_whitespace()
                .next()
                .and_then(|w| w.parse().ok());
            if let Some(code) = code {
                let mut c = console
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                c.exit = Some(code);
                c.exit_seen_at = Some(Instant::now());
                // Kernel messages can land on the same line before it.
                let before = line[..at].trim_end();
                if !before.is_empty() {
                    sink(before);
                }
                continue;
            }
        }
        // Lines made only of terminal control sequences vanish.
        if line.is_empty() && text.trim_end_matches(['\r', '\n']).contains('\x1b') {
            continue;
        }
        let done = console
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .exit
            .is_some();
        if done && line.contains("reboot: Power down") {
            continue;
        }
        sink(&line);
    }
    for l in firmware.unwrap_or_default() {
        sink(&l);
    }
}

/// Drops the line ending, `\r`, escape sequences and other control
/// characters from one console line.
fn clean(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\x1b' => {
                if chars.next_if_eq(&'[').is_some() {
                    // A CSI sequence ends with a byte in `@`..=`~`.
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                } else {
                    chars.next();
                }
            }
            '\t' => out.push(c),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// `cargo xtask vm`: runs a script file or a command; the exit status is the
/// guest's.
pub fn command(
    kernel: Kernel,
    rootfs: Rootfs,
    script: Option<&Path>,
    command: &[String],
    timeout: Duration,
    no_build: bool,
) -> Result<u8> {
    let text = match (script, command) {
        (Some(path), _) => {
            fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?
        }
        (None, []) => bail!("nothing to run: give --script FILE or -- COMMAND [ARGS...]"),
        (None, words) => format!(
            "exec {}\n",
            words
                .iter()
                .map(|w| shell_quote(w))
                .collect::<Vec<_>>()
                .join(" ")
        ),
    };
    let guest = prepare(&[kernel], !no_build, rootfs)?;
    let code = guest.run(kernel, &text, timeout, &|line| println!("{line}"))?;
    // A shell's status always fits in a byte.
    Ok(u8::try_from(code).unwrap_or(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shows_the_firmware_only_when_the_kernel_never_starts() {
        let lines = Mutex::new(Vec::new());
        let console = Mutex::new(Console::default());
        read_console(&b"SeaBIOS\r\nboot failed\r\n"[..], &console, &|l| {
            lines.lock().unwrap().push(l.to_owned());
        });
        assert_eq!(*lines.lock().unwrap(), ["SeaBIOS", "boot failed"]);
    }

    #[test]
    fn cleans_console_lines() {
        assert_eq!(clean("hello\r\n"), "hello");
        assert_eq!(clean("\x1b[2J\x1b[01;01Hboot\x1bc"), "boot");
        assert_eq!(clean("a\tb"), "a\tb");
    }

    #[test]
    fn finds_the_marker_and_hides_it() {
        let input: &[u8] =
            b"SeaBIOS\r\nBooting from ROM..\x1bc\x1b[?7l\x1b[2J.first\r\n\x1b[2J\r\n\
            [  1.0] x PINCER-VM-EXIT 3\r\nPINCER-VM-EXIT not-a-status\n\
            [  1.1] reboot: Power down\nlast";
        let console = Mutex::new(Console::default());
        let lines = Mutex::new(Vec::new());
        read_console(input, &console, &|l| {
            lines.lock().unwrap().push(l.to_owned());
        });
        assert_eq!(console.lock().unwrap().exit, Some(3));
        assert_eq!(
            *lines.lock().unwrap(),
            [".first", "[  1.0] x", "PINCER-VM-EXIT not-a-status", "last"]
        );
    }
}
