//! The service end to end on loopback, asked by the real webhook voter and
//! answered through the operators' client.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use pincer_model::{
    config::approvals::Secrets,
    request::Request,
    vote::{
        Extent, Lifetime, Vote,
        webhook::{SIGNATURE_HEADER, SignedAnswer, TIMESTAMP_HEADER, check_answer},
    },
};
use reqwest::StatusCode;
use serde_json::json;

use super::{
    Decision, PendingRequest,
    client::{Client, ClientError},
    harness::{SECRET, Service, now, post, request, signed},
};

#[tokio::test]
async fn approve_session_reaches_the_voter_as_a_signed_allow() {
    let service = Service::start(|_| {}).await;
    let voter = Arc::new(service.voter("node-a", Duration::from_secs(30)));
    let mut asked = Request::example(7, "/home/dev/.ssh/id_ed25519");
    asked.owner_only = Some(pincer_model::request::OWNER_ONLY_POLICY.to_owned());
    let asked = Arc::new(asked);
    let vote = Service::ask(&voter, &asked);

    let listed = service.pending(1).await;
    let entry = &listed[0];
    assert_eq!(entry.node, "node-a");
    assert!(entry.waiting);
    assert_eq!(entry.request, asked.as_sent());
    let message = service
        .operator()
        .decide(
            entry.id,
            Decision::Allow {
                lifetime: Lifetime::Session,
                extent: Extent::File,
            },
        )
        .await
        .unwrap();
    assert!(message.contains("node-a's request 7"), "{message}");
    // The voter counts only an answer whose signature, id, nonce and time
    // it verified.
    assert_eq!(
        vote.await.unwrap(),
        Vote::Allow {
            lifetime: Lifetime::Session,
            extent: Extent::File
        }
    );
    service.pending(0).await;
}

#[tokio::test]
async fn deny_and_ttl_reach_the_voter() {
    let service = Service::start(|_| {}).await;
    let voter = Arc::new(service.voter("node-a", Duration::from_secs(30)));
    let denied = Service::ask(&voter, &request(8, "/etc/shadow"));
    let allowed = Service::ask(&voter, &request(9, "/srv/data"));
    let listed = service.pending(2).await;
    let operator = service.operator();
    let id_of = |path: &str| listed.iter().find(|p| p.request.path == path).unwrap().id;
    operator
        .decide(
            id_of("/etc/shadow"),
            Decision::Deny {
                reason: Some("not for this task".into()),
            },
        )
        .await
        .unwrap();
    operator
        .decide(
            id_of("/srv/data"),
            Decision::Allow {
                lifetime: Lifetime::Ttl(Duration::from_secs(600)),
                extent: Extent::Tree,
            },
        )
        .await
        .unwrap();
    assert_eq!(
        denied.await.unwrap(),
        Vote::Deny {
            reason: "not for this task".into()
        }
    );
    assert_eq!(
        allowed.await.unwrap(),
        Vote::Allow {
            lifetime: Lifetime::Ttl(Duration::from_secs(600)),
            extent: Extent::Tree
        }
    );
    // Decided once: a second decision is refused.
    let again = operator
        .decide(id_of("/srv/data"), Decision::Deny { reason: None })
        .await
        .unwrap_err();
    assert!(
        matches!(
            again,
            ClientError::Refused {
                status: StatusCode::CONFLICT,
                ..
            }
        ),
        "{again}"
    );
}

#[tokio::test]
async fn no_decision_is_a_signed_abstention_before_the_deadline() {
    let service = Service::start(|_| {}).await;
    let timeout = Duration::from_millis(1500);
    let voter = Arc::new(service.voter("node-a", timeout));
    let started = Instant::now();
    let vote = Service::ask(&voter, &request(10, "/x")).await.unwrap();
    let waited = started.elapsed();
    // The service's own words: its answer was signed and counted, not the
    // voter's timeout.
    match vote {
        Vote::Abstain { reason } => {
            assert!(reason.contains("no operator decided within"), "{reason}");
        }
        other => panic!("expected an abstention, got {other:?}"),
    }
    assert!(
        waited >= Duration::from_millis(1200) && waited < timeout,
        "waited {waited:?}"
    );
    // Nobody waits now; the entry stays, for a node that asks again.
    let listed = service.pending(1).await;
    assert!(!listed[0].waiting);
}

