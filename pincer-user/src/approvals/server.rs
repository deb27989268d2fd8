//! The approval service's HTTP server.
//!
//! hyper rather than the `tiny_http` of the metrics endpoint: a held
//! webhook request here waits for a person for minutes, and with hyper it
//! is a future awaiting a channel, not a thread; connections are counted
//! (a semaphore taken before `accept`) before a byte of them is read, and
//! the header and body reads have deadlines, which `tiny_http` offers
//! neither of. Connections are not kept alive: each exchange is one
//! connection, so an idle client holds nothing.

use std::{
    convert::Infallible,
    net::SocketAddr,
    path::Path,
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::{
    Method, Request as HttpRequest, Response, StatusCode,
    body::Incoming,
    header::{self, HeaderMap, HeaderValue},
    server::conn::http1,
    service::service_fn,
};
use hyper_util::rt::{TokioIo, TokioTimer};
use pincer_model::{
    config::approvals::{Config, ConfigError, Secrets, valid_node_name},
    request::Request,
    vote::{
        self, Extent, Lifetime,
        webhook::{NONCE_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER, sign, verify},
    },
};
use serde::{Deserialize, Serialize};
use tokio::{net::TcpListener, sync::Semaphore};

use super::{
    ApiAnswer, DecideRequest, Decision, PendingList,
    board::{Asked, Board, NonceUse, unix_now},
};

/// Largest request body read: a webhook request is a few KiB.
pub const MAX_BODY_BYTES: usize = 64 * 1024;
/// Longest reason an operator may give; the voter cuts longer ones anyway.
pub const MAX_REASON_CHARS: usize = 1024;
/// How long a client may take to send its headers, and its body.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Every answer's headers: the page runs only its own script, in no frame,
/// and nothing is cached or sent on as a referrer.
const SECURITY_HEADERS: [(&str, &str); 6] = [
    (
        "content-security-policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
         img-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    ),
    ("x-frame-options", "DENY"),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "no-referrer"),
    ("cache-control", "no-store"),
    ("cross-origin-opener-policy", "same-origin"),
];

const INDEX_HTML: &str = include_str!("page/index.html");
const APP_JS: &str = include_str!("page/app.js");
const APP_CSS: &str = include_str!("page/app.css");

/// Errors running the service.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The configuration is not valid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The address cannot be listened on.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The async runtime or the signal handlers cannot be set up.
    #[error("cannot start the service")]
    Runtime(#[source] std::io::Error),
}

/// What every connection shares.
struct State {
    config: Config,
    board: Mutex<Board>,
}

impl State {
    fn board(&self) -> std::sync::MutexGuard<'_, Board> {
        self.board.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The service, bound to its address.
pub struct Server {
    state: Arc<State>,
    listener: TcpListener,
}

impl Server {
    /// Listens on `addr` (port 0: any free port).
    pub async fn bind(addr: SocketAddr, config: Config) -> Result<Self, ServeError> {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| ServeError::Bind { addr, source })?;
        let board = Board::new(config.keep, config.max_pending);
        Ok(Self {
            state: Arc::new(State {
                config,
                board: Mutex::new(board),
            }),
            listener,
        })
    }

