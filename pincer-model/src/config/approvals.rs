//! The approval service's configuration (`pincer approvals serve --config
//! FILE`).
//!
//! ```toml
//! secret_file = "/etc/pincer/webhook.key"  # one secret for every node, or [[node]] below
//! token_file = "/etc/pincer/approvals.token"  # the operators' bearer token (required)
//! clock_skew = "30s"      # how far a request's timestamp may be from this clock (the default)
//! hold = "5m"             # longest a webhook request is held open (the default)
//! keep = "10m"            # how long a decision waits for a node that re-asks (the default)
//! max_pending = 256       # requests listed at once; more are refused with 503 (the default)
//! max_connections = 512   # connections served at once; more wait to be accepted (the default)
//!
//! [[node]]                # instead of secret_file: a secret per node
//! name = "web-1"          # what its requests carry as `node`
//! secret_file = "/etc/pincer/nodes/web-1.key"
//! ```
//!
//! - Exactly one of `secret_file` and `[[node]]`. With one shared secret,
//!   a node is named by the `node` its requests carry; with a secret per
//!   node, by the secret that verifies (a node cannot speak for another).
//! - Secret and token files are read as the webhook voter reads its secret:
//!   regular files, at least 16 bytes without the trailing newline, and
//!   readable by their owner only. A relative path is relative to the
//!   directory of the configuration file.
//! - `clock_skew` is at most 1h, like the voter's; `hold` from 1s to 1h (a
//!   request is also answered before the voter's own timeout, which it
//!   sends); `keep` from 1s to 24h.
//! - Node names are 1 to 64 ASCII letters, digits, `.`, `_` and `-`, unique.
//!
//! Unknown keys, wrong types and bad values are errors naming the file, the
//! line and column and the field, like the daemon's configuration.

use std::{
    ops::RangeInclusive,
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    time::Duration,
};

use serde::Deserialize;
use toml::Spanned;

use crate::{
    toml_file::{
        self, Document, FileError, TomlError,
        fields::{Fields, raw_tables, with_hint},
        toml_string,
    },
    vote::webhook::{DEFAULT_CLOCK_SKEW, MAX_CLOCK_SKEW, MIN_SECRET_BYTES},
};

/// How long a webhook request is held when `hold` is not set.
pub const DEFAULT_HOLD: Duration = Duration::from_secs(300);
/// How long decisions are kept for re-asks when `keep` is not set.
pub const DEFAULT_KEEP: Duration = Duration::from_secs(600);
/// Requests listed at once when `max_pending` is not set.
pub const DEFAULT_MAX_PENDING: usize = 256;
/// Connections served at once when `max_connections` is not set: every
/// held request is one, and the operators need a few more.
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;
/// Largest `max_pending` and `max_connections`: each connection is a
/// descriptor, and the usual limit of those is 1024 or a few times that.
pub const MAX_LIMIT: usize = 65_536;

/// An error in the configuration file.
pub type ConfigError = FileError;

/// The approval service's configuration.
#[derive(Clone, PartialEq, Eq)]
pub struct Config {
    /// Who may ask, and with what secret.
    pub secrets: Secrets,
    /// The operators' bearer token.
    pub token: Vec<u8>,
    /// How far a request's timestamp may be from the service's clock.
    pub clock_skew: Duration,
    /// Longest a webhook request is held open.
    pub hold: Duration,
    /// How long a decision (or a request nobody waits on) is kept for a
    /// node that asks again.
    pub keep: Duration,
    /// Requests listed at once.
    pub max_pending: usize,
    /// Connections served at once.
    pub max_connections: usize,
}

// Secrets stay out of debug output (and so out of logs and panics).
impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("clock_skew", &self.clock_skew)
            .field("hold", &self.hold)
            .field("keep", &self.keep)
            .field("max_pending", &self.max_pending)
            .field("max_connections", &self.max_connections)
            .finish_non_exhaustive()
    }
}

/// The webhook secrets.
#[derive(Clone, PartialEq, Eq)]
pub enum Secrets {
    /// One secret for every node; a node is named by its requests.
    Shared(Vec<u8>),
    /// A secret per node, by name.
    PerNode(Vec<(String, Vec<u8>)>),
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Secrets::Shared(_) => f.write_str("Shared(..)"),
            Secrets::PerNode(nodes) => f
                .debug_list()
                .entries(nodes.iter().map(|(name, _)| name))
                .finish(),
        }
    }
}

