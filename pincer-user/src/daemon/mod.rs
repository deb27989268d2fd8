//! `pincer daemon`: one enforcer for every agent on the host.
//!
//! The daemon loads the programs once and pins them (see
//! [`crate::loader`]), confines every cgroup that matches an agent pattern
//! of its configuration ([`config`]) with that agent's mission, and serves
//! their parked requests through one twin. Each confined cgroup gets a grant
//! slot of its own, so no grant, prompt or verdict crosses from one agent to
//! another.
//!
//! # Life cycle
//!
//! - Start: the configuration and every mission are checked before anything
//!   changes; a bad one stops the start with its file, line and field. The
//!   pins of a daemon of the same build are reused, so enforcement never
//!   stops; otherwise the programs are loaded, attached, then pinned (pins of
//!   another build are replaced after that).
//! - Cgroups are looked for every `scan_every`: a new matching cgroup is
//!   confined (its tasks are unconfined until then: start agents in a cgroup
//!   made and confined beforehand, or with `pincer run` against the daemon),
//!   a removed one released.
//! - Parked requests are kept in a journal (`parked/` next to the control
//!   socket) until their verdict. A daemon that starts asks again about
//!   every request still parked in the kernel ("replay").
//! - `pincer run` registers its cgroup and mission on the control socket
//!   (the cgroup must be directly under `pincer/`); registrations are kept
//!   in `registered/` next to the socket, so a restarted daemon confines
//!   them again (or, if a mission no longer loads, kills their processes
//!   rather than leave them unconfined).
//! - A watchdog process outlives the daemon: if the daemon dies, it zeroes
//!   the heartbeat (every ungranted access is refused at once from then on)
//!   and continues the parked tasks, which meet `EACCES`. Granted accesses
//!   keep working: the pins keep programs, agents and grants in place. If
//!   the watchdog dies too, parked tasks wait for the next daemon, which
//!   replays them.
//! - `SIGHUP` reloads the configuration and the missions; a bad file keeps
//!   the running configuration and logs why. `SIGTERM`/`SIGINT` deny what is
//!   waiting and stop; with `on_stop = "keep"` the pins stay (agents stay
//!   confined, ungranted access is refused at once), with `"remove"` they
//!   are removed and the agents released.
//! - `pincer daemon --uninstall` refuses every parked request, then removes
//!   the pins.

pub mod config;

use std::{
    collections::{HashMap, HashSet},
    fs,
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
    time::{Duration, Instant, SystemTime},
};

use aya::maps::{MapData, RingBuf};
use nix::sys::signal::{SigSet, SigmaskHow, Signal, sigprocmask};
use pincer_common::{AccessEvent, Agent, verdict};
use serde::Serialize;
use tokio::{
    io::unix::AsyncFd,
    signal::unix::{SignalKind, signal},
    sync::mpsc,
};

use crate::{
    audit::{AuditError, AuditKey, AuditLog},
    control::{
        ControlError, ControlHandler, ControlRequest, ControlResponse, ControlServer, HumanAnswer,
    },
    loader::{self, Enforcer, LoadError},
    metrics::{Metrics, MetricsError, MetricsServer},
    mission::{Mission, MissionError, Mode},
    request::Request,
    run::{RunError, policy_for, sleep_until, voters_for},
    twin::{self, AgentEntry, HEARTBEAT_EVERY, SameAccess, Twin, TwinError},
    vote::Outcome,
    voters::prompt::PromptBoard,
    watchdog::{Watchdog, Watched},
};
use config::{AgentConfig, Config, ConfigError, LogFormat, OnStop};

/// Where `pincer daemon` reads its configuration unless told otherwise.
pub const DEFAULT_CONFIG: &str = "/etc/pincer/daemon.toml";

/// How many directory levels below the cgroup root are searched for agent
/// cgroups.
const MAX_SCAN_DEPTH: usize = 16;

/// Options of `pincer daemon`.
#[derive(Debug, clap::Args)]
pub struct DaemonOptions {
    /// The configuration file (TOML).
    #[arg(long, value_name = "FILE", default_value = DEFAULT_CONFIG)]
    pub config: PathBuf,
    /// Print the effective configuration, defaults included, and exit.
    #[arg(long)]
    pub print_config: bool,
    /// Refuse every parked request, remove the pins (detaching the
    /// programs) and exit. Stop the daemon first.
    #[arg(long, conflicts_with = "print_config")]
    pub uninstall: bool,
}

