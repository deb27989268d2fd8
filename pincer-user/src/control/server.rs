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

use tokio::{
    io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader as AsyncBufReader},
    net::{UnixListener, UnixStream},
    task::JoinSet,
};

use super::{ControlError, ControlRequest, ControlResponse, HumanAnswer, MAX_REQUEST_LINE};
use crate::{cgroup, request::Request, vote::Lifetime};

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
mod tests {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::io::AsyncWriteExt;

    use super::*;
    use crate::control::call;

    #[test]
    fn refusals_are_logged_once_a_second_with_what_was_left_out() {
        let mut log = RefusalLog::default();
        let start = Instant::now();
        assert_eq!(log.should_log(start), Some(0));
        for i in 1..=1000 {
            assert_eq!(log.should_log(start + Duration::from_micros(i)), None);
        }
        assert_eq!(log.should_log(start + Duration::from_secs(1)), Some(1000));
        assert_eq!(log.should_log(start + Duration::from_millis(1500)), None);
        assert_eq!(log.should_log(start + Duration::from_secs(3)), Some(1));
    }

    fn request(id: u64) -> Request {
        Request::example(id, "/home/u/.ssh/id_ed25519")
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

    /// A socket path in a new temporary directory; the directory goes away
    /// when the returned `TempDir` is dropped.
    fn fresh_socket_path() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pincer.sock");
        (dir, path)
    }

    /// A server on a fresh socket, answered by a [`Recorder`] that lists the
    /// requests with the ids `pending`; `server` sets it up once bound.
    fn serve_recorder(
        pending: &[u64],
        server: impl FnOnce(ControlServer) -> ControlServer,
    ) -> Fixture {
        let (dir, path) = fresh_socket_path();
        let handler = Arc::new(Recorder {
            requests: pending.iter().copied().map(request).collect(),
            ..Recorder::default()
        });
        let server = server(ControlServer::bind(&path).unwrap());
        let server = tokio::spawn(server.serve(Arc::clone(&handler) as Arc<dyn ControlHandler>));
        Fixture {
            _dir: dir,
            path,
            handler,
            server,
        }
    }

    /// A server on a fresh socket whose peers all appear to run in `cgroup`.
    fn start(cgroup: &'static str) -> Fixture {
        serve_recorder(&[7, 8], |server| {
            server.with_cgroup_resolver(move |_| Ok(cgroup.to_owned()))
        })
    }

    /// [`start`], and a raw connection to the server.
    async fn start_connected(cgroup: &'static str) -> (Fixture, Raw) {
        let fixture = start(cgroup);
        let raw = Raw::connect(&fixture.path).await;
        (fixture, raw)
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

        /// Whether the server closed the connection (an end of stream, or a
        /// reset when it closed with requests unread).
        async fn closed(&mut self) -> bool {
            let mut line = String::new();
            match self.reader.read_line(&mut line).await {
                Ok(n) => n == 0,
                Err(error) => error.kind() == io::ErrorKind::ConnectionReset,
            }
        }

        /// The next response, or `None` at end of stream.
        async fn receive(&mut self) -> Option<ControlResponse> {
            let mut line = String::new();
            let n = self.reader.read_line(&mut line).await.unwrap();
            (n > 0).then(|| serde_json::from_str(&line).unwrap())
        }

        /// Asks for the waiting requests; whether the server lists them.
        async fn lists_pending(&mut self) -> bool {
            self.send(b"{\"cmd\":\"pending\"}\n").await;
            matches!(self.receive().await, Some(ControlResponse::Pending { .. }))
        }
    }

    fn error_message(response: ControlResponse) -> String {
        match response {
            ControlResponse::Error { message } => message,
            other => panic!("expected an error, got {other:?}"),
        }
    }