impl Config {
    /// A configuration with every default, for tests and embedding.
    pub fn new(secrets: Secrets, token: Vec<u8>) -> Self {
        Self {
            secrets,
            token,
            clock_skew: DEFAULT_CLOCK_SKEW,
            hold: DEFAULT_HOLD,
            keep: DEFAULT_KEEP,
            max_pending: DEFAULT_MAX_PENDING,
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }

    /// Reads the configuration file and the secrets it names.
    pub fn from_file(path: &Path) -> Result<Config, ConfigError> {
        toml_file::read_file(path, "approvals configuration", |text| {
            Ok(parse(&Document::new(text, path))?)
        })
    }
}

// serde reads the file into these raw structs, every value spanned; each
// value is then checked with the checks every file pincer reads shares.

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
struct RawConfig {
    secret_file: Option<Spanned<String>>,
    node: Option<Vec<Spanned<RawNode>>>,
    token_file: Option<Spanned<String>>,
    clock_skew: Option<Spanned<String>>,
    hold: Option<Spanned<String>>,
    keep: Option<Spanned<String>>,
    max_pending: Option<Spanned<i64>>,
    max_connections: Option<Spanned<i64>>,
}

raw_tables! {
    struct RawNode {
        name: String,
        secret_file: String,
    }
}

/// Bounds of `hold`.
const HOLD: RangeInclusive<Duration> = Duration::from_secs(1)..=Duration::from_secs(3600);
/// Bounds of `keep`.
const KEEP: RangeInclusive<Duration> = Duration::from_secs(1)..=Duration::from_secs(24 * 3600);

fn parse(doc: &Document<'_>) -> Result<Config, TomlError> {
    let raw: RawConfig = doc
        .deserialize()
        .map_err(|error| with_hint(error, &[("node", "node")]))?;
    let secrets = match (&raw.secret_file, &raw.node) {
        (Some(file), None) => Secrets::Shared(secret(doc, file, "secret_file")?),
        (None, Some(nodes)) => Secrets::PerNode(parse_nodes(doc, nodes)?),
        (Some(file), Some(_)) => {
            return Err(doc.field_error(
                file.span().start,
                "secret_file",
                "is set and so is [[node]]: use one shared secret or a secret per node",
            ));
        }
        (None, None) => {
            return Err(doc.error_at(
                0,
                None,
                "missing field `secret_file`: the webhook secret (or a [[node]] per node)",
            ));
        }
    };
    let token = match &raw.token_file {
        Some(file) => secret(doc, file, "token_file")?,
        None => {
            return Err(doc.error_at(
                0,
                None,
                "missing field `token_file`: the operators' bearer token",
            ));
        }
    };
    let mut config = Config::new(secrets, token);
    if let Some(value) = &raw.clock_skew {
        config.clock_skew =
            doc.duration(value, "clock_skew", Duration::from_secs(1)..=MAX_CLOCK_SKEW)?;
    }
    if let Some(value) = &raw.hold {
        config.hold = doc.duration(value, "hold", HOLD)?;
    }
    if let Some(value) = &raw.keep {
        config.keep = doc.duration(value, "keep", KEEP)?;
    }
    if let Some(value) = &raw.max_pending {
        config.max_pending = limit(doc, value, "max_pending")?;
    }
    if let Some(value) = &raw.max_connections {
        config.max_connections = limit(doc, value, "max_connections")?;
    }
    Ok(config)
}

fn parse_nodes(
    doc: &Document<'_>,
    raw: &[Spanned<RawNode>],
) -> Result<Vec<(String, Vec<u8>)>, TomlError> {
    let mut nodes: Vec<(String, Vec<u8>)> = Vec::new();
    for table in Fields::each(doc, "node", raw) {
        let field = |key: &str| table.field(key);
        let node = table.raw();
        let name = table.required(&node.name, "name")?;
        let secret_file = table.required(&node.secret_file, "secret_file")?;
        let text = doc.check(name, &field("name"), |text| {
            if !valid_node_name(text) {
                return Err(format!(
                    "invalid node name {}: use 1 to 64 ASCII letters, digits, `.`, `_` and `-`",
                    toml_string(text)
                ));
            }
            if nodes.iter().any(|(known, _)| known == text) {
                return Err(format!("node {} is listed twice", toml_string(text)));
            }
            Ok(text.clone())
        })?;
        let secret = secret(doc, secret_file, &field("secret_file"))?;
        nodes.push((text, secret));
    }
    if nodes.is_empty() {
        return Err(doc.field_error(doc.table_offset("node"), "node", "lists no node"));
    }
    Ok(nodes)
}

/// Whether a node name fits in logs, keys and the page as it is: what
/// `[[node]]` accepts, and what a request's `node` must be.
pub fn valid_node_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// Reads a secret or token file named by `value`: the webhook's rules.
fn secret(doc: &Document<'_>, value: &Spanned<String>, field: &str) -> Result<Vec<u8>, TomlError> {
    let path = resolve(doc.path(), Path::new(value.get_ref()));
    doc.check(value, field, |_| {
        read_secret(&path).map_err(|message| format!("{}: {message}", path.display()))
    })
}

fn read_secret(path: &Path) -> Result<Vec<u8>, String> {
    let mut bytes = crate::files::read_regular(path, crate::files::MAX_SECRET_BYTES)
        .map_err(|error| format!("cannot read it: {error}"))?;
    if bytes.last() == Some(&b'\n') {
        bytes.pop();
        if bytes.last() == Some(&b'\r') {
            bytes.pop();
        }
    }
    if bytes.len() < MIN_SECRET_BYTES {
        return Err(format!(
            "holds {} bytes, fewer than the required {MIN_SECRET_BYTES}",
            bytes.len()
        ));
    }
    let mode = std::fs::metadata(path).map_or(0, |m| m.permissions().mode() & 0o7777);
    if mode & 0o077 != 0 {
        return Err(format!(
            "is readable by group or others (mode {mode:04o}): chmod 600 it"
        ));
    }
    Ok(bytes)
}

/// A path relative to the configuration file's directory.
fn resolve(config: &Path, path: &Path) -> PathBuf {
    match config.parent() {
        Some(dir) if path.is_relative() => dir.join(path),
        _ => path.to_owned(),
    }
}

fn limit(doc: &Document<'_>, value: &Spanned<i64>, field: &str) -> Result<usize, TomlError> {
    doc.check(value, field, |&n| {
        usize::try_from(n)
            .ok()
            .filter(|n| (1..=MAX_LIMIT).contains(n))
            .ok_or_else(|| format!("must be from 1 to {MAX_LIMIT} (not {n})"))
    })
}

#[cfg(test)]
mod tests {
    use std::{fs, os::unix::fs::PermissionsExt};

