//! The control server's tests: a fake handler and real sockets, apart so
//! the server itself reads without them.

use std::sync::{
    Mutex,
    atomic::{AtomicUsize, Ordering},
};

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
fn serve_recorder(pending: &[u64], server: impl FnOnce(ControlServer) -> ControlServer) -> Fixture {
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
async fn call_async(path: &Path, request: ControlRequest) -> Result<ControlResponse, ControlError> {
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
