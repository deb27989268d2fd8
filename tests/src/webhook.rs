//! A webhook on loopback for the tests: it verifies pincer's signature and
//! answers as told.

use std::{
    sync::{Arc, Mutex},
    thread,
    time::{Duration, SystemTime},
};

/// What the test webhook does with the next request.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    /// Allows once.
    Allow,
    /// Signs its answer with another key.
    WrongSignature,
    /// Answers for another request.
    WrongId,
    /// Replays an earlier answer.
    Replay,
    /// Answers after pincer's deadline.
    Late,
    /// The first request waits 2 s, then gets a session grant on its
    /// directory's tree; later ones get no answer in time.
    TreeFirst,
}

/// The test webhook: where it listens, what it does next, and how many
/// requests it was sent.
pub struct Webhook {
    /// Its URL.
    pub url: String,
    /// What it does with the next request.
    pub behaviour: Arc<Mutex<Behaviour>>,
    /// How many requests it was sent.
    pub requests: Arc<Mutex<usize>>,
    /// The last request's body, as sent.
    pub last: Arc<Mutex<Option<serde_json::Value>>>,
}

/// The test webhook's shared secret.
pub const SECRET: &[u8] = b"0123456789abcdef-test-webhook-secret";

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// A webhook on loopback that verifies pincer's signature and answers as
/// told.
pub fn webhook() -> Webhook {
    let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
    let url = format!("http://{}/vote", server.server_addr().to_ip().unwrap());
    let behaviour = Arc::new(Mutex::new(Behaviour::Allow));
    let requests = Arc::new(Mutex::new(0));
    let last = Arc::new(Mutex::new(None));
    let (b, n, l) = (
        Arc::clone(&behaviour),
        Arc::clone(&requests),
        Arc::clone(&last),
    );
    thread::spawn(move || {
        let mut captured: Option<(String, String, String)> = None;
        for mut request in server.incoming_requests() {
            *n.lock().unwrap() += 1;
            let mut body = Vec::new();
            request.as_reader().read_to_end(&mut body).unwrap();
            let header = |name: &str| {
                request
                    .headers()
                    .iter()
                    .find(|h| h.field.as_str().as_str().eq_ignore_ascii_case(name))
                    .map(|h| h.value.as_str().to_owned())
                    .unwrap_or_default()
            };
            let timestamp: u64 = header("X-Pincer-Timestamp").parse().unwrap();
            let nonce = header("X-Pincer-Nonce");
            assert!(
                pincer_model::vote::webhook::verify(
                    SECRET,
                    timestamp,
                    &nonce,
                    &body,
                    &header("X-Pincer-Signature")
                ),
                "pincer signs its requests"
            );
            let sent: serde_json::Value = serde_json::from_slice(&body).unwrap();
            *l.lock().unwrap() = Some(sent.clone());
            let id = sent["request"]["id"].as_u64().unwrap();
            let behaviour = *b.lock().unwrap();
            let seen = *n.lock().unwrap();
            let (answer_id, key): (u64, &[u8]) = match behaviour {
                Behaviour::WrongId => (id + 1, SECRET),
                Behaviour::WrongSignature => (id, b"not-the-shared-secret-at-all!!"),
                _ => (id, SECRET),
            };
            let (lifetime, extent) = match behaviour {
                Behaviour::TreeFirst => ("session", "tree"),
                _ => ("once", "file"),
            };
            let answer = serde_json::json!({
                "id": answer_id, "nonce": nonce, "vote": "allow",
                "lifetime": lifetime, "extent": extent, "reason": "test webhook"
            })
            .to_string();
            if behaviour == Behaviour::TreeFirst {
                thread::sleep(Duration::from_secs(if seen == 1 { 2 } else { 8 }));
            }
            let now = unix_now();
            let mut reply = (
                now.to_string(),
                pincer_model::vote::webhook::sign(key, now, &nonce, answer.as_bytes()),
                answer,
            );
            if behaviour == Behaviour::Replay {
                reply = captured.clone().expect("an earlier answer to replay");
            } else if behaviour == Behaviour::Allow {
                captured = Some(reply.clone());
            }
            if behaviour == Behaviour::Late {
                thread::sleep(Duration::from_secs(4));
            }
            let response = tiny_http::Response::from_string(reply.2)
                .with_header(tiny_http::Header::from_bytes("X-Pincer-Timestamp", reply.0).unwrap())
                .with_header(tiny_http::Header::from_bytes("X-Pincer-Signature", reply.1).unwrap());
            let _ = request.respond(response);
        }
    });
    Webhook {
        url,
        behaviour,
        requests,
        last,
    }
}
