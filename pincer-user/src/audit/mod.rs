//! The audit log: one JSON line per record, chained with HMAC-SHA256 so
//! that a line edited, removed or reordered afterwards is detected by
//! `pincer audit verify`.
//!
//! # Line format
//!
//! Every line is one JSON object whose members come in this order:
//!
//! ```text
//! {"time":"2025-06-01T09:30:00.123456Z","mission":"build","seq":0,
//!  ...the record's members...,"prev":"000…000","mac":"9f1c…"}
//! ```
//!
//! (one line in the file, ended by a newline)
//!
//! - `time`: when the line was written, RFC 3339 in UTC with microseconds;
//! - `mission`: the name of the mission;
//! - `seq`: 0, 1, 2, … counted from the start of the chain, which is the
//!   start of the file unless the chain restarted (below);
//! - the record's own members, for instance a decision's `pid`, `comm`,
//!   `operation`, `path`, `verdict` and `reason`;
//! - `prev`: the `mac` of the line before it in the chain, or 64 zeros on
//!   the first line of a chain;
//! - `mac`, always last: the lowercase hex HMAC-SHA256, under the log's key,
//!   of the line's canonical bytes.
//!
//! The canonical bytes of a line are its text as it stands in the file,
//! without the newline and with the final `,"mac":"<64 hex digits>"` taken
//! out: everything before that member, then the closing `}`. The writer
//! computes the mac over the object it is about to write and then inserts the
//! member; the verifier takes the member out and recomputes it. Nothing is
//! serialized again, so the check is byte-exact whatever the JSON looks like.
//!
//! The names `time`, `mission`, `seq`, `chain`, `abandoned`, `prev` and `mac`
//! belong to the chain: a record that uses one is refused.
//!
//! Two kinds of line carry no record but a `chain` member:
//!
//! - `"chain":"close","records":N`: the writer stopped cleanly after writing
//!   N records;
//! - `"chain":"restart","abandoned":"<hex SHA-256>"`: a new chain starts
//!   (`seq` 0, `prev` zeros) after a malformed line, whose bytes (without
//!   the newline) have that digest.
//!
//! # Appending
//!
//! A log opened again continues its chain: its next line follows the `seq`
//! and `mac` of the last line. Several pincer processes may share one log:
//! each line is written under an exclusive `flock(2)` on the file, after
//! catching up with the lines others appended meanwhile.
//!
//! Nothing is ever removed from a log. When its last line is malformed (a
//! writer killed in the middle of a line leaves one), the writer ends that
//! line with a newline if it has none, warns, and starts a new chain with a
//! restart line naming the malformed line's digest. If the file shrinks while
//! a writer holds it open, the writer keeps its own chain rather than chain
//! onto what is left, so the cut shows up in `verify`.
//!
//! # The key
//!
//! A log written to a file is keyed by `<log>.key` unless another key file is
//! given (`--audit-key`). When the key file does not exist it is created
//! (exclusively, mode 0600) with 32 random bytes; otherwise its bytes, as
//! they are, are the key (32 to 4096 of them). The key must stay out of the
//! agent's reach: a mission that grants the key file, or the directory
//! holding it, lets the agent forge lines. Keep it out of the mission's
//! grants, or keep it elsewhere with `--audit-key`. The log itself belongs
//! out of the grants too: without the key the agent cannot forge a line, but
//! it could still cut the log short.
//!
//! A log written to standard error is keyed by a random key that only the
//! writer ever holds: its lines carry the chain, but nobody can verify them.
//!
//! # Verifying
//!
//! [`verify`] reads a log with its key and reports the first line that is
//! malformed, whose mac does not match (it was edited, or the key is not the
//! log's), whose `prev` is not the previous line's `mac` or whose `seq` does
//! not follow (a line was removed or reordered), or that does not start a
//! chain when it should (the beginning of the log was removed).
//!
//! A malformed line followed by the restart line that names it is not a
//! failure: it is reported as a warning, since the chain cannot vouch for
//! its content. Neither is an incomplete last line (no newline, malformed):
//! that is what a writer killed mid-line leaves.
//!
//! What a chain cannot show by itself is that lines were cut from the end:
//! what is left is still a valid chain. That is what the close line is for:
//! when the last line is not a close line, the report warns that the log may
//! have been truncated, or its writer killed. The same holds before a restart,
//! which does not name the chain it follows: lines cut just before the
//! malformed line it sets aside (the end of the chain before it, or
//! everything from the start of the log) leave an intact chain, and only the
//! warning about the malformed line shows that something ended there. Nor
//! can a chain tell a log from an older copy of itself put back in its place
//! (which may well end with a close line): only a copy kept elsewhere, or a
//! count taken at the time, can.

pub mod explain;
mod lines;
pub mod ocsf;
mod record;
mod summary;

use std::{
    fmt::{self, Write as _},
    fs::{File, OpenOptions},
    io::{self, BufRead, BufReader, Read, Write},
    os::unix::fs::{FileExt, OpenOptionsExt, PermissionsExt},
    path::{Path, PathBuf},
    time::SystemTime,
};

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize, de::IgnoredAny};
use sha2::{Digest, Sha256};

use crate::files;

pub use self::{
    lines::{LineEnd, MAX_LINE_BYTES, read_line},
    record::{AssetRecord, Descriptor, Record, Stages, VerdictRecord},
    summary::Summary,
};

type HmacSha256 = Hmac<Sha256>;

/// Length of a key pincer draws, and the fewest bytes a key file may hold.
pub const KEY_LEN: usize = 32;

/// The most bytes read from a key file: a key is a secret, not a document,
/// and a key file pointing at a device must not be read forever.
pub const MAX_KEY_LEN: usize = 4096;

/// `prev` of the first line of a chain.
const CHAIN_START: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// What precedes the mac's hex digits at the end of every line.
const MAC_MEMBER: &str = ",\"mac\":\"";

/// Hex digits of a mac.
const MAC_HEX_LEN: usize = 64;

/// Length of `,"mac":"<64 hex digits>"}` at the end of every line.
const MAC_SUFFIX_LEN: usize = MAC_MEMBER.len() + MAC_HEX_LEN + 2;

