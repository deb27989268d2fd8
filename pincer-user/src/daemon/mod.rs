//! `pincer daemon`: one enforcer for every agent on the host.
//!
//! The daemon loads the programs once and pins them (`pins.rs`), confines
//! every cgroup that matches an agent pattern of its configuration
//! ([`pincer_model::config::daemon`]) with that agent's mission (`agents.rs`), and serves their
//! parked requests through one twin ([`crate::twin::Service`], the same
//! service `pincer run` drives). Each confined cgroup gets a grant slot of
//! its own, so no grant, prompt or verdict crosses from one agent to
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
//!   every request still parked in the kernel (`replay.rs`).
//! - `pincer run` registers its cgroup and mission on the control socket
//!   (the cgroup must be directly under `pincer/`); registrations are kept
//!   in `registered/` next to the socket, so a restarted daemon confines
//!   them again (or, if a mission no longer loads, kills their processes
//!   rather than leave them unconfined) (`registrations.rs`).
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

mod agents;
mod held;
mod kubernetes;
mod pins;
mod registrations;
mod replay;
mod status;

use std::{
    collections::HashMap,
    fs,
    path::PathBuf,
    sync::{Arc, Mutex},
    time::SystemTime,
};

use nix::sys::signal::{SigSet, SigmaskHow, Signal, sigprocmask};
use pincer_model::{
    audit::{AuditKey, AuditLog},
    config::daemon::{Config, ConfigError, KubernetesConfig, LogFormat, OnStop},
    labels,
    mission::{Mission, MissionError},
    paths,
};
use tokio::{
    signal::unix::{SignalKind, signal},
    sync::mpsc,
};

use self::{
    agents::Confined,
    status::{Handler, Snapshot},
};
use crate::{
    check::CheckError,
    control::ControlServer,
    loader,
    metrics::{Metrics, MetricsError, MetricsServer},
    twin::{Journal, Service, Step, TwinError},
    voters::prompt::PromptBoard,
    watchdog::Watched,
};

/// Options of `pincer daemon`.
#[derive(Debug, clap::Args)]
pub struct DaemonOptions {
    /// The configuration file (TOML).
    #[arg(long, value_name = "FILE", default_value = paths::DEFAULT_CONFIG)]
    pub config: PathBuf,
    /// Print the effective configuration, defaults included, and exit.
    #[arg(long)]
    pub print_config: bool,
    /// Load and validate everything a start would (the configuration, every
    /// mission with its grants and webhook secret), warn about risky
    /// grants, and exit: 0 when the daemon would start.
    #[arg(long, conflicts_with_all = ["print_config", "uninstall"])]
    pub check: bool,
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
    #[error("{place}")]
    Mission {
        /// Where the agent's mission is named
        /// ([`pincer_model::config::daemon::AgentConfig::mission_place`]).
        place: String,
        /// What is wrong with the mission.
        #[source]
        source: Box<MissionError>,
    },
    /// An agent's mission would not start.
    #[error("{place}")]
    Check {
        /// Where the agent's mission is named
        /// ([`pincer_model::config::daemon::AgentConfig::mission_place`]).
        place: String,
        /// Why its mission would not start.
        #[source]
        source: Box<CheckError>,
    },
    /// The twin or its service (loading, pinning or writing the programs,
    /// the audit log, a webhook voter) failed.
    #[error(transparent)]
    Twin(TwinError),
    /// The control socket could not be opened.
    #[error(transparent)]
    Control(crate::control::ControlError),
    /// The metrics endpoint failed.
    #[error(transparent)]
    Metrics(#[from] MetricsError),
    /// The `[kubernetes]` table cannot be served (no node name, a
    /// missions directory that does not load).
    #[error("{0}")]
    Kubernetes(String),
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

/// Whatever the twin's service fails with stops the daemon as it is.
impl<E: Into<TwinError>> From<E> for DaemonError {
    fn from(error: E) -> Self {
        DaemonError::Twin(error.into())
    }
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
    if options.check {
        return check(&options.config, &config);
    }
    init_logging(config.daemon.log_format);
    if options.uninstall {
        return pins::uninstall(&config);
    }
    let missions = load_missions(&config)?;
    let pods = config
        .kubernetes
        .as_ref()
        .map(|kubernetes| kubernetes::Pods::new(kubernetes, &config.path))
        .transpose()
        .map_err(DaemonError::Kubernetes)?;
    // Held until the handlers exist, so an early SIGTERM waits rather than
    // killing the daemon halfway through pinning.
    let mut held = SigSet::empty();
    for sig in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        held.add(sig);
    }
    sigprocmask(SigmaskHow::SIG_BLOCK, Some(&held), None)
        .map_err(|e| io_error("blocking signals")(e.into()))?;
    serve(options, config, missions, pods, &held)
}

fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("PINCER_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour codes only where a terminal shows them (not in the journal).
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    // Another subscriber (tests) is fine: the first one stays.
    let _ = match format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Text => builder.try_init(),
    };
}

