//! The control socket: how `pincer pending`, `pincer approve` and
//! `pincer deny` reach the twin inside `pincer run`.
//!
//! # Protocol
//!
//! Newline-delimited JSON over a Unix stream socket ([`DEFAULT_SOCKET`] unless
//! `--socket` or `PINCER_SOCKET` says otherwise). The client writes one
//! request per line and reads exactly one response line for each; a
//! connection may carry several requests in turn.
//!
//! Requests ([`ControlRequest`], tagged by `cmd`):
//!
//! ```text
//! {"cmd":"pending"}
//! {"cmd":"approve","id":7,"lifetime":{"kind":"once"}}
//! {"cmd":"approve","id":7,"lifetime":{"kind":"ttl","seconds":600}}
//! {"cmd":"approve","id":7,"lifetime":{"kind":"session"}}
//! {"cmd":"deny","id":7,"reason":"not during the demo"}     (reason optional)
//! ```
//!
//! Responses ([`ControlResponse`], tagged by `status`):
//!
//! ```text
//! {"status":"pending","requests":[{"id":7,"mission":"docs",...}, ...]}
//! {"status":"ok","message":"approved request 7 (once)"}
//! {"status":"error","message":"..."}
//! ```
//!
//! Each pending request is a [`PendingRequest`]: the sanitized
//! [`Request`] exactly as it serializes (the server converts, the client
//! deserializes the same type).
//!
//! A line that is not a valid request gets an `error` response naming the
//! problem and the connection stays usable. A line longer than
//! [`MAX_REQUEST_LINE`] bytes gets an `error` response and the connection is
//! closed, since the rest of it cannot be told apart from the next request.
//!
//! # Who may answer
//!
//! The server reads the peer's credentials from the socket. It refuses every
//! request (`pending` too: the list shows what the agent is trying to reach)
//! from a process that runs as a uid other than root or the server's own, or
//! inside any agent cgroup (`/pincer/...` in the cgroup v2 hierarchy), so an
//! agent cannot approve its own requests. A refused connection gets one
//! `error` response and is closed.

use std::convert::Infallible;
use std::ffi::OsString;
use std::fmt;
use std::fs::{self, DirBuilder};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener as StdUnixListener, UnixStream as StdUnixStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader as AsyncBufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::task::JoinSet;

use crate::cgroup::PINCER_DIR;
use crate::request::{ProcessFacts, Request};
use crate::vote::Lifetime;

/// Where the twin listens unless told otherwise.
pub const DEFAULT_SOCKET: &str = "/run/pincer/pincer.sock";

/// Environment variable that overrides [`DEFAULT_SOCKET`].
pub const SOCKET_ENV: &str = "PINCER_SOCKET";

/// Longest request line the server reads, without its newline.
pub const MAX_REQUEST_LINE: usize = 64 * 1024;

/// Longest response line the client reads: a long pending list is legitimate,
/// an endless line is not.
const MAX_RESPONSE_LINE: usize = 16 * 1024 * 1024;

/// How long the client waits to connect, and then for each read or write.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Pause after a failed `accept`, so that running out of descriptors does not
/// turn the accept loop into a busy loop.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// A request from the command line to the twin.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "lowercase")]
pub enum ControlRequest {
    /// List the parked requests waiting for a human.
    Pending,
    /// Allow a parked request.
    Approve {
        /// The request's id.
        id: u64,
        /// How long the allow lasts (the mission may cap it).
        lifetime: Lifetime,
    },
    /// Refuse a parked request.
    Deny {
        /// The request's id.
        id: u64,
        /// Why, for the audit log.
        #[serde(default)]
        reason: Option<String>,
    },
    /// The daemon's state (`pincer status`; daemon only).
    Status,
    /// The confined agent cgroups (`pincer agents`; daemon only).
    Agents,
    /// The grants of one agent, or of all (`pincer grants`; daemon only).
    Grants {
        /// The agent's name.
        #[serde(default)]
        agent: Option<String>,
    },
    /// Confines a cgroup `pincer run` made, with a mission, for as long as
    /// it lives (daemon only; answered once the cgroup is confined).
    Register {
        /// The cgroup, relative to the cgroup2 mount (`pincer/run-<pid>`).
        cgroup: String,
        /// The mission file (absolute).
        mission: PathBuf,
        /// `enforce`, `audit` or `ask`; the mission's own default otherwise.
        #[serde(default)]
        mode: Option<String>,
    },
    /// Releases a registered cgroup (daemon only).
    Unregister {
        /// The cgroup, as registered.
        cgroup: String,
    },
    /// Withdraws the grants votes made for an agent, all of them or those
    /// on one path (`pincer revoke`; daemon only). Mission grants stay.
    Revoke {
        /// The agent's name.
        agent: String,
        /// Only the grants on this path.
        #[serde(default)]
        path: Option<String>,
    },
}

/// The twin's answer to one [`ControlRequest`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum ControlResponse {
    /// The parked requests waiting for a human, oldest first as the handler
    /// lists them.
    Pending {
        /// The requests.
        requests: Vec<PendingRequest>,
    },
    /// What a query asked for (`status`, `agents`, `grants`).
    Info {
        /// The answer, as the command documents it.
        info: serde_json::Value,
    },
    /// The request was carried out.
    Ok {
        /// What was done.
        message: String,
    },
    /// The request was refused or failed.
    Error {
        /// Why.
        message: String,
    },
}

/// A parked request as the control socket carries it: the serialized fields
/// of [`Request`], owned so that the client can deserialize them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingRequest {
    /// Identifier to pass to `approve` or `deny`.
    pub id: u64,
    /// The mission's name.
    pub mission: String,
    /// The agent's cgroup id.
    pub cgroup: u64,
    /// Process id of the requesting task.
    pub pid: u32,
    /// Thread id of the requesting task.
    pub tid: u32,
    /// Escaped `comm` of the task.
    pub comm: String,
    /// Escaped executable path of the task, when readable.
    pub exe: Option<String>,
    /// Parents of the task, nearest first.
    pub parents: Vec<ParentProcess>,
    /// Operations requested (`read`, `write`, `create`, `exec`).
    pub operation: Vec<String>,
    /// Escaped path of the object.
    pub path: String,
    /// `file_open` or `inode_create`.
    pub hook: String,
    /// Why the mission did not grant it.
    pub why: String,
}