/// Errors writing, reading or verifying an audit log.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The log file could not be opened.
    #[error("failed to open audit log {path}")]
    Open {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// A line could not be written.
    #[error("failed to write audit log")]
    Write(#[source] io::Error),
    /// The log could not be read.
    #[error("failed to read audit log {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The key file could not be read.
    #[error("failed to read audit key {path}")]
    ReadKey {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The key file could not be created.
    #[error("failed to create audit key {path}")]
    CreateKey {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The key file holds fewer than [`KEY_LEN`] or more than
    /// [`MAX_KEY_LEN`] bytes.
    #[error(
        "audit key {path} holds {held} bytes; a key holds {KEY_LEN} to {MAX_KEY_LEN}",
        held = if *too_long { format!("more than {MAX_KEY_LEN}") } else { len.to_string() }
    )]
    KeyLength {
        /// The file.
        path: PathBuf,
        /// Bytes read (at most [`MAX_KEY_LEN`] + 1).
        len: usize,
        /// Whether the file holds more than [`MAX_KEY_LEN`] bytes.
        too_long: bool,
    },
    /// No random key could be drawn.
    #[error("failed to draw a random audit key")]
    Random(#[source] io::Error),
    /// A record could not be serialized.
    #[error("failed to serialize an audit record")]
    Serialize(#[source] serde_json::Error),
    /// A record serialized to something else than a JSON object.
    #[error("an audit record must serialize to a JSON object")]
    NotAnObject,
    /// A record has a member whose name belongs to the chain.
    #[error(
        "an audit record may not use the names time, mission, seq, chain, abandoned, prev or mac"
    )]
    Reserved,
}

/// Which key chains a log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AuditKey {
    /// A key file: read when it exists, otherwise created with [`KEY_LEN`]
    /// random bytes, mode 0600.
    File(PathBuf),
    /// A random key kept in memory only: the chain is written, but nobody
    /// can verify it.
    Ephemeral,
}

impl AuditKey {
    /// The key a log gets when none is given: [`default_key_path`] for a
    /// file, an ephemeral key for standard error.
    pub fn default_for(log: Option<&Path>) -> Self {
        log.map_or(Self::Ephemeral, |log| Self::File(default_key_path(log)))
    }

    fn load(&self) -> Result<Vec<u8>, AuditError> {
        match self {
            Self::File(path) => read_or_create_key(path),
            Self::Ephemeral => random_key(),
        }
    }
}

/// The key file of a log when none is given: `<log>.key`.
pub fn default_key_path(log: &Path) -> PathBuf {
    let mut path = log.as_os_str().to_owned();
    path.push(".key");
    path.into()
}

/// Reads a key file: its bytes, as they are, are the key.
pub fn read_key(path: &Path) -> Result<Vec<u8>, AuditError> {
    let read_error = |source| AuditError::ReadKey {
        path: path.to_owned(),
        source,
    };
    let file = files::open_regular(path).map_err(read_error)?;
    let mode = file.metadata().map_err(read_error)?.permissions().mode();
    if mode & 0o077 != 0 {
        tracing::warn!(
            path = %path.display(),
            mode = format!("{:o}", mode & 0o777),
            "the audit key can be read by others than its owner: they can forge audit lines"
        );
    }
    let mut key = Vec::with_capacity(KEY_LEN);
    file.take(MAX_KEY_LEN as u64 + 1)
        .read_to_end(&mut key)
        .map_err(read_error)?;
    if key.len() < KEY_LEN || key.len() > MAX_KEY_LEN {
        return Err(AuditError::KeyLength {
            path: path.to_owned(),
            len: key.len(),
            too_long: key.len() > MAX_KEY_LEN,
        });
    }
    Ok(key)
}

fn read_or_create_key(path: &Path) -> Result<Vec<u8>, AuditError> {
    match read_key(path) {
        Err(AuditError::ReadKey { source, .. }) if source.kind() == io::ErrorKind::NotFound => {}
        other => return other,
    }
    let key = random_key()?;
    let create_error = |source| AuditError::CreateKey {
        path: path.to_owned(),
        source,
    };
    // O_EXCL: never overwrite a key that appeared meanwhile, and never
    // follow a symlink planted in its place.
    let mut file = match OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(file) => file,
        Err(source) if source.kind() == io::ErrorKind::AlreadyExists => return read_key(path),
        Err(source) => return Err(create_error(source)),
    };
    // Synced: a log that outlives its key after a crash cannot be verified.
    if let Err(source) = file.write_all(&key).and_then(|()| file.sync_all()) {
        // A short key file would make every later open fail.
        let _ = std::fs::remove_file(path);
        return Err(create_error(source));
    }
    tracing::info!(path = %path.display(), "created the audit key");
    Ok(key)
}

fn random_key() -> Result<Vec<u8>, AuditError> {
    let mut key = vec![0; KEY_LEN];
    getrandom::fill(&mut key).map_err(|e| {
        AuditError::Random(e.raw_os_error().map_or_else(
            || io::Error::other(e.to_string()),
            io::Error::from_raw_os_error,
        ))
    })?;
    Ok(key)
}

/// Where the next line of a chain attaches.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Link {
    /// Its `seq`.
    seq: u64,
    /// Its `prev`.
    prev: String,
}

impl Link {
    fn start() -> Self {
        Self {
            seq: 0,
            prev: CHAIN_START.to_owned(),
        }
    }
}

/// The members of a line the chain reads. Every name of the chain is here,
/// so that one used twice (by the chain and by a record) is an error.
#[derive(Deserialize)]
struct ChainMembers {
    #[serde(rename = "time")]
    _time: IgnoredAny,
    #[serde(rename = "mission")]
    _mission: IgnoredAny,
    seq: u64,
    chain: Option<String>,
    abandoned: Option<String>,
    prev: String,
    mac: Option<String>,
}

/// A line whose structure is sound; its mac is not checked yet.
struct Sealed<'a> {
    /// The text before the mac member.
    body: &'a str,
    /// The mac's hex digits.
    mac: &'a str,
    members: ChainMembers,
}

impl Sealed<'_> {
    /// Whether the mac is the key's over the canonical bytes, checked in
    /// constant time.
    fn authentic(&self, key: &HmacSha256) -> bool {
        let Ok(mac) = hex::decode(self.mac) else {
            return false;
        };
        key.clone()
            .chain_update(self.body)
            .chain_update(b"}")
            .verify_slice(&mac)
            .is_ok()
    }

    fn next_link(&self) -> Link {
        Link {
            seq: self.members.seq + 1,
            prev: self.mac.to_owned(),
        }
    }
}

