//! `pincer label`: what pincer knows of a file's content, and the owner's
//! promotion of it.
//!
//! Both read and write the host's labels map (pinned at
//! [`paths::LABELS_PIN`]) directly. Only the owner can: the map is root's,
//! and an agent task is refused the `bpf(2)` system call whatever its
//! credentials, so a promotion never comes from inside an agent cgroup.

use std::{
    io::Write,
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
};

use anyhow::{Context, bail};
use aya::maps::{HashMap, Map, MapData};
use clap::Subcommand;
use pincer_common::{Label, ObjectKey, authority, kernel_dev, label_flags};
use pincer_model::{
    control::{ControlRequest, ControlResponse},
    labels::PolicySet,
    paths,
};
use serde::Serialize;
use sha2::{Digest, Sha256};

/// `pincer label ...`.
#[derive(Debug, Subcommand)]
pub enum LabelCommand {
    /// Print what pincer knows of a file's content: its authority, whether
    /// an agent made or changed it, whether it is a policy object or a
    /// source, and what reading it does to an agent's level.
    Show {
        /// The file or directory (symbolic links are followed: labels are
        /// the object's).
        path: PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Raise a file's content to `user` or `policy` authority (the owner
    /// only; never from inside an agent). Recorded with the content's
    /// digest in the promotions journal; an agent's later change makes it
    /// evidence again.
    Promote {
        /// The file.
        path: PathBuf,
        /// The authority it gets.
        #[arg(long, value_parser = ["user", "policy"])]
        to: String,
        /// The promotions journal.
        #[arg(long, default_value = paths::PROMOTIONS)]
        journal: PathBuf,
    },
    /// Revoke a source (a `[[source]]` path): everything derived from it
    /// until now is refused to agents (parked for the owner in ask mode),
    /// whatever its grants; what it holds after this is not. The owner
    /// only; survives restarts and reboots (sealed in the state directory).
    Revoke {
        /// The source's path, as the mission names it.
        source: PathBuf,
        /// The state directory.
        #[arg(long, default_value = paths::STATE_DIR)]
        state: PathBuf,
        /// The journal the revocation is recorded in.
        #[arg(long, default_value = paths::PROMOTIONS)]
        journal: PathBuf,
    },
    /// Label a file a harness wrote with the authority of its content
    /// (through the daemon; not from inside an agent).
    Map {
        /// The file.
        path: PathBuf,
        /// `evidence` (a fetched page, a tool's output: reading it lowers an
        /// agent to evidence) or `user`.
        #[arg(long, value_parser = ["evidence", "user"])]
        authority: String,
        /// Where its content came from (a URL, a tool), for the audit log.
        #[arg(long = "origin")]
        origins: Vec<String>,
        #[command(flatten)]
        socket: super::Socket,
    },
    /// Declare that a file was derived from others: it gets their lowest
    /// authority and taint (through the daemon; not from inside an agent).
    Derive {
        /// The derived file.
        path: PathBuf,
        /// A file it was derived from (repeat for each).
        #[arg(long, required = true)]
        from: Vec<PathBuf>,
        #[command(flatten)]
        socket: super::Socket,
    },
}

/// Runs a `pincer label` subcommand.
pub fn main(command: LabelCommand) -> anyhow::Result<()> {
    match command {
        LabelCommand::Show { path, json } => show(&path, json),
        LabelCommand::Promote { path, to, journal } => promote(&path, &to, &journal),
        LabelCommand::Revoke {
            source,
            state,
            journal,
        } => revoke(&source, &state, &journal),
        LabelCommand::Map {
            path,
            authority,
            origins,
            socket,
        } => tell(
            &socket.socket,
            &ControlRequest::Map {
                path: absolute(&path)?,
                authority,
                origins,
            },
        ),
        LabelCommand::Derive { path, from, socket } => tell(
            &socket.socket,
            &ControlRequest::Derive {
                path: absolute(&path)?,
                from: from.iter().map(|p| absolute(p)).collect::<Result<_, _>>()?,
            },
        ),
    }
}

/// A path as the daemon needs it: absolute, from this directory.
fn absolute(path: &Path) -> anyhow::Result<PathBuf> {
    std::path::absolute(path).with_context(|| format!("cannot make {} absolute", path.display()))
}

/// Sends a labelling request to the daemon and prints its answer.
fn tell(socket: &Path, request: &ControlRequest) -> anyhow::Result<()> {
    match super::ask(socket, request)? {
        ControlResponse::Ok { message } => {
            println!("{message}");
            Ok(())
        }
        other => bail!("unexpected answer: {other:?}"),
    }
}

/// A label as `pincer label show` prints it.
#[derive(Debug, Serialize)]
struct Shown {
    path: String,
    dev: String,
    ino: u64,
    /// `evidence`, `user`, `policy`, or `unlabelled` (the host's own
    /// content, which counts as the user's).
    authority: &'static str,
    /// `agent-made`, `policy`, `tree`, `source`.
    flags: Vec<&'static str>,
    /// The level reading it brings an agent to (`none` when it lowers no
    /// one).
    taint: &'static str,
    /// The cgroup id of the agent that made or last changed it.
    #[serde(skip_serializing_if = "Option::is_none")]
    agent: Option<u64>,
    /// The policy patterns whose names or places cover the path.
    policy_patterns: Vec<String>,
    /// The sources its content was derived from.
    origins: Vec<ShownOrigin>,
}

/// One source a label names.
#[derive(Debug, Serialize)]
struct ShownOrigin {
    /// Its path when a revocation recorded it, otherwise its id in hex
    /// (`any source` where two sources met in one position).
    source: String,
    /// Its counter when the content was derived from it.
    stamp: u32,
    /// Whether a revocation since refuses the content to agents.
    revoked: bool,
}

/// The sources a label names, with their paths where the state directory
/// recorded them and whether the kernel's counters revoke them.
fn shown_origins(origins: &pincer_common::Origins) -> Vec<ShownOrigin> {
    let counters: std::collections::HashMap<u32, u32> = MapData::from_pin(paths::REVOKED_PIN)
        .ok()
        .and_then(|data| HashMap::<MapData, u32, u32>::try_from(Map::HashMap(data)).ok())
        .map(|map| map.iter().filter_map(Result::ok).collect())
        .unwrap_or_default();
    let names = pincer_model::labels::Store::at(Path::new(paths::STATE_DIR))
        .revocations()
        .unwrap_or_default();
    origins
        .sources()
        .map(|origin| ShownOrigin {
            source: if origin.source == pincer_common::ANY_SOURCE {
                "any source".to_owned()
            } else {
                names
                    .iter()
                    .find(|r| r.source == origin.source)
                    .map_or_else(|| format!("{:#010x}", origin.source), |r| r.path.clone())
            },
            stamp: origin.stamp,
            revoked: origin.stamp < counters.get(&origin.source).copied().unwrap_or(0),
        })
        .collect()
}

/// The host's labels map.
fn labels_map() -> anyhow::Result<HashMap<MapData, ObjectKey, Label>> {
    let data = MapData::from_pin(paths::LABELS_PIN).with_context(|| {
        format!(
            "cannot open the labels map {} (pincer's programs not loaded since boot, or not root)",
            paths::LABELS_PIN
        )
    })?;
    let map = Map::HashMap(data);
    HashMap::try_from(map).context("the labels map is not a hash map")
}

/// The identity of the object a path names.
fn key_of(path: &Path) -> anyhow::Result<(ObjectKey, PathBuf)> {
    let real = std::fs::canonicalize(path)
        .with_context(|| format!("cannot resolve {}", path.display()))?;
    let meta =
        std::fs::metadata(&real).with_context(|| format!("cannot stat {}", real.display()))?;
    Ok((
        ObjectKey {
            dev: kernel_dev(meta.dev()),
            ino: meta.ino(),
        },
        real,
    ))
}

fn show(path: &Path, json: bool) -> anyhow::Result<()> {
    let (key, real) = key_of(path)?;
    let label = labels_map()?.get(&key, 0).ok();
    // A label of an earlier object with the same inode number is not this
    // one's (the programs compare generations the same way).
    let label = label.filter(|label| {
        label.generation == 0
            || pincer_model::labels::generation(&real).is_none_or(|now| now == label.generation)
    });
    let label = label.unwrap_or_default();
    let flags = label_flags::NAMES
        .iter()
        .filter(|(bit, _)| label.flags & bit != 0)
        .map(|(_, name)| *name)
        .collect();
    let shown = Shown {
        path: pincer_model::escape::escape(real.as_os_str().as_encoded_bytes()),
        dev: format!("{}:{}", key.dev >> 20, key.dev & 0xf_ffff),
        ino: key.ino,
        authority: authority::name(label.authority),
        flags,
        taint: match label.taint {
            0 => "none",
            level => authority::name(level),
        },
        agent: (label.agent != 0).then_some(label.agent),
        policy_patterns: PolicySet::with_defaults(&[])
            .policy_of(&real)
            .into_iter()
            .map(|entry| entry.pattern.text())
            .collect(),
        origins: shown_origins(&label.origins),
    };
    if json {
        println!("{}", serde_json::to_string(&shown)?);
        return Ok(());
    }
    println!("{}", shown.path);
    println!("  object     {} inode {}", shown.dev, shown.ino);
    println!("  authority  {}", shown.authority);
    if !shown.flags.is_empty() {
        println!("  flags      {}", shown.flags.join(", "));
    }
    println!("  taint      {}", shown.taint);
    if let Some(agent) = shown.agent {
        println!("  agent      cgroup {agent}");
    }
    if !shown.policy_patterns.is_empty() {
        println!(
            "  policy by  {} (only the owner changes it)",
            shown.policy_patterns.join(", ")
        );
    }
    for origin in &shown.origins {
        println!(
            "  from       {} (counter {}{})",
            origin.source,
            origin.stamp,
            if origin.revoked {
                ", revoked since"
            } else {
                ""
            }
        );
    }
    Ok(())
}

/// One line of the promotions journal.
#[derive(Debug, Serialize)]
struct Promotion<'a> {
    time: String,
    uid: u32,
    path: String,
    dev: u64,
    ino: u64,
    from: &'static str,
    to: &'a str,
    sha256: String,
}