    /// The error a new client asking for the waiting requests gets.
    async fn pending_refused(path: &Path) -> String {
        error_message(call_async(path, ControlRequest::Pending).await.unwrap())
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
        let without_identities = |id| Request {
            ops: 0,
            dev: 0,
            ino: 0,
            ..request(id)
        };
        assert_eq!(requests, [without_identities(7), without_identities(8)]);
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
    async fn zero_and_overlong_ttls_are_refused_before_the_handler() {
        let (fixture, mut raw) = start_connected("/").await;
        for (seconds, expected) in [
            ("0", "a ttl must be longer than zero"),
            // Near 2^63 seconds once overflowed the clock when granted.
            ("9223372036854775807", "a ttl must be at most 365 days"),
            ("31536001", "a ttl must be at most 365 days"),
        ] {
            raw.send(
                format!(
                    r#"{{"cmd":"approve","id":7,"lifetime":{{"kind":"ttl","seconds":{seconds}}}}}"#
                )
                .as_bytes(),
            )
            .await;
            raw.send(b"\n").await;
            let message = error_message(raw.receive().await.unwrap());
            assert!(message.contains(expected), "{seconds}: {message}");
        }
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
        let (fixture, mut raw) = start_connected("/pincer/run-42/child").await;
        raw.send(b"{\"cmd\":\"pending\"}\n{\"cmd\":\"pending\"}\n")
            .await;
        assert!(error_message(raw.receive().await.unwrap()).starts_with("refused:"));
        assert!(raw.closed().await);
        assert_eq!(fixture.handler.calls.load(Ordering::SeqCst), 0);
    }

    /// A server whose peers' cgroup is whatever `cgroup` says at the time.
    fn start_with(
        idle_timeout: Duration,
        cgroup: impl Fn() -> String + Send + Sync + 'static,
    ) -> Fixture {
        serve_recorder(&[7], |server| {
            server
                .with_idle_timeout(idle_timeout)
                .with_cgroup_resolver(move |_| Ok(cgroup()))
        })
    }

    fn approve(id: u64) -> ControlRequest {
        ControlRequest::Approve {
            id,
            lifetime: Lifetime::Once,
        }
    }

    #[tokio::test]
    async fn an_agent_opening_many_connections_does_not_keep_a_person_from_answering() {
        let agent = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let is_agent = Arc::clone(&agent);
        let fixture = start_with(IDLE_TIMEOUT, move || {
            if is_agent.load(Ordering::SeqCst) {
                "/pincer/run-42".to_owned()
            } else {
                "/user.slice/user-0.slice/session-1.scope".to_owned()
            }
        });
        // Many more than the server serves at once, all kept open by the
        // agent: each is answered and closed as it connects.
        let mut held = Vec::new();
        for _ in 0..4 * MAX_CONNECTIONS {
            let mut raw = Raw::connect(&fixture.path).await;
            assert!(
                error_message(raw.receive().await.unwrap())
                    .starts_with("refused: the caller runs in agent cgroup")
            );
            held.push(raw);
        }
        agent.store(false, Ordering::SeqCst);
        assert_eq!(
            call_async(&fixture.path, approve(7)).await.unwrap(),
            ControlResponse::Ok {
                message: "approved request 7 (once)".into()
            }
        );
        assert_eq!(
            *fixture.handler.answers.lock().unwrap(),
            [(7, HumanAnswer::Allow(Lifetime::Once))]
        );
    }

    #[tokio::test]
    async fn connections_beyond_the_limits_are_refused_and_idle_ones_closed() {
        let idle = Duration::from_millis(300);
        // Every connection from a cgroup of its own: the total limit.
        let next = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&next);
        let fixture = start_with(idle, move || {
            format!("/user.slice/c{}", counter.fetch_add(1, Ordering::SeqCst))
        });
        let mut held = Vec::new();
        for _ in 0..MAX_CONNECTIONS {
            held.push(Raw::connect(&fixture.path).await);
        }
        // Served: each answers.
        for raw in &mut held {
            assert!(raw.lists_pending().await);
        }
        assert_eq!(
            pending_refused(&fixture.path).await,
            format!("refused: {MAX_CONNECTIONS} connections are open; try again")
        );
        // Idle ones are closed, which makes room.
        for raw in &mut held {
            assert!(raw.closed().await);
        }
        assert!(matches!(
            call_async(&fixture.path, ControlRequest::Pending)
                .await
                .unwrap(),
            ControlResponse::Pending { .. }
        ));

        // All from one cgroup: the limit per cgroup.
        let fixture = start_with(idle, || "/user.slice/runaway".to_owned());
        let mut held = Vec::new();
        for _ in 0..MAX_PER_CGROUP {
            let mut raw = Raw::connect(&fixture.path).await;
            assert!(raw.lists_pending().await);
            held.push(raw);
        }
        assert_eq!(
            pending_refused(&fixture.path).await,
            format!("refused: {MAX_PER_CGROUP} connections from this cgroup are open; try again")
        );
    }

    #[tokio::test]
    async fn an_unreadable_cgroup_is_refused() {
        let fixture = serve_recorder(&[], |server| {
            server.with_cgroup_resolver(|_| Err(io::Error::from(io::ErrorKind::NotFound)))
        });
        let response = call_async(&fixture.path, ControlRequest::Pending)
            .await
            .unwrap();
        assert!(error_message(response).starts_with("refused: cannot read the caller's cgroup"));
        assert_eq!(fixture.handler.calls.load(Ordering::SeqCst), 0);
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
        let handler = Recorder::default();
        assert!(check_cgroup("/user.slice", &handler).is_ok());
        assert!(check_cgroup("/pincer/run-1", &handler).is_err());
    }

    #[tokio::test]
    async fn the_pidfd_of_a_live_peer_is_alive() {
        let (ours, _theirs) = UnixStream::pair().unwrap();
        // `None` only on kernels without SO_PEERPIDFD.
        if let Some(pidfd) = peer_pidfd(&ours).unwrap() {
            assert!(is_alive(&pidfd).unwrap());
        }
    }

    #[tokio::test]
    async fn a_malformed_line_leaves_the_connection_usable() {
        let (_fixture, mut raw) = start_connected("/").await;
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
        let (fixture, mut raw) = start_connected("/").await;
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
        let (_fixture, mut raw) = start_connected("/").await;
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
        let (fixture, mut raw) = start_connected("/").await;
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
        let (_dir, path) = fresh_socket_path();
        let _first = ControlServer::bind(&path).unwrap();
        let error = ControlServer::bind(&path).unwrap_err();
        assert!(matches!(&error, ControlError::InUse { path: p } if *p == path));
        assert!(path.exists(), "the live socket must stay");
    }

    #[test]
    fn a_stale_socket_is_replaced() {
        let (_dir, path) = fresh_socket_path();
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
        let (_dir, path) = fresh_socket_path();
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
        let (_dir, path) = fresh_socket_path();
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
}