/// One process in a [`PendingRequest`]'s parent chain.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParentProcess {
    /// Process id.
    pub pid: u32,
    /// Escaped `comm`.
    pub comm: String,
    /// Escaped path of the executable, when it could be read.
    pub exe: Option<String>,
}

impl From<&Request> for PendingRequest {
    fn from(request: &Request) -> Self {
        PendingRequest {
            id: request.id,
            mission: request.mission.clone(),
            cgroup: request.cgroup,
            pid: request.pid,
            tid: request.tid,
            comm: request.comm.clone(),
            exe: request.exe.clone(),
            parents: request.parents.iter().map(ParentProcess::from).collect(),
            operation: request.operation.iter().map(|op| op.to_string()).collect(),
            path: request.path.clone(),
            hook: request.hook.to_owned(),
            why: request.why.clone(),
        }
    }
}

impl From<&ProcessFacts> for ParentProcess {
    fn from(facts: &ProcessFacts) -> Self {
        ParentProcess {
            pid: facts.pid,
            comm: facts.comm.clone(),
            exe: facts.exe.clone(),
        }
    }
}

impl fmt::Display for PendingRequest {
    /// One line for `pincer pending`: id, mission, operations, path, task and
    /// the reason it parked.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} [{}] {} {} by {} (pid {}): {}",
            self.id,
            self.mission,
            self.operation.join(","),
            self.path,
            self.comm,
            self.pid,
            self.why
        )
    }
}

/// A human's answer to a parked request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HumanAnswer {
    /// Allow it for this long.
    Allow(Lifetime),
    /// Refuse it, optionally saying why.
    Deny(Option<String>),
}

/// What the control socket asks of the twin. Called from the server's tasks:
/// implementations must return quickly (hand the answer over, don't wait for
/// the verdict).
pub trait ControlHandler: Send + Sync + 'static {
    /// The parked requests waiting for a human.
    fn pending(&self) -> Vec<Request>;

    /// Delivers a human's answer to request `id`. The error (for example, no
    /// such pending request) is shown to the human as is.
    fn answer(&self, id: u64, answer: HumanAnswer) -> Result<(), String>;

    /// Answers the daemon's queries and commands (`status`, `agents`,
    /// `grants`, `revoke`); `pincer run` has none of them.
    fn query(&self, request: &ControlRequest) -> ControlResponse {
        let _ = request;
        ControlResponse::Error {
            message: "this socket belongs to a `pincer run`, which answers only pending, \
                      approve and deny; status, agents, grants and revoke need `pincer daemon`"
                .into(),
        }
    }

    /// Hands a command that changes the daemon's state (`register`,
    /// `unregister`) to its event loop; the answer comes when it is done.
    fn submit(
        &self,
        request: ControlRequest,
        caller: u32,
    ) -> Result<tokio::sync::oneshot::Receiver<ControlResponse>, ControlResponse> {
        let _ = (request, caller);
        Err(ControlResponse::Error {
            message: "this socket belongs to a `pincer run`; register needs `pincer daemon`".into(),
        })
    }

    /// Whether a caller in this cgroup v2 path is an agent, which may not
    /// answer (by default: anything under `/pincer`).
    fn is_agent_cgroup(&self, cgroup_path: &str) -> bool {
        in_agent_cgroup(cgroup_path)
    }
}

/// Finds the cgroup v2 path of a process, as `/proc/<pid>/cgroup` shows it.
type CgroupResolver = dyn Fn(u32) -> io::Result<String> + Send + Sync;