fn is_mac_hex(s: &str) -> bool {
    s.len() == MAC_HEX_LEN && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Checks the structure of a line (without its newline): what a writer
/// chains onto, and what the verifier checks the mac of. The error says
/// what is wrong.
fn unseal(line: &[u8]) -> Result<Sealed<'_>, String> {
    let text = std::str::from_utf8(line).map_err(|_| "not UTF-8 text".to_owned())?;
    let no_mac = || format!("it does not end with {MAC_MEMBER}<64 hex digits>\"}}");
    let split = text
        .len()
        .checked_sub(MAC_SUFFIX_LEN)
        .filter(|&at| text.is_char_boundary(at))
        .ok_or_else(no_mac)?;
    let (body, suffix) = text.split_at(split);
    let mac = suffix
        .strip_prefix(MAC_MEMBER)
        .and_then(|rest| rest.strip_suffix("\"}"))
        .filter(|mac| is_mac_hex(mac))
        .ok_or_else(no_mac)?;
    let members: ChainMembers =
        serde_json::from_str(text).map_err(|e| format!("not a JSON audit line ({e})"))?;
    // The parsed mac being the one at the end proves that the suffix is the
    // object's last member, not text inside another.
    if members.mac.as_deref() != Some(mac) {
        return Err(no_mac());
    }
    if !is_mac_hex(&members.prev) {
        return Err("prev is not 64 hex digits".to_owned());
    }
    if members.seq == u64::MAX {
        return Err("seq is out of range".to_owned());
    }
    Ok(Sealed { body, mac, members })
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The writing side of a chain.
struct Chain {
    key: HmacSha256,
    /// The mission's name as a JSON string.
    mission: String,
    next: Link,
}

impl Chain {
    /// The line (with its newline) that carries `members` at the end of the
    /// chain, and the link after it. The chain advances only once the line
    /// is written: a failed write must not leave a gap.
    fn seal(&self, members: &str, is_record: bool) -> Result<(String, Link), AuditError> {
        let time = humantime::format_rfc3339_micros(SystemTime::now());
        let mut line = format!(
            "{{\"time\":\"{time}\",\"mission\":{},\"seq\":{}",
            self.mission, self.next.seq
        );
        if !members.is_empty() {
            line.push(',');
            line.push_str(members);
        }
        let _ = write!(line, ",\"prev\":\"{}\"}}", self.next.prev);
        // Read back before sealing, so that a record whose members collide
        // with the chain's never makes a line the verifier would reject.
        let parsed: ChainMembers = serde_json::from_str(&line).map_err(|_| AuditError::Reserved)?;
        if parsed.mac.is_some()
            || (is_record && (parsed.chain.is_some() || parsed.abandoned.is_some()))
        {
            return Err(AuditError::Reserved);
        }
        let mac = hex::encode(self.key.clone().chain_update(&line).finalize().into_bytes());
        line.pop();
        let _ = writeln!(line, "{MAC_MEMBER}{mac}\"}}");
        let next = Link {
            seq: self.next.seq + 1,
            prev: mac,
        };
        Ok((line, next))
    }
}

/// The last line of a non-empty log.
struct Tail {
    /// Where it leaves the chain, or why it is malformed and its digest.
    link: Result<Link, (String, String)>,
    /// Whether it ends with a newline.
    terminated: bool,
}

/// Where the line that ends at `end` starts: after the newline before it.
fn line_start(file: &File, end: u64) -> io::Result<u64> {
    let mut chunk = [0; 8192];
    let mut pos = end;
    while pos > 0 {
        let n = pos.min(chunk.len() as u64) as usize;
        pos -= n as u64;
        file.read_exact_at(&mut chunk[..n], pos)?;
        if let Some(i) = chunk[..n].iter().rposition(|&b| b == b'\n') {
            return Ok(pos + i as u64 + 1);
        }
    }
    Ok(0)
}

fn read_tail(file: &File, len: u64) -> io::Result<Option<Tail>> {
    if len == 0 {
        return Ok(None);
    }
    let mut last = [0];
    file.read_exact_at(&mut last, len - 1)?;
    let terminated = last[0] == b'\n';
    let end = len - u64::from(terminated);
    let start = line_start(file, end)?;
    if end - start > MAX_LINE_BYTES as u64 {
        // Not read whole: hashed in chunks for the restart line to name it.
        let mut hasher = Sha256::new();
        let mut chunk = vec![0; 1 << 16];
        let mut pos = start;
        while pos < end {
            let n = (end - pos).min(chunk.len() as u64) as usize;
            file.read_exact_at(&mut chunk[..n], pos)?;
            hasher.update(&chunk[..n]);
            pos += n as u64;
        }
        let problem = format!("longer than {MAX_LINE_BYTES} bytes");
        let link = Err((problem, hex::encode(hasher.finalize())));
        return Ok(Some(Tail { link, terminated }));
    }
    let mut line = vec![0; (end - start) as usize];
    file.read_exact_at(&mut line, start)?;
    let link = match unseal(&line) {
        Ok(sealed) => Ok(sealed.next_link()),
        Err(problem) => Err((problem, sha256_hex(&line))),
    };
    Ok(Some(Tail { link, terminated }))
}

/// A log file and how far this writer has seen it.
struct LogFile {
    file: File,
    path: PathBuf,
    /// The file's length after the last line this writer read or wrote;
    /// `None` before the first look.
    end: Option<u64>,
}

impl LogFile {
    fn open(path: &Path) -> Result<Self, AuditError> {
        // Read as well: the last line is read to continue the chain.
        let file = OpenOptions::new()
            .read(true)
            .create(true)
            .append(true)
            .open(path)
            .and_then(|file| {
                // A named pipe would block every write once full, a device
                // would swallow the log: only a regular file keeps it.
                files::check_regular(&file)?;
                Ok(file)
            })
            .map_err(|source| AuditError::Open {
                path: path.to_owned(),
                source,
            })?;
        Ok(Self {
            file,
            path: path.to_owned(),
            end: None,
        })
    }

    /// Runs `f` holding the file's lock, which every pincer writing to this
    /// log takes around each line.
    fn locked<R>(
        &mut self,
        f: impl FnOnce(&mut Self) -> Result<R, AuditError>,
    ) -> Result<R, AuditError> {
        self.file.lock().map_err(AuditError::Write)?;
        let result = f(self);
        let unlocked = self.file.unlock().map_err(AuditError::Write);
        result.and_then(|r| unlocked.map(|()| r))
    }

    fn write(&mut self, text: &str) -> Result<(), AuditError> {
        // One write per line: O_APPEND puts it whole at the end.
        self.file
            .write_all(text.as_bytes())
            .map_err(AuditError::Write)?;
        if let Some(end) = &mut self.end {
            *end += text.len() as u64;
        }
        Ok(())
    }

    /// Points `chain` at the end of the file, with the lock held: after the
    /// lines others appended, or at a new chain after a malformed line.
    fn catch_up(&mut self, chain: &mut Chain) -> Result<(), AuditError> {
        let len = self.file.metadata().map_err(AuditError::Write)?.len();
        match self.end {
            Some(end) if end == len => return Ok(()),
            Some(end) if len < end => {
                // Chaining onto what is left would hide the cut.
                tracing::warn!(
                    path = %self.path.display(),
                    "the audit log shrank while open: its chain goes on from the last line \
                     written here, so verify reports the cut"
                );
                self.end = Some(len);
                return Ok(());
            }
            _ => {}
        }
        let tail = read_tail(&self.file, len).map_err(|source| AuditError::Read {
            path: self.path.clone(),
            source,
        })?;
        self.end = Some(len);
        let Some(tail) = tail else {
            chain.next = Link::start();
            return Ok(());
        };
        if !tail.terminated {
            self.write("\n")?;
        }
        match tail.link {
            Ok(link) => chain.next = link,
            Err((problem, digest)) => {
                tracing::warn!(
                    path = %self.path.display(),
                    problem,
                    "the last line of the audit log is malformed (was its writer killed?): \
                     it stays, and a new chain starts after it"
                );
                chain.next = Link::start();
                let (line, next) = chain.seal(
                    &format!("\"chain\":\"restart\",\"abandoned\":\"{digest}\""),
                    false,
                )?;
                self.write(&line)?;
                chain.next = next;
            }
        }
        Ok(())
    }
}

/// Where audit lines go: a file (appended) or standard error.
pub struct AuditLog {
    /// `None` for standard error.
    file: Option<LogFile>,
    chain: Chain,
    /// Records written by this writer, for the close line.
    records: u64,
    closed: bool,
    /// Where each record also goes as an OCSF event, outside the chain.
    siem: Option<ocsf::SiemFile>,
}

impl AuditLog {
    /// Opens the log with its default key ([`AuditKey::default_for`]);
    /// `None` writes to standard error.
    pub fn open(path: Option<&Path>, mission: &str) -> Result<Self, AuditError> {
        Self::open_with_key(path, mission, AuditKey::default_for(path))
    }

    /// Opens the log keyed by `key`; `None` writes to standard error. A log
    /// that already has lines continues their chain.
    pub fn open_with_key(
        path: Option<&Path>,
        mission: &str,
        key: AuditKey,
    ) -> Result<Self, AuditError> {
        // The log first: a path that cannot be opened is better named as
        // the log's than as its key's.
        let file = path.map(LogFile::open).transpose()?;
        let key = key.load()?;
        let mut log = Self {
            file,
            chain: Chain {
                key: HmacSha256::new_from_slice(&key).expect("HMAC takes keys of any length"),
                mission: serde_json::Value::from(mission).to_string(),
                next: Link::start(),
            },
            records: 0,
            closed: false,
            siem: None,
        };
        // Now rather than at the first record: a malformed last line is
        // reported when the log is opened.
        if let Some(file) = &mut log.file {
            file.locked(|file| file.catch_up(&mut log.chain))?;
        }
        Ok(log)
    }

    /// Appends one record: anything that serializes to a JSON object, whose
    /// members become the line's.
    pub fn record<T: Serialize + ?Sized>(&mut self, record: &T) -> Result<(), AuditError> {
        let object = serde_json::to_string(record).map_err(AuditError::Serialize)?;
        let members = object
            .strip_prefix('{')
            .and_then(|o| o.strip_suffix('}'))
            .ok_or(AuditError::NotAnObject)?;
        let line = self.append(members, true)?;
        self.records += 1;
        // After the chained line, and whatever becomes of it: the SIEM's
        // copy never holds up the log or the decision behind it.
        if let Some(siem) = &mut self.siem {
            siem.write_line(line.trim_end());
        }
        Ok(())
    }

    /// Writes every record from now on also to `path` as an OCSF event
    /// ([`ocsf`]), one JSON object a line, outside the chain. Failures to
    /// write there are logged and counted, never returned.
    #[must_use]
    pub fn with_siem(mut self, path: Option<&Path>) -> Self {
        self.siem = path.map(ocsf::SiemFile::open);
        self
    }

    /// How many OCSF events could not be written (none without an export).
    pub fn siem_failures(&self) -> u64 {
        self.siem.as_ref().map_or(0, ocsf::SiemFile::failures)
    }

    /// Ends the log with its close line, which tells `verify` that nothing
    /// was cut from the end. Dropping the log does the same but can only
    /// warn when it fails.
    pub fn close(mut self) -> Result<(), AuditError> {
        self.finish()
    }

    /// Records that pincer failed, and leaves the log without a close line:
    /// a clean close would say the run ended well.
    pub fn fail(&mut self, message: &str) -> Result<(), AuditError> {
        if self.closed {
            return Ok(());
        }
        let recorded = self.record(&Record::Failure { message });
        self.closed = true;
        recorded
    }

    fn finish(&mut self) -> Result<(), AuditError> {
        // Standard error cannot be verified: a close line would be noise.
        if self.closed || self.file.is_none() {
            return Ok(());
        }
        self.closed = true;
        let members = format!("\"chain\":\"close\",\"records\":{}", self.records);
        self.append(&members, false).map(drop)
    }

    /// Writes one line and returns it.
    fn append(&mut self, members: &str, is_record: bool) -> Result<String, AuditError> {
        let chain = &mut self.chain;
        match &mut self.file {
            Some(file) => file.locked(|file| {
                file.catch_up(chain)?;
                let (line, next) = chain.seal(members, is_record)?;
                file.write(&line)?;
                chain.next = next;
                Ok(line)
            }),
            None => {
                let (line, next) = chain.seal(members, is_record)?;
                io::stderr()
                    .lock()
                    .write_all(line.as_bytes())
                    .map_err(AuditError::Write)?;
                chain.next = next;
                Ok(line)
            }
        }
    }
}

impl Drop for AuditLog {
    fn drop(&mut self) {
        // A panicking writer may have lost the record it was handling: the
        // missing close line says so.
        if std::thread::panicking() {
            return;
        }
        if let Err(error) = self.finish() {
            tracing::warn!(error = %error, "failed to close the audit log");
        }
    }
}

/// The outcome of [`verify`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VerifyReport {
    /// Every line is authentic and in its place.
    Intact {
        /// Lines in the file.
        lines: usize,
        /// New chains started after a malformed line.
        restarts: usize,
        /// What the chain does not vouch for: lines set aside by a restart,
        /// an incomplete last line, the lack of a close line at the end.
        warnings: Vec<String>,
    },
    /// The first line that is not.
    Broken {
        /// Its number in the file, from 1.
        line: usize,
        /// What is wrong with it, and what that means.
        problem: String,
    },
}