/// `pincer daemon --check`: every mission checked as a start would, and
/// more ([`crate::check::check`]); warnings on standard error.
fn check(path: &std::path::Path, config: &Config) -> Result<(), DaemonError> {
    let missions = load_missions(config)?;
    if let Some(kubernetes) = &config.kubernetes {
        check_pod_missions(config, kubernetes)?;
    }
    for agent in &config.agents {
        let mission = config.with_sources(&missions[&agent.name]);
        let checked = crate::check::check(&mission).map_err(|source| DaemonError::Check {
            place: agent.mission_place(&config.path),
            source: Box::new(source),
        })?;
        for warning in &checked.warnings {
            eprintln!("warning: agent `{}`: {warning}", agent.name);
        }
    }
    println!(
        "{}: the daemon would start with {} agent pattern(s)",
        path.display(),
        config.agents.len()
    );
    Ok(())
}

/// `--check` of `[kubernetes]`: every mission of the directory loads and
/// would start; a node name that only the pod's environment gives is
/// reported, not refused.
fn check_pod_missions(config: &Config, kubernetes: &KubernetesConfig) -> Result<(), DaemonError> {
    if let Err(why) = kubernetes.node_name(&config.path) {
        eprintln!("warning: {why}");
    }
    let dir = &kubernetes.missions;
    let entries = fs::read_dir(dir).map_err(io_error(format!(
        "{}: kubernetes.missions: reading {}",
        config.path.display(),
        dir.display()
    )))?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "toml"))
        .collect();
    files.sort();
    for file in &files {
        let place = format!("{}: kubernetes.missions", config.path.display());
        let mission = Mission::from_file(file).map_err(|source| DaemonError::Mission {
            place: place.clone(),
            source: Box::new(source),
        })?;
        let checked = crate::check::check(&config.with_sources(&mission)).map_err(|source| {
            DaemonError::Check {
                place,
                source: Box::new(source),
            }
        })?;
        for warning in &checked.warnings {
            eprintln!("warning: {}: {warning}", file.display());
        }
    }
    println!(
        "{}: {} pod mission(s) in {}",
        config.path.display(),
        files.len(),
        dir.display()
    );
    Ok(())
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
                    place: agent.mission_place(&config.path),
                    source: Box::new(source),
                })
        })
        .collect()
}

/// The daemon's state, owned by its event loop.
struct Daemon {
    config: Config,
    config_path: PathBuf,
    missions: HashMap<String, Mission>,
    /// The node's pods, with `[kubernetes]`.
    pods: Option<kubernetes::Pods>,
    service: Service,
    /// The cgroups it confines, by cgroup id.
    confined: HashMap<u64, Confined>,
    board: Arc<PromptBoard>,
    snapshot: Arc<Mutex<Snapshot>>,
    metrics: Arc<Metrics>,
    started: SystemTime,
    reattached: bool,
    reloads: u64,
    last_reload_error: Option<String>,
    /// What the kernel holds new cgroups below ([`held`]), as last written.
    watched: Vec<(u64, u32)>,
    /// Agents' parent cgroups found missing (each is warned about once).
    unwatched: std::collections::HashSet<PathBuf>,
    /// Held cgroups not decided at the first scan that saw them, since
    /// then.
    held_since: HashMap<u64, std::time::Instant>,
    /// The last integrity check.
    integrity: Option<pincer_model::control::Integrity>,
}

