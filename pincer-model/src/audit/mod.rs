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
mod key;
mod lines;
pub mod ocsf;
mod record;
mod summary;
mod verification;

use std::{
    fmt::Write as _,
    fs::{File, OpenOptions},
    io::{self, Write},
    os::unix::fs::FileExt,
    path::{Path, PathBuf},
    time::SystemTime,
};

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize, de::IgnoredAny};
use sha2::{Digest, Sha256};

pub use self::{
    key::{AuditKey, read_key},
    lines::{LineEnd, MAX_LINE_BYTES, read_line},
    record::{AssetRecord, Descriptor, Record, Stages, VerdictRecord},
    summary::Summary,
    verification::{VerifyReport, open_log, verify, verify_file, verify_reader},
};
use crate::files;

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

#[cfg(test)]
mod tests;