/// Errors that stop the daemon (or keep it from starting).
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// An agent's mission is invalid.
    #[error("agent `{agent}` (line {line} of the configuration)")]
    Mission {
        /// The agent.
        agent: String,
        /// Its line in the configuration.
        line: usize,
        /// What is wrong with the mission.
        #[source]
        source: Box<MissionError>,
    },
    /// Loading, pinning or writing the programs failed.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The twin failed.
    #[error(transparent)]
    Twin(#[from] TwinError),
    /// The control socket failed.
    #[error(transparent)]
    Control(#[from] ControlError),
    /// The audit log failed.
    #[error(transparent)]
    Audit(#[from] AuditError),
    /// The metrics endpoint failed.
    #[error(transparent)]
    Metrics(#[from] MetricsError),
    /// Voters could not be set up.
    #[error(transparent)]
    Voters(#[from] RunError),
    /// A system call failed.
    #[error("{what}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

fn io_error(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> DaemonError {
    let what = what.into();
    move |source| DaemonError::Io { what, source }
}

/// Runs `pincer daemon` with its options; returns when it stops.
pub fn main(options: &DaemonOptions) -> Result<(), DaemonError> {
    let config = Config::from_file(&options.config)?;
    if options.print_config {
        let text = config.render();
        print!("{text}");
        if !text.ends_with('\n') {
            println!();
        }
        return Ok(());
    }
    init_logging(config.daemon.log_format);
    if options.uninstall {
        return uninstall(&config);
    }
    let missions = load_missions(&config)?;
    // Held until the handlers exist, so an early SIGTERM waits rather than
    // killing the daemon halfway through pinning.
    let mut held = SigSet::empty();
    for sig in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        held.add(sig);
    }
    sigprocmask(SigmaskHow::SIG_BLOCK, Some(&held), None)
        .map_err(|e| io_error("blocking signals")(e.into()))?;
    serve(options, config, missions, &held)
}

fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("PINCER_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // Another subscriber (tests) is fine: the first one stays.
    let _ = match format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Text => builder.try_init(),
    };
}

/// Parses every agent's mission, naming the agent on error.
fn load_missions(config: &Config) -> Result<HashMap<String, Mission>, DaemonError> {
    config
        .agents
        .iter()
        .map(|agent| {
            Mission::from_file(&agent.mission)
                .map(|mission| (agent.name.clone(), mission))
                .map_err(|source| DaemonError::Mission {
                    agent: agent.name.clone(),
                    line: agent.line,
                    source: Box::new(source),
                })
        })
        .collect()
}

/// Reattaches to the pins of this build, or loads, attaches and pins.
fn enforcer(config: &Config) -> Result<(Enforcer, bool), DaemonError> {
    let dir = &config.daemon.pin_dir;
    match Enforcer::open_pinned(dir) {
        Ok(enforcer) => {
            tracing::info!(pins = %dir.display(), "reattached to the pinned programs");
            return Ok((enforcer, true));
        }
        Err(error) if dir.exists() => {
            tracing::warn!(error = %error, "the pins cannot be reused; loading the programs again");
        }
        Err(_) => {}
    }
    let started = Instant::now();
    let mut enforcer = Enforcer::load_with_ring(config.daemon.ring_bytes)?;
    // The old programs (if any) still enforce until their pins go; the new
    // ones already do.
    loader::unpin(dir)?;
    if let Some(parent) = dir.parent() {
        fs::create_dir_all(parent).map_err(io_error(format!("creating {}", parent.display())))?;
    }
    enforcer.pin(dir)?;
    tracing::info!(pins = %dir.display(), elapsed = ?started.elapsed(), "programs loaded, attached and pinned");
    Ok((enforcer, false))
}

/// One confined cgroup.
#[derive(Clone, Debug, Serialize)]
struct Confined {
    /// The agent (configuration entry) it belongs to.
    agent: String,
    /// Its path under the cgroup root.
    cgroup: String,
    /// The kernel's cgroup id.
    id: u64,
    /// Its grant slot.
    slot: u32,
    /// The mission's name and file.
    mission: String,
    mission_file: PathBuf,
    /// `enforce`, `audit` or `ask`.
    mode: &'static str,
    /// The `pincer run` that registered it (not matched by a pattern).
    registered_by: Option<u32>,
    /// The mission's grants as `pincer grants` lists them (those written
    /// for its slot).
    #[serde(skip)]
    mission_grants: Vec<serde_json::Value>,
}

/// A cgroup `pincer run` registered, as kept for the next daemon.
#[derive(Debug, Serialize, serde::Deserialize)]
struct Registration {
    id: u64,
    cgroup: String,
    mission: PathBuf,
    mode: Option<String>,
    pid: u32,
}

/// What the control socket shows; the event loop keeps it current.
#[derive(Default)]
struct Snapshot {
    status: serde_json::Value,
    agents: Vec<Confined>,
    grants: HashMap<u32, Vec<serde_json::Value>>,
    cgroup_paths: HashSet<String>,
}

/// The control socket's side of the daemon.
struct Handler {
    board: Arc<PromptBoard>,
    snapshot: Arc<Mutex<Snapshot>>,
    revokes: mpsc::UnboundedSender<(String, Option<String>)>,
    commands: mpsc::UnboundedSender<Command>,
}

/// A state change asked for on the control socket, with where to answer.
struct Command {
    request: ControlRequest,
    caller: u32,
    answer: tokio::sync::oneshot::Sender<ControlResponse>,
}

impl ControlHandler for Handler {
    fn pending(&self) -> Vec<Request> {
        self.board.pending()
    }

    fn answer(&self, id: u64, answer: HumanAnswer) -> Result<(), String> {
        self.board.answer(id, answer)
    }

    fn query(&self, request: &ControlRequest) -> ControlResponse {
        let snapshot = self.snapshot.lock().unwrap_or_else(|e| e.into_inner());
        let info = match request {
            ControlRequest::Status => snapshot.status.clone(),
            ControlRequest::Agents => serde_json::json!(snapshot.agents),
            ControlRequest::Grants { agent } => {
                let chosen: Vec<&Confined> = snapshot
                    .agents
                    .iter()
                    .filter(|c| agent.as_ref().is_none_or(|a| *a == c.agent))
                    .collect();
                if let Some(agent) = agent
                    && chosen.is_empty()
                {
                    return ControlResponse::Error {
                        message: format!("no confined cgroup of agent `{agent}`"),
                    };
                }
                serde_json::json!(
                    chosen
                        .iter()
                        .map(|c| serde_json::json!({
                            "agent": c.agent,
                            "cgroup": c.cgroup,
                            "grants": snapshot.grants.get(&c.slot).cloned().unwrap_or_default(),
                        }))
                        .collect::<Vec<_>>()
                )
            }
            ControlRequest::Revoke { agent, path } => {
                if !snapshot.agents.iter().any(|c| c.agent == *agent) {
                    return ControlResponse::Error {
                        message: format!("no confined cgroup of agent `{agent}`"),
                    };
                }
                if self.revokes.send((agent.clone(), path.clone())).is_err() {
                    return ControlResponse::Error {
                        message: "the daemon is stopping".into(),
                    };
                }
                return ControlResponse::Ok {
                    message: match path {
                        Some(path) => format!("revoking the vote grants of `{agent}` on {path}"),
                        None => format!("revoking every vote grant of `{agent}`"),
                    },
                };
            }
            _ => {
                return ControlResponse::Error {
                    message: "not a query".into(),
                };
            }
        };
        ControlResponse::Info { info }
    }

    fn submit(
        &self,
        request: ControlRequest,
        caller: u32,
    ) -> Result<tokio::sync::oneshot::Receiver<ControlResponse>, ControlResponse> {
        let (answer, receiver) = tokio::sync::oneshot::channel();
        self.commands
            .send(Command {
                request,
                caller,
                answer,
            })
            .map_err(|_| ControlResponse::Error {
                message: "the daemon is stopping".into(),
            })?;
        Ok(receiver)
    }

    fn is_agent_cgroup(&self, cgroup_path: &str) -> bool {
        let path = cgroup_path
            .strip_suffix(" (deleted)")
            .unwrap_or(cgroup_path);
        let path = path.trim_start_matches('/');
        let snapshot = self.snapshot.lock().unwrap_or_else(|e| e.into_inner());
        crate::control::in_agent_cgroup(cgroup_path)
            || snapshot
                .cgroup_paths
                .iter()
                .any(|agent| Path::new(path).starts_with(agent))
    }
}

/// The daemon's state, owned by its event loop.
struct Daemon {
    config: Config,
    missions: HashMap<String, Mission>,
    twin: Twin,
    confined: HashMap<u64, Confined>,
    next_slot: u32,
    board: Arc<PromptBoard>,
    snapshot: Arc<Mutex<Snapshot>>,
    metrics: Arc<Metrics>,
    started: SystemTime,
    reattached: bool,
    reloads: u64,
    last_reload_error: Option<String>,
}

fn serve(
    options: &DaemonOptions,
    config: Config,
    missions: HashMap<String, Mission>,
    held: &SigSet,
) -> Result<(), DaemonError> {
    let lock = lock(&config)?;
    let (mut enforcer, reattached) = enforcer(&config)?;
    let events = enforcer.take_events()?;
    enforcer.heartbeat(
        twin::boottime_ns(),
        twin::HEARTBEAT_TIMEOUT.as_nanos() as u64,
    )?;
    // SAFETY: no thread runs yet (the loader's threads have ended; the
    // runtime comes later).
    let watchdog = unsafe {
        Watchdog::spawn(
            &mut enforcer,
            Watched::Parked {
                release: Some(std::os::fd::AsRawFd::as_raw_fd(&*lock)),
            },
        )
    }
    .map_err(io_error("starting the watchdog"))?;
    enforcer.clear_guarded()?;
    enforcer.guard(std::process::id())?;
    enforcer.guard(watchdog.pid().as_raw() as u32)?;
    let previous: Vec<(u64, Agent)> = enforcer.agents()?;
    let next_slot = previous.iter().map(|(_, a)| a.slot).max().unwrap_or(0) + 1;

    if let Some(parent) = config.daemon.audit.parent() {
        fs::create_dir_all(parent).map_err(io_error(format!("creating {}", parent.display())))?;
    }
    let mut audit = AuditLog::open_with_key(
        Some(&config.daemon.audit),
        "pincer-daemon",
        AuditKey::File(config.daemon.audit_key_path()),
    )?;
    let control = ControlServer::bind(&config.daemon.socket)?;
    let journal = journal_dir(&config);
    fs::create_dir_all(&journal).map_err(io_error(format!("creating {}", journal.display())))?;

    let metrics = Arc::new(Metrics::new());
    let (mut twin, outcomes) = Twin::new(enforcer);
    twin.set_journal(journal.clone());
    twin.set_metrics(Arc::clone(&metrics));
    let board = PromptBoard::new(None);
    let snapshot = Arc::new(Mutex::new(Snapshot::default()));
    let mut daemon = Daemon {
        config,
        missions,
        twin,
        confined: HashMap::new(),
        next_slot,
        board: Arc::clone(&board),
        snapshot: Arc::clone(&snapshot),
        metrics: Arc::clone(&metrics),
        started: SystemTime::now(),
        reattached,
        reloads: 0,
        last_reload_error: None,
    };

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(io_error("starting the runtime"))?;
    let result = runtime.block_on(async {
        let mut terminate = signal(SignalKind::terminate()).map_err(io_error("SIGTERM handler"))?;
        let mut interrupt = signal(SignalKind::interrupt()).map_err(io_error("SIGINT handler"))?;
        let mut hangup = signal(SignalKind::hangup()).map_err(io_error("SIGHUP handler"))?;
        sigprocmask(SigmaskHow::SIG_UNBLOCK, Some(held), None)
            .map_err(|e| io_error("unblocking signals")(e.into()))?;

        // Agents of a previous daemon stay confined by the kernel until the
        // scan below takes them over (or releases those no longer matched);
        // the cgroups `pincer run` registered with it come back first.
        daemon.restore_registrations();
        daemon.scan(&previous)?;
        daemon.replay(&journal);
        let _metrics_server = match daemon.config.daemon.metrics {
            Some(addr) => {
                let server = MetricsServer::start(addr, Arc::clone(&metrics))?;
                tracing::info!(address = %server.local_addr(), "serving metrics");
                Some(server)
            }
            None => None,
        };
        let (revokes, mut revoke_queue) = mpsc::unbounded_channel();
        let (commands, mut command_queue) = mpsc::unbounded_channel();
        let handler = Arc::new(Handler {
            board: Arc::clone(&board),
            snapshot: Arc::clone(&snapshot),
            revokes,
            commands,
        });
        tokio::spawn(async move {
            let Err(error) = control.serve(handler).await;
            tracing::error!(%error, "the control socket failed");
        });
        tracing::info!(
            config = %options.config.display(),
            agents = daemon.confined.len(),
            reattached,
            "pincer daemon running"
        );
        daemon.publish();
        daemon
            .event_loop(
                events,
                outcomes,
                &mut audit,
                &mut revoke_queue,
                &mut command_queue,
                &mut terminate,
                &mut interrupt,
                &mut hangup,
                &options.config,
            )
            .await
    });
    drop(runtime);

    // Stopping: nothing stays parked behind us.
    let denied = daemon.twin.deny_all();
    let on_stop = daemon.config.daemon.on_stop;
    let pin_dir = daemon.config.daemon.pin_dir.clone();
    if on_stop == OnStop::Remove {
        let ids: Vec<u64> = daemon.confined.keys().copied().collect();
        for id in ids {
            let _ = daemon.twin.release(id);
        }
        let _ = daemon.twin.enforcer().heartbeat(0, 0);
        drop(daemon);
        loader::unpin(&pin_dir)?;
        tracing::info!(pins = %pin_dir.display(), "stopped; pins removed, agents released");
    } else {
        let _ = daemon.twin.enforcer().heartbeat(0, 0);
        drop(daemon);
        tracing::info!(pins = %pin_dir.display(), "stopped; the pins keep enforcing (ungranted access is refused until a daemon runs)");
    }
    watchdog.done();
    denied?;
    result
}

/// One daemon per pin directory: a second one would read the same ring
/// buffer and replace the first one's guards. The lock (on a file in
/// `/run/pincer`, named after the pin directory) lasts as long as the
/// daemon: the kernel releases it when the process ends, however it ends.
fn lock(config: &Config) -> Result<nix::fcntl::Flock<fs::File>, DaemonError> {
    let dir = Path::new("/run/pincer");
    fs::create_dir_all(dir).map_err(io_error(format!("creating {}", dir.display())))?;
    let name: String = config
        .daemon
        .pin_dir
        .to_string_lossy()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let path = dir.join(format!("daemon{name}.lock"));
    let file = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(io_error(format!("opening {}", path.display())))?;
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock).map_err(
        |(_, errno)| DaemonError::Io {
            what: format!(
                "another pincer daemon serves the pins under {} (it holds {})",
                config.daemon.pin_dir.display(),
                path.display()
            ),
            source: errno.into(),
        },
    )
}

/// Where registrations by `pincer run` are kept for the next daemon.
fn registrations_dir(config: &Config) -> PathBuf {
    journal_dir(config).with_file_name("registered")
}

/// Where parked events wait for their verdict.
fn journal_dir(config: &Config) -> PathBuf {
    config
        .daemon
        .socket
        .parent()
        .unwrap_or(Path::new("/run/pincer"))
        .join("parked")
}

impl Daemon {
    #[allow(clippy::too_many_arguments)]
    async fn event_loop(
        &mut self,
        events: RingBuf<MapData>,
        mut outcomes: mpsc::UnboundedReceiver<(SameAccess, Outcome)>,
        audit: &mut AuditLog,
        revokes: &mut mpsc::UnboundedReceiver<(String, Option<String>)>,
        commands: &mut mpsc::UnboundedReceiver<Command>,
        terminate: &mut tokio::signal::unix::Signal,
        interrupt: &mut tokio::signal::unix::Signal,
        hangup: &mut tokio::signal::unix::Signal,
        config_path: &Path,
    ) -> Result<(), DaemonError> {
        // SAFETY: the ring buffer owns its descriptor and keeps it open for
        // as long as it is registered.
        let mut events = unsafe { AsyncFd::register(events) }
            .map_err(|e| io_error("watching the ring buffer")(e.into()))?;
        let mut heartbeat = tokio::time::interval(HEARTBEAT_EVERY);
        let mut scan = tokio::time::interval(self.config.daemon.scan_every);
        loop {
            let expiry = self.twin.next_expiry();
            tokio::select! {
                ready = events.readable_mut() => {
                    let mut guard = ready.map_err(io_error("reading the ring buffer"))?;
                    self.twin.drain(guard.get_inner_mut(), audit)?;
                    guard.clear_ready();
                }
                Some((key, outcome)) = outcomes.recv() => {
                    self.twin.on_outcome(key, outcome, audit)?;
                    // A vote may have made a grant: `pincer grants` shows it
                    // from now on.
                    self.publish();
                }
                _ = heartbeat.tick() => {
                    self.twin.heartbeat()?;
                    self.publish();
                }
                _ = scan.tick() => {
                    self.scan(&[])?;
                }
                () = sleep_until(expiry) => {
                    self.twin.expire()?;
                    self.publish();
                }
                Some((agent, path)) = revokes.recv() => self.revoke(&agent, path.as_deref(), audit)?,
                Some(command) = commands.recv() => {
                    let response = self.command(command.request, command.caller);
                    let _ = command.answer.send(response);
                }
                _ = hangup.recv() => {
                    self.reload(config_path)?;
                    scan.reset();
                }
                _ = terminate.recv() => return Ok(()),
                _ = interrupt.recv() => return Ok(()),
            }
        }
    }

    /// Confines new matching cgroups, releases removed or no longer
    /// matching ones. `previous` are kernel agents of an earlier daemon:
    /// those not taken over are released, and their grants removed.
    fn scan(&mut self, previous: &[(u64, Agent)]) -> Result<(), DaemonError> {
        let root = self.config.daemon.cgroup_root.clone();
        let mut found: HashMap<u64, (String, String)> = HashMap::new();
        walk(&root, &root, 0, &mut |relative, id| {
            // `pincer run`'s own cgroups are its business.
            if relative.starts_with(crate::cgroup::PINCER_DIR) {
                return;
            }
            if let Some(agent) = self.config.agent_for(relative) {
                found.insert(id, (agent.name.clone(), relative.display().to_string()));
            }
        });
        let gone: Vec<u64> = self
            .confined
            .iter()
            .filter(|(id, c)| match c.registered_by {
                // Until `pincer run` unregisters it, or it dies and leaves
                // the cgroup empty.
                Some(pid) => registration_over(&root.join(&c.cgroup), pid),
                None => found.get(id).is_none_or(|(agent, _)| *agent != c.agent),
            })
            .map(|(id, _)| *id)
            .collect();
        for id in gone {
            if let Some(confined) = self.confined.remove(&id) {
                self.twin.release(id)?;
                if let Some(pid) = confined.registered_by {
                    let _ = self.twin.enforcer().unguard(pid);
                    self.forget_registration(id);
                    // Its `pincer run` is gone: nobody else removes it.
                    let _ = fs::remove_dir(root.join(&confined.cgroup));
                }
                tracing::info!(agent = %confined.agent, cgroup = %confined.cgroup, "released an agent cgroup");
            }
        }
        for (id, (agent, relative)) in found {
            if self.confined.contains_key(&id) {
                continue;
            }
            let Some(config) = self.config.agents.iter().find(|a| a.name == agent).cloned() else {
                continue;
            };
            if let Err(error) = self.confine(id, &relative, &config) {
                tracing::error!(agent = %agent, cgroup = %relative, error = %error, "cannot confine a cgroup");
            }
        }
        if !previous.is_empty() {
            for (id, _) in previous {
                if !self.confined.contains_key(id) {
                    let _ = self.twin.enforcer().remove_agent(*id);
                }
            }
            let live: HashSet<u32> = self.confined.values().map(|c| c.slot).collect();
            self.twin.enforcer().retain_slots(&live)?;
        }
        self.publish();
        Ok(())
    }

    /// Confines one cgroup with its agent's mission under a new slot. A
    /// cgroup confined before (by a previous daemon, or before a reload)
    /// switches to the new slot in one map update, so it is never
    /// unconfined; the old slot's grants go afterwards.
    fn confine(
        &mut self,
        id: u64,
        relative: &str,
        config: &AgentConfig,
    ) -> Result<(), DaemonError> {
        let mission = self
            .missions
            .get(&config.name)
            .expect("every configured agent has its mission")
            .clone();
        self.confine_with(id, relative, config, &mission, None)
    }

    /// Confines a cgroup with `mission`; `registered_by` is the `pincer run`
    /// that asked for it, if one did.
    fn confine_with(
        &mut self,
        id: u64,
        relative: &str,
        config: &AgentConfig,
        mission: &Mission,
        registered_by: Option<u32>,
    ) -> Result<(), DaemonError> {
        let slot = self.next_slot;
        self.next_slot += 1;
        let grants = mission
            .resolve(slot)
            .map_err(|source| DaemonError::Mission {
                agent: config.name.clone(),
                line: config.line,
                source: Box::new(source),
            })?;
        let on_unknown = config.mode.map_or(mission.on_unknown, |m| m.on_unknown());
        let policy = policy_for(mission);
        let voters = voters_for(mission, &self.board, &policy)?;
        let kernel = Agent {
            slot,
            mode: on_unknown.kernel_mode(),
            flags: 0,
            _pad: 0,
        };
        let entry = AgentEntry {
            slot,
            name: config.name.clone(),
            voters,
            policy,
            root: None,
        };
        let old_slot = self.confined.get(&id).map(|c| c.slot);
        self.twin.confine(id, kernel, entry, &grants)?;
        if let Some(old) = old_slot {
            self.twin.drop_slot(old)?;
        }
        let confined = Confined {
            agent: config.name.clone(),
            cgroup: relative.to_owned(),
            id,
            slot,
            mission: mission.name.clone(),
            mission_file: config.mission.clone(),
            mode: Mode::from(on_unknown).name(),
            registered_by,
            mission_grants: mission
                .grants
                .iter()
                .map(|spec| {
                    serde_json::json!({
                        "path": spec.path,
                        "ops": crate::events::op_names(spec.ops),
                        "extent": format!("{:?}", spec.extent).to_lowercase(),
                        "by": "mission",
                    })
                })
                .collect(),
        };
        tracing::info!(agent = %confined.agent, cgroup = %confined.cgroup, slot, mission = %confined.mission, grants = grants.inode.len() + grants.names.len(), "confined an agent cgroup");
        self.confined.insert(id, confined);
        Ok(())
    }

    fn registrations_dir(&self) -> PathBuf {
        registrations_dir(&self.config)
    }

    /// Keeps a registration where the next daemon finds it.
    fn save_registration(&self, registration: &Registration) {
        let dir = self.registrations_dir();
        let path = dir.join(registration.id.to_string());
        let written = fs::create_dir_all(&dir)
            .and_then(|()| fs::write(&path, serde_json::to_vec(registration).unwrap_or_default()));
        if let Err(error) = written {
            tracing::warn!(%error, path = %path.display(), "cannot keep a registration");
        }
    }

    fn forget_registration(&self, id: u64) {
        let _ = fs::remove_file(self.registrations_dir().join(id.to_string()));
    }

    /// Confines again the cgroups `pincer run` registered with a previous
    /// daemon. One that cannot be (its mission no longer loads) has its
    /// processes killed rather than left unconfined.
    fn restore_registrations(&mut self) {
        let dir = self.registrations_dir();
        let Ok(entries) = fs::read_dir(&dir) else {
            return;
        };
        let root = self.config.daemon.cgroup_root.clone();
        for entry in entries.filter_map(Result::ok) {
            let kept: Option<Registration> = fs::read(entry.path())
                .ok()
                .and_then(|bytes| serde_json::from_slice(&bytes).ok());
            let _ = fs::remove_file(entry.path());
            let Some(kept) = kept else {
                continue;
            };
            let path = root.join(&kept.cgroup);
            if fs::metadata(&path).map(|m| m.ino()).ok() != Some(kept.id) {
                continue;
            }
            let request = ControlRequest::Register {
                cgroup: kept.cgroup.clone(),
                mission: kept.mission.clone(),
                mode: kept.mode.clone(),
            };
            match self.command(request, kept.pid) {
                ControlResponse::Ok { .. } => {
                    tracing::info!(cgroup = %kept.cgroup, pid = kept.pid, "confined a registered cgroup again");
                }
                response => {
                    tracing::error!(cgroup = %kept.cgroup, ?response, "cannot confine a registered cgroup again: killing its processes");
                    let _ = fs::write(path.join("cgroup.kill"), "1");
                }
            }
        }
    }

    /// Asks again about every request still parked in the kernel (left by a
    /// daemon that died).
    fn replay(&mut self, journal: &Path) {
        let kept = twin::journal_read(journal);
        let pending = self.twin.enforcer().pending().unwrap_or_default();
        let mut replayed = 0;
        for (tid, parked) in pending {
            if !Path::new(&format!("/proc/{tid}")).exists() {
                let _ = self.twin.enforcer().remove_pending(tid);
                continue;
            }
            let event = kept
                .get(&tid)
                .filter(|e| e.request_id == parked.id)
                .copied()
                .or_else(|| rebuild_event(tid, &parked));
            match event {
                Some(event) => {
                    self.twin.on_parked(event);
                    replayed += 1;
                }
                None => {
                    // Its cgroup cannot be read: it is exiting.
                    let _ = self.twin.enforcer().remove_pending(tid);
                }
            }
        }
        for tid in kept.keys() {
            if !self.twin.waiting().any(|r| r.tid == *tid) {
                let _ = fs::remove_file(journal.join(tid.to_string()));
            }
        }
        if replayed > 0 {
            tracing::info!(
                replayed,
                "asked again about requests parked before this daemon started"
            );
        }
    }

    /// Reloads the configuration and missions; on error keeps the running
    /// ones and says why.
    fn reload(&mut self, path: &Path) -> Result<(), DaemonError> {
        let loaded = Config::from_file(path)
            .map_err(DaemonError::from)
            .and_then(|config| load_missions(&config).map(|missions| (config, missions)));
        let (config, missions) = match loaded {
            Ok(loaded) => loaded,
            Err(error) => {
                let message = format!("{:#}", anyhow::Error::new(error));
                tracing::error!(error = %message, "reload refused; the running configuration stays");
                self.last_reload_error = Some(message);
                self.publish();
                return Ok(());
            }
        };
        let keep = |old: &Config| (old.daemon.pin_dir.clone(), old.daemon.socket.clone());
        if keep(&config) != keep(&self.config) {
            tracing::warn!("pin_dir and socket changes take effect at the next start");
        }
        self.config = config;
        self.missions = missions;
        self.reloads += 1;
        self.last_reload_error = None;
        // Every confined cgroup switches to its (possibly new) mission.
        let current: Vec<(u64, String)> = self
            .confined
            .iter()
            .filter(|(_, c)| c.registered_by.is_none())
            .map(|(id, c)| (*id, c.cgroup.clone()))
            .collect();
        for (id, relative) in current {
            match self.config.agent_for(Path::new(&relative)).cloned() {
                Some(agent) => {
                    if let Err(error) = self.confine(id, &relative, &agent) {
                        tracing::error!(cgroup = %relative, error = %error, "cannot confine a cgroup again");
                    }
                }
                None => {
                    self.confined.remove(&id);
                    self.twin.release(id)?;
                }
            }
        }
        tracing::info!(agents = self.config.agents.len(), "configuration reloaded");
        self.scan(&[])
    }

    /// Carries out `register` and `unregister`.
    fn command(&mut self, request: ControlRequest, caller: u32) -> ControlResponse {
        let error = |message: String| ControlResponse::Error { message };
        let root = self.config.daemon.cgroup_root.clone();
        match request {
            ControlRequest::Register {
                cgroup,
                mission,
                mode,
            } => {
                let relative = Path::new(&cgroup);
                // Registered cgroups live under `pincer/`, where no pattern
                // reaches, and nowhere else.
                if !relative.starts_with(crate::cgroup::PINCER_DIR)
                    || relative.components().count() != 2
                    || relative
                        .components()
                        .any(|c| !matches!(c, std::path::Component::Normal(_)))
                {
                    return error(format!(
                        "cannot register {cgroup}: only cgroups directly under {}/ can be",
                        crate::cgroup::PINCER_DIR
                    ));
                }
                let Ok(metadata) = fs::metadata(root.join(relative)) else {
                    return error(format!("cannot register {cgroup}: no such cgroup"));
                };
                let id = metadata.ino();
                if self.confined.contains_key(&id) {
                    return error(format!("{cgroup} is confined already"));
                }
                let mode = match mode.as_deref().map(|name| (name, Mode::from_name(name))) {
                    None => None,
                    Some((_, Some(mode))) => Some(mode),
                    Some((other, None)) => return error(format!("unknown mode {other:?}")),
                };
                let loaded = match Mission::from_file(&mission) {
                    Ok(loaded) => loaded,
                    Err(e) => return error(format!("{:#}", anyhow::Error::new(e))),
                };
                let Ok(pattern) = config::CgroupPattern::parse(&cgroup) else {
                    return error(format!("cannot register {cgroup}: not a plain cgroup name"));
                };
                let name = relative
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let agent = AgentConfig {
                    name: format!("{}/{name}", loaded.name),
                    cgroup: pattern,
                    mission: mission.clone(),
                    mode,
                    line: 0,
                };
                if let Err(e) = self.confine_with(id, &cgroup, &agent, &loaded, Some(caller)) {
                    return error(format!("{:#}", anyhow::Error::new(e)));
                }
                self.save_registration(&Registration {
                    id,
                    cgroup: cgroup.clone(),
                    mission,
                    mode: mode.map(|m| m.to_string()),
                    pid: caller,
                });
                // The command cannot signal or trace the `pincer run` that
                // started it, as with a run of its own.
                if let Err(e) = self.twin.enforcer().guard(caller) {
                    tracing::warn!(error = %e, pid = caller, "cannot protect the registering process");
                }
                self.publish();
                ControlResponse::Ok {
                    message: format!("confined {cgroup} as {}", agent.name),
                }
            }
            ControlRequest::Unregister { cgroup } => {
                let Some(id) = self
                    .confined
                    .iter()
                    .find(|(_, c)| c.cgroup == cgroup && c.registered_by == Some(caller))
                    .map(|(id, _)| *id)
                else {
                    return error(format!("{cgroup} is not registered by the caller"));
                };
                self.confined.remove(&id);
                self.forget_registration(id);
                let _ = self.twin.enforcer().unguard(caller);
                if let Err(e) = self.twin.release(id) {
                    return error(format!("{:#}", anyhow::Error::new(e)));
                }
                self.publish();
                ControlResponse::Ok {
                    message: format!("released {cgroup}"),
                }
            }
            _ => error("not a command".into()),
        }
    }

    fn revoke(
        &mut self,
        agent: &str,
        path: Option<&str>,
        audit: &mut AuditLog,
    ) -> Result<(), DaemonError> {
        let slots: Vec<u32> = self
            .confined
            .values()
            .filter(|c| c.agent == agent)
            .map(|c| c.slot)
            .collect();
        let mut revoked = 0;
        for slot in slots {
            revoked += self.twin.revoke(slot, path)?;
        }
        audit.record(&serde_json::json!({
            "event": "revoke",
            "agent": agent,
            "path": path,
            "grants": revoked,
        }))?;
        tracing::info!(agent, path, revoked, "revoked vote grants");
        self.publish();
        Ok(())
    }

    /// Updates what the control socket and the metrics show.
    fn publish(&mut self) {
        let counters = self.twin.enforcer().named_counters().ok();
        let waiting = self.twin.waiting().count();
        self.metrics.set_pending(waiting as i64);
        self.metrics.set_agents(self.confined.len() as i64);
        if let Some(counters) = &counters {
            let named: Vec<(&str, u64)> = counters.iter().map(|(k, v)| (*k, *v)).collect();
            self.metrics.set_kernel_counters(&named);
        }
        let mut grants: HashMap<u32, Vec<serde_json::Value>> = HashMap::new();
        for confined in self.confined.values() {
            grants.insert(confined.slot, confined.mission_grants.clone());
        }
        for grant in self.twin.vote_grants() {
            grants
                .entry(grant.slot)
                .or_default()
                .push(serde_json::json!({
                    "path": grant.path,
                    "ops": grant.ops,
                    "extent": grant.extent,
                    "by": "vote",
                    "expires_in_seconds": grant.expires_in,
                }));
        }
        let status = serde_json::json!({
            "pid": std::process::id(),
            "config": self.config.path,
            "pins": self.config.daemon.pin_dir,
            "socket": self.config.daemon.socket,
            "audit": self.config.daemon.audit,
            "metrics": self.config.daemon.metrics,
            "reattached": self.reattached,
            "uptime_seconds": self.started.elapsed().unwrap_or_default().as_secs(),
            "agents": self.confined.len(),
            "pending": waiting,
            "reloads": self.reloads,
            "last_reload_error": self.last_reload_error,
            "counters": counters,
        });
        let mut agents: Vec<Confined> = self.confined.values().cloned().collect();
        agents.sort_by(|a, b| (&a.agent, &a.cgroup).cmp(&(&b.agent, &b.cgroup)));
        let mut snapshot = self.snapshot.lock().unwrap_or_else(|e| e.into_inner());
        snapshot.cgroup_paths = agents.iter().map(|c| c.cgroup.clone()).collect();
        snapshot.agents = agents;
        snapshot.grants = grants;
        snapshot.status = status;
    }
}

/// Whether a registered cgroup is done with: removed, or left empty by a
/// `pincer run` that died without unregistering.
fn registration_over(cgroup: &Path, registrant: u32) -> bool {
    if !cgroup.exists() {
        return true;
    }
    let alive = Path::new(&format!("/proc/{registrant}")).exists();
    let populated = fs::read_to_string(cgroup.join("cgroup.events"))
        .is_ok_and(|events| events.lines().any(|l| l == "populated 1"));
    !alive && !populated
}

/// Walks the cgroup tree below `dir`, calling `visit` with each cgroup's
/// path relative to `root` and its id (the directory's inode number).
fn walk(root: &Path, dir: &Path, depth: usize, visit: &mut dyn FnMut(&Path, u64)) {
    if depth >= MAX_SCAN_DEPTH {
        return;
    }
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if !kind.is_dir() {
            continue;
        }
        let path = entry.path();
        let Ok(metadata) = entry.metadata() else {
            continue;
        };
        if let Ok(relative) = path.strip_prefix(root) {
            visit(relative, metadata.ino());
        }
        walk(root, &path, depth + 1, visit);
    }
}

/// An event for a parked request whose journal entry is missing (the daemon
/// died before writing it): what the kernel's pending table and `/proc`
/// still tell. The path is unknown; the voters see the inode.
fn rebuild_event(tid: u32, parked: &pincer_common::Pending) -> Option<AccessEvent> {
    let cgroup = crate::control::proc_cgroup(tid).ok()?;
    let root = crate::cgroup::cgroup2_mount().ok()?;
    let cgroup_id = fs::metadata(root.join(cgroup.trim_start_matches('/')))
        .ok()?
        .ino();
    let status = fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    let tgid = status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())?;
    // SAFETY: `AccessEvent` is plain old data; all zeroes is a valid value.
    let mut event: AccessEvent = unsafe { std::mem::zeroed() };
    event.cgroup_id = cgroup_id;
    event.dev = parked.dev;
    event.ino = parked.ino;
    event.request_id = parked.id;
    event.name_hash = parked.name_hash;
    event.pid = tid;
    event.tgid = tgid;
    event.ops = parked.ops;
    event.hook = parked.hook;
    event.verdict = verdict::PARKED;
    if parked.name_hash != 0 {
        event.flags |= pincer_common::event_flags::NEW_NAME;
    }
    Some(event)
}

/// Refuses what is parked, then removes the pins.
fn uninstall(config: &Config) -> Result<(), DaemonError> {
    // Not under a running daemon's feet.
    let _lock = lock(config)?;
    let dir = &config.daemon.pin_dir;
    match Enforcer::open_pinned(dir) {
        Ok(mut enforcer) => {
            // No heartbeat: a continued task meets EACCES from the programs,
            // which are still attached.
            enforcer.heartbeat(0, 0)?;
            crate::watchdog::continue_parked(&mut enforcer, Duration::from_secs(3), true);
        }
        Err(error) if dir.exists() => {
            tracing::warn!(error = %error, "removing pins of another build");
        }
        Err(_) => {
            println!("nothing to remove: no pins under {}", dir.display());
            return Ok(());
        }
    }
    loader::unpin(dir)?;
    let _ = fs::remove_dir_all(journal_dir(config));
    let _ = fs::remove_dir_all(registrations_dir(config));
    println!(
        "removed the pins under {}; the programs are detached",
        dir.display()
    );
    Ok(())
}