fn promote(path: &Path, to: &str, journal: &Path) -> anyhow::Result<()> {
    let (key, real) = key_of(path)?;
    if !std::fs::metadata(&real)?.is_file() {
        bail!(
            "{} is not a regular file: only files are promoted",
            real.display()
        );
    }
    let level = match to {
        "user" => authority::USER,
        "policy" => authority::POLICY,
        other => bail!("unknown authority {other:?} (expected user or policy)"),
    };
    let content =
        std::fs::read(&real).with_context(|| format!("cannot read {}", real.display()))?;
    let digest = hex::encode(Sha256::digest(&content));
    let mut map = labels_map()?;
    let before = map.get(&key, 0).ok().unwrap_or_default();
    let label = Label {
        authority: level,
        // No longer an agent's own, nor derived from anything lower.
        flags: if level == authority::POLICY {
            label_flags::POLICY
        } else {
            0
        },
        generation: pincer_model::labels::generation(&real).unwrap_or(0),
        taint: 0,
        agent: 0,
        origins: pincer_common::Origins::NONE,
    };
    // Recorded before it takes effect: a promotion the journal does not
    // hold never happened.
    let line = serde_json::to_string(&Promotion {
        time: humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
        // SAFETY: getuid cannot fail.
        uid: unsafe { libc::getuid() },
        path: pincer_model::escape::escape(real.as_os_str().as_encoded_bytes()),
        dev: key.dev,
        ino: key.ino,
        from: authority::name(before.authority),
        to,
        sha256: digest.clone(),
    })?;
    append_line(journal, &line)?;
    map.insert(key, label, 0)
        .with_context(|| format!("cannot label {}", real.display()))?;
    println!(
        "{}: {} -> {to} (sha256 {digest})",
        real.display(),
        authority::name(before.authority)
    );
    Ok(())
}

