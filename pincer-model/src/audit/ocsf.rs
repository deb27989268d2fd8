//! Audit records as OCSF events, for a SIEM: one JSON object a line, of OCSF
//! [`VERSION`] with the `security_control` profile.
//!
//! The input is an audit line as pincer's own log holds it (its `time` and
//! `mission`, and the record's members); the chain's members (`seq`, `prev`,
//! `mac`) are not carried over: the HMAC chain vouches for pincer's log, and
//! a SIEM keeps its own integrity. One function serves both the live export
//! (each line as it is written) and `pincer audit export` (a log read back),
//! so the two cannot drift apart.
//!
//! What maps to what is documented attribute by attribute in
//! docs/audit.md, "SIEM export (OCSF)"; the tests validate every kind of
//! event against the JSON Schema of its class.

use std::{
    fs::{File, OpenOptions},
    io::{self, BufRead, Write},
    os::unix::fs::OpenOptionsExt,
    path::{Path, PathBuf},
    time::UNIX_EPOCH,
};

use serde_json::{Map, Value, json};

use crate::files;

/// The OCSF version of every event.
pub const VERSION: &str = "1.5.0";

/// The profiles every event declares: `security_control` brings
/// `action_id` and `disposition_id`, which say what pincer did.
pub const PROFILES: [&str; 1] = ["security_control"];

/// OCSF category of every class emitted: System Activity.
const SYSTEM_ACTIVITY: (u64, &str) = (1, "System Activity");

/// File System Activity.
pub const FILE_SYSTEM_ACTIVITY: u64 = 1001;
/// Kernel Activity.
pub const KERNEL_ACTIVITY: u64 = 1003;
/// Process Activity.
pub const PROCESS_ACTIVITY: u64 = 1007;

/// Why a line could not be made an event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct MapError(String);

fn missing(what: &str) -> MapError {
    MapError(format!("no valid {what}"))
}

/// Where the events are said to come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// `device.hostname`: the host pincer ran on.
    pub hostname: String,
}

impl Origin {
    /// This host.
    pub fn local() -> Self {
        Self {
            hostname: local_hostname(),
        }
    }
}

/// The name of this host (`localhost` when it cannot be read: the device
/// must name something).
pub fn local_hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}

/// The OCSF event of one audit line, or `None` for a line that records no
/// activity (the chain's close and restart lines, counters, descriptors,
/// revocations, asset changes and pincer's own failures).
pub fn event(line: &Value, origin: &Origin) -> Result<Option<Value>, MapError> {
    let Some(object) = line.as_object() else {
        return Err(MapError("not a JSON object".to_owned()));
    };
    let Some(kind) = object.get("event") else {
        return Ok(None);
    };
    let time = time_ms(object)?;
    let mission = object.get("mission").and_then(Value::as_str).unwrap_or("");
    let access = match kind.as_str() {
        Some("decision") => Access::decision(object)?,
        Some("verdict") => Access::verdict(object)?,
        Some("label") => return label(object, time, mission, origin).map(Some),
        Some(_) => return Ok(None),
        None => return Err(missing("event")),
    };
    Ok(Some(access.event(time, mission, origin)))
}

/// `time` in milliseconds since the epoch.
fn time_ms(object: &Map<String, Value>) -> Result<u64, MapError> {
    let text = object
        .get("time")
        .and_then(Value::as_str)
        .ok_or_else(|| missing("time"))?;
    let time = humantime::parse_rfc3339(text)
        .map_err(|_| MapError(format!("time {text:?} is not an RFC 3339 UTC time")))?;
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    Ok(since.as_millis() as u64)
}

