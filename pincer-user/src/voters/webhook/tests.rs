//! The webhook voter's tests: a local answering server and its signatures,
//! apart so the voter itself reads without them.

use std::{collections::HashMap, io::Write as _, thread, time::Instant};

use pincer_model::vote::{Extent, Lifetime, webhook::verify};
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
                        tiny_http::Header::from_bytes(name.as_bytes(), value.as_bytes()).unwrap(),
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