/// An error of the control socket, on either side.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// The socket's directory could not be created.
    #[error("cannot create directory {}", .path.display())]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// A live server already answers on the socket.
    #[error("another pincer is already listening on {}", .path.display())]
    InUse {
        /// The socket.
        path: PathBuf,
    },
    /// Something other than a socket sits where the socket should be.
    #[error("{} exists and is not a socket", .path.display())]
    NotASocket {
        /// The path.
        path: PathBuf,
    },
    /// Whether a server is listening could not be determined.
    #[error("cannot check whether a pincer listens on {}", .path.display())]
    Probe {
        /// The socket.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// A socket left by a server that is gone could not be removed.
    #[error("cannot remove stale socket {}", .path.display())]
    RemoveStale {
        /// The socket.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// The socket could not be created or set up.
    #[error("cannot listen on {}", .path.display())]
    Bind {
        /// The socket.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// The socket's permissions could not be restricted.
    #[error("cannot restrict the permissions of {}", .path.display())]
    Permissions {
        /// The socket.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// Nothing listens on the socket: no `pincer run` is active there.
    #[error("no pincer is listening on {}", .path.display())]
    NotListening {
        /// The socket.
        path: PathBuf,
    },
    /// Connecting failed for another reason (such as permissions).
    #[error("cannot connect to {}", .path.display())]
    Connect {
        /// The socket.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// The server did not answer in time.
    #[error("no answer from {} within {}", .path.display(), humantime::format_duration(*.timeout))]
    Timeout {
        /// The socket.
        path: PathBuf,
        /// How long the client waited.
        timeout: Duration,
    },
    /// Sending the request or reading the response failed.
    #[error("cannot talk to {}", .path.display())]
    Io {
        /// The socket.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// The server closed the connection without a response.
    #[error("{} closed the connection without answering", .path.display())]
    Closed {
        /// The socket.
        path: PathBuf,
    },
    /// The response is longer than the client accepts.
    #[error("the answer from {} is longer than {limit} bytes", .path.display())]
    ResponseTooLong {
        /// The socket.
        path: PathBuf,
        /// The limit.
        limit: usize,
    },
    /// The response is not valid JSON of the protocol.
    #[error("malformed answer from {}", .path.display())]
    Malformed {
        /// The socket.
        path: PathBuf,
        /// The error.
        #[source]
        source: serde_json::Error,
    },
}

/// The listening control socket of one `pincer run`.
pub struct ControlServer {
    listener: StdUnixListener,
    socket_file: SocketFile,
    resolver: Arc<CgroupResolver>,
}

impl fmt::Debug for ControlServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ControlServer")
            .field("path", &self.socket_file.path)
            .finish_non_exhaustive()
    }
}

impl ControlServer {
    /// Listens on `path`.
    ///
    /// Creates the parent directory (mode 0700) when it is missing. Refuses
    /// when a live server answers on `path`; replaces a socket left by one
    /// that is gone, but never removes anything that is not a socket. The
    /// socket file gets mode 0600 and is removed when the server is dropped
    /// (or [`serve`](Self::serve) ends).
    ///
    /// Needs no async runtime: the socket joins one in `serve`.
    pub fn bind(path: &Path) -> Result<ControlServer, ControlError> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(parent)
                .map_err(|source| ControlError::CreateDir {
                    path: parent.to_owned(),
                    source,
                })?;
        }
        remove_stale_socket(path)?;
        let bind_error = |source| ControlError::Bind {
            path: path.to_owned(),
            source,
        };
        let listener = StdUnixListener::bind(path).map_err(bind_error)?;
        // From here on the file is ours, and dropping the guard removes it
        // whatever fails next.
        let metadata = fs::symlink_metadata(path).map_err(bind_error)?;
        let socket_file = SocketFile {
            path: path.to_owned(),
            dev: metadata.dev(),
            ino: metadata.ino(),
        };
        // The peer checks are the real gate; the mode keeps everyone else
        // from even connecting.
        fs::set_permissions(path, fs::Permissions::from_mode(0o600)).map_err(|source| {
            ControlError::Permissions {
                path: path.to_owned(),
                source,
            }
        })?;
        listener.set_nonblocking(true).map_err(bind_error)?;
        Ok(ControlServer {
            listener,
            socket_file,
            resolver: Arc::new(proc_cgroup),
        })
    }

    /// Replaces how the server finds a peer's cgroup v2 path (by default
    /// [`proc_cgroup`]).
    pub fn with_cgroup_resolver(
        mut self,
        resolver: impl Fn(u32) -> io::Result<String> + Send + Sync + 'static,
    ) -> ControlServer {
        self.resolver = Arc::new(resolver);
        self
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.socket_file.path
    }

    /// Answers connections, each in its own task, until the returned future
    /// is dropped; dropping it also closes every open connection and removes
    /// the socket file. Fails only when the socket cannot join the runtime.
    pub async fn serve(self, handler: Arc<dyn ControlHandler>) -> Result<Infallible, ControlError> {
        let ControlServer {
            listener,
            socket_file,
            resolver,
        } = self;
        let listener = UnixListener::from_std(listener).map_err(|source| ControlError::Bind {
            path: socket_file.path.clone(),
            source,
        })?;
        let server_euid = nix::unistd::geteuid().as_raw();
        // Owning the connection tasks ties their life to this future's.
        let mut connections = JoinSet::new();
        loop {
            tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => {
                        connections.spawn(serve_connection(
                            stream,
                            Arc::clone(&handler),
                            Arc::clone(&resolver),
                            server_euid,
                        ));
                    }
                    Err(error) => {
                        tracing::warn!(%error, socket = %socket_file.path.display(), "control socket: accept failed");
                        tokio::time::sleep(ACCEPT_BACKOFF).await;
                    }
                },
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
            }
        }
    }
}

/// The socket file a server created; removed on drop unless something else
/// has replaced it meanwhile.
struct SocketFile {
    path: PathBuf,
    dev: u64,
    ino: u64,
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        let ours = fs::symlink_metadata(&self.path)
            .is_ok_and(|metadata| metadata.dev() == self.dev && metadata.ino() == self.ino);
        if ours && let Err(error) = fs::remove_file(&self.path) {
            tracing::warn!(%error, socket = %self.path.display(), "cannot remove the control socket");
        }
    }
}

/// Makes room for a new socket at `path`: fails if a server answers there,
/// removes a socket nobody listens on.
fn remove_stale_socket(path: &Path) -> Result<(), ControlError> {
    match StdUnixStream::connect(path) {
        Ok(_) => Err(ControlError::InUse {
            path: path.to_owned(),
        }),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(error) if error.kind() == io::ErrorKind::ConnectionRefused => {
            let metadata = fs::symlink_metadata(path).map_err(|source| ControlError::Probe {
                path: path.to_owned(),
                source,
            })?;
            // The server runs as root: a mistyped --socket must not delete
            // an ordinary file (or follow a symlink to one).
            if !metadata.file_type().is_socket() {
                return Err(ControlError::NotASocket {
                    path: path.to_owned(),
                });
            }
            fs::remove_file(path).map_err(|source| ControlError::RemoveStale {
                path: path.to_owned(),
                source,
            })
        }
        Err(source) => Err(ControlError::Probe {
            path: path.to_owned(),
            source,
        }),
    }
}

/// The process on the other end of a connection, once checked.
#[derive(Clone, Copy, Debug)]
struct Peer {
    pid: u32,
    uid: u32,
}

/// Reads requests from one connection and answers each.
async fn serve_connection(
    stream: UnixStream,
    handler: Arc<dyn ControlHandler>,
    resolver: Arc<CgroupResolver>,
    server_euid: u32,
) {
    let peer = check_connection(&stream, &*resolver, server_euid, &*handler);
    if let Err(refusal) = &peer {
        tracing::warn!(%refusal, "control socket: refused a caller");
    }
    let (reader, mut writer) = stream.into_split();
    let mut reader = AsyncBufReader::new(reader);
    let mut line = Vec::new();
    loop {
        line.clear();
        // One byte over the limit tells a line of exactly the limit (plus its
        // newline) from a longer one.
        let limit = MAX_REQUEST_LINE as u64 + 1;
        match (&mut reader).take(limit).read_until(b'\n', &mut line).await {
            Ok(0) => return,
            Ok(_) => {}
            Err(error) => {
                tracing::debug!(%error, "control socket: read failed");
                return;
            }
        }
        let terminated = line.last() == Some(&b'\n');
        let (response, keep_open) = if !terminated && line.len() > MAX_REQUEST_LINE {
            let message = format!("request line longer than {MAX_REQUEST_LINE} bytes");
            (ControlResponse::Error { message }, false)
        } else {
            match &peer {
                Err(refusal) => (
                    ControlResponse::Error {
                        message: refusal.clone(),
                    },
                    false,
                ),
                // An unterminated line is the last one: the peer has shut
                // down its side.
                Ok(peer) => (dispatch(&line, &*handler, *peer).await, terminated),
            }
        };
        if let Err(error) = send(&mut writer, &response).await {
            tracing::debug!(%error, "control socket: write failed");
            return;
        }
        if !keep_open {
            return;
        }
    }
}