/// What was done, and to what: a kernel decision or a verdict, in the terms
/// both share.
struct Access<'a> {
    /// The record, kept whole in `unmapped` for what OCSF has no place for.
    record: &'a Map<String, Value>,
    pid: u64,
    tid: Option<u64>,
    comm: &'a str,
    exe: Option<&'a str>,
    parent: Option<&'a Value>,
    operation: Vec<&'a str>,
    path: &'a str,
    hook: &'a str,
    /// `allow`, `deny`, `audit` or `park`.
    verdict: &'a str,
    reason: &'a str,
    cgroup: Option<u64>,
    request: Option<u64>,
    /// For a decision of a guard: the process it was about (its `ino`).
    target_pid: Option<u64>,
}

fn str_of<'a>(object: &'a Map<String, Value>, key: &str) -> Result<&'a str, MapError> {
    object
        .get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| missing(key))
}

/// A member pincer always writes but an event can do without (older logs
/// lack some).
fn optional_str<'a>(object: &'a Map<String, Value>, key: &str, default: &'a str) -> &'a str {
    object.get(key).and_then(Value::as_str).unwrap_or(default)
}

fn u64_of(object: &Map<String, Value>, key: &str) -> Result<u64, MapError> {
    object
        .get(key)
        .and_then(Value::as_u64)
        .ok_or_else(|| missing(key))
}

fn operations(object: &Map<String, Value>) -> Result<Vec<&str>, MapError> {
    object
        .get("operation")
        .and_then(Value::as_array)
        .and_then(|ops| ops.iter().map(Value::as_str).collect())
        .ok_or_else(|| missing("operation"))
}

impl<'a> Access<'a> {
    fn decision(record: &'a Map<String, Value>) -> Result<Self, MapError> {
        let hook = optional_str(record, "hook", "unknown");
        Ok(Self {
            record,
            pid: u64_of(record, "pid")?,
            tid: record.get("tid").and_then(Value::as_u64),
            comm: optional_str(record, "comm", ""),
            exe: None,
            parent: None,
            operation: operations(record)?,
            path: str_of(record, "path")?,
            hook,
            verdict: str_of(record, "verdict")?,
            reason: optional_str(record, "reason", ""),
            cgroup: record.get("cgroup").and_then(Value::as_u64),
            request: None,
            target_pid: matches!(hook, "task_kill" | "ptrace_access_check")
                .then(|| record.get("ino").and_then(Value::as_u64))
                .flatten(),
        })
    }

    fn verdict(record: &'a Map<String, Value>) -> Result<Self, MapError> {
        let request = record
            .get("request")
            .and_then(Value::as_object)
            .ok_or_else(|| missing("request"))?;
        Ok(Self {
            record,
            pid: u64_of(request, "pid")?,
            tid: request.get("tid").and_then(Value::as_u64),
            comm: optional_str(request, "comm", ""),
            exe: request.get("exe").and_then(Value::as_str),
            parent: request
                .get("parents")
                .and_then(Value::as_array)
                .and_then(|parents| parents.first()),
            operation: operations(request)?,
            path: str_of(request, "path")?,
            hook: optional_str(request, "hook", "unknown"),
            verdict: str_of(record, "verdict")?,
            reason: optional_str(record, "reason", ""),
            cgroup: request.get("cgroup").and_then(Value::as_u64),
            request: request.get("id").and_then(Value::as_u64),
            target_pid: None,
        })
    }

    fn has(&self, op: &str) -> bool {
        self.operation.contains(&op)
    }

    /// The class and activity (id and name).
    fn class(&self) -> (u64, u64, &'static str) {
        if let Some(activity) = process_activity(self.hook, self.has("exec")) {
            return (PROCESS_ACTIVITY, activity.0, activity.1);
        }
        if let Some(activity) = kernel_activity(self.hook) {
            return (KERNEL_ACTIVITY, activity.0, activity.1);
        }
        let (id, name) = file_activity(self.hook, &self.operation);
        (FILE_SYSTEM_ACTIVITY, id, name)
    }