    /// The address listened on.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until the future is dropped.
    pub async fn run(self) {
        let permits = Arc::new(Semaphore::new(self.state.config.max_connections));
        loop {
            let Ok(permit) = Arc::clone(&permits).acquire_owned().await else {
                return;
            };
            let (stream, peer) = match self.listener.accept().await {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of descriptors, most likely: let some go first.
                    tracing::warn!("cannot accept a connection: {error}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let state = Arc::clone(&self.state);
            tokio::spawn(async move {
                let _permit = permit;
                let service = service_fn(move |request| handle(Arc::clone(&state), peer, request));
                let connection = http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(READ_TIMEOUT)
                    .keep_alive(false)
                    .serve_connection(TokioIo::new(stream), service);
                if let Err(error) = connection.await {
                    tracing::debug!(%peer, "connection ended: {error}");
                }
            });
        }
    }
}

/// `pincer approvals serve`: reads the configuration, listens on `listen`
/// and serves until SIGINT or SIGTERM. The address is printed on standard
/// output once it listens.
pub fn serve(listen: SocketAddr, config: &Path) -> Result<(), ServeError> {
    let config = Config::from_file(config)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(ServeError::Runtime)?;
    runtime.block_on(async {
        use tokio::signal::unix::{SignalKind, signal};
        let mut terminate = signal(SignalKind::terminate()).map_err(ServeError::Runtime)?;
        let mut interrupt = signal(SignalKind::interrupt()).map_err(ServeError::Runtime)?;
        let server = Server::bind(listen, config).await?;
        let addr = server.local_addr().map_err(ServeError::Runtime)?;
        println!("{}", serving_line(addr));
        tokio::select! {
            () = server.run() => {}
            _ = terminate.recv() => {}
            _ = interrupt.recv() => {}
        }
        Ok(())
    })
}

/// The line [`serve`] prints once it listens on `addr`.
fn serving_line(addr: SocketAddr) -> String {
    format!("pincer approvals: serving on http://{addr}/ (plain HTTP: put a TLS proxy in front)")
}

/// Where a `pincer approvals serve` started as a process listens, read from
/// the first line it prints: `127.0.0.1:8443` of `pincer approvals: serving
/// on http://127.0.0.1:8443/ ...`; `None` when the line names no address.
pub fn served_address(line: &str) -> Option<&str> {
    line.split("http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
}

type Answer = Response<Full<Bytes>>;

async fn handle(
    state: Arc<State>,
    peer: SocketAddr,
    request: HttpRequest<Incoming>,
) -> Result<Answer, Infallible> {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let answer = match (&method, path.as_str()) {
        (&Method::POST, "/webhook") => webhook(&state, peer, request).await,
        (&Method::GET, "/") => asset("text/html; charset=utf-8", INDEX_HTML),
        (&Method::GET, "/app.js") => asset("text/javascript; charset=utf-8", APP_JS),
        (&Method::GET, "/app.css") => asset("text/css; charset=utf-8", APP_CSS),
        (&Method::GET, "/api/pending") => match not_operator(&state, peer, request.headers()) {
            None => pending(&state),
            Some(refused) => refused,
        },
        (&Method::POST, "/api/decide") => match not_operator(&state, peer, request.headers()) {
            None => decide(&state, peer, request).await,
            Some(refused) => refused,
        },
        (_, "/webhook" | "/" | "/app.js" | "/app.css" | "/api/pending" | "/api/decide") => {
            error(StatusCode::METHOD_NOT_ALLOWED, "method not allowed")
        }
        _ => error(StatusCode::NOT_FOUND, "not found"),
    };
    Ok(answer)
}

fn respond(status: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Answer {
    let mut answer = Response::new(Full::new(body.into()));
    *answer.status_mut() = status;
    let headers = answer.headers_mut();
    for (name, value) in SECURITY_HEADERS {
        headers.insert(name, HeaderValue::from_static(value));
    }
    if let Ok(value) = HeaderValue::from_str(content_type) {
        headers.insert(header::CONTENT_TYPE, value);
    }
    answer
}

fn asset(content_type: &str, text: &'static str) -> Answer {
    respond(StatusCode::OK, content_type, text)
}

fn json(status: StatusCode, value: &impl Serialize) -> Answer {
    match serde_json::to_vec(value) {
        Ok(body) => respond(status, "application/json", body),
        Err(_) => respond(
            StatusCode::INTERNAL_SERVER_ERROR,
            "text/plain",
            "encoding failed",
        ),
    }
}

fn error(status: StatusCode, message: impl Into<String>) -> Answer {
    json(
        status,
        &ApiAnswer::Error {
            error: message.into(),
        },
    )
}

/// A refused webhook request: logged with its peer, answered with its
/// status. Nothing was changed.
fn refuse(peer: SocketAddr, status: StatusCode, reason: impl Into<String>) -> Answer {
    let reason = reason.into();
    tracing::warn!(%peer, status = status.as_u16(), "webhook request refused: {reason}");
    error(status, reason)
}

/// The body, at most `MAX_BODY_BYTES`, read within [`READ_TIMEOUT`].
async fn read_body(body: Incoming, headers: &HeaderMap) -> Result<Bytes, (StatusCode, String)> {
    let too_large = || {
        (
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("body is larger than {} KiB", MAX_BODY_BYTES / 1024),
        )
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|text| text.parse::<u64>().ok());
    if declared.is_some_and(|len| len > MAX_BODY_BYTES as u64) {
        return Err(too_large());
    }
    match tokio::time::timeout(READ_TIMEOUT, Limited::new(body, MAX_BODY_BYTES).collect()).await {
        Err(_) => Err((
            StatusCode::REQUEST_TIMEOUT,
            "body not sent in time".to_owned(),
        )),
        Ok(Err(cause)) if cause.is::<http_body_util::LengthLimitError>() => Err(too_large()),
        Ok(Err(cause)) => Err((
            StatusCode::BAD_REQUEST,
            format!("cannot read the body: {cause}"),
        )),
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
    }
}

/// The body a webhook voter sends.
#[derive(Deserialize)]
struct Asking {
    request: Request,
    nonce: String,
    timestamp: u64,
    #[serde(default)]
    node: Option<String>,
    #[serde(default)]
    timeout_ms: Option<u64>,
}

/// A node's webhook request: checked, then held until a decision or just
/// before the voter gives up.
async fn webhook(state: &Arc<State>, peer: SocketAddr, request: HttpRequest<Incoming>) -> Answer {
    let (parts, body) = request.into_parts();
    let body = match read_body(body, &parts.headers).await {
        Ok(body) => body,
        Err((status, reason)) => return refuse(peer, status, reason),
    };
    let header = |name: &str| parts.headers.get(name).and_then(|v| v.to_str().ok());
    let (Some(timestamp), Some(nonce), Some(signature)) = (
        header(TIMESTAMP_HEADER),
        header(NONCE_HEADER),
        header(SIGNATURE_HEADER),
    ) else {
        return refuse(
            peer,
            StatusCode::UNAUTHORIZED,
            format!(
                "unsigned: {TIMESTAMP_HEADER}, {NONCE_HEADER} and {SIGNATURE_HEADER} are required"
            ),
        );
    };
    let Ok(timestamp) = timestamp.parse::<u64>() else {
        return refuse(
            peer,
            StatusCode::UNAUTHORIZED,
            "timestamp is not unix seconds",
        );
    };
    // The voter's nonces are 32 hex digits; anything else is not one of
    // its requests, and is not worth remembering.
    if nonce.len() != 32 || !nonce.bytes().all(|b| b.is_ascii_hexdigit()) {
        return refuse(peer, StatusCode::UNAUTHORIZED, "nonce is not 32 hex digits");
    }
    let config = &state.config;
    let signer = match &config.secrets {
        Secrets::Shared(secret) => {
            verify(secret, timestamp, nonce, &body, signature).then_some((None, secret.as_slice()))
        }
        Secrets::PerNode(nodes) => nodes
            .iter()
            .find(|(_, secret)| verify(secret, timestamp, nonce, &body, signature))
            .map(|(name, secret)| (Some(name.as_str()), secret.as_slice())),
    };
    let Some((signed_by, secret)) = signer else {
        return refuse(peer, StatusCode::UNAUTHORIZED, "signature does not verify");
    };
    let now = unix_now();
    let skew = config.clock_skew.as_secs();
    if now.abs_diff(timestamp) > skew {
        return refuse(
            peer,
            StatusCode::UNAUTHORIZED,
            format!(
                "timestamp {timestamp} is {} s from now, more than the allowed {}",
                now.abs_diff(timestamp),
                humantime::format_duration(config.clock_skew)
            ),
        );
    }
    let asking: Asking = match serde_json::from_slice(&body) {
        Ok(asking) => asking,
        Err(cause) => {
            return refuse(
                peer,
                StatusCode::BAD_REQUEST,
                format!("not a webhook request: {cause}"),
            );
        }
    };
    if asking.nonce != nonce || asking.timestamp != timestamp {
        return refuse(
            peer,
            StatusCode::BAD_REQUEST,
            "the body's nonce or timestamp is not the headers'",
        );
    }
    let node = match (signed_by, asking.node.as_deref()) {
        (Some(name), None) => name.to_owned(),
        (Some(name), Some(claimed)) if claimed == name => name.to_owned(),
        (Some(name), Some(_)) => {
            return refuse(
                peer,
                StatusCode::UNAUTHORIZED,
                format!("signed with node {name}'s secret but names another node"),
            );
        }
        (None, Some(claimed)) if valid_node_name(claimed) => claimed.to_owned(),
        (None, _) => {
            return refuse(
                peer,
                StatusCode::BAD_REQUEST,
                "no valid `node`: with a shared secret every request names its node \
                 (1 to 64 ASCII letters, digits, `.`, `_` and `-`)",
            );
        }
    };
    // Last of the checks, so that a refused request does not use up its
    // nonce; a nonce is remembered while its timestamp is fresh.
    match state
        .board()
        .use_nonce(nonce, now, timestamp.saturating_add(skew))
    {
        NonceUse::Fresh => {}
        NonceUse::Replayed => {
            return refuse(
                peer,
                StatusCode::CONFLICT,
                format!("replayed: nonce {nonce} was used before"),
            );
        }
        NonceUse::Full => {
            return refuse(
                peer,
                StatusCode::SERVICE_UNAVAILABLE,
                "too many requests in the clock-skew window",
            );
        }
    }
    let within = answer_within(config.hold, asking.timeout_ms);
    let request_id = asking.request.id;
    let asked = state.board().ask(&node, asking.request, Instant::now());
    let decision = match asked {
        Asked::Decided(decision) => Ok(decision),
        Asked::Full => {
            return refuse(
                peer,
                StatusCode::SERVICE_UNAVAILABLE,
                format!("{} requests are pending already", config.max_pending),
            );
        }
        Asked::Wait {
            entry,
            waiter,
            receiver,
        } => {
            tracing::info!(%node, request = request_id, entry, "request held for an operator");
            let _leave = Leave {
                state: Arc::clone(state),
                entry,
                waiter,
            };
            match tokio::time::timeout(within, receiver).await {
                Ok(Ok(decision)) => Ok(decision),
                Ok(Err(_)) => Err("the node asked again on another connection".to_owned()),
                Err(_) => Err(format!(
                    "no operator decided within {}",
                    humantime::format_duration(within)
                )),
            }
        }
    };
    signed_answer(secret, request_id, nonce, &decision)
}

/// When to answer at the latest: within the configured hold, and before
/// the voter's own timeout by a tenth of it (from 100 ms to 2 s), which
/// leaves the answer time to arrive.
fn answer_within(hold: Duration, timeout_ms: Option<u64>) -> Duration {
    let Some(ms) = timeout_ms else {
        return hold;
    };
    let timeout = Duration::from_millis(ms);
    let margin = (timeout / 10).clamp(Duration::from_millis(100), Duration::from_secs(2));
    hold.min(timeout.saturating_sub(margin))
}

/// Takes a waiting connection off its entry however its wait ends.
struct Leave {
    state: Arc<State>,
    entry: u64,
    waiter: u64,
}

impl Drop for Leave {
    fn drop(&mut self) {
        self.state
            .board()
            .leave(self.entry, self.waiter, Instant::now());
    }
}

/// The webhook's answer format (see [`crate::voters::webhook`]).
#[derive(Serialize)]
struct WebhookAnswer<'a> {
    id: u64,
    nonce: &'a str,
    vote: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    lifetime: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ttl_seconds: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    extent: Option<Extent>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
}

/// The verdict (or, with `Err`, an abstention and why), signed with the
/// node's secret over the request's nonce.
fn signed_answer(
    secret: &[u8],
    id: u64,
    nonce: &str,
    decision: &Result<Decision, String>,
) -> Answer {
    let mut answer = WebhookAnswer {
        id,
        nonce,
        vote: "abstain",
        lifetime: None,
        ttl_seconds: None,
        extent: None,
        reason: None,
    };
    match decision {
        Ok(Decision::Allow { lifetime, extent }) => {
            answer.vote = "allow";
            answer.extent = Some(*extent);
            answer.lifetime = Some(match lifetime {
                Lifetime::Once => "once",
                Lifetime::Session => "session",
                Lifetime::Ttl(ttl) => {
                    answer.ttl_seconds = Some(ttl.as_secs());
                    "ttl"
                }
            });
        }
        Ok(Decision::Deny { reason }) => {
            answer.vote = "deny";
            answer.reason = reason.as_deref();
        }
        Err(why) => answer.reason = Some(why),
    }
    let Ok(body) = serde_json::to_vec(&answer) else {
        return error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "cannot encode the answer",
        );
    };
    let timestamp = unix_now();
    let mut response = respond(StatusCode::OK, "application/json", body.clone());
    let headers = response.headers_mut();
    for (name, value) in [
        (TIMESTAMP_HEADER, timestamp.to_string()),
        (SIGNATURE_HEADER, sign(secret, timestamp, nonce, &body)),
    ] {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(name, value);
        }
    }
    response
}

/// Checks the operator's bearer token: the refusal when it is missing or
/// wrong.
fn not_operator(state: &State, peer: SocketAddr, headers: &HeaderMap) -> Option<Answer> {
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "));
    match given {
        Some(token) if same(token.as_bytes(), &state.config.token) => None,
        Some(_) => {
            tracing::warn!(%peer, "operator request refused: wrong token");
            Some(error(StatusCode::UNAUTHORIZED, "wrong operator token"))
        }
        None => {
            tracing::warn!(%peer, "operator request refused: no token");
            Some(error(
                StatusCode::UNAUTHORIZED,
                "no operator token: send `Authorization: Bearer <token>`",
            ))
        }
    }
}

/// Compares in time that depends on the lengths only.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn pending(state: &State) -> Answer {
    let requests = state.board().pending(Instant::now());
    json(StatusCode::OK, &PendingList { requests })
}