/// One revocation, as the journal records it.
#[derive(Debug, Serialize)]
struct Revocation<'a> {
    time: String,
    uid: u32,
    event: &'static str,
    source: &'a str,
    id: u32,
    counter: u32,
}

fn revoke(source: &Path, state: &Path, journal: &Path) -> anyhow::Result<()> {
    let real = std::fs::canonicalize(source)
        .with_context(|| format!("cannot resolve {}", source.display()))?;
    let id = pincer_common::source_id(real.as_os_str().as_encoded_bytes());
    let path = pincer_model::escape::escape(real.as_os_str().as_encoded_bytes());
    // The kernel's counters, when programs are loaded: the host-wide map
    // is root's, and agent tasks are refused bpf(2), so this is the owner.
    let mut kernel: Option<HashMap<MapData, u32, u32>> = match MapData::from_pin(paths::REVOKED_PIN)
    {
        Ok(data) => Some(
            HashMap::try_from(Map::HashMap(data))
                .context("the revocation map is not a hash map")?,
        ),
        Err(error) if Path::new(paths::REVOKED_PIN).exists() => {
            return Err(error).with_context(|| format!("cannot open {}", paths::REVOKED_PIN));
        }
        Err(_) => None,
    };
    let store = pincer_model::labels::Store::at(state);
    let mut revoked = store.revocations()?;
    // The source's counter, and the one that counts every revocation:
    // content derived from more sources than its label names by position
    // is stamped with that one (`pincer_common::ANY_SOURCE`).
    let mut counters = Vec::new();
    for (source, named) in [
        (id, path.clone()),
        (pincer_common::ANY_SOURCE, "(any source)".to_owned()),
    ] {
        let in_kernel = kernel
            .as_ref()
            .and_then(|map| map.get(&source, 0).ok())
            .unwrap_or(0);
        let counter = revoked
            .iter()
            .find(|r| r.source == source)
            .map_or(0, |r| r.counter)
            .max(in_kernel)
            .checked_add(1)
            .context("this source was revoked too many times")?;
        match revoked.iter_mut().find(|r| r.source == source) {
            Some(r) => r.counter = counter,
            None => revoked.push(pincer_model::labels::Revoked {
                source,
                counter,
                path: named,
            }),
        }
        counters.push((source, counter));
    }
    // Sealed first: a counter the file does not hold would be taken, at
    // the next start, for a file restored from an earlier copy.
    store.save_revocations(&revoked)?;
    if let Some(map) = kernel.as_mut() {
        for (source, counter) in &counters {
            map.insert(source, counter, 0)
                .with_context(|| format!("cannot write {}", paths::REVOKED_PIN))?;
        }
    }
    let counter = counters[0].1;
    let line = serde_json::to_string(&Revocation {
        time: humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
        // SAFETY: getuid cannot fail.
        uid: unsafe { libc::getuid() },
        event: "revoke",
        source: &path,
        id,
        counter,
    })?;
    append_line(journal, &line)?;
    println!(
        "{path}: revoked (counter {counter}): what was derived from it until now is refused to agents"
    );
    Ok(())
}

/// Appends one line to a journal (made with its directory when missing)
/// and syncs it.
fn append_line(journal: &Path, line: &str) -> anyhow::Result<()> {
    if let Some(dir) = journal.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(journal)
        .with_context(|| format!("cannot open the journal {}", journal.display()))?;
    writeln!(file, "{line}")
        .and_then(|()| file.sync_data())
        .with_context(|| format!("cannot write {}", journal.display()))
}
