//! The webhook voter: asks an HTTP endpoint about a parked request and
//! counts only answers signed with a shared secret. The wire format is
//! written in [`pincer_model::vote::webhook`].

use std::{
    collections::{HashSet, VecDeque},
    fmt, io,
    path::{Path, PathBuf},
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use pincer_model::{
    escape::escape,
    request::Request,
    vote::{
        Vote,
        webhook::{
            MIN_SECRET_BYTES, NONCE_HEADER, SIGNATURE_HEADER, SignedAnswer, TIMESTAMP_HEADER,
            WebhookConfig, check_answer, sign,
        },
    },
};
use reqwest::{StatusCode, Url, header::HeaderMap};
use serde::Serialize;

use crate::vote::{VoteFuture, Voter};

/// Largest answer read; an answer is a few hundred bytes.
const MAX_ANSWER_BYTES: usize = 64 * 1024;
/// Accepted nonces remembered against replays.
const REMEMBERED_NONCES: usize = 4096;

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

fn read_secret(path: &Path) -> Result<Vec<u8>, WebhookError> {
    let mut secret = pincer_model::files::read_regular(path, pincer_model::files::MAX_SECRET_BYTES)
        .map_err(|source| WebhookError::ReadSecret {
            path: path.to_owned(),
            source,
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
mod tests;
