//! The server side of the control socket: who may connect, and how each
//! request line is answered (see the protocol in [`crate::control`]).

use std::{
    collections::HashMap,
    convert::Infallible,
    fmt,
    fs::{self, DirBuilder},
    io,
    os::{
        fd::{AsRawFd, FromRawFd, OwnedFd},
        unix::{
            fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt},
            net::{UnixListener as StdUnixListener, UnixStream as StdUnixStream},
        },
    },
    path::{Path, PathBuf},
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use pincer_model::{
    control::{ControlRequest, ControlResponse, HumanAnswer, MAX_REQUEST_LINE},
    request::Request,
    vote::Lifetime,
};
use tokio::{
    io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader as AsyncBufReader},
    net::{UnixListener, UnixStream},
    sync::{mpsc, oneshot},
    task::JoinSet,
};

use super::ControlError;
use crate::cgroup;

/// Pause after a failed `accept`, so that running out of descriptors does not
/// turn the accept loop into a busy loop.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Connections served at once. A refused caller (an agent, another user)
/// holds none: it is answered and closed as it connects.
pub const MAX_CONNECTIONS: usize = 64;

/// Connections served at once for callers of one cgroup, so that one
/// runaway client leaves room for a person's `pincer approve`.
pub const MAX_PER_CGROUP: usize = 16;

/// How long a connection may wait between requests (and a response may take
/// to be read) before it is closed. Clients send their request at once.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(10);

/// A command that changes a shell's state (`register`, `revoke`, an asset
/// node's admission), handed from the socket to the shell's event loop
/// with where its answer goes.
pub struct Submitted {
    /// The command.
    pub request: ControlRequest,
    /// The uid of the caller.
    pub caller: u32,
    /// Where the loop answers.
    pub answer: oneshot::Sender<ControlResponse>,
}

/// Hands `request` to the loop behind `commands` ([`ControlHandler::submit`]);
/// `stopped` is the answer when the loop is gone.
pub fn hand_over(
    commands: &mpsc::UnboundedSender<Submitted>,
    request: ControlRequest,
    caller: u32,
    stopped: impl FnOnce() -> ControlResponse,
) -> Result<oneshot::Receiver<ControlResponse>, ControlResponse> {
    let (answer, receiver) = oneshot::channel();
    commands
        .send(Submitted {
            request,
            caller,
            answer,
        })
        .map_err(|_| stopped())?;
    Ok(receiver)
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

    /// Answers the daemon's queries (`status`, `agents`, `grants`); `pincer
    /// run` has none of them.
    fn query(&self, request: &ControlRequest) -> ControlResponse {
        let _ = request;
        ControlResponse::Error {
            message: "this socket belongs to a `pincer run`, which answers only pending, \
                      approve and deny; status, agents, grants and revoke need `pincer daemon`"
                .into(),
        }
    }

    /// Hands a command that changes the daemon's state (`register`,
    /// `unregister`, `revoke`) to its event loop; the answer comes when it
    /// is done. `pincer run` has none of them.
    fn submit(
        &self,
        request: ControlRequest,
        caller: u32,
    ) -> Result<tokio::sync::oneshot::Receiver<ControlResponse>, ControlResponse> {
        let _ = (request, caller);
        Err(ControlResponse::Error {
            message: "this socket belongs to a `pincer run`; register, unregister and revoke \
                      need `pincer daemon`"
                .into(),
        })
    }

    /// Whether a caller in this cgroup v2 path is an agent, which may not
    /// answer (by default: anything under `/pincer`).
    fn is_agent_cgroup(&self, cgroup_path: &str) -> bool {
        cgroup::in_agent_cgroup(cgroup_path)
    }
}

/// Finds the cgroup v2 path of a process, as `/proc/<pid>/cgroup` shows it.
type CgroupResolver = dyn Fn(u32) -> io::Result<String> + Send + Sync;

