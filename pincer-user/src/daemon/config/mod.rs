//! The configuration of `pincer daemon --config FILE`: where the daemon
//! listens, pins and audits, and which agents it confines, each recognized
//! by the cgroup it runs in.
//!
//! ```toml
//! [daemon]
//! socket = "/run/pincer/pincer.sock"       # control socket (the default)
//! pin_dir = "/sys/fs/bpf/pincer"           # where links and maps are pinned (the default)
//! on_stop = "keep"                         # "keep" (the default) or "remove"
//! audit = "/var/log/pincer/audit.jsonl"    # audit log, JSON lines (the default)
//! audit_key = "/var/lib/pincer/audit.key"  # by default the audit path + ".key"
//! siem = "/var/log/pincer/ocsf.jsonl"      # audit records also as SIEM events; none by default
//! siem_format = "ocsf"                     # their format: "ocsf" (the default, and the only one)
//! metrics = "127.0.0.1:9464"               # Prometheus endpoint; none by default
//! log_format = "text"                      # "text" (the default) or "json"
//! cgroup_root = "/sys/fs/cgroup"           # the cgroup v2 mount (the default)
//! scan_every = "1s"                        # how often new cgroups are looked for (the default)
//! check_every = "30s"                      # how often the kernel's maps and programs are checked
//!                                          # against the configuration (the default)
//! ring_bytes = 262144                      # event ring buffer size (the default)
//!
//! [[agent]]
//! name = "claude"                          # [A-Za-z0-9._-], 1 to 64 characters, unique
//! cgroup = "agents.slice/claude-*.scope"   # pattern, relative to cgroup_root
//! mission = "/etc/pincer/missions/claude.toml"
//! mode = "ask"                             # "enforce", "audit" or "ask"; by default the
//!                                          # mission's defaults.on_unknown
//! confine_from = "start"                   # "start" (the default) or "exec"
//!
//! [labels]
//! policy = ["README.md", "/srv/site/config/"]  # added to every agent's policy set
//!
//! [[source]]                               # added to every agent's sources
//! path = "/srv/agent-cache/fetched"        # a file, or a directory and all in it
//! authority = "evidence"                   # "evidence" (the default) or "user"
//!
//! [kubernetes]                             # optional: confine this node's annotated pods
//! missions = "missions"                    # required: `pincer.dev/mission: NAME` is NAME.toml here
//! node = "worker-1"                        # by default the NODE_NAME environment variable
//! api = "https://10.0.0.1:6443"            # by default the in-cluster service account
//! kubepods = "kubepods.slice"              # the kubelet's cgroup (the default; "kubepods" for cgroupfs)
//! ```
//!
//! Every key of `[daemon]` is optional, and so is the table. A configuration
//! without agents is valid: such a daemon only serves `pincer run`
//! registrations.
//!
//! `[daemon]`:
//!
//! - `socket`, `pin_dir`, `audit`, `audit_key` and `cgroup_root` must be
//!   absolute paths, so that they do not depend on the directory the daemon
//!   starts in. `audit_key` must not be the audit log itself.
//! - `siem`, when set, receives every audit record that records an activity
//!   as an event in `siem_format` (OCSF 1.5.0 JSON lines, see
//!   [`crate::audit::ocsf`]), besides the audit log, whose HMAC chain it
//!   does not carry. It must be an absolute path, neither the audit log nor
//!   its key; `siem_format` without `siem` is refused.
//! - `on_stop`: with `"keep"`, stopping the daemon (SIGTERM) leaves the
//!   programs' links and maps pinned in `pin_dir`, so enforcement continues
//!   without the daemon; with `"remove"` it removes the pins, and
//!   enforcement ends with the daemon.
//! - `metrics` is an IP address and port (`"127.0.0.1:9464"`,
//!   `"[::1]:9464"`), not a host name.
//! - `scan_every` is a duration written like `"500ms"`, `"1s"` or `"1m"`,
//!   from 100ms to 1h; `check_every` likewise, from 1s to 1h (see
//!   [`crate::twin::integrity`]).
//! - `ring_bytes` is a power of two of at least 4096 (and at most 2^31).
//!
//! `[labels]` (optional): `policy`, patterns every agent's policy set gets
//! besides the default set and its mission's, written as in a mission
//! (`crate::labels::policy`), except that `~` is not expanded. The
//! configuration file itself and every agent's mission file are always
//! policy objects.
//!
//! `[[source]]` (optional, any number; `path` is required): content of
//! lower authority every agent the daemon confines reads as such, beside
//! its mission's own `[[source]]`s (`crate::mission`): a directory where
//! the host's harnesses keep fetched pages or tool results, a shared
//! download directory. `path` must be absolute (`~` is not expanded);
//! `authority` is `"evidence"` (the default) or `"user"`. The path is
//! resolved and its objects labelled when an agent is confined, like a
//! mission's; `pincer label revoke PATH` revokes it the same way.
//!
//! `[kubernetes]` (optional; `missions` is required): the daemon watches
//! the pods of its node through the Kubernetes API and confines the
//! containers of pods annotated `pincer.dev/mission` (see
//! `daemon::kubernetes`). `missions` is a directory, relative to the
//! configuration file's directory when relative. `node` is the node's name
//! as the API knows it (a DNS subdomain); without it the daemon reads the
//! `NODE_NAME` environment variable when it starts, and refuses to start
//! without either. `api` is the API server's `http://` or `https://` URL,
//! without credentials; without it the client configuration is inferred (a
//! kubeconfig, or in a pod its service account). `kubepods` is the
//! kubelet's parent cgroup relative to `cgroup_root`: `kubepods.slice` with
//! the systemd cgroup driver, `kubepods` with cgroupfs. A cgroup an
//! `[[agent]]` pattern matches is that agent's, pod or not.
//!
//! `[[agent]]` (`name`, `cgroup` and `mission` are required):
//!
//! - `name` is made of ASCII letters, digits, `.`, `_` and `-`, 1 to 64 of
//!   them, and is neither `.` nor `..`: names end up in file names, metric
//!   labels and log lines.
//! - `mission` is the mission file. A relative path is relative to the
//!   directory of the configuration file (not to the daemon's working
//!   directory), and `~` is not expanded. It is only checked here to be a
//!   path; the daemon reads the mission.
//! - `mode` overrides the mission's `defaults.on_unknown`: `"enforce"`
//!   denies what the mission does not grant (`"deny"`), `"audit"` allows and
//!   records it, `"ask"` parks it for the mission's voters.
//! - `confine_from`: `"start"` confines the cgroup's tasks from their first
//!   instruction; `"exec"` lets them through until one of them executes a
//!   program, whose open is the first thing decided under the mission. For
//!   cgroups a container runtime sets up (mounts, capabilities) before it
//!   executes the container's entrypoint: that set-up is the runtime's,
//!   not the agent's. New cgroups are held until decided either way.
//!
//! # Cgroup patterns
//!
//! `cgroup` is a `/`-separated path relative to `cgroup_root`: no leading
//! `/`, no `.` or `..` components and no empty components (so no trailing
//! `/` either). Each component is a glob in which `*` matches any run of
//! characters (none included) and `?` exactly one character; every other
//! character, `\` included (systemd writes `\x2d` in unit names), stands for
//! itself. A component that is exactly `**` matches any number of whole
//! components, zero included; `**` inside a longer component is refused.
//!
//! A cgroup matches when its whole path relative to `cgroup_root` does:
//!
//! | Pattern | Matches | Does not match |
//! |---|---|---|
//! | `agents.slice/*` | `agents.slice/a` | `agents.slice`, `agents.slice/a/b` |
//! | `agents.slice/**` | `agents.slice`, `agents.slice/a`, `agents.slice/a/b` | `other.slice/a` |
//! | `a/**/leaf-*` | `a/leaf-1`, `a/x/y/leaf-1` | `a/leaf`, `a/x/leaf-1/z` |
//! | `agent-?.scope` | `agent-1.scope` | `agent-10.scope` |
//!
//! The cgroup root itself (the empty path) matches only patterns made of
//! `**` components alone, which match every cgroup on the host.
//!
//! When the patterns of several agents match a cgroup, the agent declared
//! first wins ([`Config::agent_for`]); two agents with the very same pattern
//! are refused, since the second could never win.
//!
//! # Errors
//!
//! Parsing is strict, like missions': unknown keys, wrong types and bad
//! values are errors that name the file, the line and column, and the field
//! (`daemon.scan_every`, `agent[2].cgroup`; agents are counted from 1 in the
//! order they are written). A file that is not UTF-8 is refused at its first
//! bad byte.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use humantime::DurationError;

use crate::audit::default_key_path;
pub use crate::mission::Mode;
use crate::toml_file::{
    self, Document, Field, FileError, Named, Node, TomlError, named, or_list, toml_string,
};
pub use pattern::CgroupPattern;

mod pattern;