    use super::*;

    fn write(dir: &Path, name: &str, contents: &[u8], mode: u32) {
        let path = dir.join(name);
        fs::write(&path, contents).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
    }

    fn load(dir: &Path, text: &str) -> Result<Config, String> {
        let path = dir.join("approvals.toml");
        fs::write(&path, text).unwrap();
        Config::from_file(&path).map_err(|error| {
            error
                .to_string()
                .replace(&dir.display().to_string(), "[DIR]")
        })
    }

    #[test]
    fn a_shared_secret_or_one_per_node() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "key", b"sixteen bytes!!!\n", 0o600);
        write(dir.path(), "token", b"operator token, long\n", 0o600);
        let config = load(
            dir.path(),
            "secret_file = \"key\"\ntoken_file = \"token\"\nhold = \"2m\"\nmax_pending = 3\n",
        )
        .unwrap();
        assert_eq!(
            config.secrets,
            Secrets::Shared(b"sixteen bytes!!!".to_vec())
        );
        assert_eq!(config.token, b"operator token, long");
        assert_eq!(config.hold, Duration::from_secs(120));
        assert_eq!(config.keep, DEFAULT_KEEP);
        assert_eq!(config.max_pending, 3);
        assert!(!format!("{config:?}").contains("sixteen"));

        let config = load(
            dir.path(),
            "token_file = \"token\"\n[[node]]\nname = \"web-1\"\nsecret_file = \"key\"\n",
        )
        .unwrap();
        assert_eq!(
            config.secrets,
            Secrets::PerNode(vec![("web-1".into(), b"sixteen bytes!!!".to_vec())])
        );
    }

    #[test]
    fn errors_name_the_file_the_line_and_the_field() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "key", b"sixteen bytes!!!\n", 0o600);
        write(dir.path(), "short", b"fifteen bytes!!\n", 0o600);
        write(dir.path(), "open", b"sixteen bytes!!!\n", 0o644);
        write(dir.path(), "token", b"operator token, long\n", 0o600);
        for (text, expected) in [
            (
                "secret_file = \"short\"\ntoken_file = \"token\"\n",
                "[DIR]/approvals.toml:1:15: secret_file: [DIR]/short: holds 15 bytes, fewer than the required 16",
            ),
            (
                "secret_file = \"key\"\ntoken_file = \"open\"\n",
                "[DIR]/approvals.toml:2:14: token_file: [DIR]/open: is readable by group or others (mode 0644): chmod 600 it",
            ),
            (
                "secret_file = \"key\"\ntoken_file = \"token\"\nhold = \"forever\"\n",
                "[DIR]/approvals.toml:3:8: hold: invalid duration \"forever\" (write it like \"30s\", \"10m\" or \"1h30m\")",
            ),
            (
                "secret_file = \"key\"\ntoken_file = \"token\"\nlisten = 1\n",
                "[DIR]/approvals.toml:3:1: listen: unknown field `listen`",
            ),
            (
                "token_file = \"token\"\n[[node]]\nname = \"a b\"\nsecret_file = \"key\"\n",
                "[DIR]/approvals.toml:3:8: node[1].name: invalid node name \"a b\": use 1 to 64 ASCII letters, digits, `.`, `_` and `-`",
            ),
            (
                "token_file = \"token\"\n",
                "[DIR]/approvals.toml:1:1: missing field `secret_file`: the webhook secret (or a [[node]] per node)",
            ),
        ] {
            let error = load(dir.path(), text).unwrap_err();
            assert!(error.starts_with(expected), "{text}\n{error}");
        }
    }
}