/// A listening control socket (of a `pincer run`, or of `pincer daemon`).
pub struct ControlServer {
    listener: StdUnixListener,
    socket_file: SocketFile,
    resolver: Arc<CgroupResolver>,
    idle_timeout: Duration,
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
            resolver: Arc::new(cgroup::proc_cgroup),
            idle_timeout: IDLE_TIMEOUT,
        })
    }

    /// Replaces [`IDLE_TIMEOUT`].
    pub fn with_idle_timeout(mut self, idle_timeout: Duration) -> ControlServer {
        self.idle_timeout = idle_timeout;
        self
    }

    /// Replaces how the server finds a peer's cgroup v2 path (by default
    /// [`cgroup::proc_cgroup`]).
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
    ///
    /// A caller that may not answer is told so and closed as it connects, so
    /// that however many connections an agent opens it holds none; callers
    /// that may are served up to [`MAX_CONNECTIONS`] at once, at most
    /// [`MAX_PER_CGROUP`] from one cgroup, each closed when idle.
    pub async fn serve(self, handler: Arc<dyn ControlHandler>) -> Result<Infallible, ControlError> {
        let ControlServer {
            listener,
            socket_file,
            resolver,
            idle_timeout,
        } = self;
        let listener = UnixListener::from_std(listener).map_err(|source| ControlError::Bind {
            path: socket_file.path.clone(),
            source,
        })?;
        let server_euid = nix::unistd::geteuid().as_raw();
        // Owning the connection tasks ties their life to this future's.
        let mut connections = JoinSet::new();
        let per_cgroup = Arc::new(Mutex::new(HashMap::new()));
        let mut refusals = RefusalLog::default();
        loop {
            tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => {
                        let peer = check_connection(&stream, &*resolver, server_euid, &*handler);
                        let peer = peer.and_then(|(peer, cgroup)| {
                            if connections.len() >= MAX_CONNECTIONS {
                                return Err(format!(
                                    "refused: {MAX_CONNECTIONS} connections are open; try again"
                                ));
                            }
                            let slot = CgroupSlot::take(&per_cgroup, cgroup).ok_or_else(|| {
                                format!(
                                    "refused: {MAX_PER_CGROUP} connections from this cgroup are open; \
                                     try again"
                                )
                            })?;
                            Ok((peer, slot))
                        });
                        match peer {
                            Ok((peer, slot)) => {
                                connections.spawn(serve_connection(
                                    stream,
                                    Arc::clone(&handler),
                                    peer,
                                    idle_timeout,
                                    slot,
                                ));
                            }
                            Err(refusal) => {
                                if let Some(suppressed) = refusals.should_log(Instant::now()) {
                                    tracing::warn!(%refusal, suppressed, "control socket: refused a caller");
                                }
                                refuse_at_once(&stream, refusal);
                            }
                        }
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

/// Connections open per caller cgroup.
type CgroupCounts = Arc<Mutex<HashMap<String, usize>>>;

/// One connection's place among its cgroup's, given back when the
/// connection ends (however it ends).
struct CgroupSlot {
    counts: CgroupCounts,
    cgroup: String,
}

impl CgroupSlot {
    /// A place for one more connection from `cgroup`, if it has one left.
    fn take(counts: &CgroupCounts, cgroup: String) -> Option<CgroupSlot> {
        let mut held = counts.lock().unwrap_or_else(PoisonError::into_inner);
        let open = held.entry(cgroup.clone()).or_insert(0);
        if *open >= MAX_PER_CGROUP {
            return None;
        }
        *open += 1;
        Some(CgroupSlot {
            counts: Arc::clone(counts),
            cgroup,
        })
    }
}

impl Drop for CgroupSlot {
    fn drop(&mut self) {
        let mut held = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(open) = held.get_mut(&self.cgroup) {
            *open -= 1;
            if *open == 0 {
                held.remove(&self.cgroup);
            }
        }
    }
}

/// Answers a refused caller without waiting for it, and closes: the line is
/// short enough for an empty socket buffer, and a caller that let its buffer
/// fill gets nothing.
fn refuse_at_once(stream: &UnixStream, refusal: String) {
    let response = ControlResponse::Error { message: refusal };
    if let Ok(mut bytes) = serde_json::to_vec(&response) {
        bytes.push(b'\n');
        let _ = stream.try_write(&bytes);
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

/// Reads requests from one connection and answers each, until the peer
/// closes, sends too long a line, or stays idle for `idle_timeout`.
async fn serve_connection(
    stream: UnixStream,
    handler: Arc<dyn ControlHandler>,
    peer: Peer,
    idle_timeout: Duration,
    _slot: CgroupSlot,
) {
    let (reader, mut writer) = stream.into_split();
    let mut reader = AsyncBufReader::new(reader);
    let mut line = Vec::new();
    loop {
        line.clear();
        // One byte over the limit tells a line of exactly the limit (plus its
        // newline) from a longer one.
        let limit = MAX_REQUEST_LINE as u64 + 1;
        let mut bounded = (&mut reader).take(limit);
        let read = bounded.read_until(b'\n', &mut line);
        match within(idle_timeout, read, peer, "read").await {
            None | Some(0) => return,
            Some(_) => {}
        }
        let terminated = line.last() == Some(&b'\n');
        let (response, keep_open) = if !terminated && line.len() > MAX_REQUEST_LINE {
            let message = format!("request line longer than {MAX_REQUEST_LINE} bytes");
            (ControlResponse::Error { message }, false)
        } else {
            // An unterminated line is the last one: the peer has shut down
            // its side.
            (dispatch(&line, &*handler, peer).await, terminated)
        };
        if within(idle_timeout, send(&mut writer, &response), peer, "write")
            .await
            .is_none()
        {
            return;
        }
        if !keep_open {
            return;
        }
    }
}

/// Runs one read or write of a connection, `None` (logged) when it fails
/// or the caller stays idle for `idle_timeout`: the connection then ends.
async fn within<T>(
    idle_timeout: Duration,
    io: impl std::future::Future<Output = io::Result<T>>,
    peer: Peer,
    what: &str,
) -> Option<T> {
    match tokio::time::timeout(idle_timeout, io).await {
        Ok(Ok(done)) => Some(done),
        Ok(Err(error)) => {
            tracing::debug!(%error, "control socket: {what} failed");
            None
        }
        Err(_) => {
            tracing::debug!(pid = peer.pid, "control socket: {what} timed out: closing");
            None
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
) -> Result<(Peer, String), String> {
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
    Ok((Peer { pid, uid }, cgroup))
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
async fn dispatch(
    line: &[u8],
    handler: &dyn ControlHandler,
    Peer { pid, uid }: Peer,
) -> ControlResponse {
    let request = match ControlRequest::from_line(line) {
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
                requests: handler.pending(),
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
        command @ (ControlRequest::Register { .. }
        | ControlRequest::Unregister { .. }
        | ControlRequest::Revoke { .. }
        | ControlRequest::Map { .. }
        | ControlRequest::Derive { .. }
        | ControlRequest::Assets { .. }
        | ControlRequest::Asset { .. }) => {
            tracing::info!(?command, pid, uid, "control socket: command");
            return match handler.submit(command, pid) {
                Ok(answer) => answer.await.unwrap_or_else(|_| ControlResponse::Error {
                    message: "the daemon is stopping".into(),
                }),
                Err(refusal) => refusal,
            };
        }
        query @ (ControlRequest::Status
        | ControlRequest::Agents
        | ControlRequest::Grants { .. }) => {
            tracing::info!(?query, pid, uid, "control socket: query");
            return handler.query(&query);
        }
    };
    tracing::info!(id, ?answer, pid, uid, "control socket: answer");
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

/// Refusals are logged at most once per [`RefusalLog::EVERY`], with the
/// number left out since the last line: an agent that connects thousands
/// of times must not be able to flood the log (and the disk or journal
/// behind it) with one line per attempt.
#[derive(Debug, Default)]
struct RefusalLog {
    last: Option<Instant>,
    suppressed: u64,
}

impl RefusalLog {
    const EVERY: Duration = Duration::from_secs(1);

    /// Whether to log a refusal at `now`; if so, how many were left out
    /// before it.
    fn should_log(&mut self, now: Instant) -> Option<u64> {
        match self.last {
            Some(last) if now.saturating_duration_since(last) < Self::EVERY => {
                self.suppressed += 1;
                None
            }
            _ => {
                self.last = Some(now);
                Some(std::mem::take(&mut self.suppressed))
            }
        }
    }
}

#[cfg(test)]
mod tests;