/// The control socket when `daemon.socket` is not set.
pub const DEFAULT_SOCKET: &str = crate::paths::DEFAULT_SOCKET;
/// Where links and maps are pinned when `daemon.pin_dir` is not set.
pub const DEFAULT_PIN_DIR: &str = "/sys/fs/bpf/pincer";
/// The audit log when `daemon.audit` is not set.
pub const DEFAULT_AUDIT: &str = "/var/log/pincer/audit.jsonl";
/// The cgroup v2 mount when `daemon.cgroup_root` is not set.
pub const DEFAULT_CGROUP_ROOT: &str = "/sys/fs/cgroup";
/// How often new cgroups are looked for when `daemon.scan_every` is not set.
pub const DEFAULT_SCAN_EVERY: Duration = Duration::from_secs(1);
/// Shortest `daemon.scan_every`: each scan walks the cgroup tree.
pub const MIN_SCAN_EVERY: Duration = Duration::from_millis(100);
/// Longest `daemon.scan_every`: an agent runs unconfined until its cgroup
/// is found, so an hour is already far too long for anything but tests.
pub const MAX_SCAN_EVERY: Duration = Duration::from_secs(3600);
/// How often the integrity check runs when `daemon.check_every` is not set.
pub const DEFAULT_CHECK_EVERY: Duration = Duration::from_secs(30);
/// Shortest `daemon.check_every`: each check forks a canary per agent.
pub const MIN_CHECK_EVERY: Duration = Duration::from_secs(1);
/// Smallest `daemon.ring_bytes`: one page.
pub const MIN_RING_BYTES: u32 = 4096;

/// An error in the daemon's configuration file: it cannot be read, or is
/// not a valid configuration (bad TOML, an unknown key, a wrong type or a
/// bad value).
pub type ConfigError = FileError;

/// The daemon's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// `[daemon]`.
    pub daemon: DaemonConfig,
    /// The `[[agent]]` entries, in file order: the first whose pattern
    /// matches a cgroup confines it.
    pub agents: Vec<AgentConfig>,
    /// `[labels] policy`: patterns every agent's policy set gets besides
    /// the default set and its mission's (see [`crate::labels::policy`]).
    pub policy: Vec<crate::labels::PolicyPattern>,
    /// The `[[source]]` entries: every confined agent's sources besides
    /// its mission's.
    pub sources: Vec<crate::mission::SourceSpec>,
    /// `[kubernetes]`: this node's annotated pods are agents too.
    pub kubernetes: Option<KubernetesConfig>,
    /// The file the configuration was read from (or would have been).
    pub path: PathBuf,
}

/// The kubelet's parent cgroup when `kubernetes.kubepods` is not set: the
/// systemd cgroup driver's.
pub const DEFAULT_KUBEPODS: &str = "kubepods.slice";
/// Where the node's name is read from when `kubernetes.node` is not set (the
/// DaemonSet sets it from the downward API).
pub const NODE_NAME_VARIABLE: &str = "NODE_NAME";

/// `[kubernetes]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubernetesConfig {
    /// The node whose pods are watched; `None`: [`NODE_NAME_VARIABLE`].
    pub node: Option<String>,
    /// The API server's URL; `None`: inferred (kubeconfig or in-cluster).
    pub api: Option<String>,
    /// The directory of the missions annotations name, absolute.
    pub missions: PathBuf,
    /// The kubelet's parent cgroup, relative to `cgroup_root`.
    pub kubepods: PathBuf,
}

impl KubernetesConfig {
    /// The node's name: `node`, or else the environment's `NODE_NAME`.
    pub fn node_name(&self, config: &Path) -> Result<String, String> {
        if let Some(node) = &self.node {
            return Ok(node.clone());
        }
        match std::env::var(NODE_NAME_VARIABLE) {
            Ok(name) => check_node_name(&name)
                .map(|()| name)
                .map_err(|why| format!("{NODE_NAME_VARIABLE} in the environment {why}")),
            Err(_) => Err(format!(
                "{}: kubernetes.node is not set and {NODE_NAME_VARIABLE} is not in the \
                 environment: the daemon would not know which pods are its node's",
                config.display()
            )),
        }
    }
}

/// `[daemon]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DaemonConfig {
    /// The control socket.
    pub socket: PathBuf,
    /// Where the programs' links and maps are pinned.
    pub pin_dir: PathBuf,
    /// What stopping the daemon does to the pins.
    pub on_stop: OnStop,
    /// The audit log.
    pub audit: PathBuf,
    /// The audit log's key file as written; see
    /// [`DaemonConfig::audit_key_path`] for the one to use.
    pub audit_key: Option<PathBuf>,
    /// Where audit records also go as SIEM events, if anywhere.
    pub siem: Option<PathBuf>,
    /// The format of those events.
    pub siem_format: SiemFormat,
    /// Where the Prometheus endpoint listens, if there is one.
    pub metrics: Option<SocketAddr>,
    /// How the daemon's own log lines are written.
    pub log_format: LogFormat,
    /// The cgroup v2 mount that agents' patterns are relative to.
    pub cgroup_root: PathBuf,
    /// How often new cgroups are looked for.
    pub scan_every: Duration,
    /// How often what the kernel holds is checked.
    pub check_every: Duration,
    /// Size of the event ring buffer in bytes.
    pub ring_bytes: u32,
}

impl Default for DaemonConfig {
    fn default() -> Self {
        Self {
            socket: PathBuf::from(DEFAULT_SOCKET),
            pin_dir: PathBuf::from(DEFAULT_PIN_DIR),
            on_stop: OnStop::default(),
            audit: PathBuf::from(DEFAULT_AUDIT),
            audit_key: None,
            siem: None,
            siem_format: SiemFormat::default(),
            metrics: None,
            log_format: LogFormat::default(),
            cgroup_root: PathBuf::from(DEFAULT_CGROUP_ROOT),
            scan_every: DEFAULT_SCAN_EVERY,
            check_every: DEFAULT_CHECK_EVERY,
            ring_bytes: pincer_common::EVENTS_BYTES,
        }
    }
}

impl DaemonConfig {
    /// The audit log's key file: `audit_key`, or the audit path + `.key`.
    pub fn audit_key_path(&self) -> PathBuf {
        self.audit_key
            .clone()
            .unwrap_or_else(|| default_key_path(&self.audit))
    }
}

/// What stopping the daemon (SIGTERM) does to the pinned programs and maps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum OnStop {
    /// They stay pinned, so enforcement continues without the daemon.
    #[default]
    Keep,
    /// They are removed, so enforcement ends with the daemon.
    Remove,
}

named!(OnStop: "keep" => Keep, "remove" => Remove);

/// How the daemon writes its own log lines.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum LogFormat {
    /// For people.
    #[default]
    Text,
    /// One JSON object a line, for log collectors.
    Json,
}

named!(LogFormat: "text" => Text, "json" => Json);

/// The format of the SIEM export.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum SiemFormat {
    /// OCSF events, one JSON object a line.
    #[default]
    Ocsf,
}

named!(SiemFormat: "ocsf" => Ocsf);

/// One `[[agent]]` entry.
///
/// Equality leaves out [`AgentConfig::number`] and [`AgentConfig::line`]:
/// they say where the entry was written, not what it configures, and
/// rendering moves them.
#[derive(Debug, Clone, Eq)]
pub struct AgentConfig {
    /// Unique among the agents: `[A-Za-z0-9._-]{1,64}`.
    pub name: String,
    /// Which cgroups are this agent's.
    pub cgroup: CgroupPattern,
    /// The mission file, absolute.
    pub mission: PathBuf,
    /// Overrides the mission's `defaults.on_unknown` when set.
    pub mode: Option<Mode>,
    /// Confinement starts at the first program a task of the cgroup
    /// executes (`confine_from = "exec"`), not at its first instruction.
    pub from_exec: bool,
    /// Its place among the `[[agent]]` entries, from 1 (0 for an agent
    /// that a `pincer run` registered, which has no entry).
    pub number: usize,
    /// 1-based line of its `mission` key in the file, where errors about
    /// the mission point.
    pub line: usize,
}

impl PartialEq for AgentConfig {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
            && self.cgroup == other.cgroup
            && self.mission == other.mission
            && self.mode == other.mode
            && self.from_exec == other.from_exec
    }
}

impl AgentConfig {
    /// Where messages about the agent's mission point: `file:line:
    /// agent[N].mission` in the configuration `config`, or the agent's name
    /// when a `pincer run` registered it.
    pub fn mission_place(&self, config: &Path) -> String {
        if self.number == 0 {
            return format!("agent `{}`", self.name);
        }
        format!(
            "{}:{}: agent[{}].mission",
            config.display(),
            self.line,
            self.number
        )
    }
}

impl Config {
    /// Reads and parses a configuration file.
    pub fn from_file(path: &Path) -> Result<Config, ConfigError> {
        toml_file::read_file(path, "daemon configuration", |text| {
            Self::from_str(text, path)
        })
    }

    /// Parses a configuration; `path` names the file in messages, and
    /// relative mission paths are relative to its directory (itself taken
    /// relative to the working directory when `path` is relative).
    pub fn from_str(text: &str, path: &Path) -> Result<Config, ConfigError> {
        Ok(parse(&Document::new(text, path))?)
    }

    /// The configuration of a file with every default and no agents.
    pub fn default_at(path: &Path) -> Config {
        Config {
            daemon: DaemonConfig::default(),
            agents: Vec::new(),
            policy: Vec::new(),
            sources: Vec::new(),
            kubernetes: None,
            path: path.to_owned(),
        }
    }

    /// The agent whose pattern matches a cgroup (by its path relative to
    /// the cgroup root): the first declared when several do.
    pub fn agent_for(&self, relative: &Path) -> Option<&AgentConfig> {
        self.agents
            .iter()
            .find(|agent| agent.cgroup.matches(relative))
    }