async fn decide(state: &State, peer: SocketAddr, request: HttpRequest<Incoming>) -> Answer {
    let (parts, body) = request.into_parts();
    let body = match read_body(body, &parts.headers).await {
        Ok(body) => body,
        Err((status, reason)) => return error(status, reason),
    };
    let asked: DecideRequest = match serde_json::from_slice(&body) {
        Ok(asked) => asked,
        Err(cause) => return error(StatusCode::BAD_REQUEST, format!("not a decision: {cause}")),
    };
    match &asked.decision {
        Decision::Allow {
            lifetime: Lifetime::Ttl(ttl),
            ..
        } => {
            if let Err(why) = vote::check_ttl(*ttl) {
                return error(StatusCode::BAD_REQUEST, format!("ttl: {why}"));
            }
        }
        Decision::Deny {
            reason: Some(reason),
        } if reason.chars().count() > MAX_REASON_CHARS => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("reason is longer than {MAX_REASON_CHARS} characters"),
            );
        }
        _ => {}
    }
    let verdict = match &asked.decision {
        Decision::Allow { .. } => "allowed",
        Decision::Deny { .. } => "denied",
    };
    let outcome = state
        .board()
        .decide(asked.id, asked.decision.clone(), Instant::now());
    match outcome {
        Ok((node, request)) => {
            tracing::info!(%peer, %node, request, entry = asked.id, "operator {verdict} the request");
            json(
                StatusCode::OK,
                &ApiAnswer::Done {
                    message: format!(
                        "request {} ({node}'s request {request}) {verdict}",
                        asked.id
                    ),
                },
            )
        }
        Err(cause @ super::DecideError::Unknown { .. }) => {
            error(StatusCode::NOT_FOUND, cause.to_string())
        }
        Err(cause @ super::DecideError::Decided { .. }) => {
            error(StatusCode::CONFLICT, cause.to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_come_before_the_voter_gives_up() {
        let hold = Duration::from_secs(300);
        assert_eq!(answer_within(hold, None), hold);
        assert_eq!(answer_within(hold, Some(60_000)), Duration::from_secs(58));
        assert_eq!(
            answer_within(hold, Some(3_600_000)),
            Duration::from_secs(300)
        );
        assert_eq!(answer_within(hold, Some(500)), Duration::from_millis(400));
        assert_eq!(answer_within(hold, Some(50)), Duration::ZERO);
    }

    #[test]
    fn the_address_is_read_back_from_the_line_printed() {
        let addr: SocketAddr = "127.0.0.1:8443".parse().unwrap();
        assert_eq!(served_address(&serving_line(addr)), Some("127.0.0.1:8443"));
        assert_eq!(served_address("pincer approvals: failed\n"), None);
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"abc", b"abcd"));
        assert!(!same(b"", b"a"));
    }
}