/// Writes one response line.
async fn send(
    writer: &mut tokio::net::unix::OwnedWriteHalf,
    response: &ControlResponse,
) -> io::Result<()> {
    let mut bytes = serde_json::to_vec(response)?;
    bytes.push(b'\n');
    writer.write_all(&bytes).await
}

/// Decides whether the peer of `stream` may use the control socket.
fn check_connection(
    stream: &UnixStream,
    resolver: &CgroupResolver,
    server_euid: u32,
    handler: &dyn ControlHandler,
) -> Result<Peer, String> {
    let credentials = stream
        .peer_cred()
        .map_err(|error| format!("refused: cannot read the caller's credentials ({error})"))?;
    let uid = credentials.uid();
    check_uid(uid, server_euid)?;
    // The pid is 0 when the caller lives in a pid namespace this one cannot
    // see: then its cgroup cannot be checked either.
    let pid = credentials
        .pid()
        .and_then(|pid| u32::try_from(pid).ok())
        .filter(|&pid| pid != 0)
        .ok_or_else(|| "refused: cannot identify the calling process".to_owned())?;
    // The pid names the caller only while the caller lives: once it exits,
    // another process may get the same pid, cgroup and all. A pidfd taken
    // from the socket pins the caller itself, so checking that it is still
    // alive after reading its cgroup proves the cgroup was the caller's.
    let pidfd = peer_pidfd(stream)
        .map_err(|error| format!("refused: cannot identify the calling process ({error})"))?;
    let cgroup = resolver(pid)
        .map_err(|error| format!("refused: cannot read the caller's cgroup ({error})"))?;
    if let Some(pidfd) = pidfd {
        match is_alive(&pidfd) {
            Ok(true) => {}
            Ok(false) => return Err("refused: the caller exited before it could be checked".into()),
            Err(error) => return Err(format!("refused: cannot check the caller ({error})")),
        }
    }
    check_cgroup(&cgroup, handler)?;
    Ok(Peer { pid, uid })
}

/// Only root and the server's own user may answer.
fn check_uid(uid: u32, server_euid: u32) -> Result<(), String> {
    if uid == 0 || uid == server_euid {
        Ok(())
    } else {
        Err(format!(
            "refused: the caller runs as uid {uid}; only root and uid {server_euid} may answer"
        ))
    }
}

/// No process of any agent may answer.
fn check_cgroup(cgroup: &str, handler: &dyn ControlHandler) -> Result<(), String> {
    if handler.is_agent_cgroup(cgroup) {
        Err(format!(
            "refused: the caller runs in agent cgroup {cgroup}; an agent cannot answer its own requests"
        ))
    } else {
        Ok(())
    }
}

/// A pidfd for the peer of `stream`, or `None` on kernels older than 6.5,
/// which lack `SO_PEERPIDFD` (then only the pid is checked).
fn peer_pidfd(stream: &UnixStream) -> io::Result<Option<OwnedFd>> {
    let mut fd: libc::c_int = -1;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes, the size of `fd`.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERPIDFD,
            (&raw mut fd).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        let error = io::Error::last_os_error();
        return match error.raw_os_error() {
            Some(libc::ENOPROTOOPT) => Ok(None),
            _ => Err(error),
        };
    }
    // SAFETY: on success the kernel installed a new descriptor that nothing
    // else owns.
    Ok(Some(unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// Whether the process behind `pidfd` has not been reaped (so its pid has
/// not been reused).
fn is_alive(pidfd: &OwnedFd) -> io::Result<bool> {
    // SAFETY: signal 0 with no siginfo and no flags delivers nothing; it only
    // checks that the process exists.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            libc::c_long::from(pidfd.as_raw_fd()),
            0 as libc::c_long,
            std::ptr::null::<libc::siginfo_t>(),
            0 as libc::c_long,
        )
    };
    if rc == 0 {
        return Ok(true);
    }
    let error = io::Error::last_os_error();
    match error.raw_os_error() {
        Some(libc::ESRCH) => Ok(false),
        // Permission is checked only once the process is found.
        Some(libc::EPERM) => Ok(true),
        _ => Err(error),
    }
}

/// Carries out one request line of an accepted peer.
async fn dispatch(line: &[u8], handler: &dyn ControlHandler, peer: Peer) -> ControlResponse {
    let request = match serde_json::from_slice::<ControlRequest>(line) {
        Ok(request) => request,
        Err(error) => {
            return ControlResponse::Error {
                message: format!("malformed request: {error}"),
            };
        }
    };
    let (id, answer, done) = match request {
        ControlRequest::Pending => {
            return ControlResponse::Pending {
                requests: handler.pending().iter().map(PendingRequest::from).collect(),
            };
        }
        ControlRequest::Approve { id, lifetime } => {
            if matches!(lifetime, Lifetime::Ttl(ttl) if ttl.is_zero()) {
                return ControlResponse::Error {
                    message: "a ttl must be longer than zero".into(),
                };
            }
            let done = format!("approved request {id} ({})", describe(lifetime));
            (id, HumanAnswer::Allow(lifetime), done)
        }
        ControlRequest::Deny { id, reason } => (
            id,
            HumanAnswer::Deny(reason),
            format!("denied request {id}"),
        ),
        command @ (ControlRequest::Register { .. } | ControlRequest::Unregister { .. }) => {
            tracing::info!(
                ?command,
                pid = peer.pid,
                uid = peer.uid,
                "control socket: command"
            );
            return match handler.submit(command, peer.pid) {
                Ok(answer) => answer.await.unwrap_or_else(|_| ControlResponse::Error {
                    message: "the daemon is stopping".into(),
                }),
                Err(refusal) => refusal,
            };
        }
        query @ (ControlRequest::Status
        | ControlRequest::Agents
        | ControlRequest::Grants { .. }
        | ControlRequest::Revoke { .. }) => {
            tracing::info!(
                ?query,
                pid = peer.pid,
                uid = peer.uid,
                "control socket: query"
            );
            return handler.query(&query);
        }
    };
    tracing::info!(
        id,
        ?answer,
        pid = peer.pid,
        uid = peer.uid,
        "control socket: answer"
    );
    match handler.answer(id, answer) {
        Ok(()) => ControlResponse::Ok { message: done },
        Err(message) => ControlResponse::Error { message },
    }
}