impl VerifyReport {
    /// Whether the log is intact (warnings or not).
    pub fn is_intact(&self) -> bool {
        matches!(self, Self::Intact { .. })
    }
}

impl fmt::Display for VerifyReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Intact {
                lines,
                restarts,
                warnings,
            } => {
                write!(f, "intact: {lines} line(s), {restarts} restart(s)")?;
                for warning in warnings {
                    write!(f, "\nwarning: {warning}")?;
                }
                Ok(())
            }
            Self::Broken { line, problem } => write!(f, "broken: line {line}: {problem}"),
        }
    }
}

/// Verifies the chain of the log at `log` under `key`.
pub fn verify(log: &Path, key: &[u8]) -> Result<VerifyReport, AuditError> {
    let file = open_log(log)?;
    verify_reader(BufReader::new(file), key).map_err(|source| AuditError::Read {
        path: log.to_owned(),
        source,
    })
}

/// Verifies the chain of the log at `log` under the key in `key`: the log is
/// opened first, so a log that is not there is named as such, not its key.
pub fn verify_file(log: &Path, key: &Path) -> Result<VerifyReport, AuditError> {
    let file = open_log(log)?;
    let key = read_key(key)?;
    verify_reader(BufReader::new(file), &key).map_err(|source| AuditError::Read {
        path: log.to_owned(),
        source,
    })
}

