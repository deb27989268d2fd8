//! The approval service's unit-test harness: a served instance on loopback
//! with the files its clients need ([`Service`]), and webhook requests
//! signed as the voter signs them. Apart from `tests.rs` so that file holds
//! only tests.

use std::{
    io::Write as _,
    net::SocketAddr,
    os::unix::fs::PermissionsExt,
    sync::Arc,
    time::{Duration, Instant},
};

use pincer_model::{
    config::approvals::{Config, Secrets},
    request::Request,
    vote::{
        Vote,
        webhook::{NONCE_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER, WebhookConfig, sign},
    },
};
use serde_json::json;
use tempfile::TempDir;

use super::{PendingRequest, Server, client::Client};
use crate::{vote::Voter, voters::webhook::WebhookVoter};

pub(super) const SECRET: &[u8] = b"correct horse battery staple";
pub(super) const TOKEN: &[u8] = b"operator token, long enough";

/// A served instance and the files its clients need.
pub(super) struct Service {
    addr: SocketAddr,
    pub(super) dir: TempDir,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Service {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Service {
    pub(super) async fn start(config: impl FnOnce(&mut Config)) -> Self {
        let mut settings = Config::new(Secrets::Shared(SECRET.to_vec()), TOKEN.to_vec());
        config(&mut settings);
        let server = Server::bind("127.0.0.1:0".parse().unwrap(), settings)
            .await
            .unwrap();
        let addr = server.local_addr().unwrap();
        let dir = tempfile::tempdir().unwrap();
        for (name, contents) in [
            ("secret", SECRET),
            ("token", TOKEN),
            ("wrong", b"not the token!!!!"),
        ] {
            let path = dir.path().join(name);
            let mut file = std::fs::File::create(&path).unwrap();
            file.write_all(contents).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        Self {
            addr,
            dir,
            task: tokio::spawn(server.run()),
        }
    }

    pub(super) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub(super) fn operator(&self) -> Client {
        Client::new(&self.url("/"), &self.dir.path().join("token")).unwrap()
    }

    /// The real webhook voter of node `node`, with this vote timeout.
    pub(super) fn voter(&self, node: &str, timeout: Duration) -> WebhookVoter {
        let config = WebhookConfig {
            node: Some(node.to_owned()),
            ..WebhookConfig::new(self.url("/webhook"), self.dir.path().join("secret"))
        };
        WebhookVoter::new(config, timeout).unwrap()
    }

    /// Asks `voter` about `request` in a task of its own.
    pub(super) fn ask(
        voter: &Arc<WebhookVoter>,
        request: &Arc<Request>,
    ) -> tokio::task::JoinHandle<Vote> {
        let (voter, request) = (Arc::clone(voter), Arc::clone(request));
        tokio::spawn(async move { voter.vote(request).await })
    }

    /// The pending list once it has `count` entries.
    pub(super) async fn pending(&self, count: usize) -> Vec<PendingRequest> {
        let operator = self.operator();
        let started = Instant::now();
        loop {
            let list = operator.pending().await.unwrap();
            if list.len() == count {
                return list;
            }
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "pending stays at {} entries, not {count}: {list:?}",
                list.len()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

pub(super) fn request(id: u64, path: &str) -> Arc<Request> {
    Arc::new(Request::example(id, path))
}

/// A webhook request as the voter signs it.
pub(super) struct Signed {
    pub(super) body: Vec<u8>,
    timestamp: u64,
    nonce: String,
    pub(super) signature: String,
}

pub(super) fn signed(
    secret: &[u8],
    id: u64,
    nonce: &str,
    timestamp: u64,
    padding: usize,
) -> Signed {
    let mut request = Request::example(id, "/x");
    request.why = "x".repeat(padding);
    let body = serde_json::to_vec(&json!({
        "request": request,
        "nonce": nonce,
        "timestamp": timestamp,
        "node": "node-a",
        "timeout_ms": 400,
    }))
    .unwrap();
    Signed {
        signature: sign(secret, timestamp, nonce, &body),
        body,
        timestamp,
        nonce: nonce.to_owned(),
    }
}

pub(super) async fn post(service: &Service, request: &Signed) -> reqwest::Response {
    reqwest::Client::new()
        .post(service.url("/webhook"))
        .header(TIMESTAMP_HEADER, request.timestamp.to_string())
        .header(NONCE_HEADER, &request.nonce)
        .header(SIGNATURE_HEADER, &request.signature)
        .body(request.body.clone())
        .send()
        .await
        .unwrap()
}

pub(super) fn now() -> u64 {
    super::board::unix_now()
}