    /// The effective configuration as TOML, every setting written out;
    /// settings that are not set are described in comments. Parsing it
    /// again (with the same `path`) gives an equal configuration.
    pub fn render(&self) -> String {
        let daemon = &self.daemon;
        let mut lines = vec![
            format!(
                "# pincer daemon configuration: {}, with every default written out.",
                toml_string(&self.path.to_string_lossy())
            ),
            String::new(),
            "[daemon]".to_owned(),
            setting("socket", &path_string(&daemon.socket)),
            setting("pin_dir", &path_string(&daemon.pin_dir)),
            setting("on_stop", &toml_string(&daemon.on_stop.to_string())),
            setting("audit", &path_string(&daemon.audit)),
            match &daemon.audit_key {
                Some(key) => setting("audit_key", &path_string(key)),
                None => format!(
                    "# audit_key is not set: the key is {}",
                    path_string(&daemon.audit_key_path())
                ),
            },
            match &daemon.siem {
                Some(siem) => format!(
                    "{}\n{}",
                    setting("siem", &path_string(siem)),
                    setting("siem_format", &toml_string(&daemon.siem_format.to_string()))
                ),
                None => "# siem is not set: no SIEM export".to_owned(),
            },
            match &daemon.metrics {
                Some(address) => setting("metrics", &toml_string(&address.to_string())),
                None => "# metrics is not set: no Prometheus endpoint".to_owned(),
            },
            setting("log_format", &toml_string(&daemon.log_format.to_string())),
            setting("cgroup_root", &path_string(&daemon.cgroup_root)),
            setting(
                "scan_every",
                &toml_string(&humantime::format_duration(daemon.scan_every).to_string()),
            ),
            setting(
                "check_every",
                &toml_string(&humantime::format_duration(daemon.check_every).to_string()),
            ),
            setting("ring_bytes", &daemon.ring_bytes.to_string()),
        ];
        if self.agents.is_empty() {
            lines.push(String::new());
            lines.push("# No [[agent]]: only `pincer run` registrations are served.".to_owned());
        }
        for agent in &self.agents {
            lines.extend([
                String::new(),
                "[[agent]]".to_owned(),
                setting("name", &toml_string(&agent.name)),
                setting("cgroup", &toml_string(agent.cgroup.as_str())),
                setting("mission", &path_string(&agent.mission)),
                match agent.mode {
                    Some(mode) => setting("mode", &toml_string(&mode.to_string())),
                    None => {
                        "# mode is not set: the mission's defaults.on_unknown decides".to_owned()
                    }
                },
                setting(
                    "confine_from",
                    &toml_string(if agent.from_exec { "exec" } else { "start" }),
                ),
            ]);
        }
        for source in &self.sources {
            let authority = if source.authority == pincer_common::authority::USER {
                "user"
            } else {
                "evidence"
            };
            lines.extend([
                String::new(),
                "[[source]]".to_owned(),
                setting("path", &path_string(&source.path)),
                setting("authority", &toml_string(authority)),
            ]);
        }
        if let Some(kubernetes) = &self.kubernetes {
            lines.extend([
                String::new(),
                "[kubernetes]".to_owned(),
                setting("missions", &path_string(&kubernetes.missions)),
                match &kubernetes.node {
                    Some(node) => setting("node", &toml_string(node)),
                    None => format!(
                        "# node is not set: the {NODE_NAME_VARIABLE} environment variable names it"
                    ),
                },
                match &kubernetes.api {
                    Some(api) => setting("api", &toml_string(api)),
                    None => "# api is not set: a kubeconfig or the pod's service account names it"
                        .to_owned(),
                },
                setting("kubepods", &path_string(&kubernetes.kubepods)),
            ]);
        }
        if !self.policy.is_empty() {
            let patterns: Vec<String> = self
                .policy
                .iter()
                .map(|pattern| toml_string(&pattern.text()))
                .collect();
            lines.extend([
                String::new(),
                "[labels]".to_owned(),
                setting("policy", &format!("[{}]", patterns.join(", "))),
            ]);
        }
        let mut text = lines.join("\n");
        text.push('\n');
        text
    }

    /// `mission` with this configuration's `[[source]]`s added to its own
    /// (a path the mission already declares keeps the mission's entry).
    pub fn with_sources(&self, mission: &crate::mission::Mission) -> crate::mission::Mission {
        let mut mission = mission.clone();
        for source in &self.sources {
            if !mission.sources.iter().any(|own| own.path == source.path) {
                mission.sources.push(source.clone());
            }
        }
        mission
    }

    /// The policy set of an agent of this configuration running `mission`:
    /// the default set, what the mission adds (and the mission file), what
    /// `[labels]` adds, and this file.
    pub fn policy_set(&self, mission: &crate::mission::Mission) -> crate::labels::PolicySet {
        use crate::labels::policy::{Place, PolicyPattern, Protects};
        let mut extra = mission.policy_set().added();
        extra.extend(self.policy.iter().cloned());
        if let Ok(path) = std::fs::canonicalize(&self.path) {
            extra.push(PolicyPattern {
                place: Place::Path(path),
                protects: Protects::NAMED,
            });
        }
        crate::labels::PolicySet::with_defaults(&extra)
    }
}

fn setting(key: &str, value: &str) -> String {
    format!("{key} = {value}")
}

fn path_string(path: &Path) -> String {
    toml_string(&path.to_string_lossy())
}

// The file is read into a tree of values that keep their spans, and checked
// by hand rather than by serde's derive: every unknown key, wrong type and
// bad value is then reported by this module, with its position and its
// field. A new key is a name in one of the `fields` calls below plus its
// check.

fn parse(doc: &Document<'_>) -> Result<Config, TomlError> {
    let root: Node = doc.deserialize()?;
    let root = Field::root(&root);
    let [daemon, agents, labels, sources, kubernetes] =
        doc.fields(&root, ["daemon", "agent", "labels", "source", "kubernetes"])?;
    let daemon = match daemon {
        Some(table) => parse_daemon(doc, &table)?,
        None => DaemonConfig::default(),
    };
    let agents = match agents {
        Some(list) => parse_agents(doc, &list)?,
        None => Vec::new(),
    };
    let policy = match labels {
        Some(table) => parse_labels(doc, &table)?,
        None => Vec::new(),
    };
    let sources = match sources {
        Some(list) => parse_sources(doc, &list)?,
        None => Vec::new(),
    };
    let kubernetes = kubernetes
        .map(|table| parse_kubernetes(doc, &table))
        .transpose()?;
    Ok(Config {
        daemon,
        agents,
        policy,
        sources,
        kubernetes,
        path: doc.path().to_owned(),
    })
}

/// `[kubernetes]`: `missions` (required), `node`, `api`, `kubepods`.
fn parse_kubernetes(doc: &Document<'_>, table: &Field<'_>) -> Result<KubernetesConfig, TomlError> {
    let [missions, node, api, kubepods] =
        doc.fields(table, ["missions", "node", "api", "kubepods"])?;
    let missions = doc.required_in(table, "missions", missions)?;
    let missions = resolve_mission(doc, &missions)?;
    // A string the check accepts, or the check's word on it at its place.
    let checked = |field: Option<Field<'_>>, check: fn(&str) -> Result<(), String>| {
        field
            .map(|field| {
                let text = doc.string(&field)?;
                check(text)
                    .map(|()| text.to_owned())
                    .map_err(|why| doc.error(&field, why))
            })
            .transpose()
    };
    let node = checked(node, check_node_name)?;
    let api = checked(api, check_api_url)?;
    let kubepods = match kubepods {
        Some(field) => {
            let text = doc.string(&field)?;
            check_relative_cgroup(text).map_err(|why| doc.error(&field, why))?;
            PathBuf::from(text)
        }
        None => PathBuf::from(DEFAULT_KUBEPODS),
    };
    Ok(KubernetesConfig {
        node,
        api,
        missions,
        kubepods,
    })
}

/// A node's name is a DNS subdomain: it goes into the field selector of
/// every list and watch.
fn check_node_name(name: &str) -> Result<(), String> {
    let valid = !name.is_empty()
        && name.len() <= 253
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-')
        && name
            .split('.')
            .all(|label| !label.is_empty() && !label.starts_with('-') && !label.ends_with('-'));
    if valid {
        Ok(())
    } else {
        Err(format!(
            "{} is not a node name (lower-case letters, digits, \"-\" and \".\", \
             at most 253 characters)",
            toml_string(name)
        ))
    }
}

/// The API server's URL: `http` or `https`, a host, and no credentials
/// (they would end up in logs; the client takes them from a kubeconfig or
/// the service account).
fn check_api_url(text: &str) -> Result<(), String> {
    let uri: http::Uri = text
        .parse()
        .map_err(|error| format!("invalid URL {}: {error}", toml_string(text)))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) {
        return Err(format!(
            "must be an http:// or https:// URL (not {})",
            toml_string(text)
        ));
    }
    let Some(authority) = uri.authority() else {
        return Err(format!("names no host: {}", toml_string(text)));
    };
    if authority.as_str().contains('@') {
        return Err(
            "must not carry credentials: use a kubeconfig or the pod's service account".to_owned(),
        );
    }
    Ok(())
}

/// A cgroup path relative to the cgroup root: no leading `/`, no empty,
/// `.` or `..` components.
fn check_relative_cgroup(text: &str) -> Result<(), String> {
    if text.is_empty() {
        return Err("must not be empty".to_owned());
    }
    if text.starts_with('/') {
        return Err(format!(
            "must be relative to daemon.cgroup_root (not {})",
            toml_string(text)
        ));
    }
    if text
        .split('/')
        .any(|part| part.is_empty() || part == "." || part == ".." || part.contains('\0'))
    {
        return Err(format!(
            "{} has an empty, \".\" or \"..\" component",
            toml_string(text)
        ));
    }
    Ok(())
}

