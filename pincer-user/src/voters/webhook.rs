//! The webhook voter: asks an HTTP endpoint about a parked request and
//! counts only answers signed with a shared secret.
//!
//! # Wire format
//!
//! pincer sends one `POST` to the configured `http` or `https` URL per parked
//! request. Redirects are not followed.
//!
//! ```text
//! POST <url>
//! Content-Type: application/json
//! X-Pincer-Timestamp: <unix seconds>
//! X-Pincer-Nonce: <32 lower-case hex characters, 16 random bytes>
//! X-Pincer-Signature: sha256=<hex HMAC-SHA256(secret, "<timestamp>.<nonce>." + body)>
//!
//! {"request": {...}, "nonce": "<nonce>", "timestamp": <unix seconds>,
//!  "node": "<host name>", "timeout_ms": <milliseconds>}
//! ```
//!
//! `request` is the sanitized request (`id`, `mission`, `cgroup`, `pid`,
//! `tid`, `comm`, `exe`, `parents`, `operation`, `path`, `hook`, `why`). The
//! timestamp and nonce in the body are the ones in the headers; the
//! signature covers the body bytes exactly as sent. `node` names the
//! machine asking (its host name, escaped, unless configured): request ids
//! are unique on one machine only, and an endpoint serving many machines
//! with one secret tells them apart by it. `timeout_ms` is how long pincer
//! waits for the answer: an endpoint that holds the request until a person
//! decides answers before then (`pincer approvals serve` answers `abstain`
//! just before).
//!
//! The endpoint answers `200 OK` with a JSON body and two headers:
//!
//! ```text
//! X-Pincer-Timestamp: <unix seconds>
//! X-Pincer-Signature: sha256=<hex HMAC-SHA256(secret, "<timestamp>.<nonce>." + body)>
//!
//! {"id": <request id>, "nonce": "<the nonce>", "vote": "allow" | "deny" | "abstain",
//!  "lifetime": "once" | "session" | "ttl", "ttl_seconds": <seconds, with ttl>,
//!  "extent": "file" | "tree", "reason": "<text>"}
//! ```
//!
//! The answer's signature uses the nonce pincer sent, the timestamp of the
//! answer's own header (decimal, as written in the header) and the answer's
//! body bytes. `lifetime` defaults to `once`, `extent` to `file`, `reason` is
//! optional; `lifetime`, `ttl_seconds` and `extent` matter only for `allow`,
//! `reason` only for `deny` and `abstain`. Unknown fields are refused.
//!
//! An answer counts only when its signature verifies, its `id` and `nonce`
//! are those of the request, its timestamp is within the configured clock
//! skew (30 s by default) of pincer's clock, and no answer with that nonce has
//! been accepted before. Anything else — no answer before the mission's
//! deadline, a transport error, a status other than 200, a body over 64 KiB,
//! a missing or wrong signature, a wrong id or nonce, a stale timestamp, a
//! replayed answer, malformed JSON — is an abstention, logged with what was
//! wrong.
//!
//! The signature gives authenticity, not secrecy: use `https` when the
//! endpoint is not on the local host, since requests name the files an agent
//! tried to touch.

use std::{
    collections::{HashSet, VecDeque},
    fmt, io,
    path::{Path, PathBuf},
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use hmac::{Hmac, Mac};
use reqwest::{StatusCode, Url, header::HeaderMap};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::{
    escape::{CUT, escape},
    request::Request,
    vote::{self, Extent, Lifetime, Vote, VoteFuture, Voter},
};

/// Header carrying the unix time of a request or an answer.
pub const TIMESTAMP_HEADER: &str = "X-Pincer-Timestamp";
/// Header carrying the request's nonce.
pub const NONCE_HEADER: &str = "X-Pincer-Nonce";
/// Header carrying `sha256=<hex HMAC>` of a request or an answer.
pub const SIGNATURE_HEADER: &str = "X-Pincer-Signature";
/// Shortest secret accepted: shorter ones are guessable offline from one
/// signed request.
pub const MIN_SECRET_BYTES: usize = 16;

const SIGNATURE_PREFIX: &str = "sha256=";
/// Largest answer read; an answer is a few hundred bytes.
const MAX_ANSWER_BYTES: usize = 64 * 1024;
/// Accepted nonces remembered against replays.
const REMEMBERED_NONCES: usize = 4096;
/// Longest reason taken from an answer, in characters, so that an endpoint
/// cannot flood the audit log.
const MAX_REASON_CHARS: usize = 1024;

/// Errors setting up the webhook voter.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// The URL does not parse.
    #[error("invalid webhook url {url:?}")]
    Url {
        /// The URL as configured.
        url: String,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The URL is neither `http` nor `https`.
    #[error("webhook url must use http or https, not {scheme}")]
    Scheme {
        /// The scheme found.
        scheme: String,
    },
    /// The secret file cannot be read.
    #[error("cannot read webhook secret file {}", .path.display())]
    ReadSecret {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The secret file is empty.
    #[error("webhook secret file {} is empty", .path.display())]
    EmptySecret {
        /// The file.
        path: PathBuf,
    },
    /// The secret is too short to resist guessing.
    #[error(
        "webhook secret in {} is {len} bytes, fewer than the required {MIN_SECRET_BYTES}",
        .path.display()
    )]
    ShortSecret {
        /// The file.
        path: PathBuf,
        /// The secret's length, without its trailing newline.
        len: usize,
    },
    /// The HTTP client cannot be built.
    #[error("failed to build the webhook http client")]
    Client(#[source] reqwest::Error),
    /// The webhook voter is named, but no endpoint is configured.
    #[error("the webhook voter needs a [vote.webhook] table")]
    NotConfigured,
}

/// How far a webhook answer's timestamp may be from pincer's clock unless
/// `vote.webhook.clock_skew` says otherwise.
pub const DEFAULT_CLOCK_SKEW: Duration = Duration::from_secs(30);

/// Largest `vote.webhook.clock_skew`: answers are checked for freshness
/// against it, and a wider window lets a captured answer be replayed for
/// longer.
pub const MAX_CLOCK_SKEW: Duration = Duration::from_secs(3600);

/// `[vote.webhook]`: where the webhook lives and how its answers are
/// checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebhookConfig {
    /// The endpoint, `http://` or `https://` with a host.
    pub url: String,
    /// Absolute path of the file holding the shared secret (one trailing
    /// newline is ignored), kept out of the mission so that the mission can
    /// be shared and logged.
    pub secret_file: PathBuf,
    /// How far an answer's timestamp may be from pincer's clock.
    pub clock_skew: Duration,
    /// 1-based line of the `[vote.webhook]` table in the mission file (0
    /// when it comes from elsewhere).
    pub line: usize,
    /// 1-based line of `secret_file` in the mission file (0 when it comes
    /// from elsewhere), for messages about the secret.
    pub secret_line: usize,
    /// `owner = true`: the endpoint speaks for the owner, so its allow
    /// counts for a change to a policy object (its secret is the owner's
    /// key: keep it apart from any other webhook's).
    pub owner: bool,
    /// The `node` the requests carry; `None`: the host's name.
    pub node: Option<String>,
}

