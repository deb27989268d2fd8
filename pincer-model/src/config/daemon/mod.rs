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
//!   `pincer::audit::ocsf`), besides the audit log, whose HMAC chain it
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
//!   `pincer::twin::integrity`).
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

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    time::Duration,
};

pub use pattern::CgroupPattern;

use self::kubernetes::check_node_name;
pub use crate::mission::Mode;
use crate::{
    paths::default_key_path,
    toml_file::{self, Document, FileError, named, toml_string},
};

mod agents;
mod kubernetes;
mod parse;
mod pattern;
#[cfg(test)]
mod tests;

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
        Ok(parse::parse(&Document::new(text, path))?)
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
