//! `pincer run`: confine one command for the length of its life.
//!
//! Order matters: the mission is parsed and resolved before anything is
//! loaded (a bad mission changes nothing), the agent's grants and cgroup are in
//! the kernel before the command exists, and the command joins its cgroup in
//! the child between `fork` and `exec`, so not one instruction of it runs
//! unconfined. Whatever happens afterwards, the cgroup, the grants and the
//! programs go away with `pincer run`.

use std::{
    ffi::OsString,
    fs::OpenOptions,
    io::{self, IsTerminal},
    os::fd::AsRawFd,
    path::PathBuf,
    process::ExitStatus,
};

use aya::maps::{MapData, RingBuf};
use nix::{
    sys::signal::{Signal, kill},
    unistd::Pid,
};
use pincer_common::{Agent, agent_flags, mode};
use tokio::{
    io::unix::AsyncFd,
    signal::unix::{SignalKind, signal},
};

use crate::{
    audit::{AuditError, AuditLog},
    cgroup::{self, AgentCgroup, CgroupError},
    events::{self, Mounts},
    loader::{Enforcer, LoadError},
    mission::{Mission, MissionError},
};

/// Each `pincer run` loads its own programs and maps, so its one mission
/// always has the same slot.
const SLOT: u32 = 1;

/// What the programs do with an access the mission does not grant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// Deny with `EACCES` and audit.
    Enforce,
    /// Allow, and audit what would have been denied.
    Audit,
}

/// Options of `pincer run`.
#[derive(Debug)]
pub struct RunOptions {
    /// The mission file.
    pub mission: PathBuf,
    /// Enforce or audit.
    pub mode: Mode,
    /// Audit log file (standard error when `None`).
    pub audit: Option<PathBuf>,
    /// Audit granted accesses too.
    pub log_allowed: bool,
    /// The command and its arguments.
    pub command: Vec<OsString>,
}