impl WebhookConfig {
    /// A configuration with the default clock skew.
    pub fn new(url: impl Into<String>, secret_file: impl Into<PathBuf>) -> Self {
        Self {
            url: url.into(),
            secret_file: secret_file.into(),
            clock_skew: DEFAULT_CLOCK_SKEW,
            line: 0,
            secret_line: 0,
            owner: false,
            node: None,
        }
    }
}

/// Votes by asking an HTTP endpoint (see the module documentation for the
/// wire format).
pub struct WebhookVoter {
    inner: Arc<Inner>,
}

struct Inner {
    client: reqwest::Client,
    url: Url,
    /// `scheme://host:port` of the URL, for logs: the full URL may carry
    /// credentials or a token.
    endpoint: String,
    secret: Vec<u8>,
    clock_skew: Duration,
    timeout: Duration,
    accepted: Mutex<AcceptedNonces>,
    owner: bool,
    node: String,
}

impl fmt::Debug for WebhookVoter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebhookVoter")
            .field("endpoint", &self.inner.endpoint)
            .field("clock_skew", &self.inner.clock_skew)
            .field("timeout", &self.inner.timeout)
            .finish_non_exhaustive()
    }
}

impl WebhookVoter {
    /// Checks the URL, reads the secret and prepares a client whose requests
    /// give up after `timeout` (the vote deadline).
    pub fn new(config: WebhookConfig, timeout: Duration) -> Result<Self, WebhookError> {
        let url = Url::parse(&config.url).map_err(|source| WebhookError::Url {
            url: config.url.clone(),
            source: Box::new(source),
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(WebhookError::Scheme {
                scheme: url.scheme().to_owned(),
            });
        }
        let secret = read_secret(&config.secret_file)?;
        let client = reqwest::Client::builder()
            .timeout(timeout)
            // A redirect would carry the request to wherever the endpoint
            // points; an endpoint that moved is a configuration change.
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("pincer/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(WebhookError::Client)?;
        let endpoint = match (url.host_str(), url.port_or_known_default()) {
            (Some(host), Some(port)) => format!("{}://{host}:{port}", url.scheme()),
            _ => url.scheme().to_owned(),
        };
        Ok(Self {
            inner: Arc::new(Inner {
                client,
                url,
                endpoint,
                secret,
                clock_skew: config.clock_skew,
                timeout,
                accepted: Mutex::new(AcceptedNonces::new(REMEMBERED_NONCES)),
                owner: config.owner,
                node: config.node.unwrap_or_else(host_name),
            }),
        })
    }
}

impl Voter for WebhookVoter {
    fn name(&self) -> &'static str {
        "webhook"
    }

    fn owner(&self) -> bool {
        self.inner.owner
    }

    fn vote(&self, request: Arc<Request>) -> VoteFuture {
        let inner = Arc::clone(&self.inner);
        Box::pin(async move {
            match new_nonce() {
                Ok(nonce) => inner.ask(&request, &nonce, unix_now()).await,
                Err(error) => inner.abstain(&request, format!("cannot draw a nonce: {error}")),
            }
        })
    }
}

impl Inner {
    /// One exchange with the endpoint; every failure is an abstention.
    async fn ask(&self, request: &Request, nonce: &str, timestamp: u64) -> Vote {
        // The client's timeout covers the exchange too; this one also bounds
        // the time spent before the request leaves.
        let outcome = tokio::time::timeout(self.timeout, self.exchange(request, nonce, timestamp))
            .await
            .unwrap_or_else(|_| Err(self.no_answer()));
        match outcome {
            Ok(vote) => vote,
            Err(reason) => self.abstain(request, reason),
        }
    }

    fn abstain(&self, request: &Request, reason: String) -> Vote {
        tracing::warn!(
            request = request.id,
            webhook = %self.endpoint,
            "webhook vote abstains: {reason}"
        );
        Vote::Abstain { reason }
    }

    fn no_answer(&self) -> String {
        format!(
            "no answer within {}",
            humantime::format_duration(self.timeout)
        )
    }