/// How a lifetime reads in a confirmation.
fn describe(lifetime: Lifetime) -> String {
    match lifetime {
        Lifetime::Once => "once".into(),
        Lifetime::Ttl(ttl) => format!("for {}", humantime::format_duration(ttl)),
        Lifetime::Session => "for the session".into(),
    }
}

/// Whether a cgroup v2 path (as `/proc/<pid>/cgroup` shows it) is an agent
/// cgroup: `/pincer` or anything below it.
///
/// Paths are relative to the reader's cgroup namespace, which is the one
/// where pincer mounts cgroup2 and creates `pincer/`, so they compare
/// directly.
pub fn in_agent_cgroup(cgroup_path: &str) -> bool {
    // The kernel marks the cgroup of a process whose cgroup was removed.
    let path = cgroup_path
        .strip_suffix(" (deleted)")
        .unwrap_or(cgroup_path);
    path.split('/').find(|part| !part.is_empty()) == Some(PINCER_DIR)
}

/// The cgroup v2 path in the text of a `/proc/<pid>/cgroup` file: its single
/// `0::` line.
///
/// More than one such line means a cgroup name containing a newline is
/// trying to pass for another line, so the answer is `None`, as when there
/// is none.
pub fn cgroup_v2_path(proc_cgroup: &str) -> Option<&str> {
    let mut paths = proc_cgroup
        .lines()
        .filter_map(|line| line.strip_prefix("0::"));
    let path = paths.next()?;
    paths.next().is_none().then_some(path)
}

/// The cgroup v2 path of process `pid`, from `/proc/<pid>/cgroup`.
pub fn proc_cgroup(pid: u32) -> io::Result<String> {
    let text = fs::read_to_string(format!("/proc/{pid}/cgroup"))?;
    cgroup_v2_path(&text).map(str::to_owned).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("no single cgroup v2 entry in /proc/{pid}/cgroup"),
        )
    })
}

/// Sends one request to the server at `path` and waits for its response.
///
/// Blocking: connecting, writing and each read wait at most
/// [`CALL_TIMEOUT`].
pub fn call(path: &Path, request: &ControlRequest) -> Result<ControlResponse, ControlError> {
    let io_error = |source: io::Error| match source.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => ControlError::Timeout {
            path: path.to_owned(),
            timeout: CALL_TIMEOUT,
        },
        _ => ControlError::Io {
            path: path.to_owned(),
            source,
        },
    };
    let mut stream = connect(path, CALL_TIMEOUT)?;
    stream
        .set_read_timeout(Some(CALL_TIMEOUT))
        .and_then(|()| stream.set_write_timeout(Some(CALL_TIMEOUT)))
        .map_err(io_error)?;

    let mut line = serde_json::to_vec(request).expect("a control request always serializes");
    line.push(b'\n');
    stream.write_all(&line).map_err(io_error)?;

    let mut response = Vec::new();
    BufReader::new(&stream)
        .take(MAX_RESPONSE_LINE as u64 + 1)
        .read_until(b'\n', &mut response)
        .map_err(io_error)?;
    if response.is_empty() {
        return Err(ControlError::Closed {
            path: path.to_owned(),
        });
    }
    if response.len() > MAX_RESPONSE_LINE && response.last() != Some(&b'\n') {
        return Err(ControlError::ResponseTooLong {
            path: path.to_owned(),
            limit: MAX_RESPONSE_LINE,
        });
    }
    serde_json::from_slice(&response).map_err(|source| ControlError::Malformed {
        path: path.to_owned(),
        source,
    })
}

/// Connects to `path` within `timeout`.
fn connect(path: &Path, timeout: Duration) -> Result<StdUnixStream, ControlError> {
    // A Unix connect waits only while the listener's backlog is full (a hung
    // server), but then without end, and std has no timeout for it: it runs
    // on its own thread, left behind if it hangs.
    let (sender, receiver) = mpsc::channel();
    let target = path.to_owned();
    thread::spawn(move || {
        // The receiver is gone only once the caller has given up.
        let _ = sender.send(StdUnixStream::connect(target));
    });
    match receiver.recv_timeout(timeout) {
        Ok(Ok(stream)) => Ok(stream),
        Ok(Err(error))
            if matches!(
                error.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused
            ) =>
        {
            Err(ControlError::NotListening {
                path: path.to_owned(),
            })
        }
        Ok(Err(source)) => Err(ControlError::Connect {
            path: path.to_owned(),
            source,
        }),
        Err(_) => Err(ControlError::Timeout {
            path: path.to_owned(),
            timeout,
        }),
    }
}

/// The control socket's path: the `--socket` flag, else `PINCER_SOCKET`, else
/// [`DEFAULT_SOCKET`].
pub fn socket_path(flag: Option<PathBuf>) -> PathBuf {
    choose_socket(flag, std::env::var_os(SOCKET_ENV))
}

fn choose_socket(flag: Option<PathBuf>, env: Option<OsString>) -> PathBuf {
    flag.or_else(|| env.filter(|value| !value.is_empty()).map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from(DEFAULT_SOCKET))
}