/// Opens a log to read it: a regular file only (a named pipe would wait for a
/// writer forever).
pub fn open_log(log: &Path) -> Result<File, AuditError> {
    files::open_regular(log).map_err(|source| AuditError::Read {
        path: log.to_owned(),
        source,
    })
}

/// A malformed line, until the next line says whether a restart set it
/// aside.
struct Malformed {
    line: usize,
    problem: String,
    digest: String,
    terminated: bool,
}

/// Verifies the chain of a log read from `reader` under `key`, as [`verify`]
/// does for a file. Public so that a log's bytes can be checked without a
/// file behind them: the fuzz targets feed it their inputs.
pub fn verify_reader(mut reader: impl BufRead, key: &[u8]) -> io::Result<VerifyReport> {
    let key = HmacSha256::new_from_slice(key).expect("HMAC takes keys of any length");
    let broken = |line, problem: String| Ok(VerifyReport::Broken { line, problem });
    let mut lines = 0;
    let mut restarts = 0;
    let mut warnings = Vec::new();
    // `None` where a chain must start: the first line, or after a restart.
    let mut next: Option<Link> = None;
    let mut malformed: Option<Malformed> = None;
    let mut closed = false;
    let mut buf = Vec::new();
    while let Some(end) = lines::read_line(&mut reader, &mut buf)? {
        lines += 1;
        let terminated = end.terminated;
        let unsealed = match end.overlong {
            Some((len, digest)) => Err((format!("{len} bytes, longer than any line"), digest)),
            None => unseal(&buf).map_err(|problem| (problem, sha256_hex(&buf))),
        };
        let sealed = match unsealed {
            Ok(sealed) => sealed,
            Err((problem, digest)) => {
                if let Some(earlier) = malformed {
                    return broken(earlier.line, malformed_problem(&earlier.problem));
                }
                malformed = Some(Malformed {
                    line: lines,
                    problem,
                    digest,
                    terminated,
                });
                closed = false;
                continue;
            }
        };
        let authentic = sealed.authentic(&key);
        let members = &sealed.members;
        let restart = members.chain.as_deref() == Some("restart");
        if let Some(earlier) = malformed.take() {
            // Only the restart line a writer put after it, naming it, makes a
            // malformed line acceptable.
            if !(authentic && restart) {
                return broken(earlier.line, malformed_problem(&earlier.problem));
            }
            if members.abandoned.as_deref() != Some(earlier.digest.as_str()) {
                return broken(
                    earlier.line,
                    format!(
                        "not the malformed line the restart on line {lines} set aside \
                         (it was edited)"
                    ),
                );
            }
            restarts += 1;
            next = None;
            warnings.push(format!(
                "line {} is malformed ({}) and not covered by the chain: it was the last \
                 line when the log was opened again, and a new chain starts on line {lines}",
                earlier.line, earlier.problem
            ));
        } else if !authentic {
            return broken(
                lines,
                "mac mismatch (the line was edited, or the key is not this log's)".to_owned(),
            );
        } else if restart {
            return broken(
                lines,
                "a restart line without the malformed line it sets aside before it \
                 (that line was removed)"
                    .to_owned(),
            );
        }
        match &next {
            None if members.seq != 0 || members.prev != CHAIN_START => {
                return broken(
                    lines,
                    format!(
                        "seq {} does not start a chain (the lines before it were removed)",
                        members.seq
                    ),
                );
            }
            Some(link) if members.prev != link.prev => {
                return broken(
                    lines,
                    format!(
                        "prev does not match line {} (a line was removed or reordered: \
                         seq {} follows {})",
                        lines - 1,
                        members.seq,
                        link.seq - 1
                    ),
                );
            }
            Some(link) if members.seq != link.seq => {
                return broken(
                    lines,
                    format!(
                        "seq {} follows {} (a line was removed or reordered)",
                        members.seq,
                        link.seq - 1
                    ),
                );
            }
            _ => {}
        }
        next = Some(sealed.next_link());
        closed = members.chain.as_deref() == Some("close");
    }
    if let Some(last) = malformed {
        if last.terminated {
            return broken(last.line, malformed_problem(&last.problem));
        }
        warnings.push(format!(
            "line {} is incomplete (its writer was killed in the middle of it) and not \
             covered by the chain",
            last.line
        ));
    }
    if !closed {
        warnings.push(
            "no close line at the end: the log may have been truncated, or its writer killed"
                .to_owned(),
        );
    }
    Ok(VerifyReport::Intact {
        lines,
        restarts,
        warnings,
    })
}