    async fn exchange(
        &self,
        request: &Request,
        nonce: &str,
        timestamp: u64,
    ) -> Result<Vote, String> {
        let body = serde_json::to_vec(&Outgoing {
            request,
            nonce,
            timestamp,
            node: &self.node,
            timeout_ms: u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX),
        })
        .map_err(|error| format!("cannot encode the request: {error}"))?;
        let signature = sign(&self.secret, timestamp, nonce, &body);
        let mut response = self
            .client
            .post(self.url.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(TIMESTAMP_HEADER, timestamp.to_string())
            .header(NONCE_HEADER, nonce)
            .header(SIGNATURE_HEADER, signature)
            .body(body)
            .send()
            .await
            .map_err(|error| self.transport(error))?;
        if response.status() != StatusCode::OK {
            return Err(format!("webhook answered HTTP {}", response.status()));
        }
        let body = self.read_answer(&mut response).await?;
        let (timestamp, signature) = answer_headers(response.headers())?;
        let answer = SignedAnswer {
            timestamp,
            signature,
            body: &body,
        };
        let vote = check_answer(
            &self.secret,
            request.id,
            nonce,
            &answer,
            unix_now(),
            self.clock_skew,
        )?;
        // Last, so that an answer refused for another reason does not use up
        // the nonce.
        let fresh = self
            .accepted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(nonce);
        if !fresh {
            return Err(format!(
                "replayed answer: nonce {nonce} was already accepted"
            ));
        }
        Ok(vote)
    }

    /// The answer's body, refused past [`MAX_ANSWER_BYTES`] before it is all
    /// in memory.
    async fn read_answer(&self, response: &mut reqwest::Response) -> Result<Vec<u8>, String> {
        let too_large = || format!("answer is larger than {} KiB", MAX_ANSWER_BYTES / 1024);
        if response
            .content_length()
            .is_some_and(|len| len > MAX_ANSWER_BYTES as u64)
        {
            return Err(too_large());
        }
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|error| self.transport(error))?
        {
            if body.len() + chunk.len() > MAX_ANSWER_BYTES {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    /// A transport error as a reason, without the URL (it may carry a token)
    /// but with every cause.
    fn transport(&self, error: reqwest::Error) -> String {
        if error.is_timeout() {
            return self.no_answer();
        }
        let error = error.without_url();
        let mut text = error.to_string();
        let mut source = std::error::Error::source(&error);
        while let Some(cause) = source {
            text.push_str(": ");
            text.push_str(&cause.to_string());
            source = cause.source();
        }
        text
    }
}

/// The text of an answer's timestamp and signature headers; an answer
/// without them, or whose headers are not text, is refused.
fn answer_headers(headers: &HeaderMap) -> Result<(&str, &str), String> {
    let header = |name: &str| match headers.get(name) {
        None => Err(format!("unsigned answer: no {name} header")),
        Some(value) => value
            .to_str()
            .map_err(|_| format!("answer's {name} header is not text")),
    };
    Ok((header(TIMESTAMP_HEADER)?, header(SIGNATURE_HEADER)?))
}

/// An endpoint's answer as received: the text of its
/// [`TIMESTAMP_HEADER`] and [`SIGNATURE_HEADER`], and its body.
#[derive(Clone, Copy, Debug)]
pub struct SignedAnswer<'a> {
    /// The timestamp header, unix seconds in decimal.
    pub timestamp: &'a str,
    /// The signature header, `sha256=<hex HMAC>`.
    pub signature: &'a str,
    /// The body's bytes, as received.
    pub body: &'a [u8],
}

/// Checks an answer to the request `request_id`, sent with `nonce`: its
/// signature under `secret`, then its id and nonce, its timestamp within
/// `clock_skew` of `now` (unix seconds) and the vote it carries. This is
/// every check the voter makes but one: replays, refused afterwards by the
/// voter's memory of accepted nonces. Public so that the checks can be
/// exercised alone, without an endpoint: the fuzz targets do.
pub fn check_answer(
    secret: &[u8],
    request_id: u64,
    nonce: &str,
    answer: &SignedAnswer<'_>,
    now: u64,
    clock_skew: Duration,
) -> Result<Vote, String> {
    let answer_time: u64 = answer.timestamp.parse().map_err(|_| {
        format!(
            "answer's {TIMESTAMP_HEADER} header \"{}\" is not unix seconds",
            escape(answer.timestamp.as_bytes())
        )
    })?;
    if !verify(secret, answer_time, nonce, answer.body, answer.signature) {
        return Err("answer signature does not verify".to_owned());
    }
    let parsed: Answer = serde_json::from_slice(answer.body)
        .map_err(|error| format!("answer is not a valid vote: {error}"))?;
    if parsed.id != request_id {
        return Err(format!(
            "answer is for request {}, not {request_id}",
            parsed.id
        ));
    }
    if parsed.nonce != nonce {
        return Err(format!(
            "answer carries nonce \"{}\", not the one sent",
            escape(parsed.nonce.as_bytes())
        ));
    }
    let drift = now.abs_diff(answer_time);
    if Duration::from_secs(drift) > clock_skew {
        return Err(format!(
            "answer timestamp {answer_time} is {drift} s from now, more than the allowed {}",
            humantime::format_duration(clock_skew)
        ));
    }
    parsed.into_vote()
}

/// The body pincer sends.
#[derive(Serialize)]
struct Outgoing<'a> {
    request: &'a Request,
    nonce: &'a str,
    timestamp: u64,
    node: &'a str,
    timeout_ms: u64,
}

/// The host's name, escaped like every name pincer shows (the
/// administrator chose it, but it reaches other machines' screens); empty
/// when it cannot be read.
fn host_name() -> String {
    std::fs::read("/proc/sys/kernel/hostname")
        .map(|bytes| escape(bytes.trim_ascii_end()))
        .unwrap_or_default()
}

/// The body an endpoint answers.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Answer {
    id: u64,
    nonce: String,
    vote: AnswerVote,
    #[serde(default)]
    lifetime: AnswerLifetime,
    ttl_seconds: Option<u64>,
    #[serde(default = "file_extent")]
    extent: Extent,
    reason: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "lowercase")]