/// `[[source]]`: `path` (absolute) and `authority`, as in a mission.
fn parse_sources(
    doc: &Document<'_>,
    list: &Field<'_>,
) -> Result<Vec<crate::mission::SourceSpec>, TomlError> {
    let Some(items) = list.items() else {
        let mut error = doc.wrong_type(list, "an array of tables");
        error
            .message
            .push_str(" (write each source as a [[source]] table)");
        return Err(error);
    };
    let mut sources: Vec<crate::mission::SourceSpec> = Vec::new();
    for table in items {
        let [path, authority] = doc.fields(&table, ["path", "authority"])?;
        let path = doc.required_in(&table, "path", path)?;
        let line = doc.line(path.offset);
        let resolved = absolute_path(doc, &path)?;
        if sources.iter().any(|earlier| earlier.path == resolved) {
            return Err(doc.error(&path, "is already a source above"));
        }
        let authority = match authority {
            Some(field) => choice(doc, &field, &crate::mission::SOURCE_AUTHORITIES)?,
            None => pincer_common::authority::EVIDENCE,
        };
        sources.push(crate::mission::SourceSpec {
            path: resolved,
            authority,
            line,
            file: Some(doc.path().to_owned()),
        });
    }
    Ok(sources)
}

/// `[labels]`: `policy`, patterns added to every agent's policy set. `~`
/// is not expanded (whose home would it be?).
fn parse_labels(
    doc: &Document<'_>,
    table: &Field<'_>,
) -> Result<Vec<crate::labels::PolicyPattern>, TomlError> {
    let [policy] = doc.fields(table, ["policy"])?;
    let Some(policy) = policy else {
        return Ok(Vec::new());
    };
    let Some(items) = policy.items() else {
        return Err(doc.wrong_type(&policy, "an array of strings"));
    };
    items
        .map(|item| {
            let text = doc.string(&item)?;
            crate::labels::PolicyPattern::parse(text, None)
                .map_err(|message| doc.error(&item, message))
        })
        .collect()
}

fn parse_daemon(doc: &Document<'_>, table: &Field<'_>) -> Result<DaemonConfig, TomlError> {
    let [
        socket,
        pin_dir,
        on_stop,
        audit,
        audit_key,
        siem,
        siem_format,
        metrics,
        log_format,
        cgroup_root,
        scan_every,
        check_every,
        ring_bytes,
    ] = doc.fields(
        table,
        [
            "socket",
            "pin_dir",
            "on_stop",
            "audit",
            "audit_key",
            "siem",
            "siem_format",
            "metrics",
            "log_format",
            "cgroup_root",
            "scan_every",
            "check_every",
            "ring_bytes",
        ],
    )?;
    let mut config = DaemonConfig::default();
    if let Some(field) = socket {
        config.socket = absolute_path(doc, &field)?;
    }
    if let Some(field) = pin_dir {
        config.pin_dir = absolute_path(doc, &field)?;
    }
    if let Some(field) = on_stop {
        config.on_stop = choice(doc, &field, OnStop::NAMES)?;
    }
    if let Some(field) = audit {
        config.audit = absolute_path(doc, &field)?;
    }
    if let Some(field) = audit_key {
        let key = absolute_path(doc, &field)?;
        // The key would be read back as the log's first line, and lost.
        if key == config.audit {
            return Err(doc.error(&field, "must not be the audit log itself"));
        }
        config.audit_key = Some(key);
    }
    if let Some(field) = &siem {
        let path = absolute_path(doc, field)?;
        // Either would be garbled by lines of another kind.
        if path == config.audit {
            return Err(doc.error(field, "must not be the audit log itself"));
        }
        if path == config.audit_key_path() {
            return Err(doc.error(field, "must not be the audit log's key"));
        }
        config.siem = Some(path);
    }
    if let Some(field) = siem_format {
        if siem.is_none() {
            return Err(doc.error(
                &field,
                "is set but daemon.siem is not: set siem to the file the events go to",
            ));
        }
        config.siem_format = choice(doc, &field, SiemFormat::NAMES)?;
    }
    if let Some(field) = metrics {
        let text = doc.string(&field)?;
        let address = text.parse().map_err(|_| {
            doc.error(
                &field,
                format!(
                    "invalid address {} (write an IP address and a port, like \
                     \"127.0.0.1:9464\" or \"[::1]:9464\")",
                    toml_string(text)
                ),
            )
        })?;
        config.metrics = Some(address);
    }
    if let Some(field) = log_format {
        config.log_format = choice(doc, &field, LogFormat::NAMES)?;
    }
    if let Some(field) = cgroup_root {
        config.cgroup_root = absolute_path(doc, &field)?;
    }
    if let Some(field) = scan_every {
        config.scan_every = parse_every(doc, &field, MIN_SCAN_EVERY..=MAX_SCAN_EVERY)?;
    }
    if let Some(field) = check_every {
        config.check_every = parse_every(doc, &field, MIN_CHECK_EVERY..=MAX_SCAN_EVERY)?;
    }
    if let Some(field) = ring_bytes {
        let n = doc.integer(&field)?;
        config.ring_bytes = u32::try_from(n)
            .ok()
            .filter(|bytes| bytes.is_power_of_two() && *bytes >= MIN_RING_BYTES)
            .ok_or_else(|| {
                doc.error(
                    &field,
                    format!(
                        "must be a power of two from {MIN_RING_BYTES} to {} (not {n})",
                        1u32 << 31
                    ),
                )
            })?;
    }
    Ok(config)
}

fn parse_every(
    doc: &Document<'_>,
    field: &Field<'_>,
    range: std::ops::RangeInclusive<Duration>,
) -> Result<Duration, TomlError> {
    let text = doc.string(field)?;
    let duration = humantime::parse_duration(text).map_err(|cause| {
        doc.error(
            field,
            match cause {
                DurationError::NumberOverflow => {
                    format!("duration {} is too large", toml_string(text))
                }
                _ => format!(
                    "invalid duration {} (write it like \"500ms\", \"1s\" or \"1m\")",
                    toml_string(text)
                ),
            },
        )
    })?;
    if !range.contains(&duration) {
        return Err(doc.error(
            field,
            format!(
                "must be from {} to {} (not {})",
                humantime::format_duration(*range.start()),
                humantime::format_duration(*range.end()),
                humantime::format_duration(duration)
            ),
        ));
    }
    Ok(duration)
}

fn parse_agents(doc: &Document<'_>, list: &Field<'_>) -> Result<Vec<AgentConfig>, TomlError> {
    let Some(items) = list.items() else {
        let mut error = doc.wrong_type(list, "an array of tables");
        error
            .message
            .push_str(" (write each agent as an [[agent]] table)");
        return Err(error);
    };
    let mut agents: Vec<AgentConfig> = Vec::new();
    // Names and patterns seen so far, to the agent (from 1) that has them.
    let mut names = HashMap::new();
    let mut patterns = HashMap::new();
    for (index, table) in items.enumerate() {
        let number = index + 1;
        let [name, cgroup, mission, mode, confine_from] = doc.fields(
            &table,
            ["name", "cgroup", "mission", "mode", "confine_from"],
        )?;

        let name = doc.required_in(&table, "name", name)?;
        let name_text = doc.string(&name)?;
        check_agent_name(name_text).map_err(|message| doc.error(&name, message))?;
        if let Some(first) = names.insert(name_text, number) {
            return Err(doc.error(
                &name,
                format!(
                    "duplicate agent name {} (agent[{first}] has it)",
                    toml_string(name_text)
                ),
            ));
        }

        let cgroup = doc.required_in(&table, "cgroup", cgroup)?;
        let pattern = CgroupPattern::parse(doc.string(&cgroup)?)
            .map_err(|message| doc.error(&cgroup, message))?;
        if let Some(first) = patterns.insert(pattern.as_str().to_owned(), number) {
            return Err(doc.error(
                &cgroup,
                format!(
                    "same pattern as agent[{first}], which wins every cgroup it matches: \
                     this agent would never confine anything"
                ),
            ));
        }

        let mission = doc.required_in(&table, "mission", mission)?;
        let mission_line = doc.line(mission.offset);
        let mission = resolve_mission(doc, &mission)?;

        let mode = mode
            .map(|mode| choice(doc, &mode, Mode::NAMES))
            .transpose()?;
        let from_exec = confine_from
            .map(|from| choice(doc, &from, &[("start", false), ("exec", true)]))
            .transpose()?
            .unwrap_or(false);

        agents.push(AgentConfig {
            name: name_text.to_owned(),
            cgroup: pattern,
            mission,
            mode,
            from_exec,
            number,
            line: mission_line,
        });
    }
    Ok(agents)
}

/// Agent names end up in file names, metric labels and log lines.
fn check_agent_name(name: &str) -> Result<(), String> {
    let valid_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if let Some(bad) = name.chars().find(|c| !valid_char(*c)) {
        return Err(format!(
            "{} is not allowed in {} (only letters, digits, \".\", \"_\" and \"-\")",
            toml_string(&bad.to_string()),
            toml_string(name)
        ));
    }
    // ASCII from here on: bytes are characters.
    if name.is_empty() || name.len() > 64 {
        return Err(format!(
            "must be 1 to 64 characters long (not {})",
            name.len()
        ));
    }
    if name == "." || name == ".." {
        return Err(format!(
            "must not be {} (it means a directory when used as a file name)",
            toml_string(name)
        ));
    }
    Ok(())
}

