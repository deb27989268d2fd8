//! Reading the daemon's configuration: serde reads the file into the raw
//! structs below, every value spanned, and each value is then checked with
//! the checks every file pincer reads shares (`toml_file::fields`), so that
//! an error names the file, the line and column, and the field. `[labels]`
//! and `[[source]]` are a mission's, read by the mission's own code.

use std::net::SocketAddr;

use serde::Deserialize;
use toml::Spanned;

use super::{
    Config, DaemonConfig, LogFormat, MAX_SCAN_EVERY, MIN_CHECK_EVERY, MIN_RING_BYTES,
    MIN_SCAN_EVERY, OnStop, SiemFormat,
    agents::{RawAgent, parse_agents},
    kubernetes::{RawKubernetes, parse_kubernetes},
};
use crate::{
    mission::parse::{RawLabels, RawSource, parse_policy, parse_sources},
    toml_file::{
        Document, TomlError,
        fields::{Fields, PathRules, Table, raw_tables, with_hint},
        toml_string,
    },
};

// Tables are not spanned where a dotted key (`daemon.socket = ...`) may
// make them: `Spanned` refuses a table without a span.

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
struct RawConfig {
    daemon: Option<Table<RawDaemon>>,
    #[serde(default)]
    agent: Vec<Spanned<RawAgent>>,
    labels: Option<Table<RawLabels>>,
    #[serde(default)]
    source: Vec<Spanned<RawSource>>,
    kubernetes: Option<Table<RawKubernetes>>,
}

raw_tables! {
    struct RawDaemon {
        socket: String,
        pin_dir: String,
        on_stop: String,
        audit: String,
        audit_key: String,
        siem: String,
        siem_format: String,
        metrics: String,
        log_format: String,
        cgroup_root: String,
        scan_every: String,
        check_every: String,
        ring_bytes: i64,
    }
}

/// The arrays of tables of the file, for [`with_hint`].
const TABLES: &[(&str, &str)] = &[("agent", "agent"), ("source", "source")];

pub(super) fn parse(doc: &Document<'_>) -> Result<Config, TomlError> {
    let raw: RawConfig = doc
        .deserialize()
        .map_err(|error| with_hint(error, TABLES))?;
    let daemon = match &raw.daemon {
        Some(Table(daemon)) => parse_daemon(doc, daemon)?,
        None => DaemonConfig::default(),
    };
    let agents = parse_agents(doc, &raw.agent)?;
    // A host-wide file is nobody's: its paths are written in full.
    let rules = PathRules::IN_FULL;
    let policy = match &raw.labels {
        Some(Table(labels)) => parse_policy(doc, labels, "labels", &rules)?,
        None => Vec::new(),
    };
    let mut sources = parse_sources(doc, &raw.source, &rules)?;
    for (index, source) in sources.iter().enumerate() {
        if sources[..index]
            .iter()
            .any(|earlier| earlier.path == source.path)
        {
            let at = raw.source[index]
                .get_ref()
                .path
                .as_ref()
                .map_or(raw.source[index].span().start, |path| path.span().start);
            return Err(doc.field_error(
                at,
                &format!("source[{}].path", index + 1),
                "is already a source above",
            ));
        }
    }
    for source in &mut sources {
        source.file = Some(doc.path().to_owned());
    }
    let kubernetes = raw
        .kubernetes
        .as_ref()
        .map(|kubernetes| parse_kubernetes(&Fields::table(doc, "kubernetes", kubernetes)))
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

fn parse_daemon(doc: &Document<'_>, raw: &RawDaemon) -> Result<DaemonConfig, TomlError> {
    let rules = PathRules::IN_FULL;
    let path = |value: &Spanned<String>, key: &str| {
        doc.absolute_path(value, &format!("daemon.{key}"), &rules)
    };
    let mut config = DaemonConfig::default();
    if let Some(value) = &raw.socket {
        config.socket = path(value, "socket")?;
    }
    if let Some(value) = &raw.pin_dir {
        config.pin_dir = path(value, "pin_dir")?;
    }
    if let Some(value) = &raw.on_stop {
        config.on_stop = doc.named::<OnStop>(value, "daemon.on_stop")?;
    }
    if let Some(value) = &raw.audit {
        config.audit = path(value, "audit")?;
    }
    if let Some(value) = &raw.audit_key {
        let key = path(value, "audit_key")?;
        // The key would be read back as the log's first line, and lost.
        if key == config.audit {
            return Err(doc.field_error(
                value.span().start,
                "daemon.audit_key",
                "must not be the audit log itself",
            ));
        }
        config.audit_key = Some(key);
    }
    if let Some(value) = &raw.siem {
        let siem = path(value, "siem")?;
        // Either would be garbled by lines of another kind.
        let clash = if siem == config.audit {
            Some("must not be the audit log itself")
        } else if siem == config.audit_key_path() {
            Some("must not be the audit log's key")
        } else {
            None
        };
        if let Some(message) = clash {
            return Err(doc.field_error(value.span().start, "daemon.siem", message));
        }
        config.siem = Some(siem);
    }
    if let Some(value) = &raw.siem_format {
        if raw.siem.is_none() {
            return Err(doc.field_error(
                value.span().start,
                "daemon.siem_format",
                "is set but daemon.siem is not: set siem to the file the events go to",
            ));
        }
        config.siem_format = doc.named::<SiemFormat>(value, "daemon.siem_format")?;
    }
    if let Some(value) = &raw.metrics {
        let address = doc.check(value, "daemon.metrics", |text| {
            text.parse::<SocketAddr>().map_err(|_| {
                format!(
                    "invalid address {} (write an IP address and a port, like \
                     \"127.0.0.1:9464\" or \"[::1]:9464\")",
                    toml_string(text)
                )
            })
        })?;
        config.metrics = Some(address);
    }
    if let Some(value) = &raw.log_format {
        config.log_format = doc.named::<LogFormat>(value, "daemon.log_format")?;
    }
    if let Some(value) = &raw.cgroup_root {
        config.cgroup_root = path(value, "cgroup_root")?;
    }
    if let Some(value) = &raw.scan_every {
        config.scan_every =
            doc.duration(value, "daemon.scan_every", MIN_SCAN_EVERY..=MAX_SCAN_EVERY)?;
    }
    if let Some(value) = &raw.check_every {
        config.check_every = doc.duration(
            value,
            "daemon.check_every",
            MIN_CHECK_EVERY..=MAX_SCAN_EVERY,
        )?;
    }
    if let Some(value) = &raw.ring_bytes {
        config.ring_bytes = doc.check(value, "daemon.ring_bytes", |&n| {
            u32::try_from(n)
                .ok()
                .filter(|bytes| bytes.is_power_of_two() && *bytes >= MIN_RING_BYTES)
                .ok_or_else(|| {
                    format!(
                        "must be a power of two from {MIN_RING_BYTES} to {} (not {n})",
                        1u32 << 31
                    )
                })
        })?;
    }
    Ok(config)
}