enum AnswerVote {
    Allow,
    Deny,
    Abstain,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
enum AnswerLifetime {
    #[default]
    Once,
    Session,
    Ttl,
}

fn file_extent() -> Extent {
    Extent::File
}

impl Answer {
    fn into_vote(self) -> Result<Vote, String> {
        let reason = |fallback: &str| match &self.reason {
            Some(text) => bounded_reason(text),
            None => fallback.to_owned(),
        };
        Ok(match self.vote {
            AnswerVote::Allow => Vote::Allow {
                lifetime: match (self.lifetime, self.ttl_seconds) {
                    (AnswerLifetime::Ttl, Some(seconds)) => {
                        Lifetime::Ttl(vote::check_ttl(Duration::from_secs(seconds)).map_err(
                            |error| format!("answer has ttl_seconds {seconds}: {error}"),
                        )?)
                    }
                    (AnswerLifetime::Ttl, None) => {
                        return Err("answer has lifetime ttl but no ttl_seconds".to_owned());
                    }
                    (_, Some(_)) => {
                        return Err(
                            "answer has ttl_seconds but a lifetime other than ttl".to_owned()
                        );
                    }
                    (AnswerLifetime::Once, None) => Lifetime::Once,
                    (AnswerLifetime::Session, None) => Lifetime::Session,
                },
                extent: self.extent,
            },
            AnswerVote::Deny => Vote::Deny {
                reason: reason("denied by webhook"),
            },
            AnswerVote::Abstain => Vote::Abstain {
                reason: reason("webhook abstained"),
            },
        })
    }
}

/// An endpoint's reason, escaped (it may reach a terminal) and shortened.
/// The mark of the cut goes on after escaping, which would write it as
/// bytes: shown as itself it is pincer's, never the endpoint's.
fn bounded_reason(text: &str) -> String {
    let shortened: String = text.chars().take(MAX_REASON_CHARS).collect();
    let mut reason = escape(shortened.as_bytes());
    if shortened.len() < text.len() {
        reason.push(CUT);
    }
    reason
}

/// Nonces of accepted answers, oldest forgotten first.
///
/// Each request gets a fresh random nonce and an answer's signature covers
/// it, so only an answer to a nonce pincer sent can verify; remembering the
/// accepted ones guarantees that one answer never counts twice, even if a
/// nonce were ever sent again.
struct AcceptedNonces {
    capacity: usize,
    order: VecDeque<String>,
    known: HashSet<String>,
}

impl AcceptedNonces {
    fn new(capacity: usize) -> Self {
        Self {
            capacity,
            order: VecDeque::with_capacity(capacity),
            known: HashSet::with_capacity(capacity),
        }
    }

    /// Records a nonce; false when it was already recorded.
    fn insert(&mut self, nonce: &str) -> bool {
        if self.known.contains(nonce) {
            return false;
        }
        if self.order.len() >= self.capacity
            && let Some(oldest) = self.order.pop_front()
        {
            self.known.remove(&oldest);
        }
        self.order.push_back(nonce.to_owned());
        self.known.insert(nonce.to_owned());
        true
    }
}

/// Signs a request or an answer: `sha256=` and the hex HMAC-SHA256, keyed
/// with `secret`, of `"<timestamp>.<nonce>."` followed by `body`.
pub fn sign(secret: &[u8], timestamp: u64, nonce: &str, body: &[u8]) -> String {
    let tag = mac(secret, timestamp, nonce, body).finalize().into_bytes();
    format!("{SIGNATURE_PREFIX}{}", hex::encode(tag))
}

/// Checks a signature header made by [`sign`], in constant time.
pub fn verify(secret: &[u8], timestamp: u64, nonce: &str, body: &[u8], header_value: &str) -> bool {
    let Some(tag) = header_value.strip_prefix(SIGNATURE_PREFIX) else {
        return false;
    };
    let Ok(tag) = hex::decode(tag) else {
        return false;
    };
    mac(secret, timestamp, nonce, body)
        .verify_slice(&tag)
        .is_ok()
}

fn mac(secret: &[u8], timestamp: u64, nonce: &str, body: &[u8]) -> Hmac<Sha256> {
    // HMAC hashes long keys and pads short ones: every length is valid.
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes keys of any length");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(nonce.as_bytes());
    mac.update(b".");
    mac.update(body);
    mac
}

fn read_secret(path: &Path) -> Result<Vec<u8>, WebhookError> {
    let mut secret =
        crate::files::read_regular(path, crate::files::MAX_SECRET_BYTES).map_err(|source| {
            WebhookError::ReadSecret {
                path: path.to_owned(),
                source,
            }
        })?;
    // Editors and `echo` end the file with a newline that is not part of the
    // secret the endpoint holds.
    if secret.last() == Some(&b'\n') {
        secret.pop();
        if secret.last() == Some(&b'\r') {
            secret.pop();
        }
    }
    if secret.is_empty() {
        return Err(WebhookError::EmptySecret {
            path: path.to_owned(),
        });
    }
    if secret.len() < MIN_SECRET_BYTES {
        return Err(WebhookError::ShortSecret {
            path: path.to_owned(),
            len: secret.len(),
        });
    }
    Ok(secret)
}

fn new_nonce() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)?;
    Ok(hex::encode(bytes))
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}

#[cfg(test)]
mod tests {
    use std::{collections::HashMap, io::Write as _, thread, time::Instant};

