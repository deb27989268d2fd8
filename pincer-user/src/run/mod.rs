//! `pincer run`: confine one command for the length of its life.
//!
//! Order matters: the mission is parsed and resolved before anything is
//! loaded (a bad mission changes nothing), the agent's grants and cgroup are in
//! the kernel before the command exists, and the command joins its cgroup in
//! the child between `fork` and `exec`, so not one instruction of it runs
//! unconfined. Whatever happens afterwards, the cgroup, the grants and the
//! programs go away with `pincer run`.

mod descriptors;
mod own;
mod socket;

use std::{
    ffi::OsString,
    fs::OpenOptions,
    io::{self, IsTerminal},
    os::fd::AsRawFd,
    path::{Path, PathBuf},
    process::ExitStatus,
    sync::Arc,
};

use nix::{
    sys::signal::{SigSet, SigmaskHow, Signal, kill, sigprocmask},
    unistd::Pid,
};
use pincer_model::{
    audit::{AuditKey, AuditLog, Descriptor, Record},
    control::{ControlRequest, ControlResponse, RunOwn},
    labels,
    mission::{Mission, MissionError, Mode},
    paths,
    toml_file::FileError,
};
use tokio::signal::unix::{SignalKind, signal};

use self::{descriptors::PassError, own::Own, socket::RunControl};
use crate::{
    cgroup::{self, AgentCgroup, CgroupError},
    control::{self, ControlError, ControlServer},
    loader::{
        self,
        runs::{Pool, RunPrograms},
    },
    procfs,
    twin::{self, Confinement, Service, TwinError, refusals},
    voters::{self, prompt::PromptBoard},
    watchdog::Watched,
};

/// Signals `pincer run` passes on to the command.
const FORWARDED: [Signal; 6] = [
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGINT,
    Signal::SIGQUIT,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
];

/// Options of `pincer run` (also its command line: the doc comments are the
/// help text).
#[derive(Debug, clap::Args)]
pub struct RunOptions {
    /// The mission file (TOML).
    #[arg(long, short = 'm', value_name = "FILE")]
    pub mission: PathBuf,
    /// What an access the mission does not grant does: `enforce` denies it
    /// at once, `audit` allows and logs it, `ask` parks the task and asks the
    /// voters. Default: the mission's `defaults.on_unknown`.
    #[arg(long, value_enum)]
    pub mode: Option<Mode>,
    /// The control socket. When a `pincer daemon` answers on it, the daemon
    /// confines the command (its programs, votes and audit log; this run
    /// loads nothing); otherwise this run listens on it for answers (`ask`).
    #[arg(long, env = paths::SOCKET_ENV, default_value = paths::DEFAULT_SOCKET)]
    pub socket: PathBuf,
    /// Append audit lines (JSON) to this file instead of standard error.
    #[arg(long, value_name = "FILE")]
    pub audit: Option<PathBuf>,
    /// Key file of the audit log's HMAC chain (default: the audit file's path
    /// + `.key`, created when missing); keep it out of the mission.
    #[arg(long, value_name = "FILE", requires = "audit")]
    pub audit_key: Option<PathBuf>,
    /// Also append every audit record to this file as an OCSF event (JSON
    /// lines, for a SIEM), outside the HMAC chain, which stays on the audit
    /// log.
    #[arg(long, value_name = "FILE")]
    pub siem: Option<PathBuf>,
    /// Audit granted accesses too (verbose).
    #[arg(long)]
    pub log_allowed: bool,
    /// Hand descriptor N (3 or above) to the command; every other one but
    /// standard input, output and error is closed (repeatable). What is
    /// passed is in the audit log.
    #[arg(long = "pass-fd", value_name = "N")]
    pub pass_fd: Vec<i32>,
    /// Add the profile of an agent program (its state, caches and settings;
    /// repeatable): `claude-code`, `codex`.
    #[arg(long = "profile", value_name = "NAME")]
    pub profiles: Vec<String>,
    /// How long the programs stay attached, idle, after a clean end, for
    /// the next `pincer run` to take over instead of loading them again
    /// (both start and end are then a fraction of a second); `0` detaches
    /// them at the end.
    #[arg(long, env = "PINCER_LINGER", value_name = "DURATION", default_value = "60s", value_parser = parse_linger)]
    pub linger: std::time::Duration,
    /// What the command is told of its refusals: `stderr` prints one line
    /// per refused object on standard error (at most once a minute each,
    /// ten lines in ten seconds) and lists the last hundred in
    /// `$TMPDIR/pincer-refusals`; `file` only lists them (for a full-screen
    /// program that a line on its terminal would disturb); `off` neither.
    #[arg(long, value_enum, default_value_t = TellMode::Stderr)]
    pub tell: TellMode,
    /// The command to confine and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

/// What `pincer run --tell` asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum TellMode {
    /// A line on standard error per refused object, and the list.
    Stderr,
    /// Only the list in the private temporary directory.
    File,
    /// Nothing.
    Off,
}