    fn event(&self, time: u64, mission: &str, origin: &Origin) -> Value {
        let (class_uid, activity_id, activity_name) = self.class();
        let outcome = Outcome::of(self.verdict);
        let mut event = base(
            class_uid,
            activity_id,
            activity_name,
            time,
            &outcome,
            origin,
        );
        let object = event.as_object_mut().expect("base is an object");
        object.insert(
            "message".to_owned(),
            json!(format!(
                "{} {} {} by {} (pid {}): {}",
                self.verdict,
                self.operation.join(","),
                if self.path.is_empty() {
                    self.hook
                } else {
                    self.path
                },
                self.comm,
                self.pid,
                self.reason
            )),
        );
        object.insert("status_detail".to_owned(), json!(self.reason));
        object.insert("actor".to_owned(), json!({ "process": self.actor() }));
        if let Some(id) = self.request {
            object["metadata"]["correlation_uid"] = json!(id.to_string());
        }
        object["metadata"]["event_code"] = json!(self.hook);
        match class_uid {
            PROCESS_ACTIVITY => {
                object.insert("process".to_owned(), self.target_process());
            }
            KERNEL_ACTIVITY => {
                object.insert(
                    "kernel".to_owned(),
                    json!({
                        "name": self.hook,
                        "type_id": if self.hook == "bpf" { 2 } else { 99 },
                        "type": if self.hook == "bpf" { "System Call" } else { "Other" },
                    }),
                );
            }
            _ => {
                object.insert("file".to_owned(), file(self.path, file_type(self.hook)));
            }
        }
        let mut unmapped = Map::new();
        unmapped.insert("mission".to_owned(), json!(mission));
        unmapped.insert("event".to_owned(), self.record["event"].clone());
        unmapped.insert("verdict".to_owned(), json!(self.verdict));
        unmapped.insert("operation".to_owned(), json!(self.operation));
        if let Some(cgroup) = self.cgroup {
            unmapped.insert("cgroup".to_owned(), json!(cgroup));
        }
        // What only pincer knows, as the audit line has it.
        for key in [
            "dev",
            "ino",
            "taint",
            "decided_by",
            "lifetime",
            "extent",
            "tids",
            "votes",
        ] {
            if let Some(value) = self.record.get(key).filter(|v| !v.is_null()) {
                unmapped.insert(key.to_owned(), value.clone());
            }
        }
        object.insert("unmapped".to_owned(), Value::Object(unmapped));
        event
    }

    fn actor(&self) -> Value {
        let mut process = json!({ "pid": self.pid, "name": self.comm });
        if let Some(tid) = self.tid {
            process["tid"] = json!(tid);
        }
        if let Some(exe) = self.exe.filter(|exe| !exe.is_empty()) {
            process["file"] = file(exe, FileType::Regular);
        }
        if let Some(parent) = self.parent
            && let Some(pid) = parent.get("pid").and_then(Value::as_u64)
        {
            let mut parent_process = json!({ "pid": pid });
            if let Some(comm) = parent.get("comm").and_then(Value::as_str) {
                parent_process["name"] = json!(comm);
            }
            if let Some(exe) = parent.get("exe").and_then(Value::as_str) {
                parent_process["file"] = file(exe, FileType::Regular);
            }
            process["parent_process"] = parent_process;
        }
        process
    }

    /// `process` of a Process Activity: the program an exec starts, the
    /// process a signal or a trace was aimed at, or (starting a process in
    /// another cgroup) the actor itself, the new one having no id yet.
    fn target_process(&self) -> Value {
        if self.has("exec") && !self.path.is_empty() {
            let file = file(self.path, FileType::Regular);
            return json!({ "pid": self.pid, "name": file["name"], "file": file });
        }
        match self.target_pid {
            Some(pid) => json!({ "pid": pid }),
            None => json!({ "pid": self.pid, "name": self.comm }),
        }
    }
}