/// The mission's path, absolute: a relative one is taken from the
/// configuration file's directory, so that the file means the same whatever
/// directory the daemon starts in.
fn resolve_mission(doc: &Document<'_>, field: &Field<'_>) -> Result<PathBuf, TomlError> {
    let path = path(doc, field)?;
    if path.starts_with("~") {
        return Err(doc.error(
            field,
            "\"~\" is not expanded (whose home would it be?): write the path in full",
        ));
    }
    let directory = doc.path().parent().unwrap_or(Path::new(""));
    std::path::absolute(directory.join(&path)).map_err(|error| {
        doc.error(
            field,
            format!("cannot make {} absolute: {error}", path.display()),
        )
    })
}

/// Looks a string up in `choices`, the accepted spellings of a setting.
fn choice<T: Copy>(
    doc: &Document<'_>,
    field: &Field<'_>,
    choices: &[(&str, T)],
) -> Result<T, TomlError> {
    let text = doc.string(field)?;
    choices
        .iter()
        .find(|(name, _)| *name == text)
        .map(|(_, choice)| *choice)
        .ok_or_else(|| {
            let names: Vec<String> = choices.iter().map(|(name, _)| toml_string(name)).collect();
            doc.error(
                field,
                format!(
                    "unknown value {} (expected {})",
                    toml_string(text),
                    or_list(&names)
                ),
            )
        })
}

/// A path: not empty and without NUL bytes.
fn path(doc: &Document<'_>, field: &Field<'_>) -> Result<PathBuf, TomlError> {
    let text = doc.string(field)?;
    if text.is_empty() {
        return Err(doc.error(field, "must not be empty"));
    }
    if text.contains('\0') {
        return Err(doc.error(field, "must not contain a NUL byte"));
    }
    Ok(PathBuf::from(text))
}