    use serde_json::{Value, json};
    use tempfile::NamedTempFile;

    use super::*;

    const SECRET: &[u8] = b"correct horse battery staple";

    /// What the test endpoint received.
    #[derive(Clone, Debug)]
    struct Received {
        /// Header names in lower case.
        headers: HashMap<String, String>,
        body: Vec<u8>,
    }

    impl Received {
        fn sent(&self) -> Value {
            serde_json::from_slice(&self.body).unwrap()
        }

        fn nonce(&self) -> String {
            self.sent()["nonce"].as_str().unwrap().to_owned()
        }

        fn id(&self) -> u64 {
            self.sent()["request"]["id"].as_u64().unwrap()
        }
    }

    #[derive(Clone, Debug)]
    struct Reply {
        status: u16,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
        delay: Duration,
    }

    impl Reply {
        /// An answer signed with `secret` over `nonce` at `timestamp`.
        fn signed_with(secret: &[u8], timestamp: u64, nonce: &str, answer: &Value) -> Self {
            let body = answer.to_string().into_bytes();
            Self {
                status: 200,
                headers: vec![
                    (TIMESTAMP_HEADER.to_owned(), timestamp.to_string()),
                    (
                        SIGNATURE_HEADER.to_owned(),
                        sign(secret, timestamp, nonce, &body),
                    ),
                ],
                body,
                delay: Duration::ZERO,
            }
        }

        /// A correctly signed answer to what was received.
        fn signed(received: &Received, answer: &Value) -> Self {
            Self::signed_with(SECRET, unix_now(), &received.nonce(), answer)
        }
    }

    /// The answer fields with the received id and nonce.
    fn answer(received: &Received, fields: Value) -> Value {
        let mut answer = json!({"id": received.id(), "nonce": received.nonce()});
        answer
            .as_object_mut()
            .unwrap()
            .extend(fields.as_object().unwrap().clone());
        answer
    }

    /// A webhook endpoint on 127.0.0.1 answering as `script` says.
    struct Endpoint {
        url: String,
        received: Arc<Mutex<Vec<Received>>>,
        server: Arc<tiny_http::Server>,
    }

    impl Endpoint {
        fn start(mut script: impl FnMut(&Received) -> Reply + Send + 'static) -> Self {
            let server = Arc::new(tiny_http::Server::http("127.0.0.1:0").unwrap());
            let port = server.server_addr().to_ip().unwrap().port();
            let received = Arc::new(Mutex::new(Vec::new()));
            let (serving, log) = (Arc::clone(&server), Arc::clone(&received));
            thread::spawn(move || {
                for mut request in serving.incoming_requests() {
                    let mut body = Vec::new();
                    request.as_reader().read_to_end(&mut body).unwrap();
                    let headers = request
                        .headers()
                        .iter()
                        .map(|h| {
                            (
                                h.field.as_str().as_str().to_ascii_lowercase(),
                                h.value.as_str().to_owned(),
                            )
                        })
                        .collect();
                    let seen = Received { headers, body };
                    let reply = script(&seen);
                    log.lock().unwrap().push(seen);
                    thread::sleep(reply.delay);
                    let mut response =
                        tiny_http::Response::from_data(reply.body).with_status_code(reply.status);
                    for (name, value) in reply.headers {
                        response.add_header(
                            tiny_http::Header::from_bytes(name.as_bytes(), value.as_bytes())
                                .unwrap(),
                        );
                    }
                    // The voter may have given up already.
                    let _ = request.respond(response);
                }
            });
            Self {
                url: format!("http://127.0.0.1:{port}/vote?token=hush"),
                received,
                server,
            }
        }

        fn received(&self) -> Vec<Received> {
            self.received.lock().unwrap().clone()
        }
    }

    impl Drop for Endpoint {
        fn drop(&mut self) {
            self.server.unblock();
        }
    }

    fn secret_file(contents: &[u8]) -> NamedTempFile {
        let mut file = NamedTempFile::new().unwrap();
        file.write_all(contents).unwrap();
        file
    }

    fn voter_with_timeout(url: &str, timeout: Duration) -> (WebhookVoter, NamedTempFile) {
        let secret = secret_file(&[SECRET, b"\n"].concat());
        let voter = WebhookVoter::new(WebhookConfig::new(url, secret.path()), timeout).unwrap();
        (voter, secret)
    }

    fn voter(url: &str) -> (WebhookVoter, NamedTempFile) {
        voter_with_timeout(url, Duration::from_secs(5))
    }

    fn request(id: u64) -> Arc<Request> {
        Arc::new(Request::example(id, "/home/dev/.ssh/id_ed25519"))
    }