/// Status, action, disposition and severity of a verdict.
struct Outcome {
    status: (u64, &'static str),
    action: (u64, &'static str),
    disposition: (u64, &'static str),
    severity: (u64, &'static str),
}

impl Outcome {
    fn of(verdict: &str) -> Self {
        // Status, action, disposition and severity, each an id and its caption.
        let [status, action, disposition, severity] = match verdict {
            "allow" => [
                (1, "Success"),
                (1, "Allowed"),
                (1, "Allowed"),
                (1, "Informational"),
            ],
            // Allowed, and would have been denied: what audit mode is for.
            "audit" => [(1, "Success"), (1, "Allowed"), (17, "Logged"), (2, "Low")],
            // Held until the voters decide; a verdict record follows.
            "park" => [
                (0, "Unknown"),
                (99, "Parked"),
                (14, "Delayed"),
                (1, "Informational"),
            ],
            "deny" => [(2, "Failure"), (2, "Denied"), (2, "Blocked"), (3, "Medium")],
            _ => [(0, "Unknown"); 4],
        };
        Self {
            status,
            action,
            disposition,
            severity,
        }
    }
}

/// What every event has.
fn base(
    class_uid: u64,
    activity_id: u64,
    activity_name: &str,
    time: u64,
    outcome: &Outcome,
    origin: &Origin,
) -> Value {
    let class_name = match class_uid {
        PROCESS_ACTIVITY => "Process Activity",
        KERNEL_ACTIVITY => "Kernel Activity",
        _ => "File System Activity",
    };
    json!({
        "category_uid": SYSTEM_ACTIVITY.0,
        "category_name": SYSTEM_ACTIVITY.1,
        "class_uid": class_uid,
        "class_name": class_name,
        "activity_id": activity_id,
        "activity_name": activity_name,
        "type_uid": class_uid * 100 + activity_id,
        "type_name": format!("{class_name}: {activity_name}"),
        "time": time,
        "severity_id": outcome.severity.0,
        "severity": outcome.severity.1,
        "status_id": outcome.status.0,
        "status": outcome.status.1,
        "action_id": outcome.action.0,
        "action": outcome.action.1,
        "disposition_id": outcome.disposition.0,
        "disposition": outcome.disposition.1,
        "metadata": {
            "version": VERSION,
            "profiles": PROFILES,
            "product": {
                "name": "pincer",
                "vendor_name": "pincer",
                "version": env!("CARGO_PKG_VERSION"),
            },
        },
        "device": {
            "type_id": 0,
            "type": "Unknown",
            "hostname": origin.hostname,
        },
    })
}

/// Process Activity for an exec, a signal, a trace and a process started
/// elsewhere.
fn process_activity(hook: &str, exec: bool) -> Option<(u64, &'static str)> {
    match hook {
        "task_alloc" => Some((1, "Launch")),
        "task_kill" => Some((2, "Terminate")),
        "ptrace_access_check" => Some((3, "Open")),
        _ if exec => Some((1, "Launch")),
        _ => None,
    }
}

/// Kernel Activity for what touches the kernel rather than a file: system
/// V IPC, keys, capabilities, the bpf system call, loading into the kernel.
fn kernel_activity(hook: &str) -> Option<(u64, &'static str)> {
    match hook {
        "msg_queue_alloc_security" | "shm_alloc_security" | "sem_alloc_security" | "key_alloc" => {
            Some((1, "Create"))
        }
        "ipc_permission" | "key_permission" => Some((2, "Read")),
        "msg_queue_msgctl" | "shm_shmctl" | "sem_semctl" | "capable" | "bpf"
        | "kernel_load_data" | "kernel_read_file" => Some((4, "Invoke")),
        _ => None,
    }
}

/// File System Activity: by the hook where it says, by the operations
/// otherwise.
fn file_activity(hook: &str, operation: &[&str]) -> (u64, &'static str) {
    match hook {
        "inode_create" | "inode_mkdir" | "inode_mknod" | "inode_symlink" | "inode_link" => {
            (1, "Create")
        }
        "inode_unlink" | "inode_rmdir" => (4, "Delete"),
        "inode_rename" => (5, "Rename"),
        "inode_setattr" | "inode_setxattr" | "inode_removexattr" => (6, "Set Attributes"),
        "inode_set_acl" | "inode_remove_acl" => (7, "Set Security"),
        "inode_getxattr" | "inode_listxattr" => (8, "Get Attributes"),
        "inode_get_acl" => (9, "Get Security"),
        "inode_readlink" => (2, "Read"),
        "sb_mount" | "move_mount" => (12, "Mount"),
        "sb_umount" => (13, "Unmount"),
        "file_receive" => (14, "Open"),
        "mmap_file" | "file_mprotect" => (99, "Other"),
        "file_ioctl" | "file_ioctl_compat" | "path_notify" => (99, "Other"),
        _ => {
            let has = |op| operation.contains(&op);
            if has("create") || has("mkdir") || has("link") {
                (1, "Create")
            } else if has("delete") {
                (4, "Delete")
            } else if has("rename") {
                (5, "Rename")
            } else if has("setattr") {
                (6, "Set Attributes")
            } else if has("write") {
                (3, "Update")
            } else if has("read") {
                (2, "Read")
            } else {
                (99, "Other")
            }
        }
    }
}

/// OCSF file types pincer can tell from the hook alone.
#[derive(Clone, Copy)]
enum FileType {
    Unknown,
    Regular,
    Folder,
    Symlink,
}

impl FileType {
    fn id_and_name(self) -> (u64, &'static str) {
        match self {
            Self::Unknown => (0, "Unknown"),
            Self::Regular => (1, "Regular File"),
            Self::Folder => (2, "Folder"),
            Self::Symlink => (7, "Symbolic Link"),
        }
    }
}

fn file_type(hook: &str) -> FileType {
    match hook {
        "inode_mkdir" | "inode_rmdir" => FileType::Folder,
        "inode_symlink" | "inode_readlink" => FileType::Symlink,
        _ => FileType::Unknown,
    }
}

/// A file object: its path, name, parent folder and type.
fn file(path: &str, kind: FileType) -> Value {
    let trimmed = path.trim_end_matches('/');
    let (parent, name) = match trimmed.rsplit_once('/') {
        Some(("", name)) => (Some("/"), name),
        Some((parent, name)) => (Some(parent), name),
        None => (None, trimmed),
    };
    let name = if name.is_empty() { path } else { name };
    let (type_id, type_name) = kind.id_and_name();
    let mut file = json!({ "name": name, "type_id": type_id, "type": type_name });
    if !path.is_empty() {
        file["path"] = json!(path);
    }
    if let Some(parent) = parent {
        file["parent_folder"] = json!(parent);
    }
    file
}

/// A harness labelled a file: File System Activity, Set Security.
fn label(
    record: &Map<String, Value>,
    time: u64,
    mission: &str,
    origin: &Origin,
) -> Result<Value, MapError> {
    let action = str_of(record, "action")?;
    let path = str_of(record, "path")?;
    let caller = u64_of(record, "caller")?;
    let mut event = base(
        FILE_SYSTEM_ACTIVITY,
        7,
        "Set Security",
        time,
        &Outcome::of("allow"),
        origin,
    );
    let object = event.as_object_mut().expect("base is an object");
    object.insert(
        "message".to_owned(),
        json!(format!("label {action} {path} by pid {caller}")),
    );
    object.insert("actor".to_owned(), json!({ "process": { "pid": caller } }));
    object.insert("file".to_owned(), file(path, FileType::Unknown));
    object["metadata"]["event_code"] = json!(format!("label_{action}"));
    let mut unmapped = Map::new();
    unmapped.insert("mission".to_owned(), json!(mission));
    unmapped.insert("event".to_owned(), json!("label"));
    for key in ["action", "authority", "taint", "from"] {
        if let Some(value) = record.get(key) {
            unmapped.insert(key.to_owned(), value.clone());
        }
    }
    object.insert("unmapped".to_owned(), Value::Object(unmapped));
    Ok(event)
}

/// Why an audit log could not be exported.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// A line is not an audit line, or a record lacks what its event needs.
    #[error("line {line}: {problem}")]
    Line {
        /// Its number, from 1.
        line: usize,
        /// What is wrong with it.
        problem: String,
    },
    /// The log could not be read, or the events written.
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// Writes the OCSF event of every line of an audit log that records an
/// activity to `out`, one a line; returns how many. The chain is not
/// checked (that is `pincer audit verify`'s work): the first line that is
/// not an audit line stops the export.
pub fn export(
    mut reader: impl BufRead,
    origin: &Origin,
    out: &mut impl Write,
) -> Result<usize, ExportError> {
    let mut buf = Vec::new();
    let mut number = 0;
    let mut events = 0;
    while let Some(end) = super::read_line(&mut reader, &mut buf)? {
        number += 1;
        let problem = |problem: String| ExportError::Line {
            line: number,
            problem,
        };
        if let Some((len, _)) = end.overlong {
            return Err(problem(format!("{len} bytes, longer than any audit line")));
        }
        let line: Value = serde_json::from_slice(&buf)
            .map_err(|e| problem(format!("not a JSON audit line ({e})")))?;
        if let Some(event) = event(&line, origin).map_err(|e| problem(e.to_string()))? {
            serde_json::to_writer(&mut *out, &event).map_err(io::Error::from)?;
            out.write_all(b"\n")?;
            events += 1;
        }
    }
    Ok(events)
}

/// The OCSF file written beside the audit log. A write that fails is
/// logged and counted, never passed on: the audit log and enforcement go
/// on without the SIEM's copy.
pub struct SiemFile {
    path: PathBuf,
    file: Option<File>,
    origin: Origin,
    /// Events that could not be written.
    failures: u64,
}

impl SiemFile {
    /// The OCSF file at `path`, appended to (created mode 0640). A file
    /// that cannot be opened now is tried again at the next event.
    pub fn open(path: &Path) -> Self {
        let mut siem = Self {
            path: path.to_owned(),
            file: None,
            origin: Origin::local(),
            failures: 0,
        };
        if let Err(error) = siem.ensure_open() {
            tracing::warn!(
                path = %path.display(),
                %error,
                "cannot open the OCSF export file: tried again at the next event"
            );
        }
        siem
    }

    fn ensure_open(&mut self) -> io::Result<&mut File> {
        if self.file.is_none() {
            let file = OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o640)
                .open(&self.path)?;
            // A named pipe nobody reads would block every write.
            files::check_regular(&file)?;
            self.file = Some(file);
        }
        Ok(self.file.as_mut().expect("opened above"))
    }

    /// How many events could not be written.
    pub fn failures(&self) -> u64 {
        self.failures
    }

    /// Writes the event of one audit line (as pincer's log holds it).
    pub fn write_line(&mut self, line: &str) {
        let event = serde_json::from_str::<Value>(line)
            .map_err(|e| MapError(e.to_string()))
            .and_then(|line| event(&line, &self.origin));
        let event = match event {
            Ok(Some(event)) => event,
            Ok(None) => return,
            Err(error) => {
                self.failed(&error.to_string());
                return;
            }
        };
        let mut text = event.to_string();
        text.push('\n');
        let written = self
            .ensure_open()
            .and_then(|file| file.write_all(text.as_bytes()));
        if let Err(error) = written {
            // Opened again at the next event: the file may have been
            // removed, or its disk filled.
            self.file = None;
            self.failed(&error.to_string());
        }
    }

    fn failed(&mut self, error: &str) {
        self.failures += 1;
        // The first failure, then every thousandth: a full disk must not
        // flood the daemon's own log.
        if self.failures == 1 || self.failures.is_multiple_of(1000) {
            tracing::warn!(
                path = %self.path.display(),
                error,
                failures = self.failures,
                "cannot write an OCSF event: the audit log still has the record"
            );
        }
    }
}

#[cfg(test)]
mod tests;