#[tokio::test]
async fn replays_and_forgeries_are_refused_and_change_nothing() {
    let service = Service::start(|_| {}).await;
    let nonce = "00112233445566778899aabbccddeeff";

    // Refused before anything is recorded: a wrong secret, a stale or
    // future timestamp, a body over 64 KiB, no signature.
    let forged = signed(b"not the shared secret", 1, nonce, now(), 0);
    assert_eq!(
        post(&service, &forged).await.status(),
        StatusCode::UNAUTHORIZED
    );
    for offset in [-600i64, 600] {
        let stale = signed(SECRET, 1, nonce, now().saturating_add_signed(offset), 0);
        let answer = post(&service, &stale).await;
        assert_eq!(answer.status(), StatusCode::UNAUTHORIZED);
        assert!(
            answer
                .text()
                .await
                .unwrap()
                .contains("more than the allowed 30s")
        );
    }
    let oversized = signed(SECRET, 1, nonce, now(), 64 * 1024);
    assert_eq!(
        post(&service, &oversized).await.status(),
        StatusCode::PAYLOAD_TOO_LARGE
    );
    let mut unsigned = signed(SECRET, 1, nonce, now(), 0);
    unsigned.signature = String::new();
    assert_eq!(
        post(&service, &unsigned).await.status(),
        StatusCode::UNAUTHORIZED
    );
    service.pending(0).await;

    // The nonce was not used up by those: the genuine request counts.
    let genuine = signed(SECRET, 1, nonce, now(), 0);
    let answer = post(&service, &genuine).await;
    assert_eq!(answer.status(), StatusCode::OK);
    let timestamp = answer.headers()[TIMESTAMP_HEADER]
        .to_str()
        .unwrap()
        .to_owned();
    let signature = answer.headers()[SIGNATURE_HEADER]
        .to_str()
        .unwrap()
        .to_owned();
    let body = answer.bytes().await.unwrap();
    let reply = SignedAnswer {
        timestamp: &timestamp,
        signature: &signature,
        body: &body,
    };
    // Nobody decided within the 400 ms the request gave: a signed
    // abstention, which the voter's checks accept.
    let skew = Duration::from_secs(30);
    assert!(matches!(
        check_answer(SECRET, 1, nonce, &reply, now(), skew),
        Ok(Vote::Abstain { .. })
    ));
    // The same answer does not verify for another request, nonce or
    // secret: an answer cannot be forged or moved.
    let other_nonce = "ffeeddccbbaa99887766554433221100";
    assert!(check_answer(SECRET, 1, other_nonce, &reply, now(), skew).is_err());
    assert!(check_answer(SECRET, 2, nonce, &reply, now(), skew).is_err());
    assert!(check_answer(b"another secret, 16+", 1, nonce, &reply, now(), skew).is_err());

    // The replay is refused and changes nothing. The entries are compared
    // without their age, which may tick over a second between the lists.
    let ageless = |mut list: Vec<PendingRequest>| {
        for entry in &mut list {
            entry.age_seconds = 0;
        }
        list
    };
    let before = ageless(service.operator().pending().await.unwrap());
    let replayed = post(&service, &genuine).await;
    assert_eq!(replayed.status(), StatusCode::CONFLICT);
    assert!(replayed.text().await.unwrap().contains("replayed"));
    assert_eq!(ageless(service.operator().pending().await.unwrap()), before);
    assert_eq!(before.len(), 1);
}

