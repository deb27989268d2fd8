//! The watchdog: what keeps enforcing when the twin dies.
//!
//! `pincer run` forks it right after the programs are loaded and attached,
//! so it holds the same BPF objects: as long as it lives, the programs stay
//! attached even if the twin is killed (even with `SIGKILL`). It waits on a
//! pipe whose other end only the twin holds. When the pipe closes without
//! the twin's "done" byte, the twin is gone: the watchdog zeroes the
//! heartbeat (from then on every ungranted access is refused at once, and a
//! stopped task that is continued meets `EACCES`), continues every task of
//! the agent's cgroup so none stays parked, then keeps the programs attached
//! until the agent's last process has exited, removes the cgroup and exits.
//!
//! It runs in a session of its own and ignores the terminal's and the usual
//! termination signals: it ends with the twin's word or with the agent.

use std::{
    fs,
    io::{self, Read, Write},
    os::fd::OwnedFd,
    path::{Path, PathBuf},
    thread,
    time::Duration,
};

use nix::{
    fcntl::OFlag,
    sys::signal::{SigHandler, SigSet, SigmaskHow, Signal, kill, signal, sigprocmask},
    unistd::{ForkResult, Pid, fork, pipe2, setsid},
};

use crate::loader::{Enforcer, Kernel, runs};

/// The byte the twin writes when it has cleaned up and the watchdog may go.
const DONE: u8 = b'd';
/// The byte the twin writes when it has cleaned up and left the programs
/// idle for the next run: eight bytes of expiry (Unix seconds, little
/// endian) follow, and the watchdog removes the idle set then
/// ([`crate::loader::runs`]).
const LINGER: u8 = b'l';
/// How long after the twin's death the watchdog keeps continuing tasks
/// (a task may have been parking while the heartbeat was zeroed).
const RESUME_FOR: Duration = Duration::from_secs(3);

/// What the watchdog looks after.
pub enum Watched {
    /// `pincer run`'s one agent cgroup: its tasks are continued, and the
    /// programs kept attached until the cgroup is empty, then it is removed,
    /// and so are the run's pins (`pins`), which kept the programs attached
    /// should the watchdog die too.
    Run {
        /// The agent cgroup.
        cgroup: PathBuf,
        /// The run's pins, if it has them.
        pins: Option<PathBuf>,
    },
    /// `pincer daemon`'s parked tasks, found in the kernel's pending table:
    /// they are continued (and meet `EACCES`); the pins keep the programs.
    /// `release` is the daemon's lock descriptor, closed in the watchdog so
    /// the lock ends with the daemon.
    Parked {
        /// A descriptor the watchdog must not keep.
        release: Option<std::os::fd::RawFd>,
    },
}

/// The twin's end of the watchdog's pipe.
pub struct Watchdog {
    pipe: Option<fs::File>,
    pid: Pid,
}

impl Watchdog {
    /// Forks the watchdog for an agent cgroup.
    ///
    /// # Safety
    ///
    /// The process must have a single thread: the child continues in a copy
    /// of it and uses the copied `enforcer`.
    pub unsafe fn spawn(enforcer: &mut Enforcer, watched: Watched) -> io::Result<Watchdog> {
        // Close-on-exec: the agent, spawned later, must not inherit the
        // twin's end, or the pipe would never close while the agent lives.
        let (read, write) = pipe2(OFlag::O_CLOEXEC)?;
        // SAFETY: single-threaded (the caller's contract), so the child may
        // run arbitrary code; it never returns into the caller's frames.
        match unsafe { fork() }? {
            ForkResult::Child => {
                drop(write);
                watch(read, enforcer, watched)
            }
            ForkResult::Parent { child } => {
                drop(read);
                Ok(Watchdog {
                    pipe: Some(fs::File::from(write)),
                    pid: child,
                })
            }
        }
    }

    /// The watchdog's pid.
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// Tells the watchdog the twin cleaned up: it exits without touching
    /// anything.
    ///
    /// Its exit closes the last references to the programs, and detaching
    /// each LSM program from its hook waits for an RCU-tasks grace period
    /// inside the kernel: about a tenth of a second per hook even on real
    /// hardware, seconds for all of them under emulation. The agent is
    /// already gone and unconfined in the maps, so that wait is left to the
    /// watchdog instead of delaying `pincer run`'s own exit; the programs are
    /// gone a moment later (`pincer doctor` and the tests check that they
    /// are).
    pub fn done(mut self) {
        if let Some(mut pipe) = self.pipe.take() {
            let _ = pipe.write_all(&[DONE]);
        }
    }

    /// Tells the watchdog the twin cleaned up and left the programs idle
    /// until `expiry` (Unix seconds) under the watchdog's name: it removes
    /// them then, unless a run took them over, and exits.
    pub fn linger_until(mut self, expiry: u64) {
        if let Some(mut pipe) = self.pipe.take() {
            let mut message = [0u8; 9];
            message[0] = LINGER;
            message[1..].copy_from_slice(&expiry.to_le_bytes());
            let _ = pipe.write_all(&message);
        }
    }
}

