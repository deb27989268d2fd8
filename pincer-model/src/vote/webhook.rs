//! The webhook's wire: how pincer asks an HTTP endpoint about a parked
//! request, and how it checks the signed answer (the voter that does the
//! asking is the runtime's).
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

use std::{path::PathBuf, time::Duration};

use hmac::{Hmac, Mac};
use serde::Deserialize;
use sha2::Sha256;

use super::{Extent, Lifetime, Vote, check_ttl};
use crate::escape::{CUT, escape};

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
/// Longest reason taken from an answer, in characters, so that an endpoint
/// cannot flood the audit log.
const MAX_REASON_CHARS: usize = 1024;

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
                        Lifetime::Ttl(check_ttl(Duration::from_secs(seconds)).map_err(|error| {
                            format!("answer has ttl_seconds {seconds}: {error}")
                        })?)
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

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"correct horse battery staple";

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
}