fn malformed_problem(problem: &str) -> String {
    format!("malformed: {problem} (the line was edited or corrupted)")
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;
    use crate::events::Decision;

    fn decision(n: u32) -> Decision {
        Decision::example(&format!("/x/{n}"))
    }

    /// A log of `n` decisions, closed; returns its key.
    fn write_log(path: &Path, n: u32) -> Vec<u8> {
        let mut log = AuditLog::open(Some(path), "m").unwrap();
        for i in 0..n {
            log.record(&decision(i)).unwrap();
        }
        log.close().unwrap();
        read_key(&default_key_path(path)).unwrap()
    }

    /// A log path in a new temporary directory; the directory goes away
    /// when the returned `TempDir` is dropped.
    fn temp_log_path() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        (dir, path)
    }

    /// Verifies the log at `path` with the key file beside it.
    fn verify_with_default_key(path: &Path) -> VerifyReport {
        let key = read_key(&default_key_path(path)).unwrap();
        verify(path, &key).unwrap()
    }

    fn lines(path: &Path) -> Vec<String> {
        fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    fn write_lines(path: &Path, lines: &[String]) {
        fs::write(
            path,
            lines.iter().map(|l| format!("{l}\n")).collect::<String>(),
        )
        .unwrap();
    }

    /// Verifies a closed log of `n` decisions after `edit` changed its
    /// lines.
    fn verify_edited(n: u32, edit: impl FnOnce(&mut Vec<String>)) -> VerifyReport {
        let (_dir, path) = temp_log_path();
        let key = write_log(&path, n);
        let mut lines = lines(&path);
        edit(&mut lines);
        write_lines(&path, &lines);
        verify(&path, &key).unwrap()
    }

    fn json(line: &str) -> serde_json::Value {
        serde_json::from_str(line).unwrap()
    }

    #[track_caller]
    fn assert_broken(report: &VerifyReport, at: usize, says: &str) {
        match report {
            VerifyReport::Broken { line, problem } => {
                assert_eq!(*line, at, "{problem}");
                assert!(problem.contains(says), "{problem}");
            }
            intact @ VerifyReport::Intact { .. } => {
                panic!("expected broken at line {at}, got {intact:?}")
            }
        }
    }

    #[track_caller]
    fn assert_intact(report: &VerifyReport, at_lines: usize, at_restarts: usize) -> Vec<String> {
        match report {
            VerifyReport::Intact {
                lines,
                restarts,
                warnings,
            } => {
                assert_eq!((*lines, *restarts), (at_lines, at_restarts), "{warnings:?}");
                warnings.clone()
            }
            broken @ VerifyReport::Broken { .. } => panic!("expected intact, got {broken}"),
        }
    }

    #[test]
    fn record_writes_one_chained_json_line_per_decision() {
        let (_dir, path) = temp_log_path();
        let mut log = AuditLog::open(Some(&path), "m").unwrap();
        log.record(&decision(0)).unwrap();
        log.record(&decision(1)).unwrap();
        let lines = lines(&path);
        assert_eq!(lines.len(), 2);
        let (first, second) = (json(&lines[0]), json(&lines[1]));
        assert_eq!(first["mission"], "m");
        assert_eq!(first["path"], "/x/0");
        assert_eq!(first["verdict"], "deny");
        assert!(first["time"].as_str().unwrap().ends_with('Z'));
        assert_eq!((&first["seq"], &second["seq"]), (&0.into(), &1.into()));
        assert_eq!(first["prev"], CHAIN_START);
        assert_eq!(second["prev"], first["mac"]);
        // The chain's members frame the record's, and the mac comes last.
        assert!(lines[0].starts_with(r#"{"time":""#), "{}", lines[0]);
        assert!(lines[0].contains(r#""seq":0,"pid":1,"#), "{}", lines[0]);
        let mac = first["mac"].as_str().unwrap();
        assert!(lines[0].ends_with(&format!(r#","prev":"{CHAIN_START}","mac":"{mac}"}}"#)));
    }

    #[test]
    fn the_mac_covers_the_line_without_its_mac_member() {
        let (_dir, path) = temp_log_path();
        let key = write_log(&path, 1);
        let line = &lines(&path)[0];
        let mac = json(line)["mac"].as_str().unwrap().to_owned();
        let canonical = line.replace(&format!(r#","mac":"{mac}""#), "");
        let mut expected = HmacSha256::new_from_slice(&key).unwrap();
        expected.update(canonical.as_bytes());
        assert_eq!(hex::encode(expected.finalize().into_bytes()), mac);
    }

    #[test]
    fn a_closed_chain_verifies_intact() {
        let (_dir, path) = temp_log_path();
        let key = write_log(&path, 10);
        let report = verify(&path, &key).unwrap();
        assert!(assert_intact(&report, 11, 0).is_empty());
        assert_eq!(report.to_string(), "intact: 11 line(s), 0 restart(s)");
        let close = json(lines(&path).last().unwrap());
        assert_eq!(
            (&close["chain"], &close["records"]),
            (&"close".into(), &10.into())
        );
    }

    #[test]
    fn a_one_byte_edit_anywhere_in_a_line_breaks_that_line() {
        let (_dir, path) = temp_log_path();
        let key = write_log(&path, 6);
        let original = fs::read(&path).unwrap();
        let starts: Vec<usize> = std::iter::once(0)
            .chain(
                original
                    .iter()
                    .enumerate()
                    .filter(|(_, b)| **b == b'\n')
                    .map(|(i, _)| i + 1),
            )
            .collect();
        let (start, end) = (starts[3], starts[4]);
        // Every byte of line 4, its newline included.
        for at in start..end {
            let mut edited = original.clone();
            edited[at] = if edited[at] == b'0' { b'1' } else { b'0' };
            fs::write(&path, &edited).unwrap();
            let report = verify(&path, &key).unwrap();
            assert_broken(&report, 4, "");
        }
        // A field's value, and the mac itself: still well-formed lines.
        for (needle, offset) in [(&b"/x/3"[..], 3), (b",\"mac\":\"", 8)] {
            let at = start
                + original[start..end]
                    .windows(needle.len())
                    .position(|w| w == needle)
                    .unwrap()
                + offset;
            let mut edited = original.clone();
            edited[at] = if edited[at] == b'a' { b'b' } else { b'a' };
            fs::write(&path, &edited).unwrap();
            let report = verify(&path, &key).unwrap();
            assert_broken(&report, 4, "mac mismatch (the line was edited");
            assert!(
                report
                    .to_string()
                    .starts_with("broken: line 4: mac mismatch")
            );
        }
    }

    #[test]
    fn a_removed_line_breaks_the_line_after_the_gap() {
        assert_broken(
            &verify_edited(6, |lines| {
                lines.remove(3);
            }),
            4,
            "prev does not match line 3 (a line was removed or reordered: seq 4 follows 2)",
        );
    }

    #[test]
    fn swapped_lines_break_at_the_first() {
        assert_broken(
            &verify_edited(6, |lines| lines.swap(2, 3)),
            3,
            "prev does not match line 2",
        );
    }

    #[test]
    fn a_removed_beginning_breaks_line_1() {
        assert_broken(
            &verify_edited(3, |lines| {
                lines.remove(0);
            }),
            1,
            "seq 1 does not start a chain",
        );
    }

    #[test]
    fn the_wrong_key_breaks_line_1() {
        let (_dir, path) = temp_log_path();
        write_log(&path, 3);
        assert_broken(&verify(&path, &[7; KEY_LEN]).unwrap(), 1, "mac mismatch");
    }

    #[test]
    fn a_missing_close_line_is_a_warning() {
        let report = verify_edited(3, |lines| lines.truncate(3));
        let warnings = assert_intact(&report, 3, 0);
        assert_eq!(warnings.len(), 1);
        assert!(
            warnings[0].starts_with("no close line at the end"),
            "{warnings:?}"
        );
        assert!(report.to_string().contains("\nwarning: no close line"));
    }

    #[test]
    fn opening_again_continues_the_chain() {
        let (_dir, path) = temp_log_path();
        let key = write_log(&path, 3);
        let mut log = AuditLog::open(Some(&path), "m2").unwrap();
        log.record(&decision(3)).unwrap();
        log.record(&decision(4)).unwrap();
        // Dropping closes too.
        drop(log);
        let lines = lines(&path);
        assert_eq!(lines.len(), 7);
        let first_appended = json(&lines[4]);
        assert_eq!(first_appended["seq"], 4);
        assert_eq!(first_appended["mission"], "m2");
        assert_eq!(first_appended["prev"], json(&lines[3])["mac"]);
        assert_eq!(json(&lines[6])["chain"], "close");
        assert!(assert_intact(&verify(&path, &key).unwrap(), 7, 0).is_empty());
        let summary = Summary::from_lines(lines.iter().map(String::as_str));
        assert_eq!(summary.verdicts, [("deny".to_owned(), 5)]);
        assert_eq!(summary.unreadable, 0);
    }

    #[test]
    fn the_key_file_is_created_private_and_reused() {
        let (dir, path) = temp_log_path();
        let key_path = dir.path().join("audit.jsonl.key");
        assert_eq!(default_key_path(&path), key_path);
        AuditLog::open(Some(&path), "m").unwrap().close().unwrap();
        let meta = fs::metadata(&key_path).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        let key = fs::read(&key_path).unwrap();
        assert_eq!(key.len(), KEY_LEN);
        AuditLog::open(Some(&path), "m").unwrap().close().unwrap();
        assert_eq!(fs::read(&key_path).unwrap(), key);
        assert_eq!(read_key(&key_path).unwrap(), key);
        assert!(assert_intact(&verify(&path, &key).unwrap(), 2, 0).is_empty());
    }

    #[test]
    fn a_given_key_file_is_used_instead() {
        let (dir, path) = temp_log_path();
        let key_path = dir.path().join("elsewhere.key");
        let log = AuditLog::open_with_key(Some(&path), "m", AuditKey::File(key_path.clone()));
        log.unwrap().close().unwrap();
        assert!(!default_key_path(&path).exists());
        let key = read_key(&key_path).unwrap();
        assert_intact(&verify(&path, &key).unwrap(), 1, 0);
    }

    #[test]
    fn a_key_file_of_the_wrong_length_is_refused_by_name() {
        let (_dir, path) = temp_log_path();
        let key_path = default_key_path(&path);
        fs::write(&key_path, [1; 16]).unwrap();
        let Err(error) = AuditLog::open(Some(&path), "m") else {
            panic!("a 16-byte key was accepted");
        };
        assert!(matches!(
            error,
            AuditError::KeyLength {
                len: 16,
                too_long: false,
                ..
            }
        ));
        let message = error.to_string();
        assert!(
            message.contains(&key_path.display().to_string()),
            "{message}"
        );
        assert!(message.contains("holds 16 bytes"), "{message}");
        fs::write(&key_path, [1; MAX_KEY_LEN + 100]).unwrap();
        let error = read_key(&key_path).unwrap_err().to_string();
        assert!(error.contains("more than 4096"), "{error}");
    }

    #[test]
    fn standard_error_gets_an_ephemeral_key() {
        assert_eq!(AuditKey::default_for(None), AuditKey::Ephemeral);
        assert_eq!(
            AuditKey::default_for(Some(Path::new("/var/log/a.jsonl"))),
            AuditKey::File("/var/log/a.jsonl.key".into())
        );
        let (a, b) = (
            AuditKey::Ephemeral.load().unwrap(),
            AuditKey::Ephemeral.load().unwrap(),
        );
        assert_eq!(a.len(), KEY_LEN);
        assert_ne!(a, b);
    }

    /// A log of 3 records whose writer died in the middle of a 4th line,
    /// then opened again for one record; returns its key.
    fn restarted_log(path: &Path, cut: &str) -> Vec<u8> {
        let key = write_log(path, 3);
        let mut lines = lines(path);
        lines.pop();
        let mut text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        text.push_str(cut);
        fs::write(path, text).unwrap();
        let mut log = AuditLog::open(Some(path), "m").unwrap();
        log.record(&decision(9)).unwrap();
        log.close().unwrap();
        key
    }

    #[test]
    fn an_overlong_last_line_is_set_aside_without_being_read_whole() {
        // What a writer would abort on if it read the line into memory (an
        // 8 GiB line takes only longer): the writer hashes it in chunks,
        // and verify streams it.
        let (_dir, path) = temp_log_path();
        let cut = "x".repeat(MAX_LINE_BYTES * 2 + 3);
        let key = restarted_log(&path, &cut);
        let restart = json(&lines(&path)[4]);
        assert_eq!(restart["chain"], "restart");
        assert_eq!(restart["abandoned"], sha256_hex(cut.as_bytes()));
        let warnings = assert_intact(&verify(&path, &key).unwrap(), 7, 1);
        assert!(
            warnings[0].starts_with(&format!(
                "line 4 is malformed ({} bytes, longer than any line)",
                cut.len()
            )),
            "{warnings:?}"
        );
    }

    #[test]
    fn a_malformed_last_line_starts_a_new_chain() {
        let (dir, path) = temp_log_path();
        let cut = r#"{"time":"2025-06-01T09:30:00.1"#;
        let key = restarted_log(&path, cut);
        let lines = lines(&path);
        assert_eq!(lines.len(), 7);
        // Kept as it was, ended by a newline.
        assert_eq!(lines[3], cut);
        let restart = json(&lines[4]);
        assert_eq!(restart["chain"], "restart");
        assert_eq!(restart["seq"], 0);
        assert_eq!(restart["prev"], CHAIN_START);
        assert_eq!(restart["abandoned"], sha256_hex(cut.as_bytes()));
        assert_eq!(json(&lines[5])["seq"], 1);
        let warnings = assert_intact(&verify(&path, &key).unwrap(), 7, 1);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].starts_with("line 4 is malformed"),
            "{warnings:?}"
        );
        assert!(
            warnings[0].ends_with("a new chain starts on line 5"),
            "{warnings:?}"
        );
        let summary = Summary::from_lines(lines.iter().map(String::as_str));
        assert_eq!(summary.verdicts, [("deny".to_owned(), 4)]);
        assert_eq!(summary.unreadable, 1);

        // A whole line of something else is set aside the same way.
        let path = dir.path().join("other.jsonl");
        let key = restarted_log(&path, "garbage\n");
        assert_eq!(self::lines(&path)[3], "garbage");
        assert_intact(&verify(&path, &key).unwrap(), 7, 1);
    }

    #[test]
    fn the_line_a_restart_set_aside_cannot_be_edited_or_removed() {
        let (_dir, path) = temp_log_path();
        let key = restarted_log(&path, "{\"cut");
        let original = lines(&path);

        let mut edited = original.clone();
        edited[3] = "{\"cuT".to_owned();
        write_lines(&path, &edited);
        assert_broken(
            &verify(&path, &key).unwrap(),
            4,
            "restart on line 5 set aside",
        );

        let mut removed = original.clone();
        removed.remove(3);
        write_lines(&path, &removed);
        assert_broken(&verify(&path, &key).unwrap(), 4, "restart line without");

        // Without the restart line, the malformed line is just broken.
        let mut removed = original;
        removed.remove(4);
        write_lines(&path, &removed);
        assert_broken(&verify(&path, &key).unwrap(), 4, "malformed: ");
    }

    #[test]
    fn an_incomplete_last_line_is_a_warning_and_a_complete_one_is_not() {
        let (_dir, path) = temp_log_path();
        let key = write_log(&path, 2);
        let mut text = fs::read_to_string(&path).unwrap();
        text.push_str("{\"time\":");
        fs::write(&path, &text).unwrap();
        let warnings = assert_intact(&verify(&path, &key).unwrap(), 4, 0);
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(
            warnings[0].starts_with("line 4 is incomplete"),
            "{warnings:?}"
        );
        assert!(warnings[1].starts_with("no close line"), "{warnings:?}");

        text.push('\n');
        fs::write(&path, &text).unwrap();
        assert_broken(&verify(&path, &key).unwrap(), 4, "malformed: ");
    }

    #[test]
    fn two_writers_share_one_chain() {
        let (_dir, path) = temp_log_path();
        let mut a = AuditLog::open(Some(&path), "a").unwrap();
        let mut b = AuditLog::open(Some(&path), "b").unwrap();
        a.record(&decision(0)).unwrap();
        b.record(&decision(1)).unwrap();
        a.record(&decision(2)).unwrap();
        a.close().unwrap();
        b.record(&decision(3)).unwrap();
        b.close().unwrap();
        assert!(assert_intact(&verify_with_default_key(&path), 6, 0).is_empty());
        let missions: Vec<_> = lines(&path)
            .iter()
            .map(|l| json(l)["mission"].clone())
            .collect();
        assert_eq!(missions, ["a", "b", "a", "a", "b", "b"]);
    }

    #[test]
    fn a_log_cut_while_open_is_not_chained_over() {
        let (_dir, path) = temp_log_path();
        let mut log = AuditLog::open(Some(&path), "m").unwrap();
        for i in 0..3 {
            log.record(&decision(i)).unwrap();
        }
        let lines = lines(&path);
        write_lines(&path, &lines[..2]);
        log.record(&decision(3)).unwrap();
        log.close().unwrap();
        assert_broken(&verify_with_default_key(&path), 3, "seq 3 follows 1");
    }

    #[test]
    fn any_object_is_a_record() {
        #[derive(Serialize)]
        struct Verdict {
            verdict: &'static str,
            votes: Vec<(&'static str, bool)>,
            decided_by: &'static str,
            lifetime: Option<u64>,
        }
        let (_dir, path) = temp_log_path();
        let mut log = AuditLog::open(Some(&path), "m").unwrap();
        log.record(&Verdict {
            verdict: "allow",
            votes: vec![("prompt", true)],
            decided_by: "prompt",
            lifetime: None,
        })
        .unwrap();
        log.record(&serde_json::json!({})).unwrap();
        log.record(&serde_json::json!({"event": "note", "n": 1}))
            .unwrap();
        log.close().unwrap();
        let lines = lines(&path);
        let verdict = json(&lines[0]);
        assert_eq!(verdict["votes"][0][0], "prompt");
        assert_eq!(verdict["lifetime"], serde_json::Value::Null);
        assert!(lines[1].contains(r#""seq":1,"prev":"#), "{}", lines[1]);
        assert_eq!(json(&lines[2])["event"], "note");
        assert!(assert_intact(&verify_with_default_key(&path), 4, 0).is_empty());
    }

    #[test]
    fn records_that_would_break_the_chain_are_refused() {
        let (_dir, path) = temp_log_path();
        let mut log = AuditLog::open(Some(&path), "m").unwrap();
        for reserved in [
            "time",
            "mission",
            "seq",
            "chain",
            "abandoned",
            "prev",
            "mac",
        ] {
            let error = log
                .record(&serde_json::json!({ reserved: "x" }))
                .unwrap_err();
            assert!(matches!(error, AuditError::Reserved), "{reserved}: {error}");
        }
        assert!(matches!(log.record(&42), Err(AuditError::NotAnObject)));
        assert!(matches!(log.record("text"), Err(AuditError::NotAnObject)));
        assert!(matches!(log.record(&[1, 2]), Err(AuditError::NotAnObject)));
        // Refusals leave no line and no gap.
        log.record(&decision(0)).unwrap();
        log.close().unwrap();
        assert!(assert_intact(&verify_with_default_key(&path), 2, 0).is_empty());
    }

    #[test]
    fn records_also_go_to_the_siem_file_outside_the_chain() {
        let (dir, path) = temp_log_path();
        let siem = dir.path().join("ocsf.jsonl");
        let mut log = AuditLog::open(Some(&path), "m")
            .unwrap()
            .with_siem(Some(&siem));
        log.record(&Record::Decision(&decision(0))).unwrap();
        log.record(&Record::Counters {
            counters: Default::default(),
        })
        .unwrap();
        log.close().unwrap();
        let events = lines(&siem);
        // The counters are no activity, and the close line no record.
        assert_eq!(events.len(), 1, "{events:?}");
        let event = json(&events[0]);
        assert_eq!(event["class_uid"], 1001);
        assert!(event.get("mac").is_none() && event.get("prev").is_none());
        assert!(assert_intact(&verify_with_default_key(&path), 3, 0).is_empty());
    }

    #[test]
    fn a_siem_file_that_cannot_be_written_stops_nothing() {
        let (dir, path) = temp_log_path();
        // A directory: opening it for writing fails, every time.
        let mut log = AuditLog::open(Some(&path), "m")
            .unwrap()
            .with_siem(Some(dir.path()));
        log.record(&Record::Decision(&decision(0))).unwrap();
        log.record(&Record::Decision(&decision(1))).unwrap();
        assert_eq!(log.siem_failures(), 2);
        log.close().unwrap();
        assert!(assert_intact(&verify_with_default_key(&path), 3, 0).is_empty());
    }

    #[test]
    fn an_empty_log_verifies_with_a_warning() {
        let (_dir, path) = temp_log_path();
        fs::write(&path, "").unwrap();
        let warnings = assert_intact(&verify(&path, &[0; KEY_LEN]).unwrap(), 0, 0);
        assert_eq!(warnings.len(), 1);
    }
}