/// The watchdog's life. Never returns.
fn watch(pipe: OwnedFd, enforcer: &mut Enforcer, watched: Watched) -> ! {
    let twin = nix::unistd::getppid().as_raw() as u32;
    if let Watched::Parked { release: Some(fd) } = watched {
        // SAFETY: the watchdog's copy of a descriptor only the daemon uses.
        unsafe { libc::close(fd) };
    }
    let _ = setsid();
    // Let go of the terminal and of whatever pipes `pincer run` was given:
    // whoever reads them waits for the agent, not for the watchdog.
    if let Ok(null) = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        for fd in 0..3 {
            // SAFETY: dup2 onto the standard descriptors of this process.
            unsafe { libc::dup2(std::os::fd::AsRawFd::as_raw_fd(&null), fd) };
        }
    }
    for sig in [
        Signal::SIGINT,
        Signal::SIGQUIT,
        Signal::SIGHUP,
        Signal::SIGTERM,
        Signal::SIGTSTP,
        Signal::SIGTTIN,
        Signal::SIGTTOU,
        Signal::SIGUSR1,
        Signal::SIGUSR2,
    ] {
        // SAFETY: SIG_IGN installs no handler code.
        let _ = unsafe { signal(sig, SigHandler::SigIgn) };
    }
    let _ = sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None);

    let mut pipe = fs::File::from(pipe);
    let mut byte = [0u8; 1];
    let word = loop {
        match pipe.read(&mut byte) {
            Ok(0) => break None,
            Ok(_) => break Some(byte[0]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break None,
        }
    };
    match word {
        Some(DONE) => exit(0),
        Some(LINGER) => {
            let mut expiry = [0u8; 8];
            if pipe.read_exact(&mut expiry).is_ok() {
                linger(u64::from_le_bytes(expiry));
            }
            exit(0)
        }
        _ => {}
    }

    // The twin is gone. No heartbeat: nothing parks any more, and a task
    // continued while parked gets EACCES. Its guard entry goes with it (the
    // guard map is every pincer's, and outlives this process).
    let _ = enforcer.heartbeat(0, 0);
    let _ = enforcer.unguard(twin);
    let started = std::time::Instant::now();
    let (cgroup, pins) = match watched {
        Watched::Run { cgroup, pins } => (cgroup, pins),
        Watched::Parked { .. } => {
            continue_parked(enforcer, RESUME_FOR, false);
            let _ = enforcer.unguard(std::process::id());
            exit(0)
        }
    };
    while started.elapsed() < RESUME_FOR {
        for pid in procs(&cgroup) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGCONT);
        }
        thread::sleep(Duration::from_millis(200));
    }
    // Keep the programs attached while any agent process lives.
    while populated(&cgroup) {
        for pid in procs(&cgroup) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGCONT);
        }
        thread::sleep(Duration::from_millis(500));
    }
    let _ = fs::remove_dir(&cgroup);
    if let Some(pins) = pins {
        let _ = crate::loader::unpin(&pins);
    }
    let _ = enforcer.unguard(std::process::id());
    exit(0)
}

/// Waits out the linger time of the programs the twin left idle, then
/// removes them unless a run took them over. The twin ended cleanly, so
/// nothing else needs the watchdog: it lets go of every descriptor first
/// (the pins alone keep the idle programs, so removing the pins, as
/// `pincer daemon --uninstall` does, detaches them at once), and names
/// itself `pincer-idle` for whoever lists processes.
fn linger(expiry: u64) {
    // SAFETY: closes this process's own descriptors above the standard
    // ones; nothing here uses them any more.
    unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) };
    let _ = nix::sys::prctl::set_name(c"pincer-idle");
    runs::sleep_until(expiry);
    let pool = runs::Pool::host();
    let _ = pool.reclaim(&pool.idle_dir(expiry, std::process::id()));
}

/// Continues every task in the kernel's pending table, again and again for
/// `window` (a task may have been parking as the heartbeat went stale), or
/// only until the table is empty. With no heartbeat, each meets `EACCES`.
pub fn continue_parked(enforcer: &mut Enforcer, window: Duration, until_empty: bool) {
    let started = std::time::Instant::now();
    while started.elapsed() < window {
        let pending = enforcer.pending().unwrap_or_default();
        if until_empty && pending.is_empty() {
            return;
        }
        for (tid, _) in pending {
            let _ = kill(Pid::from_raw(tid as i32), Signal::SIGCONT);
        }
        thread::sleep(Duration::from_millis(50));
    }
}

fn procs(cgroup: &Path) -> Vec<i32> {
    crate::cgroup::processes_in(cgroup)
        .into_iter()
        .filter_map(|pid| i32::try_from(pid).ok())
        .collect()
}

fn populated(cgroup: &Path) -> bool {
    match fs::read_to_string(cgroup.join("cgroup.events")) {
        Ok(events) => events.lines().any(|l| l == "populated 1"),
        Err(_) => false,
    }
}

/// Leaves without running the parent's destructors: the copies of its
/// state (the agent cgroup, the audit log) belong to the twin.
fn exit(code: i32) -> ! {
    let _ = io::stderr().flush();
    // SAFETY: _exit ends the process at once; nothing else runs.
    unsafe { libc::_exit(code) }
}
