//! Webhook answers: the first line of the input is the answer's timestamp
//! header, the rest its body, answering request 7 sent with a fixed nonce at
//! a fixed time. Checking never panics. Signed with the right secret, an
//! answer is accepted only when it is a vote for that request and nonce,
//! within the clock skew, with a bounded, escaped reason (cut with pincer's
//! mark when it was too long); and the same answer with anything changed
//! that the signature covers (a body bit, the timestamp, the nonce, the
//! secret, a digit of the signature) never verifies. A signature the input
//! makes up verifies only if it is the right one.

#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use pincer_fuzz::assert_escaped;
use pincer_model::{
    escape::CUT,
    vote::{
        Lifetime, MAX_TTL, Vote,
        webhook::{SignedAnswer, check_answer, sign, verify},
    },
};

const SECRET: &[u8] = b"a fuzzing secret of 32 bytes....";
const REQUEST: u64 = 7;
const NONCE: &str = "0123456789abcdef0123456789abcdef";
const NOW: u64 = 1_750_000_000;
const SKEW: Duration = Duration::from_secs(30);
/// The characters of a reason the voter keeps.
const MAX_REASON_CHARS: usize = 1024;
/// Escaping writes a character as at most four `\xNN`; then comes the mark.
const MAX_REASON_BYTES: usize = MAX_REASON_CHARS * 16 + CUT.len_utf8();

fuzz_target!(|data: &[u8]| {
    let (header, body) = match data.iter().position(|&b| b == b'\n') {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[][..]),
    };
    // A header that is not text is refused before these checks.
    let Ok(timestamp) = std::str::from_utf8(header) else {
        return;
    };
    let check = |secret: &[u8], nonce: &str, timestamp: &str, signature: &str, body: &[u8]| {
        let answer = SignedAnswer {
            timestamp,
            signature,
            body,
        };
        check_answer(secret, REQUEST, nonce, &answer, NOW, SKEW)
    };

    let Ok(signed_time) = timestamp.parse::<u64>() else {
        // No signature makes a timestamp that is not unix seconds count.
        let signature = sign(SECRET, 0, NONCE, body);
        assert!(check(SECRET, NONCE, timestamp, &signature, body).is_err());
        return;
    };
    let signature = sign(SECRET, signed_time, NONCE, body);

    if let Ok(vote) = check(SECRET, NONCE, timestamp, &signature, body) {
        let value: serde_json::Value =
            serde_json::from_slice(body).expect("an accepted answer is JSON");
        assert_eq!(value["id"], REQUEST, "accepted for another request");
        assert_eq!(value["nonce"], NONCE, "accepted with another nonce");
        assert!(
            NOW.abs_diff(signed_time) <= SKEW.as_secs(),
            "stale answer accepted"
        );
        match vote {
            Vote::Allow { lifetime, .. } => {
                if let Lifetime::Ttl(ttl) = lifetime {
                    assert!(!ttl.is_zero() && ttl <= MAX_TTL, "ttl {ttl:?}");
                }
            }
            Vote::Deny { reason } | Vote::Abstain { reason } => {
                assert!(reason.len() <= MAX_REASON_BYTES, "{} bytes", reason.len());
                assert_escaped("the reason", &reason);
                // A reason cut short says so with pincer's own mark, which
                // escaping never lets through from the endpoint's text.
                if let Some(given) = value["reason"].as_str() {
                    let cut = given.chars().count() > MAX_REASON_CHARS;
                    assert_eq!(reason.ends_with(CUT), cut, "reason {reason:?}");
                    assert!(!reason.trim_end_matches(CUT).contains(CUT));
                }
            }
        }
    }

    // Everything the signature covers, changed: never verifies.
    let seed = data
        .iter()
        .fold(0usize, |h, &b| h.wrapping_mul(31) ^ usize::from(b));
    if !body.is_empty() {
        let mut flipped = body.to_vec();
        flipped[seed % body.len()] ^= 1 << (seed % 8);
        assert!(check(SECRET, NONCE, timestamp, &signature, &flipped).is_err());
    }
    let later = signed_time.wrapping_add(1).to_string();
    assert!(check(SECRET, NONCE, &later, &signature, body).is_err());
    let other_nonce = "fedcba9876543210fedcba9876543210";
    assert!(check(SECRET, other_nonce, timestamp, &signature, body).is_err());
    let other_secret = sign(
        b"another secret of 32 bytes......",
        signed_time,
        NONCE,
        body,
    );
    assert!(check(SECRET, NONCE, timestamp, &other_secret, body).is_err());
    let mut digits = signature.clone().into_bytes();
    let at = "sha256=".len() + seed % (digits.len() - "sha256=".len());
    digits[at] = if digits[at] == b'0' { b'1' } else { b'0' };
    let digits = String::from_utf8(digits).unwrap();
    assert!(check(SECRET, NONCE, timestamp, &digits, body).is_err());
    assert!(
        check(
            SECRET,
            NONCE,
            timestamp,
            &signature[..signature.len() - 2],
            body
        )
        .is_err()
    );

    // The body's text as the signature of an empty answer: only the right
    // one verifies (hex digits may be written in either case).
    if let Ok(made_up) = std::str::from_utf8(body)
        && verify(SECRET, signed_time, NONCE, b"", made_up)
    {
        assert!(made_up.eq_ignore_ascii_case(&sign(SECRET, signed_time, NONCE, b"")));
    }
});