/// Parses the `--ttl` of `pincer approve`: a duration such as `90s`, `10m`
/// or `1h30m`, in whole seconds (the protocol counts seconds), above zero.
pub fn parse_ttl(text: &str) -> Result<Duration, String> {
    let ttl = humantime::parse_duration(text)
        .map_err(|error| format!("invalid ttl {text:?}: {error}"))?;
    if ttl.is_zero() {
        return Err(format!("invalid ttl {text:?}: it must be longer than zero"));
    }
    if ttl.subsec_nanos() != 0 {
        return Err(format!("invalid ttl {text:?}: it must be whole seconds"));
    }
    Ok(ttl)
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::io::AsyncWriteExt;

    use super::*;

    fn request(id: u64) -> Request {
        Request {
            id,
            mission: "docs".into(),
            cgroup: 4242,
            pid: 100,
            tid: 101,
            comm: "cat".into(),
            exe: Some("/usr/bin/cat".into()),
            parents: vec![ProcessFacts {
                pid: 99,
                comm: "sh".into(),
                exe: None,
            }],
            operation: vec!["read", "write"],
            ops: 3,
            path: "/home/u/.ssh/id_ed25519".into(),
            hook: "file_open",
            dev: 1,
            ino: 2,
            why: "no grant covers it".into(),
        }
    }

    /// Lists fixed requests and records every answer; only ids it lists can
    /// be answered.
    #[derive(Default)]
    struct Recorder {
        requests: Vec<Request>,
        answers: Mutex<Vec<(u64, HumanAnswer)>>,
        calls: AtomicUsize,
    }

    impl ControlHandler for Recorder {
        fn pending(&self) -> Vec<Request> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            self.requests.clone()
        }

        fn answer(&self, id: u64, answer: HumanAnswer) -> Result<(), String> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            if !self.requests.iter().any(|r| r.id == id) {
                return Err(format!("no pending request {id}"));
            }
            self.answers.lock().unwrap().push((id, answer));
            Ok(())
        }
    }

    struct Fixture {
        _dir: tempfile::TempDir,
        path: PathBuf,
        handler: Arc<Recorder>,
        server: tokio::task::JoinHandle<Result<Infallible, ControlError>>,
    }

    /// A server on a fresh socket whose peers all appear to run in `cgroup`.
    fn start(cgroup: &'static str) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pincer.sock");
        let handler = Arc::new(Recorder {
            requests: vec![request(7), request(8)],
            ..Recorder::default()
        });
        let server = ControlServer::bind(&path)
            .unwrap()
            .with_cgroup_resolver(move |_| Ok(cgroup.to_owned()));
        let server = tokio::spawn(server.serve(Arc::clone(&handler) as Arc<dyn ControlHandler>));
        Fixture {
            _dir: dir,
            path,
            handler,
            server,
        }
    }

    /// The blocking client, off the runtime's thread.
    async fn call_async(
        path: &Path,
        request: ControlRequest,
    ) -> Result<ControlResponse, ControlError> {
        let path = path.to_owned();
        tokio::task::spawn_blocking(move || call(&path, &request))
            .await
            .unwrap()
    }

    /// A raw connection, to send lines the client never would.
    struct Raw {
        reader: AsyncBufReader<tokio::net::unix::OwnedReadHalf>,
        writer: tokio::net::unix::OwnedWriteHalf,
    }

    impl Raw {
        async fn connect(path: &Path) -> Raw {
            let (reader, writer) = UnixStream::connect(path).await.unwrap().into_split();
            Raw {
                reader: AsyncBufReader::new(reader),
                writer,
            }
        }

        async fn send(&mut self, bytes: &[u8]) {
            self.writer.write_all(bytes).await.unwrap();
        }

        /// The next response, or `None` at end of stream.
        async fn receive(&mut self) -> Option<ControlResponse> {
            let mut line = String::new();
            let n = self.reader.read_line(&mut line).await.unwrap();
            (n > 0).then(|| serde_json::from_str(&line).unwrap())
        }
    }

    fn error_message(response: ControlResponse) -> String {
        match response {
            ControlResponse::Error { message } => message,
            other => panic!("expected an error, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn pending_lists_what_the_handler_returns() {
        let fixture = start("/user.slice/user-0.slice");
        let response = call_async(&fixture.path, ControlRequest::Pending)
            .await
            .unwrap();
        let ControlResponse::Pending { requests } = response else {
            panic!("expected a pending list, got {response:?}");
        };
        assert_eq!(
            requests,
            vec![
                PendingRequest::from(&request(7)),
                PendingRequest::from(&request(8))
            ]
        );
        assert_eq!(requests[0].operation, ["read", "write"]);
        assert_eq!(requests[0].parents[0].comm, "sh");
    }

    #[tokio::test]
    async fn approve_and_deny_reach_the_handler() {
        let fixture = start("/");
        let ttl = Duration::from_secs(600);
        let approve = ControlRequest::Approve {
            id: 7,
            lifetime: Lifetime::Ttl(ttl),
        };
        assert_eq!(
            call_async(&fixture.path, approve).await.unwrap(),
            ControlResponse::Ok {
                message: "approved request 7 (for 10m)".into()
            }
        );
        let deny = ControlRequest::Deny {
            id: 8,
            reason: Some("not now".into()),
        };
        assert_eq!(
            call_async(&fixture.path, deny).await.unwrap(),
            ControlResponse::Ok {
                message: "denied request 8".into()
            }
        );
        assert_eq!(
            *fixture.handler.answers.lock().unwrap(),
            [
                (7, HumanAnswer::Allow(Lifetime::Ttl(ttl))),
                (8, HumanAnswer::Deny(Some("not now".into()))),
            ]
        );
    }

    #[tokio::test]
    async fn handler_errors_come_back_as_errors() {
        let fixture = start("/");
        let approve = ControlRequest::Approve {
            id: 99,
            lifetime: Lifetime::Once,
        };
        let response = call_async(&fixture.path, approve).await.unwrap();
        assert_eq!(error_message(response), "no pending request 99");
        assert!(fixture.handler.answers.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn zero_ttl_is_refused_before_the_handler() {
        let fixture = start("/");
        let mut raw = Raw::connect(&fixture.path).await;
        raw.send(br#"{"cmd":"approve","id":7,"lifetime":{"kind":"ttl","seconds":0}}"#)
            .await;
        raw.send(b"\n").await;
        let message = error_message(raw.receive().await.unwrap());
        assert_eq!(message, "a ttl must be longer than zero");
        assert_eq!(fixture.handler.calls.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn callers_in_agent_cgroups_are_refused() {
        let fixture = start("/pincer/run-42");
        for request in [
            ControlRequest::Pending,
            ControlRequest::Approve {
                id: 7,
                lifetime: Lifetime::Session,
            },
            ControlRequest::Deny {
                id: 7,
                reason: None,
            },
        ] {
            let response = call_async(&fixture.path, request).await.unwrap();
            assert_eq!(
                error_message(response),
                "refused: the caller runs in agent cgroup /pincer/run-42; \
                 an agent cannot answer its own requests"
            );
        }
        assert_eq!(fixture.handler.calls.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn a_refused_connection_is_closed() {
        let fixture = start("/pincer/run-42/child");
        let mut raw = Raw::connect(&fixture.path).await;
        raw.send(b"{\"cmd\":\"pending\"}\n{\"cmd\":\"pending\"}\n")
            .await;
        assert!(error_message(raw.receive().await.unwrap()).starts_with("refused:"));
        assert_eq!(raw.receive().await, None);
        assert_eq!(fixture.handler.calls.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn an_unreadable_cgroup_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pincer.sock");
        let handler = Arc::new(Recorder::default());
        let server = ControlServer::bind(&path)
            .unwrap()
            .with_cgroup_resolver(|_| Err(io::Error::from(io::ErrorKind::NotFound)));
        tokio::spawn(server.serve(Arc::clone(&handler) as Arc<dyn ControlHandler>));
        let response = call_async(&path, ControlRequest::Pending).await.unwrap();
        assert!(error_message(response).starts_with("refused: cannot read the caller's cgroup"));
        assert_eq!(handler.calls.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn agent_cgroups() {
        assert!(in_agent_cgroup("/pincer/run-1"));
        assert!(in_agent_cgroup("/pincer/run-1/nested"));
        assert!(in_agent_cgroup("/pincer"));
        assert!(in_agent_cgroup("/pincer/run-1 (deleted)"));
        assert!(in_agent_cgroup("/pincer (deleted)"));
        assert!(!in_agent_cgroup("/pincerx"));
        assert!(!in_agent_cgroup("/pincerx/run-1"));
        assert!(!in_agent_cgroup(
            "/user.slice/user-1000.slice/session-2.scope"
        ));
        assert!(!in_agent_cgroup("/system.slice/pincer.service"));
        assert!(!in_agent_cgroup("/"));
        assert!(!in_agent_cgroup(""));
    }

    #[test]
    fn peer_checks() {
        assert!(check_uid(0, 0).is_ok());
        assert!(check_uid(1000, 1000).is_ok());
        assert!(check_uid(0, 1000).is_ok());
        assert_eq!(
            check_uid(1001, 0).unwrap_err(),
            "refused: the caller runs as uid 1001; only root and uid 0 may answer"
        );
        let board = crate::voters::prompt::PromptBoard::new(None);
        assert!(check_cgroup("/user.slice", &*board).is_ok());
        assert!(check_cgroup("/pincer/run-1", &*board).is_err());
    }

    #[tokio::test]
    async fn the_pidfd_of_a_live_peer_is_alive() {
        let (ours, _theirs) = UnixStream::pair().unwrap();
        // `None` only on kernels without SO_PEERPIDFD.
        if let Some(pidfd) = peer_pidfd(&ours).unwrap() {
            assert!(is_alive(&pidfd).unwrap());
        }
    }

    #[test]
    fn cgroup_v2_lines() {
        assert_eq!(cgroup_v2_path("0::/pincer/run-1\n"), Some("/pincer/run-1"));
        let hybrid = "12:memory:/user.slice\n1:name=systemd:/user.slice\n0::/user.slice\n";
        assert_eq!(cgroup_v2_path(hybrid), Some("/user.slice"));
        assert_eq!(cgroup_v2_path("4:memory:/\n1:cpu:/\n"), None);
        // A cgroup named "x\n0::" must not pass for a second entry.
        assert_eq!(cgroup_v2_path("0::/pincer/run-1/x\n0::/\n"), None);
    }

    #[tokio::test]
    async fn a_malformed_line_leaves_the_connection_usable() {
        let fixture = start("/");
        let mut raw = Raw::connect(&fixture.path).await;
        raw.send(b"{not json\n").await;
        assert!(error_message(raw.receive().await.unwrap()).starts_with("malformed request:"));
        raw.send(b"{\"cmd\":\"launch\"}\n").await;
        assert!(error_message(raw.receive().await.unwrap()).contains("unknown variant `launch`"));
        raw.send(b"{\"cmd\":\"pending\"}\n").await;
        assert!(matches!(
            raw.receive().await,
            Some(ControlResponse::Pending { requests }) if requests.len() == 2
        ));
    }

    #[tokio::test]
    async fn an_oversize_line_is_refused_and_closes_the_connection() {
        let fixture = start("/");
        let mut raw = Raw::connect(&fixture.path).await;
        let mut line = vec![b' '; MAX_REQUEST_LINE + 10];
        line.push(b'\n');
        raw.send(&line).await;
        assert_eq!(
            error_message(raw.receive().await.unwrap()),
            format!("request line longer than {MAX_REQUEST_LINE} bytes")
        );
        assert_eq!(raw.receive().await, None);
        assert_eq!(fixture.handler.calls.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn a_line_of_exactly_the_limit_is_read() {
        let fixture = start("/");
        let mut raw = Raw::connect(&fixture.path).await;
        let request = b"{\"cmd\":\"pending\"}";
        let mut line = vec![b' '; MAX_REQUEST_LINE - request.len()];
        line.extend_from_slice(request);
        line.push(b'\n');
        raw.send(&line).await;
        assert!(matches!(
            raw.receive().await,
            Some(ControlResponse::Pending { .. })
        ));
    }

    #[tokio::test]
    async fn several_requests_share_a_connection() {
        let fixture = start("/");
        let mut raw = Raw::connect(&fixture.path).await;
        raw.send(b"{\"cmd\":\"deny\",\"id\":7}\n{\"cmd\":\"approve\",\"id\":8,\"lifetime\":{\"kind\":\"once\"}}\n")
            .await;
        assert_eq!(
            raw.receive().await,
            Some(ControlResponse::Ok {
                message: "denied request 7".into()
            })
        );
        assert_eq!(
            raw.receive().await,
            Some(ControlResponse::Ok {
                message: "approved request 8 (once)".into()
            })
        );
        assert_eq!(
            *fixture.handler.answers.lock().unwrap(),
            [
                (7, HumanAnswer::Deny(None)),
                (8, HumanAnswer::Allow(Lifetime::Once))
            ]
        );
    }

    #[test]
    fn a_second_bind_on_a_live_socket_is_in_use() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pincer.sock");
        let _first = ControlServer::bind(&path).unwrap();
        let error = ControlServer::bind(&path).unwrap_err();
        assert!(matches!(&error, ControlError::InUse { path: p } if *p == path));
        assert!(path.exists(), "the live socket must stay");
    }

    #[test]
    fn a_stale_socket_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pincer.sock");
        // A listener that went away without removing its file.
        drop(StdUnixListener::bind(&path).unwrap());
        assert!(path.exists());
        let server = ControlServer::bind(&path).unwrap();
        assert!(StdUnixStream::connect(&path).is_ok());
        drop(server);
        assert!(!path.exists(), "dropping the server removes its socket");
    }

    #[test]
    fn a_file_that_is_not_a_socket_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pincer.sock");
        fs::write(&path, "precious").unwrap();
        let error = ControlServer::bind(&path).unwrap_err();
        assert!(matches!(error, ControlError::NotASocket { .. }));
        assert_eq!(fs::read_to_string(&path).unwrap(), "precious");
    }

    #[test]
    fn bind_creates_a_private_directory_and_socket() {
        let dir = tempfile::tempdir().unwrap();
        let parent = dir.path().join("run").join("pincer");
        let path = parent.join("pincer.sock");
        let server = ControlServer::bind(&path).unwrap();
        assert_eq!(server.path(), path);
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&parent), 0o700);
        assert_eq!(mode(&path), 0o600);
    }

    #[test]
    fn drop_leaves_a_socket_that_replaced_ours() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pincer.sock");
        let server = ControlServer::bind(&path).unwrap();
        fs::remove_file(&path).unwrap();
        let _other = StdUnixListener::bind(&path).unwrap();
        drop(server);
        assert!(path.exists());
    }

    #[tokio::test]
    async fn stopping_serve_removes_the_socket() {
        let fixture = start("/");
        call_async(&fixture.path, ControlRequest::Pending)
            .await
            .unwrap();
        fixture.server.abort();
        assert!(fixture.server.await.unwrap_err().is_cancelled());
        assert!(!fixture.path.exists());
    }

    #[test]
    fn calling_nobody_names_the_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("absent.sock");
        let error = call(&path, &ControlRequest::Pending).unwrap_err();
        assert_eq!(
            error.to_string(),
            format!("no pincer is listening on {}", path.display())
        );
        // A socket file whose server is gone reads the same.
        drop(StdUnixListener::bind(&path).unwrap());
        let error = call(&path, &ControlRequest::Pending).unwrap_err();
        assert!(matches!(error, ControlError::NotListening { .. }));
    }

    #[test]
    fn wire_format() {
        let json = |request: &ControlRequest| serde_json::to_string(request).unwrap();
        assert_eq!(json(&ControlRequest::Pending), r#"{"cmd":"pending"}"#);
        assert_eq!(
            json(&ControlRequest::Approve {
                id: 7,
                lifetime: Lifetime::Once
            }),
            r#"{"cmd":"approve","id":7,"lifetime":{"kind":"once"}}"#
        );
        assert_eq!(
            json(&ControlRequest::Approve {
                id: 7,
                lifetime: Lifetime::Ttl(Duration::from_secs(600))
            }),
            r#"{"cmd":"approve","id":7,"lifetime":{"kind":"ttl","seconds":600}}"#
        );
        let deny: ControlRequest = serde_json::from_str(r#"{"cmd":"deny","id":3}"#).unwrap();
        assert_eq!(
            deny,
            ControlRequest::Deny {
                id: 3,
                reason: None
            }
        );
        let ok = ControlResponse::Ok {
            message: "done".into(),
        };
        assert_eq!(
            serde_json::to_string(&ok).unwrap(),
            r#"{"status":"ok","message":"done"}"#
        );
    }

    /// The mirror must carry every field `Request` serializes, and nothing
    /// else.
    #[test]
    fn pending_request_mirrors_request() {
        let request = request(7);
        assert_eq!(
            serde_json::to_value(PendingRequest::from(&request)).unwrap(),
            serde_json::to_value(&request).unwrap()
        );
    }

    #[test]
    fn pending_request_line() {
        assert_eq!(
            PendingRequest::from(&request(7)).to_string(),
            "7 [docs] read,write /home/u/.ssh/id_ed25519 by cat (pid 100): no grant covers it"
        );
    }

    #[test]
    fn socket_path_precedence() {
        let flag = Some(PathBuf::from("/tmp/flag.sock"));
        let env = Some(OsString::from("/tmp/env.sock"));
        assert_eq!(
            choose_socket(flag.clone(), env.clone()),
            PathBuf::from("/tmp/flag.sock")
        );
        assert_eq!(choose_socket(None, env), PathBuf::from("/tmp/env.sock"));
        assert_eq!(
            choose_socket(None, Some(OsString::new())),
            PathBuf::from(DEFAULT_SOCKET)
        );
        assert_eq!(choose_socket(None, None), PathBuf::from(DEFAULT_SOCKET));
    }

    #[test]
    fn ttls() {
        assert_eq!(parse_ttl("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_ttl("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_ttl("90s"), Ok(Duration::from_secs(90)));
        assert!(parse_ttl("0s").unwrap_err().contains("longer than zero"));
        assert!(parse_ttl("1500ms").unwrap_err().contains("whole seconds"));
        assert!(parse_ttl("").is_err());
        assert!(parse_ttl("soon").is_err());
        assert!(parse_ttl("-5m").is_err());
    }
}