impl TellMode {
    /// What the twin is to tell, with the run's private directory.
    fn tell(self, tmp: Option<&Path>) -> refusals::Tell {
        refusals::Tell {
            stderr: self == TellMode::Stderr,
            dir: match self {
                TellMode::Off => None,
                _ => tmp.map(Path::to_owned),
            },
        }
    }
}

/// Errors of `pincer run` (the command's own failures are its exit status),
/// in the order a run can meet them.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// No command was given.
    #[error("no command to run: give it after `--`")]
    NoCommand,
    /// The mission is invalid, cannot be resolved, or its file cannot be
    /// found again for the daemon.
    #[error(transparent)]
    Mission(#[from] MissionError),
    /// A `--pass-fd` cannot be passed.
    #[error(transparent)]
    Pass(#[from] PassError),
    /// The control socket failed: asking the daemon on it, or opening
    /// this run's own.
    #[error(transparent)]
    Control(ControlError),
    /// The daemon refused or failed to confine the command.
    #[error("pincer daemon: {0}")]
    Daemon(String),
    /// The agent cgroup could not be set up.
    #[error(transparent)]
    Cgroup(#[from] CgroupError),
    /// The private temporary directory could not be made.
    #[error("failed to make the command's private temporary directory")]
    PrivateTmp(#[source] io::Error),
    /// An environment variable has an invalid value.
    #[error("environment variable {name}: {message}")]
    BadEnvironment {
        /// The variable.
        name: &'static str,
        /// What is wrong.
        message: String,
    },
    /// The twin or its service (the programs, the audit log, the control
    /// socket, the voters) failed.
    #[error(transparent)]
    Twin(TwinError),
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

/// Whatever the twin's service fails with stops the run as it is.
impl<E: Into<TwinError>> From<E> for RunError {
    fn from(error: E) -> Self {
        RunError::Twin(error.into())
    }
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
    // Hold the forwarded signals from here on: one that arrives before the
    // handlers exist waits instead of killing us with the cgroup and grants
    // in place. (Blocked, not handled, also because the watchdog is forked
    // below and must start from a single-threaded process.)
    let mut forwarded_set = SigSet::empty();
    for sig in FORWARDED {
        forwarded_set.add(sig);
    }
    sigprocmask(SigmaskHow::SIG_BLOCK, Some(&forwarded_set), None)
        .map_err(|e| RunError::Supervise(e.into()))?;
    let result = run_blocked(options, &forwarded_set);
    let _ = sigprocmask(SigmaskHow::SIG_UNBLOCK, Some(&forwarded_set), None);
    result
}

/// Whether a `pincer daemon` answers on `socket`. A socket that answers but
/// is not to be trusted is an error, never a daemon to hand the command to
/// (it could answer `ok` and leave the command unconfined) nor a reason to
/// go on quietly.
fn daemon_at(socket: &std::path::Path) -> Result<bool, RunError> {
    // A missing socket answers at once; only a live daemon has a status.
    if !socket.exists() {
        return Ok(false);
    }
    match control::call(socket, &ControlRequest::Status) {
        Ok(ControlResponse::Daemon { .. }) => Ok(true),
        Err(error @ ControlError::Untrusted { .. }) => Err(RunError::Control(error)),
        _ => Ok(false),
    }
}

fn run_blocked(options: &RunOptions, forwarded_set: &SigSet) -> Result<i32, RunError> {
    let mut mission = Mission::from_file(&options.mission)?;
    mission.add_profiles(&options.profiles)?;
    let inherited = descriptors::inherited(&options.pass_fd)?;
    for made in mission.make_dirs()? {
        tracing::info!(dir = %made.display(), "made a directory a grant names");
    }
    own::sweep();
    // Removed when this function returns, after the command and its cgroup.
    let own = Own::prepare(&mission).map_err(RunError::PrivateTmp)?;
    if daemon_at(&options.socket)? {
        return run_registered(options, &mission, &inherited, &own, forwarded_set);
    }
    // Resolved before anything is loaded: a mission that does not resolve
    // changes nothing.
    let grants = mission.resolve_with(twin::FIRST_SLOT, &own.grants())?;
    let mode = options.mode.unwrap_or(mission.on_unknown);
    let key = options.audit_key.clone().map_or_else(
        || AuditKey::default_for(options.audit.as_deref()),
        AuditKey::File,
    );
    let audit = UntilConfined(Some(
        AuditLog::open_with_key(options.audit.as_deref(), &mission.name, key)?
            .with_siem(options.siem.as_deref()),
    ));
    let root = cgroup::cgroup2_mount()?;
    for stale in cgroup::sweep_stale(&root) {
        tracing::info!(cgroup = %stale.display(), "removed a stale agent cgroup");
    }
    let pool = Pool::host();
    pool.sweep(&root);

    // What agents made stays evidence across a reboot: a snapshot of it
    // that was changed is refused before the programs are loaded.
    let store = labels::Store::at(Path::new(paths::STATE_DIR));
    let saved = store.read()?;
    tracing::trace!("loading");
    let RunPrograms {
        enforcer,
        pins,
        taken_over,
    } = pool.acquire(ring_bytes()?)?;
    tracing::debug!(taken_over, "programs ready");
    let cgroup = AgentCgroup::create(&root, &cgroup::run_cgroup_name(std::process::id()))?;
    let watched = Watched::Run {
        cgroup: cgroup.path().to_owned(),
        pins: pins.clone(),
    };
    // SAFETY: no thread has been started yet (the runtime comes next).
    let prepared = unsafe { Service::prepare(enforcer, watched) }?;
    // Bound after the fork, so the watchdog never holds the listening socket
    // (a dead twin's socket must refuse connections, not hang them).
    let control = match mode {
        // Discovery parks what no grant covers, and the owner reconsiders
        // the nodes on the socket.
        _ if mission.assets.iter().any(|a| a.found_in.is_some()) => {
            Some(ControlServer::bind(&options.socket).map_err(RunError::Control)?)
        }
        Mode::Ask => Some(ControlServer::bind(&options.socket).map_err(RunError::Control)?),
        _ => None,
    };
    let board = PromptBoard::new(terminal());
    let voters = voters::for_mission(&mission.vote, &board)?;

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(RunError::Supervise)?;
    let mut service = {
        let _entered = runtime.enter();
        Service::new(prepared, audit.take())?
    };
    // The saved labels the map lacks come back before the agent is
    // confined.
    let confined = service.twin().restore_labels(&saved).and_then(|restored| {
        tracing::debug!(restored, "labels restored from the snapshot");
        service.twin().confine(
            cgroup.id(),
            Confinement {
                name: mission.name.clone(),
                slot: twin::FIRST_SLOT,
                mode,
                report_allowed: options.log_allowed,
                // The run's command is the agent from its first instruction.
                from_exec: false,
                capabilities: mission.capabilities,
                // The command starts where this process runs.
                userns_home: procfs::userns_home(&[]),
                grants,
                voters,
                policy: mission.vote.policy.clone(),
                policy_set: mission.policy_set(),
                policy_roots: mission.policy_roots(),
                // The private temporary directory is the agent's own
                // place, as if it had made it.
                own_roots: mission
                    .own_roots()
                    .into_iter()
                    .chain(own.tmp().map(Path::to_owned))
                    .collect(),
                assets: pincer_model::assets::Assets::of(&mission),
                tell: options.tell.tell(own.tmp()),
            },
        )
    });
    let confined = confined.and_then(|()| {
        service.twin().audit(&Record::Descriptors {
            agent: &mission.name,
            fds: &inherited,
        })
    });
    let outcome = match confined {
        Ok(()) => {
            tracing::info!(
                mission = %mission.name,
                cgroup = %cgroup.path().display(),
                watchdog = service.watchdog_pid(),
                "agent confined"
            );
            runtime.block_on(async {
                let forwarded = Forwarded::new().map_err(RunError::Supervise)?;
                // Handlers are in place: let held signals through to them.
                sigprocmask(SigmaskHow::SIG_UNBLOCK, Some(forwarded_set), None)
                    .map_err(|e| RunError::Supervise(e.into()))?;
                let (commands, mut asked) = tokio::sync::mpsc::unbounded_channel();
                if let Some(control) = control {
                    let handler = Arc::new(RunControl {
                        board: Arc::clone(&board),
                        commands,
                    });
                    tokio::spawn(async move {
                        let Err(error) = control.serve(handler).await;
                        tracing::error!(%error, "the control socket failed");
                    });
                }
                if let Some(input) = terminal() {
                    let board = Arc::clone(&board);
                    std::thread::spawn(move || board.read_terminal(input));
                }
                supervise(options, &cgroup, &own, forwarded, &mut asked, &mut service).await
            })
        }
        Err(error) => Err(error.into()),
    };
    drop(runtime);
    tracing::trace!("agent done; tearing down");

    // Tear down in every case: nothing stays parked, stragglers go before
    // their grants, then the kernel state, then the cgroup.
    let stopped = service.stop();
    // In a log file only: on a terminal it would be noise after every run.
    if options.audit.is_some()
        && let Ok(counters) = service.twin().counters()
    {
        let _ = service.twin().audit(&Record::Counters { counters });
    }
    cgroup.kill_all();
    let released = service.twin().release(cgroup.id());
    if let Err(error) = service.twin().save_labels(&store) {
        tracing::warn!(%error, "cannot save the labels");
    }
    let failure = match (&outcome, &stopped, &released) {
        (Err(error), _, _) => Some(error.to_string()),
        (_, Err(error), _) | (_, _, Err(error)) => Some(error.to_string()),
        _ => None,
    };
    // Programs whose agent was released confine nobody now: the next run
    // may take them over (clearing every map first), whether or not the
    // command could start or its supervision failed. When the kernel state
    // could not be stopped or released, they go.
    let idle_until = match &pins {
        Some(pins) if stopped.is_ok() && released.is_ok() => {
            pool.shelve(pins, options.linger, service.watchdog_pid())
        }
        _ => None,
    };
    if let Some(pins) = &pins
        && idle_until.is_none()
        && let Err(error) = loader::unpin(pins)
    {
        tracing::warn!(%error, "cannot remove the run's pins");
    }
    if let Some(message) = failure {
        let _ = service.twin().audit_failure(&message);
    }
    service.finish(idle_until);
    tracing::trace!("programs released");
    let removed = cgroup.remove();
    tracing::trace!("torn down");
    let status = outcome?;
    stopped?;
    released?;
    removed?;
    Ok(exit_code(status))
}

/// The audit log until the twin takes it over. Dropped before that, pincer
/// failed before the agent was confined (the programs did not load, say):
/// the log records the failure and gets no clean close line.
struct UntilConfined(Option<AuditLog>);

impl UntilConfined {
    fn take(mut self) -> AuditLog {
        self.0.take().expect("taken once")
    }
}

impl Drop for UntilConfined {
    fn drop(&mut self) {
        if let Some(mut log) = self.0.take() {
            let _ = log.fail(
                "pincer run failed before the agent was confined (the error is on standard error)",
            );
        }
    }
}

/// `pincer run` with a daemon: the daemon confines the cgroup with the
/// mission (its programs, twin, votes and audit log serve the command), and
/// this process only starts the command in the cgroup, passes signals on
/// and releases the cgroup at the end. Parked requests are answered on the
/// daemon's socket (`pincer pending`, `pincer approve`).
fn run_registered(
    options: &RunOptions,
    mission: &Mission,
    inherited: &[Descriptor],
    own: &Own,
    forwarded_set: &SigSet,
) -> Result<i32, RunError> {
    if options.audit.is_some() || options.siem.is_some() {
        tracing::warn!(
            "a daemon confines this command: decisions go to the daemon's audit log \
             (and its OCSF export, when its configuration has one)"
        );
    }
    let root = cgroup::cgroup2_mount()?;
    let cgroup = AgentCgroup::create(&root, &cgroup::run_cgroup_name(std::process::id()))?;
    let relative = cgroup
        .path()
        .strip_prefix(&root)
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let mission_file = std::fs::canonicalize(&options.mission).map_err(|source| {
        MissionError::File(FileError::Io {
            kind: "mission file",
            path: options.mission.clone(),
            source,
        })
    })?;
    let register = ControlRequest::Register {
        cgroup: relative.clone(),
        mission: mission_file,
        mode: options.mode.map(|m| m.name().to_owned()),
        descriptors: inherited.to_vec(),
        profiles: options.profiles.clone(),
        own: RunOwn {
            tmp: own.tmp().map(Path::to_owned),
            terminal: own.terminal().map(Path::to_owned),
        },
    };
    match control::call(&options.socket, &register) {
        Ok(ControlResponse::Ok { message }) => {
            tracing::info!(%message, mission = %mission.name, "registered with the daemon");
        }
        Ok(ControlResponse::Error { message }) => {
            let _ = cgroup.remove();
            return Err(RunError::Daemon(message));
        }
        Ok(other) => {
            let _ = cgroup.remove();
            return Err(RunError::Daemon(format!("unexpected answer: {other:?}")));
        }
        Err(error) => {
            let _ = cgroup.remove();
            return Err(RunError::Control(error));
        }
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(RunError::Supervise)?;
    let outcome = runtime.block_on(async {
        let mut forwarded = Forwarded::new().map_err(RunError::Supervise)?;
        sigprocmask(SigmaskHow::SIG_UNBLOCK, Some(forwarded_set), None)
            .map_err(|e| RunError::Supervise(e.into()))?;
        let mut child = spawn_in(options, &cgroup, own)?;
        let pid = child.id().map(|id| Pid::from_raw(id as i32));
        loop {
            tokio::select! {
                status = child.wait() => return status.map_err(RunError::Supervise),
                signal = forwarded.recv() => {
                    if let (Some(signal), Some(pid)) = (signal, pid) {
                        let _ = kill(pid, signal);
                    }
                }
            }
        }
    });
    drop(runtime);
    cgroup.kill_all();
    let unregistered = control::call(
        &options.socket,
        &ControlRequest::Unregister { cgroup: relative },
    );
    let removed = cgroup.remove();
    let status = outcome?;
    // The command's status is what matters now: a daemon that cannot be
    // told finds the cgroup gone and forgets it by itself.
    match unregistered {
        Ok(ControlResponse::Ok { .. }) => {}
        Ok(other) => tracing::warn!(answer = ?other, "the daemon did not release the cgroup"),
        Err(error) => tracing::warn!(error = %error, "cannot tell the daemon the command ended"),
    }
    removed?;
    Ok(exit_code(status))
}

/// Starts the command as a child that joins `cgroup` between `fork` and
/// `exec`, so not one instruction of it runs outside, and that inherits no
/// descriptor but 0–2 and those passed.
fn spawn_in(
    options: &RunOptions,
    cgroup: &AgentCgroup,
    own: &Own,
) -> Result<tokio::process::Child, RunError> {
    let command = &options.command;
    let procs = OpenOptions::new()
        .write(true)
        .open(cgroup.procs_path())
        .map_err(|source| CgroupError::Io {
            path: cgroup.procs_path(),
            source,
        })?;
    let procs_fd = procs.as_raw_fd();
    let closed = descriptors::closed_ranges(&options.pass_fd);
    let mut child = tokio::process::Command::new(&command[0]);
    child.args(&command[1..]).envs(own.environment());
    // SAFETY: only async-signal-safe calls between fork and exec: write(2)
    // and close_range(2).
    unsafe {
        child.pre_exec(move || {
            // "0" moves the writing process itself into the cgroup.
            if libc::write(procs_fd, b"0".as_ptr().cast(), 1) != 1 {
                return Err(io::Error::last_os_error());
            }
            descriptors::close_on_exec(&closed)
        });
    }
    let child = child.spawn().map_err(|source| RunError::Spawn {
        program: command[0].clone(),
        source,
    })?;
    drop(procs);
    Ok(child)
}

/// The longest `--linger`: idle programs are for the next run of a
/// session, not for days.
/// How often a run checks what the kernel holds
/// ([`crate::twin::integrity`]); the first check comes this long after the
/// command starts, so that a short command pays nothing for it.
const CHECK_EVERY: std::time::Duration = std::time::Duration::from_secs(30);
const MAX_LINGER: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// Parses `--linger`: a duration such as `60s` or `10m`, at most a day.
fn parse_linger(text: &str) -> Result<std::time::Duration, String> {
    pincer_model::duration::parse(text, std::time::Duration::ZERO..=MAX_LINGER)
}

/// Size of the event ring buffer: `PINCER_RING_BYTES` (a power of two of
/// at least 4096), or the built-in 256 KiB. A small ring fills sooner under
/// bursts of requests; everything that does not fit is denied.
fn ring_bytes() -> Result<u32, RunError> {
    let Some(text) = std::env::var_os("PINCER_RING_BYTES") else {
        return Ok(pincer_common::EVENTS_BYTES);
    };
    text.to_str()
        .and_then(|t| t.parse::<u32>().ok())
        .filter(|n| n.is_power_of_two() && *n >= 4096)
        .ok_or_else(|| RunError::BadEnvironment {
            name: "PINCER_RING_BYTES",
            message: format!("{text:?} is not a power of two of at least 4096"),
        })
}

/// The controlling terminal, when `pincer run` has one on standard input.
fn terminal() -> Option<std::fs::File> {
    if !io::stdin().is_terminal() {
        return None;
    }
    OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
        .ok()
}

/// Starts the command inside the cgroup, forwards signals, runs the twin
/// until the command exits.
async fn supervise(
    options: &RunOptions,
    cgroup: &AgentCgroup,
    own: &Own,
    mut forwarded: Forwarded,
    asked: &mut tokio::sync::mpsc::UnboundedReceiver<crate::control::server::Submitted>,
    service: &mut Service,
) -> Result<ExitStatus, RunError> {
    let mut child = spawn_in(options, cgroup, own)?;
    let pid = child.id().map(|id| Pid::from_raw(id as i32));
    if let Some(pid) = pid {
        service.twin().set_root(cgroup.id(), pid.as_raw() as u32);
    }
    // What the kernel holds is checked as the daemon checks it; a problem
    // is said on standard error and audited (once until it changes).
    let mut check =
        tokio::time::interval_at(tokio::time::Instant::now() + CHECK_EVERY, CHECK_EVERY);
    check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let dirs = std::collections::HashMap::from([(cgroup.id(), cgroup.path().to_owned())]);
    loop {
        tokio::select! {
            _ = check.tick() => {
                let (integrity, changed) = service.twin().check_integrity(&dirs)?;
                if changed {
                    for problem in &integrity.problems {
                        eprintln!("pincer: integrity: {problem}");
                    }
                }
            }
            status = child.wait() => {
                let status = status.map_err(RunError::Supervise)?;
                // Its last decisions are in the ring buffer already.
                service.drain()?;
                return Ok(status);
            }
            step = service.step() => {
                step?;
            }
            Some(command) = asked.recv() => {
                let response = service.twin().asset_command(command.request, command.caller);
                let _ = command.answer.send(response);
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
        let kinds = FORWARDED.map(|sig| (sig, SignalKind::from_raw(sig as i32)));
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