fn serve(
    options: &DaemonOptions,
    config: Config,
    missions: HashMap<String, Mission>,
    pods: Option<kubernetes::Pods>,
    held: &SigSet,
) -> Result<(), DaemonError> {
    let lock = pins::lock(&config)?;
    // A changed snapshot is refused before the programs are loaded.
    let store = labels::Store::at(std::path::Path::new(paths::STATE_DIR));
    let saved = store.read()?;
    let (enforcer, reattached) = pins::enforcer(&config)?;
    let watched = Watched::Parked {
        release: Some(std::os::fd::AsRawFd::as_raw_fd(&*lock)),
    };
    // SAFETY: no thread runs yet (the loader's threads have ended; the
    // runtime comes later).
    let prepared = unsafe { Service::prepare(enforcer, watched) }?;

    if let Some(parent) = config.daemon.audit.parent() {
        fs::create_dir_all(parent).map_err(io_error(format!("creating {}", parent.display())))?;
    }
    let audit = AuditLog::open_with_key(
        Some(&config.daemon.audit),
        "pincer-daemon",
        AuditKey::File(config.daemon.audit_key_path()),
    )?
    .with_siem(config.daemon.siem.as_deref());
    let control = ControlServer::bind(&config.daemon.socket).map_err(DaemonError::Control)?;
    let journal = paths::journal_dir(&config.daemon.socket);
    fs::create_dir_all(&journal).map_err(io_error(format!("creating {}", journal.display())))?;

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(io_error("starting the runtime"))?;
    let mut service = {
        let _entered = runtime.enter();
        Service::new(prepared, audit)?
    };
    // What agents made stays evidence across a reboot: the saved labels
    // the map lacks come back before any agent is confined.
    let restored = service.twin().restore_labels(&saved)?;
    tracing::info!(restored, "labels restored from the snapshot");
    // Agents of a previous daemon stay confined by the kernel until the
    // first scan takes them over (or releases those no longer matched).
    let previous = service.twin().kernel_agents()?;
    let metrics = Arc::new(Metrics::new());
    service.twin().set_journal(Journal::new(journal));
    service.twin().set_metrics(Arc::clone(&metrics));
    let mut daemon = Daemon {
        config,
        config_path: options.config.clone(),
        missions,
        pods,
        service,
        confined: HashMap::new(),
        board: PromptBoard::new(None),
        snapshot: Arc::new(Mutex::new(Snapshot::default())),
        metrics,
        started: SystemTime::now(),
        reattached,
        reloads: 0,
        last_reload_error: None,
        watched: Vec::new(),
        unwatched: std::collections::HashSet::new(),
        held_since: HashMap::new(),
        integrity: None,
    };

    let result = runtime.block_on(async {
        let mut terminate = signal(SignalKind::terminate()).map_err(io_error("SIGTERM handler"))?;
        let mut interrupt = signal(SignalKind::interrupt()).map_err(io_error("SIGINT handler"))?;
        let mut hangup = signal(SignalKind::hangup()).map_err(io_error("SIGHUP handler"))?;
        sigprocmask(SigmaskHow::SIG_UNBLOCK, Some(held), None)
            .map_err(|e| io_error("unblocking signals")(e.into()))?;

        // A restarted daemon takes its pods over only once it knows them:
        // scanning before would release them.
        let pod_changes = match &daemon.pods {
            Some(pods) => {
                pods.start();
                tokio::select! {
                    () = pods.synced() => {}
                    _ = terminate.recv() => return Ok(()),
                    _ = interrupt.recv() => return Ok(()),
                }
                Some(pods.changes())
            }
            None => None,
        };
        // The cgroups `pincer run` registered with a previous daemon come
        // back first, then the scan takes over the rest.
        daemon.restore_registrations();
        daemon.scan(&previous)?;
        daemon.replay();
        let _metrics_server = match daemon.config.daemon.metrics {
            Some(addr) => {
                let server = MetricsServer::start(addr, Arc::clone(&daemon.metrics))?;
                tracing::info!(address = %server.local_addr(), "serving metrics");
                Some(server)
            }
            None => None,
        };
        let (commands, mut command_queue) = mpsc::unbounded_channel();
        let handler = Arc::new(Handler::new(
            Arc::clone(&daemon.board),
            Arc::clone(&daemon.snapshot),
            commands,
        ));
        tokio::spawn(async move {
            let Err(error) = control.serve(handler).await;
            tracing::error!(%error, "the control socket failed");
        });
        tracing::info!(
            config = %daemon.config_path.display(),
            agents = daemon.confined.len(),
            reattached,
            "pincer daemon running"
        );
        daemon.publish();
        let mut scan = tokio::time::interval(daemon.config.daemon.scan_every);
        // A scan slower than the period (many cgroups, a busy machine) waits
        // a whole period before the next rather than catching up at once:
        // the control socket and the events get their turn in between.
        scan.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // The first check once the first scan's agents run: a canary per
        // agent proves the programs decide for it.
        let mut check = tokio::time::interval_at(
            tokio::time::Instant::now() + std::time::Duration::from_secs(1),
            daemon.config.daemon.check_every,
        );
        check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                step = daemon.service.step() => {
                    // A vote may have made a grant: `pincer grants` shows it
                    // from now on.
                    if step? != Step::Records {
                        daemon.publish();
                    }
                    // A held cgroup's task waits: decide it now rather
                    // than at the next tick.
                    if daemon.service.twin().take_held_reports() {
                        daemon.scan(&[])?;
                    }
                }
                _ = scan.tick() => daemon.scan(&[])?,
                _ = check.tick() => daemon.check_integrity()?,
                () = pod_change(pod_changes.as_deref()) => daemon.scan(&[])?,
                Some(command) = command_queue.recv() => daemon.command(command)?,
                _ = hangup.recv() => {
                    daemon.reload()?;
                    scan.reset();
                }
                _ = terminate.recv() => return Ok(()),
                _ = interrupt.recv() => return Ok(()),
            }
        }
    });
    drop(runtime);

    // Stopping: nothing stays parked behind us, nothing parks any more.
    let Daemon {
        mut service,
        confined,
        config,
        ..
    } = daemon;
    let stopped = service.stop();
    match service.twin().save_labels(&store) {
        Ok(saved) => tracing::info!(saved, "labels saved"),
        Err(error) => tracing::warn!(%error, "cannot save the labels"),
    }
    let pin_dir = config.daemon.pin_dir.clone();
    if config.daemon.on_stop == OnStop::Remove {
        for id in confined.keys() {
            let _ = service.twin().release(*id);
        }
        service.finish(None);
        loader::unpin(&pin_dir)?;
        tracing::info!(pins = %pin_dir.display(), "stopped; pins removed, agents released");
    } else {
        service.finish(None);
        tracing::info!(pins = %pin_dir.display(), "stopped; the pins keep enforcing (ungranted access is refused until a daemon runs)");
    }
    drop(lock);
    stopped?;
    result
}

/// The next change of the node's pods; never without `[kubernetes]`.
async fn pod_change(changes: Option<&tokio::sync::Notify>) {
    match changes {
        Some(changes) => changes.notified().await,
        None => std::future::pending().await,
    }
}

impl Daemon {
    /// Reloads the configuration and missions; on error keeps the running
    /// ones and says why.
    fn reload(&mut self) -> Result<(), DaemonError> {
        let loaded = Config::from_file(&self.config_path)
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
        match (&mut self.pods, &config.kubernetes) {
            (Some(pods), Some(kubernetes)) => pods.reconfigure(kubernetes),
            (None, None) => {}
            _ => tracing::warn!("adding or removing [kubernetes] takes effect at the next start"),
        }
        self.config = config;
        self.missions = missions;
        self.reloads += 1;
        self.last_reload_error = None;
        self.confine_again()?;
        tracing::info!(agents = self.config.agents.len(), "configuration reloaded");
        self.scan(&[])
    }
}