    fn abstains(vote: &Vote, containing: &str) {
        match vote {
            Vote::Abstain { reason } => assert!(
                reason.contains(containing),
                "reason {reason:?} does not mention {containing:?}"
            ),
            other => panic!("expected an abstention, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn signed_allow_is_counted_with_its_lifetime_and_extent() {
        let endpoint = Endpoint::start(|received| {
            Reply::signed(
                received,
                &answer(
                    received,
                    json!({"vote": "allow", "lifetime": "session", "extent": "tree"}),
                ),
            )
        });
        let (voter, _secret) = voter(&endpoint.url);
        assert_eq!(voter.name(), "webhook");
        let request = request(11);
        let vote = voter.vote(Arc::clone(&request)).await;
        assert_eq!(
            vote,
            Vote::Allow {
                lifetime: Lifetime::Session,
                extent: Extent::Tree
            }
        );

        let received = endpoint.received();
        assert_eq!(received.len(), 1);
        let got = &received[0];
        assert_eq!(got.headers["content-type"], "application/json");
        let timestamp: u64 = got.headers["x-pincer-timestamp"].parse().unwrap();
        assert!(unix_now().abs_diff(timestamp) <= 5);
        let nonce = &got.headers["x-pincer-nonce"];
        assert_eq!(nonce.len(), 32);
        assert!(
            nonce
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
        assert!(verify(
            SECRET,
            timestamp,
            nonce,
            &got.body,
            &got.headers["x-pincer-signature"]
        ));
        assert!(!verify(
            b"another secret, 16+",
            timestamp,
            nonce,
            &got.body,
            &got.headers["x-pincer-signature"]
        ));
        let sent = got.sent();
        assert_eq!(sent["request"], serde_json::to_value(&*request).unwrap());
        assert_eq!(sent["nonce"], json!(nonce));
        assert_eq!(sent["timestamp"], json!(timestamp));
        assert_eq!(sent["node"], json!(host_name()));
        assert_eq!(sent["timeout_ms"], json!(5000));
    }

    #[tokio::test]
    async fn signed_deny_carries_its_reason() {
        let endpoint = Endpoint::start(|received| {
            Reply::signed(
                received,
                &answer(received, json!({"vote": "deny", "reason": "keys stay put"})),
            )
        });
        let (voter, _secret) = voter(&endpoint.url);
        assert_eq!(
            voter.vote(request(12)).await,
            Vote::Deny {
                reason: "keys stay put".into()
            }
        );
    }

    #[tokio::test]
    async fn signed_abstain_and_ttl_allow() {
        let mut answers = vec![
            json!({"vote": "allow", "lifetime": "ttl", "ttl_seconds": 90}),
            json!({"vote": "abstain", "reason": "ask a human\u{1b}[2J"}),
            json!({"vote": "allow"}),
        ]
        .into_iter();
        let endpoint = Endpoint::start(move |received| {
            Reply::signed(received, &answer(received, answers.next().unwrap()))
        });
        let (voter, _secret) = voter(&endpoint.url);
        assert_eq!(
            voter.vote(request(13)).await,
            Vote::Allow {
                lifetime: Lifetime::Ttl(Duration::from_secs(90)),
                extent: Extent::File
            }
        );
        // An endpoint's text can reach a terminal: control bytes are escaped.
        abstains(&voter.vote(request(14)).await, "ask a human\\x1b[2J");
        assert_eq!(
            voter.vote(request(15)).await,
            Vote::Allow {
                lifetime: Lifetime::Once,
                extent: Extent::File
            }
        );
    }

    #[tokio::test]
    async fn wrong_signature_abstains() {
        let endpoint = Endpoint::start(|received| {
            Reply::signed_with(
                b"not the shared secret",
                unix_now(),
                &received.nonce(),
                &answer(received, json!({"vote": "allow"})),
            )
        });
        let (voter, _secret) = voter(&endpoint.url);
        abstains(&voter.vote(request(20)).await, "signature does not verify");
    }

    #[tokio::test]
    async fn unsigned_answer_abstains() {
        let endpoint = Endpoint::start(|received| {
            let mut reply = Reply::signed(received, &answer(received, json!({"vote": "allow"})));
            reply.headers.retain(|(name, _)| name != SIGNATURE_HEADER);
            reply
        });
        let (voter, _secret) = voter(&endpoint.url);
        abstains(&voter.vote(request(21)).await, "unsigned answer");
    }

    #[tokio::test]
    async fn malformed_signature_or_timestamp_abstains() {
        let mut replies = 0;
        let endpoint = Endpoint::start(move |received| {
            replies += 1;
            let mut reply = Reply::signed(received, &answer(received, json!({"vote": "allow"})));
            let (header, value) = match replies {
                1 => (SIGNATURE_HEADER, "sha256=zz"),
                2 => (SIGNATURE_HEADER, "md5=00"),
                _ => (TIMESTAMP_HEADER, "soon"),
            };
            for (name, old) in &mut reply.headers {
                if name == header {
                    *old = value.to_owned();
                }
            }
            reply
        });
        let (voter, _secret) = voter(&endpoint.url);
        abstains(&voter.vote(request(22)).await, "does not verify");
        abstains(&voter.vote(request(23)).await, "does not verify");
        abstains(&voter.vote(request(24)).await, "is not unix seconds");
    }

    #[tokio::test]
    async fn answer_for_another_request_abstains() {
        let endpoint = Endpoint::start(|received| {
            let mut answer = answer(received, json!({"vote": "allow"}));
            answer["id"] = json!(received.id() + 1);
            Reply::signed(received, &answer)
        });
        let (voter, _secret) = voter(&endpoint.url);
        abstains(
            &voter.vote(request(30)).await,
            "answer is for request 31, not 30",
        );
    }

    #[tokio::test]
    async fn answer_with_another_nonce_abstains() {
        // Signed over the nonce sent, so only the body's nonce is wrong.
        let endpoint = Endpoint::start(|received| {
            let mut answer = answer(received, json!({"vote": "allow"}));
            answer["nonce"] = json!("00112233445566778899aabbccddeeff");
            Reply::signed(received, &answer)
        });
        let (voter, _secret) = voter(&endpoint.url);
        abstains(&voter.vote(request(31)).await, "not the one sent");
    }

    #[tokio::test]
    async fn replayed_answer_never_counts_twice() {
        let mut captured: Option<Reply> = None;
        let endpoint = Endpoint::start(move |received| {
            captured
                .get_or_insert_with(|| {
                    Reply::signed(received, &answer(received, json!({"vote": "allow"})))
                })
                .clone()
        });
        let (voter, _secret) = voter(&endpoint.url);
        let a = request(40);
        let nonce = new_nonce().unwrap();

        // The same nonce twice: the first answer counts, the replay does not.
        let first = voter.inner.ask(&a, &nonce, unix_now()).await;
        assert!(matches!(first, Vote::Allow { .. }), "{first:?}");
        abstains(
            &voter.inner.ask(&a, &nonce, unix_now()).await,
            "replayed answer",
        );
        // A fresh nonce for the same request: the old answer's signature
        // covers the old nonce.
        abstains(
            &voter.vote(Arc::clone(&a)).await,
            "signature does not verify",
        );
        // Another request.
        abstains(&voter.vote(request(41)).await, "signature does not verify");
        assert_eq!(endpoint.received().len(), 4);
    }

    #[tokio::test]
    async fn stale_or_future_timestamp_abstains() {
        let mut offsets = [-600i64, 600].into_iter();
        let endpoint = Endpoint::start(move |received| {
            let at = unix_now().saturating_add_signed(offsets.next().unwrap());
            Reply::signed_with(
                SECRET,
                at,
                &received.nonce(),
                &answer(received, json!({"vote": "allow"})),
            )
        });
        let (voter, _secret) = voter(&endpoint.url);
        abstains(&voter.vote(request(50)).await, "more than the allowed 30s");
        abstains(&voter.vote(request(51)).await, "more than the allowed 30s");
    }

    #[tokio::test]
    async fn slow_endpoint_abstains_at_the_timeout() {
        let endpoint = Endpoint::start(|received| {
            let mut reply = Reply::signed(received, &answer(received, json!({"vote": "allow"})));
            reply.delay = Duration::from_secs(3);
            reply
        });
        let (voter, _secret) = voter_with_timeout(&endpoint.url, Duration::from_millis(300));
        let started = Instant::now();
        let vote = voter.vote(request(60)).await;
        let waited = started.elapsed();
        abstains(&vote, "no answer within 300ms");
        assert!(
            waited >= Duration::from_millis(300) && waited < Duration::from_millis(1500),
            "waited {waited:?}"
        );
    }

    #[tokio::test]
    async fn non_200_abstains_even_when_signed() {
        let endpoint = Endpoint::start(|received| {
            let mut reply = Reply::signed(received, &answer(received, json!({"vote": "allow"})));
            reply.status = 500;
            reply
        });
        let (voter, _secret) = voter(&endpoint.url);
        abstains(&voter.vote(request(70)).await, "HTTP 500");
    }

    #[tokio::test]
    async fn redirect_is_not_followed() {
        let endpoint = Endpoint::start(|_| Reply {
            status: 307,
            headers: vec![("Location".into(), "http://127.0.0.1:9/elsewhere".into())],
            body: vec![],
            delay: Duration::ZERO,
        });
        let (voter, _secret) = voter(&endpoint.url);
        abstains(&voter.vote(request(71)).await, "HTTP 307");
        assert_eq!(endpoint.received().len(), 1);
    }

    #[tokio::test]
    async fn malformed_answers_abstain() {
        let mut bodies = vec![
            json!("allow"),
            json!({"vote": "maybe"}),
            json!({"vote": "allow", "lifetime": "forever"}),
            json!({"vote": "allow", "lifetime": "ttl"}),
            json!({"vote": "allow", "lifetime": "ttl", "ttl_seconds": 0}),
            json!({"vote": "allow", "lifetime": "ttl", "ttl_seconds": u64::MAX}),
            json!({"vote": "allow", "ttl_seconds": 60}),
            json!({"vote": "allow", "extent": "everything"}),
            json!({"vote": "allow", "grant": "all"}),
        ]
        .into_iter();
        let endpoint = Endpoint::start(move |received| {
            let fields = bodies.next().unwrap();
            let body = if fields.is_object() {
                answer(received, fields)
            } else {
                fields
            };
            Reply::signed(received, &body)
        });
        let (voter, _secret) = voter(&endpoint.url);
        for (id, expected) in [
            "not a valid vote",
            "unknown variant `maybe`",
            "unknown variant `forever`",
            "no ttl_seconds",
            "ttl_seconds 0",
            "ttl_seconds 18446744073709551615: must be at most 365 days",
            "a lifetime other than ttl",
            "unknown variant `everything`",
            "unknown field `grant`",
        ]
        .into_iter()
        .enumerate()
        {
            abstains(&voter.vote(request(80 + id as u64)).await, expected);
        }
    }

    #[tokio::test]
    async fn oversized_answer_abstains() {
        let endpoint = Endpoint::start(|received| {
            let padding = "x".repeat(MAX_ANSWER_BYTES);
            Reply::signed(
                received,
                &answer(received, json!({"vote": "deny", "reason": padding})),
            )
        });
        let (voter, _secret) = voter(&endpoint.url);
        abstains(&voter.vote(request(90)).await, "larger than 64 KiB");
    }

    #[tokio::test]
    async fn unreachable_endpoint_abstains_without_leaking_the_url() {
        // A port that was just free.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let (voter, _secret) = voter(&format!("http://127.0.0.1:{port}/?token=hush"));
        let vote = voter.vote(request(91)).await;
        abstains(&vote, "error sending request");
        let Vote::Abstain { reason } = vote else {
            unreachable!()
        };
        assert!(!reason.contains("hush"), "{reason}");
        assert!(!format!("{voter:?}").contains("hush"));
    }

    #[test]
    fn secret_file_is_checked() {
        let short = secret_file(b"fifteen bytes!!\n");
        let error = WebhookVoter::new(
            WebhookConfig::new("https://example.org/", short.path()),
            Duration::from_secs(1),
        )
        .unwrap_err();
        assert!(matches!(error, WebhookError::ShortSecret { len: 15, .. }));
        let message = error.to_string();
        assert!(
            message.contains(&short.path().display().to_string()),
            "{message}"
        );
        assert!(message.contains("15 bytes"), "{message}");

        let empty = secret_file(b"\n");
        let error = WebhookVoter::new(
            WebhookConfig::new("https://example.org/", empty.path()),
            Duration::from_secs(1),
        )
        .unwrap_err();
        assert!(matches!(error, WebhookError::EmptySecret { .. }));
        assert!(
            error
                .to_string()
                .contains(&empty.path().display().to_string())
        );

        // A named pipe would hang the voter's start for good; /dev/zero would
        // be read until memory runs out.
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("secret");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        for (path, what) in [
            (fifo.as_path(), "a named pipe"),
            (Path::new("/dev/zero"), "a character device"),
        ] {
            let error = WebhookVoter::new(
                WebhookConfig::new("https://example.org/", path),
                Duration::from_secs(1),
            )
            .unwrap_err();
            let message = format!("{:#}", anyhow::Error::new(error));
            assert_eq!(
                message,
                format!(
                    "cannot read webhook secret file {}: {what}: only regular files are read",
                    path.display()
                )
            );
        }

        let missing = WebhookVoter::new(
            WebhookConfig::new("https://example.org/", "/nonexistent/pincer-secret"),
            Duration::from_secs(1),
        )
        .unwrap_err();
        assert!(missing.to_string().contains("/nonexistent/pincer-secret"));

        // Exactly the minimum, newline (also CRLF) not counted.
        for contents in [&b"sixteen bytes!!!\n"[..], b"sixteen bytes!!!\r\n"] {
            let file = secret_file(contents);
            let voter = WebhookVoter::new(
                WebhookConfig::new("https://example.org/", file.path()),
                Duration::from_secs(1),
            )
            .unwrap();
            assert_eq!(voter.inner.secret, b"sixteen bytes!!!");
        }
    }

    #[test]
    fn url_must_be_http_or_https() {
        let secret = secret_file(SECRET);
        for url in ["ftp://example.org/", "file:///etc/passwd", "not a url"] {
            let error = WebhookVoter::new(
                WebhookConfig::new(url, secret.path()),
                Duration::from_secs(1),
            )
            .unwrap_err();
            assert!(
                matches!(
                    error,
                    WebhookError::Scheme { .. } | WebhookError::Url { .. }
                ),
                "{url}: {error}"
            );
        }
        let voter = WebhookVoter::new(
            WebhookConfig::new("https://user:pw@example.org/hook", secret.path()),
            Duration::from_secs(1),
        )
        .unwrap();
        assert_eq!(voter.inner.endpoint, "https://example.org:443");
    }

    #[test]
    fn a_long_reason_is_cut_with_pincers_mark() {
        // Found by the webhook_answer fuzz target: the mark was escaped with
        // the text, and showed as `\xe2\x80\xa6`.
        let long = "x".repeat(MAX_REASON_CHARS + 1);
        assert_eq!(bounded_reason(&long), format!("{}{CUT}", &long[1..]));
        let exact = "x".repeat(MAX_REASON_CHARS);
        assert_eq!(bounded_reason(&exact), exact);
        // The endpoint's own mark is escaped, cut or not.
        assert_eq!(bounded_reason("a\u{2026}"), "a\\xe2\\x80\\xa6");
    }

    #[test]
    fn sign_and_verify() {
        let signature = sign(SECRET, 1_700_000_000, "abcd", b"{}");
        assert!(signature.starts_with("sha256="));
        assert_eq!(signature.len(), "sha256=".len() + 64);
        assert!(verify(SECRET, 1_700_000_000, "abcd", b"{}", &signature));
        assert!(verify(
            SECRET,
            1_700_000_000,
            "abcd",
            b"{}",
            &signature.to_ascii_uppercase().replace("SHA256=", "sha256=")
        ));
        assert!(!verify(SECRET, 1_700_000_001, "abcd", b"{}", &signature));
        assert!(!verify(SECRET, 1_700_000_000, "abce", b"{}", &signature));
        assert!(!verify(SECRET, 1_700_000_000, "abcd", b"{ }", &signature));
        assert!(!verify(
            b"other secret....",
            1_700_000_000,
            "abcd",
            b"{}",
            &signature
        ));
        assert!(!verify(
            SECRET,
            1_700_000_000,
            "abcd",
            b"{}",
            &signature[..40]
        ));
        assert!(!verify(
            SECRET,
            1_700_000_000,
            "abcd",
            b"{}",
            &signature[7..]
        ));
        assert!(!verify(SECRET, 1_700_000_000, "abcd", b"{}", ""));
        // Known answer, so that endpoints in other languages can check theirs:
        // HMAC-SHA256("key", "1.n.body").
        let expected = {
            let mut mac = Hmac::<Sha256>::new_from_slice(b"key").unwrap();
            mac.update(b"1.n.body");
            format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
        };
        assert_eq!(sign(b"key", 1, "n", b"body"), expected);
    }

    #[test]
    fn accepted_nonces_are_bounded() {
        let mut accepted = AcceptedNonces::new(2);
        assert!(accepted.insert("a"));
        assert!(!accepted.insert("a"));
        assert!(accepted.insert("b"));
        assert!(accepted.insert("c"));
        assert_eq!(accepted.order.len(), 2);
        assert!(!accepted.insert("c"));
        // The oldest was forgotten.
        assert!(accepted.insert("a"));
    }

    #[test]
    fn nonces_are_fresh_hex() {
        let (a, b) = (new_nonce().unwrap(), new_nonce().unwrap());
        assert_ne!(a, b);
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
    }
}