#[tokio::test]
async fn a_re_ask_after_a_restart_is_one_entry_and_gets_the_decision() {
    let service = Service::start(|_| {}).await;
    let asked = request(12, "/home/dev/notes.txt");

    // The node asks, then dies: its connection goes.
    let first = Arc::new(service.voter("node-a", Duration::from_secs(30)));
    let task = Service::ask(&first, &asked);
    let id = service.pending(1).await[0].id;
    task.abort();

    // The restarted node asks again (a new voter, a new nonce): one entry.
    let second = Arc::new(service.voter("node-a", Duration::from_secs(30)));
    let again = Service::ask(&second, &asked);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let listed = service.pending(1).await;
    assert_eq!(listed[0].id, id);
    // Another node's request with the same id is its own entry.
    let other = Arc::new(service.voter("node-b", Duration::from_secs(30)));
    let elsewhere = Service::ask(&other, &asked);
    service.pending(2).await;

    let allow = Decision::Allow {
        lifetime: Lifetime::Once,
        extent: Extent::File,
    };
    service.operator().decide(id, allow.clone()).await.unwrap();
    assert!(matches!(again.await.unwrap(), Vote::Allow { .. }));
    service.pending(1).await;
    elsewhere.abort();

    // Decided while nobody waited: the node's next ask gets the decision
    // at once.
    let waiting = Service::ask(&first, &request(13, "/srv/a"));
    let id = service
        .pending(2)
        .await
        .iter()
        .find(|p| p.request.id == 13)
        .unwrap()
        .id;
    waiting.abort();
    service
        .operator()
        .decide(
            id,
            Decision::Deny {
                reason: Some("decided meanwhile".into()),
            },
        )
        .await
        .unwrap();
    let started = Instant::now();
    let vote = Service::ask(&second, &request(13, "/srv/a")).await.unwrap();
    assert_eq!(
        vote,
        Vote::Deny {
            reason: "decided meanwhile".into()
        }
    );
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn the_operator_api_refuses_missing_and_wrong_tokens() {
    let service = Service::start(|_| {}).await;
    let voter = Arc::new(service.voter("node-a", Duration::from_secs(30)));
    let _held = Service::ask(&voter, &request(14, "/x"));
    let id = service.pending(1).await[0].id;

    let http = reqwest::Client::new();
    let decide = json!({"id": id, "decision": {"vote": "allow", "lifetime": {"kind": "session"}}});
    for token in [None, Some("not the token"), Some("")] {
        let mut get = http.get(service.url("/api/pending"));
        let mut post = http.post(service.url("/api/decide")).json(&decide);
        if let Some(token) = token {
            get = get.bearer_auth(token);
            post = post.bearer_auth(token);
        }
        assert_eq!(get.send().await.unwrap().status(), StatusCode::UNAUTHORIZED);
        assert_eq!(
            post.send().await.unwrap().status(),
            StatusCode::UNAUTHORIZED
        );
    }
    let wrong = Client::new(&service.url("/"), &service.dir.path().join("wrong")).unwrap();
    let refused = wrong.pending().await.unwrap_err();
    assert!(
        matches!(refused, ClientError::Unauthorized { .. }),
        "{refused}"
    );
    assert!(refused.to_string().contains("refused the operator token"));
    // Nothing was decided.
    assert!(service.pending(1).await[0].waiting);

    // The page: its own script only, in no frame, no cookies.
    let page = http.get(service.url("/")).send().await.unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    let headers = page.headers();
    let csp = headers["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"));
    assert!(!csp.contains("unsafe-inline"));
    assert_eq!(headers["x-frame-options"], "DENY");
    assert!(headers.get("set-cookie").is_none());
    let html = page.text().await.unwrap();
    assert!(html.contains("<script src=\"/app.js\" defer></script>"));
    let script = http.get(service.url("/app.js")).send().await.unwrap();
    assert!(
        script.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/javascript")
    );
    let script = script.text().await.unwrap();
    assert!(!script.contains("innerHTML") && !script.contains("insertAdjacentHTML"));
}

#[tokio::test]
async fn per_node_secrets_and_the_pending_limit() {
    let service = Service::start(|config| {
        config.secrets = Secrets::PerNode(vec![("node-a".into(), SECRET.to_vec())]);
        config.max_pending = 1;
    })
    .await;
    // Node b signs with node a's secret: it cannot speak for a.
    let impostor = Arc::new(service.voter("node-b", Duration::from_secs(5)));
    match Service::ask(&impostor, &request(1, "/x")).await.unwrap() {
        Vote::Abstain { reason } => assert!(reason.contains("HTTP 401"), "{reason}"),
        other => panic!("{other:?}"),
    }
    let voter = Arc::new(service.voter("node-a", Duration::from_secs(5)));
    let _held = Service::ask(&voter, &request(2, "/x"));
    service.pending(1).await;
    match Service::ask(&voter, &request(3, "/y")).await.unwrap() {
        Vote::Abstain { reason } => assert!(reason.contains("HTTP 503"), "{reason}"),
        other => panic!("{other:?}"),
    }
    service.pending(1).await;
}