/// Errors of `pincer run` (the command's own failures are its exit status).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The mission is invalid or cannot be resolved.
    #[error(transparent)]
    Mission(#[from] MissionError),
    /// The agent cgroup could not be set up.
    #[error(transparent)]
    Cgroup(#[from] CgroupError),
    /// The programs could not be loaded or written.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The audit log failed.
    #[error(transparent)]
    Audit(#[from] AuditError),
    /// No command was given.
    #[error("no command to run: give it after `--`")]
    NoCommand,
    /// The command could not be started.
    #[error("failed to start {program:?}")]
    Spawn {
        /// The program.
        program: OsString,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The event loop failed.
    #[error("failed to supervise the command")]
    Supervise(#[source] io::Error),
}

impl RunError {
    /// The exit status `pincer run` reports for this error: 127 when the
    /// command does not exist, 126 when it cannot be executed (as shells do),
    /// 125 when pincer itself failed.
    pub fn exit_code(&self) -> i32 {
        match self {
            RunError::Spawn { source, .. } if source.kind() == io::ErrorKind::NotFound => 127,
            RunError::Spawn { .. } => 126,
            _ => 125,
        }
    }
}

/// Runs the command confined by the mission and returns its exit status.
pub fn run(options: &RunOptions) -> Result<i32, RunError> {
    if options.command.is_empty() {
        return Err(RunError::NoCommand);
    }
    // Catch the forwarded signals before anything exists that must be cleaned
    // up: a SIGTERM from here on is passed to the command (queued until it
    // has started) instead of killing us with the cgroup and grants in place.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(RunError::Supervise)?;
    let forwarded = {
        let _guard = runtime.enter();
        Forwarded::new().map_err(RunError::Supervise)?
    };

    let mission = Mission::from_file(&options.mission)?;
    let grants = mission.resolve(SLOT)?;
    let mut audit = AuditLog::open(options.audit.as_deref(), &mission.name)?;
    let root = cgroup::cgroup2_mount()?;
    for stale in cgroup::sweep_stale(&root) {
        tracing::info!(cgroup = %stale.display(), "removed a stale agent cgroup");
    }

    let mut enforcer = Enforcer::load()?;
    let events = enforcer.take_events()?;
    enforcer.add_grants(&grants)?;
    let cgroup = AgentCgroup::create(&root, &cgroup::run_cgroup_name(std::process::id()))?;
    let agent = Agent {
        slot: SLOT,
        mode: match options.mode {
            Mode::Enforce => mode::ENFORCE,
            Mode::Audit => mode::AUDIT,
        },
        flags: if options.log_allowed {
            agent_flags::REPORT_ALLOWED
        } else {
            0
        },
        _pad: 0,
    };
    enforcer.add_agent(cgroup.id(), agent)?;
    tracing::info!(
        mission = %mission.name,
        cgroup = %cgroup.path().display(),
        grants = grants.inode.len() + grants.names.len(),
        "agent confined"
    );

    let outcome = runtime.block_on(supervise(
        &options.command,
        &cgroup,
        events,
        forwarded,
        &mut audit,
    ));

    // Tear down in every case: stragglers first, so nothing runs after its
    // grants are gone, then the kernel state, then the cgroup.
    cgroup.kill_all();
    let unconfine = enforcer
        .remove_agent(cgroup.id())
        .and_then(|()| enforcer.remove_slot(SLOT));
    drop(enforcer);
    let removed = cgroup.remove();
    let status = outcome?;
    unconfine?;
    removed?;
    Ok(exit_code(status))
}

/// Starts the command inside the cgroup, forwards signals, audits events
/// until it exits.
async fn supervise(
    command: &[OsString],
    cgroup: &AgentCgroup,
    events: RingBuf<MapData>,
    mut forwarded: Forwarded,
    audit: &mut AuditLog,
) -> Result<ExitStatus, RunError> {
    let mounts = Mounts::load();
    let procs = OpenOptions::new()
        .write(true)
        .open(cgroup.procs_path())
        .map_err(|source| CgroupError::Io {
            path: cgroup.procs_path(),
            source,
        })?;
    let procs_fd = procs.as_raw_fd();
    let mut child = tokio::process::Command::new(&command[0]);
    child.args(&command[1..]);
    // SAFETY: only async-signal-safe calls between fork and exec: one write(2).
    unsafe {
        child.pre_exec(move || {
            // "0" moves the writing process itself into the cgroup.
            if libc::write(procs_fd, b"0".as_ptr().cast(), 1) != 1 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = child.spawn().map_err(|source| RunError::Spawn {
        program: command[0].clone(),
        source,
    })?;
    drop(procs);
    let pid = child.id().map(|id| Pid::from_raw(id as i32));

    // SAFETY: the ring buffer owns its descriptor and keeps it open for as
    // long as it is registered.
    let mut events =
        unsafe { AsyncFd::register(events) }.map_err(|e| RunError::Supervise(e.into()))?;
    loop {
        tokio::select! {
            status = child.wait() => {
                let status = status.map_err(RunError::Supervise)?;
                drain(events.get_mut(), audit, &mounts)?;
                return Ok(status);
            }
            ready = events.readable_mut() => {
                let mut guard = ready.map_err(RunError::Supervise)?;
                drain(guard.get_inner_mut(), audit, &mounts)?;
                guard.clear_ready();
            }
            signal = forwarded.recv() => {
                if let (Some(signal), Some(pid)) = (signal, pid) {
                    // The child may have exited a moment ago; that is fine.
                    let _ = kill(pid, signal);
                }
            }
        }
    }
}

/// Audits every event waiting in the ring buffer.
fn drain(
    ring: &mut RingBuf<MapData>,
    audit: &mut AuditLog,
    mounts: &Mounts,
) -> Result<(), RunError> {
    while let Some(item) = ring.next() {
        let Some(event) = events::parse(&item) else {
            tracing::warn!(len = item.len(), "dropped a short event record");
            continue;
        };
        drop(item);
        audit.record(&events::decision(&event, mounts))?;
    }
    Ok(())
}

/// Signals `pincer run` passes on to the command. All are caught, so their
/// default action (dying without cleaning up) never applies to us.
struct Forwarded {
    streams: Vec<(Signal, tokio::signal::unix::Signal)>,
    /// On a terminal, Ctrl-C and Ctrl-\ already reach the command (it is in
    /// our foreground process group): passing them on would deliver them
    /// twice, so they are only absorbed.
    interactive: bool,
}

impl Forwarded {
    fn new() -> io::Result<Self> {
        let kinds = [
            (Signal::SIGTERM, SignalKind::terminate()),
            (Signal::SIGHUP, SignalKind::hangup()),
            (Signal::SIGINT, SignalKind::interrupt()),
            (Signal::SIGQUIT, SignalKind::quit()),
            (Signal::SIGUSR1, SignalKind::user_defined1()),
            (Signal::SIGUSR2, SignalKind::user_defined2()),
        ];
        let mut streams = Vec::with_capacity(kinds.len());
        for (sig, kind) in kinds {
            streams.push((sig, signal(kind)?));
        }
        Ok(Self {
            streams,
            interactive: io::stdin().is_terminal(),
        })
    }

    /// The next signal to pass on; `None` for one that is only absorbed.
    async fn recv(&mut self) -> Option<Signal> {
        let received = std::future::poll_fn(|cx| {
            for (sig, stream) in &mut self.streams {
                if stream.poll_recv(cx).is_ready() {
                    return std::task::Poll::Ready(*sig);
                }
            }
            std::task::Poll::Pending
        })
        .await;
        let absorbed = self.interactive && matches!(received, Signal::SIGINT | Signal::SIGQUIT);
        (!absorbed).then_some(received)
    }
}

/// The exit status a shell would report: the code, or 128 + the signal.
fn exit_code(status: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(125)
}