fn absolute_path(doc: &Document<'_>, field: &Field<'_>) -> Result<PathBuf, TomlError> {
    let path = path(doc, field)?;
    if !path.is_absolute() {
        return Err(doc.error(
            field,
            format!(
                "must be an absolute path (not {})",
                toml_string(&path.to_string_lossy())
            ),
        ));
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;
    use crate::toml_file::test_support::{Parts, field};

    const CONFIG: &str = "/etc/pincer/daemon.toml";

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::from_str(text, Path::new(CONFIG))
    }

    /// The position, field and message of an `Invalid` error.
    fn invalid(text: &str) -> Parts {
        match parse(text) {
            Err(ConfigError::Invalid(error)) => error.parts(),
            other => panic!("expected an invalid configuration, got {other:?}"),
        }
    }

    /// An agent entry whose `cgroup` is on line 3 of the text it starts.
    fn agent_with_cgroup(name: &str, cgroup: &str) -> String {
        format!("[[agent]]\nname = \"{name}\"\ncgroup = \"{cgroup}\"\nmission = \"m.toml\"\n")
    }

    fn pattern(text: &str) -> CgroupPattern {
        CgroupPattern::parse(text).unwrap()
    }

    #[test]
    fn an_empty_file_is_every_default() {
        let config = parse("").unwrap();
        assert_eq!(config, Config::default_at(Path::new(CONFIG)));
        let daemon = &config.daemon;
        assert_eq!(daemon.socket, Path::new("/run/pincer/pincer.sock"));
        assert_eq!(daemon.pin_dir, Path::new("/sys/fs/bpf/pincer"));
        assert_eq!(daemon.on_stop, OnStop::Keep);
        assert_eq!(daemon.audit, Path::new("/var/log/pincer/audit.jsonl"));
        assert_eq!(daemon.audit_key, None);
        assert_eq!(
            daemon.audit_key_path(),
            Path::new("/var/log/pincer/audit.jsonl.key")
        );
        assert_eq!(daemon.metrics, None);
        assert_eq!(daemon.log_format, LogFormat::Text);
        assert_eq!(daemon.cgroup_root, Path::new("/sys/fs/cgroup"));
        assert_eq!(daemon.scan_every, Duration::from_secs(1));
        assert_eq!(daemon.ring_bytes, 262_144);
        assert!(config.agents.is_empty());
        assert_eq!(config.path, Path::new(CONFIG));
        // An empty [daemon] is the same as none.
        assert_eq!(parse("[daemon]\n").unwrap(), config);
    }

    /// A seed of the fuzz corpus too, so the fuzzer starts from what these
    /// tests check.
    const FULL: &str = include_str!("../../../../fuzz/corpus/daemon_config/tests_full.toml");

    #[test]
    fn a_full_configuration() {
        let config = parse(FULL).unwrap();
        assert_eq!(
            config.daemon,
            DaemonConfig {
                socket: PathBuf::from("/run/p/control.sock"),
                pin_dir: PathBuf::from("/sys/fs/bpf/p"),
                on_stop: OnStop::Remove,
                audit: PathBuf::from("/var/log/p/audit.jsonl"),
                audit_key: Some(PathBuf::from("/var/lib/p/audit.key")),
                siem: Some(PathBuf::from("/var/log/p/ocsf.jsonl")),
                siem_format: SiemFormat::Ocsf,
                metrics: Some("[::1]:9464".parse().unwrap()),
                log_format: LogFormat::Json,
                cgroup_root: PathBuf::from("/mnt/cgroup2"),
                scan_every: Duration::from_millis(250),
                check_every: Duration::from_secs(5),
                ring_bytes: 1 << 20,
            }
        );
        assert_eq!(
            config.daemon.audit_key_path(),
            Path::new("/var/lib/p/audit.key")
        );
        assert_eq!(
            config
                .policy
                .iter()
                .map(crate::labels::PolicyPattern::text)
                .collect::<Vec<_>>(),
            ["README.md", "docs/", "/srv/site/config/"]
        );
        let [claude, codex] = config.agents.as_slice() else {
            panic!("expected two agents, got {:?}", config.agents);
        };
        assert_eq!(claude.name, "claude");
        assert_eq!(claude.cgroup.to_string(), "agents.slice/claude-*.scope");
        assert_eq!(
            claude.mission,
            Path::new("/etc/pincer/missions/claude.toml")
        );
        assert_eq!(claude.mode, Some(Mode::Ask));
        assert_eq!((claude.number, claude.line), (1, 20));
        assert_eq!(codex.name, "codex_2.0-beta");
        // Relative to the configuration's directory.
        assert_eq!(codex.mission, Path::new("/etc/pincer/missions/codex.toml"));
        assert_eq!(codex.mode, None);
        assert_eq!((codex.number, codex.line), (2, 26));
    }

    #[test]
    fn agents_may_be_inline_tables() {
        let config = parse(
            "agent = [\n  { name = \"a\", cgroup = \"a/*\", mission = \"/m\" },\n  \
             { name = \"b\", cgroup = \"b/*\", mission = \"/m\", mode = \"enforce\" },\n]\n",
        )
        .unwrap();
        assert_eq!(config.agents.len(), 2);
        assert_eq!(config.agents[1].line, 3);
        assert_eq!(config.agents[1].mode, Some(Mode::Enforce));
        assert!(parse("agent = []\n").unwrap().agents.is_empty());
    }

    #[test]
    fn dotted_keys_are_the_same_as_a_table() {
        let config = parse("daemon.socket = \"/s\"\ndaemon.on_stop = \"remove\"\n").unwrap();
        assert_eq!(config.daemon.socket, Path::new("/s"));
        assert_eq!(config.daemon.on_stop, OnStop::Remove);
        // A table without a span of its own still gets a position.
        assert_eq!(
            invalid("daemon.socket = \"/s\"\ndaemon.sokcet = \"/t\"\n"),
            (
                2,
                8,
                field("daemon.sokcet"),
                "unknown field `sokcet`, expected one of `socket`, `pin_dir`, `on_stop`, \
                 `audit`, `audit_key`, `siem`, `siem_format`, `metrics`, `log_format`, \
                 `cgroup_root`, `scan_every`, `check_every`, `ring_bytes`"
                    .to_owned()
            )
        );
    }

    #[test]
    fn relative_missions_follow_the_configuration_file() {
        let text = agent_with_cgroup("a", "x");
        let config = Config::from_str(&text, Path::new("/srv/conf/daemon.toml")).unwrap();
        assert_eq!(config.agents[0].mission, Path::new("/srv/conf/m.toml"));
        // A relative configuration path is taken from the working directory.
        let config = Config::from_str(&text, Path::new("daemon.toml")).unwrap();
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(config.agents[0].mission, cwd.join("m.toml"));
        assert!(config.agents[0].mission.is_absolute());
    }

    #[test]
    fn from_file_reads_and_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("daemon.toml");
        fs::write(&path, agent_with_cgroup("a", "x")).unwrap();
        let config = Config::from_file(&path).unwrap();
        assert_eq!(config.path, path);
        assert_eq!(config.agents[0].mission, dir.path().join("m.toml"));

        fs::write(&path, "[daemon]\nbogus = 1\n").unwrap();
        let error = Config::from_file(&path).unwrap_err();
        assert_eq!(
            error.to_string(),
            format!(
                "{}:2:1: daemon.bogus: unknown field `bogus`, expected one of `socket`, \
                 `pin_dir`, `on_stop`, `audit`, `audit_key`, `siem`, `siem_format`, \
                 `metrics`, `log_format`, `cgroup_root`, `scan_every`, `check_every`, `ring_bytes`",
                path.display()
            )
        );

        let missing = dir.path().join("missing.toml");
        let error = Config::from_file(&missing).unwrap_err();
        assert!(
            matches!(&error, ConfigError::Io { path, source, .. }
                if *path == missing && source.kind() == std::io::ErrorKind::NotFound),
            "{error:?}"
        );
    }

    #[test]
    fn toml_syntax_errors_have_a_position() {
        let (line, column, field_name, message) = invalid("[daemon]\nsocket = \"/s\n");
        assert_eq!((line, field_name), (2, None));
        assert!(column > 1, "{column}");
        assert!(message.contains("invalid basic string"), "{message}");

        let (line, _, field_name, message) =
            invalid("[daemon]\nsocket = \"/a\"\nsocket = \"/b\"\n");
        assert_eq!((line, field_name), (3, None));
        assert!(message.contains("duplicate key"), "{message}");
    }

    #[test]
    fn unknown_top_level_keys() {
        assert_eq!(
            invalid("\n[agents]\nname = \"a\"\n"),
            (
                2,
                2,
                field("agents"),
                "unknown field `agents`, expected one of `daemon`, `agent`, `labels`, `source`, \
                 `kubernetes`"
                    .to_owned()
            )
        );
    }

    #[test]
    fn sources_are_every_agents_and_named_in_this_file() {
        let config = parse(
            "[[source]]\npath = \"/srv/fetched\"\n\n[[source]]\npath = \"/srv/notes\"\n\
             authority = \"user\"\n",
        )
        .unwrap();
        let found: Vec<_> = config
            .sources
            .iter()
            .map(|s| {
                (
                    s.path.to_str().unwrap(),
                    s.authority,
                    s.line,
                    s.file.clone(),
                )
            })
            .collect();
        let file = Some(PathBuf::from(CONFIG));
        assert_eq!(
            found,
            [
                (
                    "/srv/fetched",
                    pincer_common::authority::EVIDENCE,
                    2,
                    file.clone()
                ),
                ("/srv/notes", pincer_common::authority::USER, 5, file),
            ]
        );
        // A mission keeps its own entry for a path both declare, and gets
        // the others.
        let mut mission = crate::mission::Mission::parse(
            "[mission]\nname = \"m\"\n\n[[source]]\npath = \"/srv/notes\"\n",
            Path::new("/m.toml"),
        )
        .unwrap();
        mission = config.with_sources(&mission);
        let sources: Vec<_> = mission
            .sources
            .iter()
            .map(|s| (s.path.to_str().unwrap(), s.file.is_some()))
            .collect();
        assert_eq!(sources, [("/srv/notes", false), ("/srv/fetched", true)]);
        // And the effective configuration prints them back.
        let printed = config.render();
        let reread: Vec<_> = parse(&printed)
            .unwrap()
            .sources
            .into_iter()
            .map(|s| (s.path, s.authority))
            .collect();
        let written: Vec<_> = config
            .sources
            .iter()
            .map(|s| (s.path.clone(), s.authority))
            .collect();
        assert_eq!(reread, written, "{printed}");
    }

    #[test]
    fn bad_sources() {
        for (text, expected) in [
            (
                "[[source]]\nauthority = \"user\"\n",
                (1, 1, Some("source[1].path"), "missing field"),
            ),
            (
                "[[source]]\npath = \"fetched\"\n",
                (2, 8, Some("source[1].path"), "must be an absolute path"),
            ),
            (
                "[[source]]\npath = \"/a\"\nauthority = \"policy\"\n",
                (
                    3,
                    13,
                    Some("source[1].authority"),
                    "unknown value \"policy\"",
                ),
            ),
            (
                "[[source]]\npath = \"/a\"\n[[source]]\npath = \"/a\"\n",
                (4, 8, Some("source[2].path"), "is already a source above"),
            ),
            (
                "[[source]]\npath = \"/a\"\nowner = true\n",
                (3, 1, Some("source[1].owner"), "unknown field `owner`"),
            ),
            ("source = \"/a\"\n", (1, 10, Some("source"), "invalid type")),
        ] {
            let (line, column, field_name, message) = invalid(text);
            assert_eq!(
                (line, column, field_name.as_deref()),
                (expected.0, expected.1, expected.2),
                "{text}: {message}"
            );
            assert!(message.contains(expected.3), "{text}: {message}");
        }
    }

    #[test]
    fn unknown_keys_in_daemon() {
        let (line, column, field_name, message) =
            invalid("[daemon]\nsocket = \"/s\"\n  pinned = true\n");
        assert_eq!((line, column), (3, 3));
        assert_eq!(field_name, field("daemon.pinned"));
        assert!(
            message.starts_with("unknown field `pinned`, expected one of `socket`"),
            "{message}"
        );
        // Tables inside [daemon] are unknown keys too.
        let (line, column, field_name, _) = invalid("[daemon.extra]\nx = 1\n");
        assert_eq!((line, column, field_name), (1, 9, field("daemon.extra")));
    }

    #[test]
    fn unknown_keys_in_an_agent() {
        let text = format!(
            "{}\n[[agent]]\nname = \"b\"\ncgroup = \"b\"\nmission = \"/m\"\nverdict = \"deny\"\n",
            agent_with_cgroup("a", "a")
        );
        assert_eq!(
            invalid(&text),
            (
                10,
                1,
                field("agent[2].verdict"),
                "unknown field `verdict`, expected one of `name`, `cgroup`, `mission`, `mode`, `confine_from`"
                    .to_owned()
            )
        );
    }

    #[test]
    fn wrong_types() {
        // The text, then the line, column, field and message of its error.
        type Case<'a> = (&'a str, (usize, usize, &'a str, &'a str));
        let cases: &[Case<'_>] = &[
            (
                "[daemon]\nsocket = 5\n",
                (
                    2,
                    10,
                    "daemon.socket",
                    "invalid type: integer 5, expected a string",
                ),
            ),
            (
                "[daemon]\nring_bytes = \"4096\"\n",
                (
                    2,
                    14,
                    "daemon.ring_bytes",
                    "invalid type: string \"4096\", expected an integer",
                ),
            ),
            (
                "[daemon]\nring_bytes = 4096.0\n",
                (
                    2,
                    14,
                    "daemon.ring_bytes",
                    "invalid type: float 4096, expected an integer",
                ),
            ),
            (
                "[daemon]\nscan_every = 1\n",
                (
                    2,
                    14,
                    "daemon.scan_every",
                    "invalid type: integer 1, expected a string",
                ),
            ),
            (
                "[daemon]\non_stop = false\n",
                (
                    2,
                    11,
                    "daemon.on_stop",
                    "invalid type: boolean false, expected a string",
                ),
            ),
            (
                "[daemon]\naudit = 1979-05-27T07:32:00Z\n",
                (
                    2,
                    9,
                    "daemon.audit",
                    "invalid type: datetime 1979-05-27T07:32:00Z, expected a string",
                ),
            ),
            (
                "[daemon]\nmetrics = [\"127.0.0.1:1\"]\n",
                (
                    2,
                    11,
                    "daemon.metrics",
                    "invalid type: array, expected a string",
                ),
            ),
            (
                "daemon = \"yes\"\n",
                (
                    1,
                    10,
                    "daemon",
                    "invalid type: string \"yes\", expected a table",
                ),
            ),
            (
                "[[daemon]]\nsocket = \"/s\"\n",
                (1, 1, "daemon", "invalid type: array, expected a table"),
            ),
            (
                "[agent]\nname = \"a\"\n",
                (
                    1,
                    1,
                    "agent",
                    "invalid type: table, expected an array of tables \
                     (write each agent as an [[agent]] table)",
                ),
            ),
            (
                "agent = [\"a\"]\n",
                (
                    1,
                    10,
                    "agent[1]",
                    "invalid type: string \"a\", expected a table",
                ),
            ),
            (
                "[[agent]]\nname = 7\n",
                (
                    2,
                    8,
                    "agent[1].name",
                    "invalid type: integer 7, expected a string",
                ),
            ),
            (
                "[[agent]]\nname = \"a\"\ncgroup = [\"a\", \"b\"]\n",
                (
                    3,
                    10,
                    "agent[1].cgroup",
                    "invalid type: array, expected a string",
                ),
            ),
            (
                "[[agent]]\nname = \"a\"\ncgroup = \"a\"\nmission = { path = \"/m\" }\n",
                (
                    4,
                    11,
                    "agent[1].mission",
                    "invalid type: table, expected a string",
                ),
            ),
        ];
        for (text, (line, column, field_name, message)) in cases {
            assert_eq!(
                invalid(text),
                (*line, *column, field(field_name), (*message).to_owned()),
                "{text}"
            );
        }
    }

    #[test]
    fn confinement_starts_at_the_first_instruction_unless_told_exec() {
        let config = Config::from_str(&agent_with_cgroup("a", "a"), Path::new("/d.toml")).unwrap();
        assert!(!config.agents[0].from_exec);
        let text = format!("{}confine_from = \"exec\"\n", agent_with_cgroup("a", "a"));
        let config = Config::from_str(&text, Path::new("/d.toml")).unwrap();
        assert!(config.agents[0].from_exec);
        let text = format!("{}confine_from = \"later\"\n", agent_with_cgroup("a", "a"));
        let (_, _, field_name, message) = invalid(&text);
        assert_eq!(field_name, field("agent[1].confine_from"));
        assert_eq!(
            message,
            "unknown value \"later\" (expected \"start\" or \"exec\")"
        );
    }

    #[test]
    fn bad_choices() {
        assert_eq!(
            invalid("[daemon]\non_stop = \"unpin\"\n"),
            (
                2,
                11,
                field("daemon.on_stop"),
                "unknown value \"unpin\" (expected \"keep\" or \"remove\")".to_owned()
            )
        );
        assert_eq!(
            invalid("[daemon]\nlog_format = \"JSON\"\n"),
            (
                2,
                14,
                field("daemon.log_format"),
                "unknown value \"JSON\" (expected \"text\" or \"json\")".to_owned()
            )
        );
        // The mission's word for enforcing is not a mode.
        let text = format!("{}mode = \"deny\"\n", agent_with_cgroup("a", "a"));
        assert_eq!(
            invalid(&text),
            (
                5,
                8,
                field("agent[1].mode"),
                "unknown value \"deny\" (expected \"enforce\", \"audit\" or \"ask\")".to_owned()
            )
        );
    }

    #[test]
    fn scan_every_is_a_duration_in_range() {
        assert_eq!(
            invalid("[daemon]\nscan_every = \"often\"\n"),
            (
                2,
                14,
                field("daemon.scan_every"),
                "invalid duration \"often\" (write it like \"500ms\", \"1s\" or \"1m\")".to_owned()
            )
        );
        assert_eq!(
            invalid("[daemon]\nscan_every = \"10\"\n").3,
            "invalid duration \"10\" (write it like \"500ms\", \"1s\" or \"1m\")"
        );
        assert_eq!(
            invalid("[daemon]\nscan_every = \"99ms\"\n"),
            (
                2,
                14,
                field("daemon.scan_every"),
                "must be from 100ms to 1h (not 99ms)".to_owned()
            )
        );
        assert_eq!(
            invalid("[daemon]\nscan_every = \"1h 1s\"\n").3,
            "must be from 100ms to 1h (not 1h 1s)"
        );
        assert_eq!(
            invalid("[daemon]\nscan_every = \"0s\"\n").3,
            "must be from 100ms to 1h (not 0s)"
        );
        for (text, duration) in [
            ("100ms", Duration::from_millis(100)),
            ("1h", Duration::from_secs(3600)),
            ("1m 30s", Duration::from_secs(90)),
        ] {
            let config = parse(&format!("[daemon]\nscan_every = \"{text}\"\n")).unwrap();
            assert_eq!(config.daemon.scan_every, duration, "{text}");
        }
    }

    #[test]
    fn ring_bytes_is_a_power_of_two_of_at_least_a_page() {
        for bad in [
            "4097",
            "6144",
            "2048",
            "0",
            "-4096",
            "4294967296",
            "8589934592",
        ] {
            assert_eq!(
                invalid(&format!("[daemon]\nring_bytes = {bad}\n")),
                (
                    2,
                    14,
                    field("daemon.ring_bytes"),
                    format!("must be a power of two from 4096 to 2147483648 (not {bad})")
                ),
            );
        }
        for good in [4096u32, 65536, 1 << 31] {
            let config = parse(&format!("[daemon]\nring_bytes = {good}\n")).unwrap();
            assert_eq!(config.daemon.ring_bytes, good);
        }
    }

    #[test]
    fn integers_too_large_for_toml_name_their_field() {
        for (literal, column) in [
            ("99999999999999999999", 14),
            ("-9223372036854775809", 14),
            ("0x1_0000_0000_0000_0000", 14),
        ] {
            assert_eq!(
                invalid(&format!("[daemon]\nring_bytes = {literal}\n")),
                (
                    2,
                    column,
                    field("daemon.ring_bytes"),
                    format!("integer {literal} does not fit in 64 bits")
                ),
            );
        }
        // The largest integer TOML holds is only out of the setting's range.
        assert_eq!(
            invalid("[daemon]\nring_bytes = 9223372036854775807\n").3,
            "must be a power of two from 4096 to 2147483648 (not 9223372036854775807)"
        );
        let text = "agent = [{ name = \"a\", cgroup = \"a\", mission = \"/m\", \
                    mode = 18446744073709551616 }]\n";
        assert_eq!(
            invalid(text),
            (
                1,
                61,
                field("agent[1].mode"),
                "integer 18446744073709551616 does not fit in 64 bits".to_owned()
            )
        );
    }

    #[test]
    fn scan_every_too_large() {
        assert_eq!(
            invalid("[daemon]\nscan_every = \"99999999999999999999s\"\n"),
            (
                2,
                14,
                field("daemon.scan_every"),
                "duration \"99999999999999999999s\" is too large".to_owned()
            )
        );
    }

    #[test]
    fn metrics_is_an_ip_address_and_port() {
        let config = parse("[daemon]\nmetrics = \"127.0.0.1:9464\"\n").unwrap();
        assert_eq!(
            config.daemon.metrics,
            Some(SocketAddr::from(([127, 0, 0, 1], 9464)))
        );
        for bad in ["localhost:9464", "127.0.0.1", "9464", "::1:9464", ""] {
            let (line, column, field_name, message) =
                invalid(&format!("[daemon]\nmetrics = \"{bad}\"\n"));
            assert_eq!((line, column, field_name), (2, 11, field("daemon.metrics")));
            assert!(
                message.starts_with(&format!("invalid address \"{bad}\" (write an IP address")),
                "{message}"
            );
        }
    }

    #[test]
    fn daemon_paths_are_absolute() {
        for key in ["socket", "pin_dir", "audit", "audit_key", "cgroup_root"] {
            assert_eq!(
                invalid(&format!("[daemon]\n{key} = \"run/x\"\n")),
                (
                    2,
                    key.len() + 4,
                    field(&format!("daemon.{key}")),
                    "must be an absolute path (not \"run/x\")".to_owned()
                ),
            );
            assert_eq!(
                invalid(&format!("[daemon]\n{key} = \"\"\n")).3,
                "must not be empty"
            );
            assert_eq!(
                invalid(&format!("[daemon]\n{key} = \"/a\\u0000b\"\n")).3,
                "must not contain a NUL byte"
            );
        }
    }

    #[test]
    fn the_audit_key_is_not_the_log() {
        assert_eq!(
            invalid("[daemon]\naudit = \"/var/a.log\"\naudit_key = \"/var/a.log\"\n"),
            (
                3,
                13,
                field("daemon.audit_key"),
                "must not be the audit log itself".to_owned()
            )
        );
        // The default log counts too.
        assert_eq!(
            invalid("[daemon]\naudit_key = \"/var/log/pincer/audit.jsonl\"\n").2,
            field("daemon.audit_key")
        );
        let config = parse("[daemon]\naudit = \"/var/a.log\"\n").unwrap();
        assert_eq!(config.daemon.audit_key_path(), Path::new("/var/a.log.key"));
    }

    #[test]
    fn required_agent_fields() {
        let cases = [
            (
                "[[agent]]\ncgroup = \"a\"\nmission = \"/m\"\n",
                "agent[1].name",
            ),
            (
                "[[agent]]\nname = \"a\"\nmission = \"/m\"\n",
                "agent[1].cgroup",
            ),
            (
                "[[agent]]\nname = \"a\"\ncgroup = \"a\"\n",
                "agent[1].mission",
            ),
        ];
        for (text, name) in cases {
            // The entry's header, for want of the missing key.
            let text = format!("[daemon]\n\n{text}");
            assert_eq!(
                invalid(&text),
                (3, 1, field(name), "missing field".to_owned()),
                "{text}"
            );
        }
    }

    #[test]
    fn duplicate_agent_names_point_at_the_second() {
        let text = format!(
            "{}{}{}",
            agent_with_cgroup("a", "x"),
            agent_with_cgroup("b", "y"),
            agent_with_cgroup("a", "z")
        );
        assert_eq!(
            invalid(&text),
            (
                10,
                8,
                field("agent[3].name"),
                "duplicate agent name \"a\" (agent[1] has it)".to_owned()
            )
        );
    }

    #[test]
    fn agent_names() {
        let good = ["a", "Claude-3.5_sonnet", &"x".repeat(64), "..."];
        for name in good {
            let config = parse(&agent_with_cgroup(name, "x")).unwrap();
            assert_eq!(config.agents[0].name, name);
        }
        let bad = [
            ("", "must be 1 to 64 characters long (not 0)"),
            (&"x".repeat(65), "must be 1 to 64 characters long (not 65)"),
            (
                "a b",
                "\" \" is not allowed in \"a b\" (only letters, digits, \".\", \"_\" and \"-\")",
            ),
            (
                "a/b",
                "\"/\" is not allowed in \"a/b\" (only letters, digits, \".\", \"_\" and \"-\")",
            ),
            (
                "é",
                "\"é\" is not allowed in \"é\" (only letters, digits, \".\", \"_\" and \"-\")",
            ),
            (
                "..",
                "must not be \"..\" (it means a directory when used as a file name)",
            ),
            (
                ".",
                "must not be \".\" (it means a directory when used as a file name)",
            ),
        ];
        for (name, message) in bad {
            assert_eq!(
                invalid(&agent_with_cgroup(name, "x")),
                (2, 8, field("agent[1].name"), message.to_owned()),
                "{name:?}"
            );
        }
    }

    #[test]
    fn bad_patterns_point_at_the_cgroup() {
        for (text, message) in pattern::tests::BAD_PATTERNS {
            let config = format!("[daemon]\n{}", agent_with_cgroup("a", text));
            assert_eq!(
                invalid(&config),
                (4, 10, field("agent[1].cgroup"), message.to_owned()),
                "{text}"
            );
        }
    }

    #[test]
    fn the_same_pattern_twice_is_refused() {
        let text = format!(
            "{}{}",
            agent_with_cgroup("a", "x/*"),
            agent_with_cgroup("b", "x/*")
        );
        let (line, column, field_name, message) = invalid(&text);
        assert_eq!(
            (line, column, field_name),
            (7, 10, field("agent[2].cgroup"))
        );
        assert!(message.starts_with("same pattern as agent[1]"), "{message}");
    }

    #[test]
    fn missions() {
        let with_mission = |mission: &str| {
            format!("[[agent]]\nname = \"a\"\ncgroup = \"a\"\nmission = \"{mission}\"\n")
        };
        assert_eq!(
            invalid(&with_mission("")),
            (
                4,
                11,
                field("agent[1].mission"),
                "must not be empty".to_owned()
            )
        );
        assert_eq!(
            invalid(&with_mission("~/mission.toml")).3,
            "\"~\" is not expanded (whose home would it be?): write the path in full"
        );
        // Only a leading `~` component is a home; elsewhere it is a name.
        let config = parse(&with_mission("~x/../m.toml")).unwrap();
        assert_eq!(
            config.agents[0].mission,
            Path::new("/etc/pincer/~x/../m.toml")
        );
        let config = parse(&with_mission("./m.toml")).unwrap();
        assert_eq!(config.agents[0].mission, Path::new("/etc/pincer/m.toml"));
    }

    #[test]
    fn the_first_declared_agent_wins() {
        let text = format!(
            "{}{}{}",
            agent_with_cgroup("claude", "agents.slice/claude-*.scope"),
            agent_with_cgroup("any", "agents.slice/**"),
            agent_with_cgroup("late", "agents.slice/claude-1.scope"),
        );
        let config = parse(&text).unwrap();
        let agent = |path: &str| config.agent_for(Path::new(path)).map(|a| a.name.as_str());
        assert_eq!(agent("agents.slice/claude-1.scope"), Some("claude"));
        assert_eq!(agent("agents.slice/codex-1.scope"), Some("any"));
        assert_eq!(agent("agents.slice"), Some("any"));
        assert_eq!(agent("system.slice/sshd.service"), None);
        assert_eq!(
            Config::default_at(Path::new(CONFIG)).agent_for(Path::new("agents.slice/a")),
            None
        );
    }

    #[test]
    fn render_writes_every_setting() {
        let rendered = Config::default_at(Path::new(CONFIG)).render();
        assert_eq!(
            rendered,
            r#"# pincer daemon configuration: "/etc/pincer/daemon.toml", with every default written out.

[daemon]
socket = "/run/pincer/pincer.sock"
pin_dir = "/sys/fs/bpf/pincer"
on_stop = "keep"
audit = "/var/log/pincer/audit.jsonl"
# audit_key is not set: the key is "/var/log/pincer/audit.jsonl.key"
# siem is not set: no SIEM export
# metrics is not set: no Prometheus endpoint
log_format = "text"
cgroup_root = "/sys/fs/cgroup"
scan_every = "1s"
check_every = "30s"
ring_bytes = 262144

# No [[agent]]: only `pincer run` registrations are served.
"#
        );
        let full = parse(FULL).unwrap().render();
        assert!(full.contains("\nmetrics = \"[::1]:9464\"\n"), "{full}");
        assert!(
            full.contains("\nsiem = \"/var/log/p/ocsf.jsonl\"\nsiem_format = \"ocsf\"\n"),
            "{full}"
        );
        assert!(full.contains("\nscan_every = \"250ms\"\n"), "{full}");
        assert!(
            full.contains("\nmission = \"/etc/pincer/missions/codex.toml\"\n# mode is not set"),
            "{full}"
        );
    }

    #[test]
    fn render_round_trips() {
        let defaults = Config::default_at(Path::new(CONFIG));
        assert_eq!(parse(&defaults.render()).unwrap(), defaults);

        let full = parse(FULL).unwrap();
        let rendered = full.render();
        let again = parse(&rendered).unwrap();
        assert_eq!(again, full);
        assert_eq!(again.render(), rendered);
        // Lines move, which equality leaves out.
        assert_ne!(again.agents[0].line, full.agents[0].line);

        // Strings that need escaping survive, in the header comment too.
        let mut odd = Config::default_at(Path::new("/etc/we\"ird\n# dir/daemon.toml"));
        odd.daemon.socket = PathBuf::from("/run/a \"b\"\\c\td");
        odd.daemon.scan_every = Duration::from_millis(1500);
        odd.daemon.ring_bytes = 4096;
        odd.agents.push(AgentConfig {
            name: "x".to_owned(),
            cgroup: pattern("a\\x2db/*/**"),
            mission: PathBuf::from("/m\u{7f}.toml"),
            mode: Some(Mode::Audit),
            from_exec: true,
            number: 1,
            line: 1,
        });
        let again = Config::from_str(&odd.render(), &odd.path).unwrap();
        assert_eq!(again, odd);
    }

    #[test]
    fn kubernetes_table_defaults_and_round_trip() {
        let config = parse("[kubernetes]\nmissions = \"pods\"\n").unwrap();
        let kubernetes = config.kubernetes.clone().unwrap();
        assert_eq!(
            kubernetes,
            KubernetesConfig {
                node: None,
                api: None,
                // Relative to the configuration's directory.
                missions: PathBuf::from("/etc/pincer/pods"),
                kubepods: PathBuf::from("kubepods.slice"),
            }
        );
        let rendered = config.render();
        assert!(
            rendered.ends_with(
                "\n[kubernetes]\nmissions = \"/etc/pincer/pods\"\n\
                 # node is not set: the NODE_NAME environment variable names it\n\
                 # api is not set: a kubeconfig or the pod's service account names it\n\
                 kubepods = \"kubepods.slice\"\n"
            ),
            "{rendered}"
        );
        assert_eq!(parse(&rendered).unwrap(), config);

        let full = parse(
            "[kubernetes]\nmissions = \"/srv/m\"\nnode = \"worker-1.example\"\n\
             api = \"http://127.0.0.1:8080\"\nkubepods = \"kubepods\"\n",
        )
        .unwrap();
        let kubernetes = full.kubernetes.clone().unwrap();
        assert_eq!(kubernetes.node.as_deref(), Some("worker-1.example"));
        assert_eq!(kubernetes.api.as_deref(), Some("http://127.0.0.1:8080"));
        assert_eq!(kubernetes.kubepods, Path::new("kubepods"));
        assert_eq!(
            kubernetes.node_name(Path::new(CONFIG)),
            Ok("worker-1.example".to_owned())
        );
        assert_eq!(parse(&full.render()).unwrap(), full);
    }

    #[test]
    fn bad_kubernetes_tables_name_their_field() {
        for (text, line, name, message) in [
            (
                "[kubernetes]\nnode = \"a\"\n",
                1,
                "kubernetes.missions",
                "missing field",
            ),
            (
                "[kubernetes]\nmissions = \"m\"\nnode = \"Worker_1\"\n",
                3,
                "kubernetes.node",
                "\"Worker_1\" is not a node name",
            ),
            (
                "[kubernetes]\nmissions = \"m\"\napi = \"ftp://h/\"\n",
                3,
                "kubernetes.api",
                "must be an http:// or https:// URL",
            ),
            (
                "[kubernetes]\nmissions = \"m\"\napi = \"https://u:p@h:6443\"\n",
                3,
                "kubernetes.api",
                "must not carry credentials",
            ),
            (
                "[kubernetes]\nmissions = \"m\"\nkubepods = \"/kubepods\"\n",
                3,
                "kubernetes.kubepods",
                "must be relative to daemon.cgroup_root",
            ),
            (
                "[kubernetes]\nmissions = \"m\"\nkubepods = \"a/../b\"\n",
                3,
                "kubernetes.kubepods",
                "\"a/../b\" has an empty",
            ),
            (
                "[kubernetes]\nmissions = \"m\"\nnodes = \"a\"\n",
                3,
                "kubernetes.nodes",
                "unknown field `nodes`",
            ),
            (
                "[[kubernetes]]\nmissions = \"m\"\n",
                1,
                "kubernetes",
                "invalid type",
            ),
        ] {
            let (found_line, _, found_name, found_message) = invalid(text);
            assert_eq!(
                (found_line, found_name),
                (line, field(name)),
                "{text}: {found_message}"
            );
            assert!(
                found_message.starts_with(message),
                "{text}: {found_message}"
            );
        }
    }

    #[test]
    fn agent_modes_stand_for_mission_settings() {
        // The mission writes the same modes with the policy's words.
        for ((mission, mode), name) in Mode::ON_UNKNOWN.iter().zip(["enforce", "audit", "ask"]) {
            assert_eq!(mode.name(), name, "on_unknown = {mission:?}");
        }
        assert_eq!(Mode::Enforce.to_string(), "enforce");
        assert_eq!(OnStop::Remove.to_string(), "remove");
        assert_eq!(LogFormat::Json.to_string(), "json");
    }
}
