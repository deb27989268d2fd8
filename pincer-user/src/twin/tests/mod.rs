//! The twin's whole path on the host, over a fake kernel: a parked event
//! comes in as ring-buffer bytes, is sanitized and voted on, the verdict is
//! written into the (fake) maps, the task continued, the verdict audited.

use std::{collections::HashMap, path::Path, sync::Arc, time::Duration};

use pincer_common::{AccessEvent, GrantKey, GrantValue, Verdict, event_flags, hook, ops, verdict};
use pincer_model::{
    control::HumanAnswer,
    mission::Reason,
    vote::{
        Extent, Lifetime, Vote,
        rules::{Rule, RuleVerdict},
    },
};
use tokio::sync::mpsc;

use super::{fake::FakeKernel, *};
use crate::{
    vote::VoteFuture,
    voters::{
        mission::MissionVoter,
        prompt::{PromptBoard, PromptVoter},
    },
};

mod labels;

const CGROUP: u64 = 7000;
const SLOT: u32 = FIRST_SLOT;
const DEV: u64 = (8 << 20) | 1;
/// The project directory's inode, and a granted file in it.
const PROJECT: u64 = 500;
const GRANTED: u64 = 501;
/// A secret next to the project.
const SECRET: u64 = 900;
/// The verdict that lets thread 41's request (410) through once.
const ALLOWED_ONCE: Verdict = Verdict {
    id: 410,
    allow: 1,
    _pad: 0,
    pin_dev: 0,
    pin_ino: 0,
};

/// A voter that always answers the same.
struct Fixed(Vote);

impl Voter for Fixed {
    fn name(&self) -> &'static str {
        "mission"
    }

    fn vote(&self, _: Arc<Request>) -> VoteFuture {
        let vote = self.0.clone();
        Box::pin(async move { vote })
    }
}

/// A voter that answers as its function says, or never.
struct Scripted<F>(F);

impl<F: Fn(&Request) -> Option<Vote> + Send + Sync> Voter for Scripted<F> {
    fn name(&self) -> &'static str {
        "webhook"
    }

    fn vote(&self, request: Arc<Request>) -> VoteFuture {
        vote_or_never((self.0)(&request))
    }
}

/// `vote`, or (`None`) a vote that never comes.
fn vote_or_never(vote: Option<Vote>) -> VoteFuture {
    Box::pin(async move {
        match vote {
            Some(vote) => vote,
            None => std::future::pending().await,
        }
    })
}

/// A voter that answers at once as its function says, or (`None`) must be
/// waited for and never answers.
struct AtOnce<F>(F);

impl<F: Fn(&Request) -> Option<Vote> + Send + Sync> Voter for AtOnce<F> {
    fn name(&self) -> &'static str {
        "mission"
    }

    fn vote_now(&self, request: &Request) -> Option<Vote> {
        (self.0)(request)
    }

    fn vote(&self, request: Arc<Request>) -> VoteFuture {
        vote_or_never((self.0)(&request))
    }
}

/// The mission voter with one rule on the tree of the secret (the path the
/// twin shows for `parked(.., &["key", "secret"])`).
fn mission_rule(verdict: RuleVerdict) -> Arc<dyn Voter> {
    Arc::new(MissionVoter::new(vec![Rule {
        path: "…/secret".into(),
        extent: Extent::Tree,
        ops: ops::ALL,
        verdict,
        reason: Some("the rule on the secret".into()),
        line: 9,
    }]))
}

/// The prompt voter on a board nobody answers unless the test does.
fn prompt(board: &Arc<PromptBoard>) -> Arc<dyn Voter> {
    Arc::new(PromptVoter::new(Arc::clone(board)))
}

/// What waits on `board`, once the vote tasks (on this thread) have had a
/// few turns to put it there; empty when nothing came.
async fn asked(board: &PromptBoard) -> Vec<Request> {
    for _ in 0..100 {
        let pending = board.pending();
        if !pending.is_empty() {
            return pending;
        }
        tokio::task::yield_now().await;
    }
    Vec::new()
}

/// The mission's rule allowing the secret for the session, and the owner's
/// prompt on `board`: what only the owner may allow must wait for the
/// owner even so.
fn allowed_but_for_the_owner(board: &Arc<PromptBoard>) -> Vec<Arc<dyn Voter>> {
    vec![
        mission_rule(RuleVerdict::Allow(Lifetime::Session)),
        Arc::new(PromptVoter::owner_only(Arc::clone(board))),
    ]
}

fn allow(lifetime: Lifetime, extent: Extent) -> Vote {
    Vote::Allow { lifetime, extent }
}

fn policy() -> Policy {
    Policy {
        max_extent: Extent::Tree,
        ..Policy::default()
    }
}

/// A twin over a fake kernel, auditing to a file in `dir`.
struct Harness {
    twin: Twin<FakeKernel>,
    results: mpsc::UnboundedReceiver<VoteResult>,
    audit: std::path::PathBuf,
    /// Where the audit log is, and anything else a test writes.
    dir: tempfile::TempDir,
}

impl Harness {
    /// One agent in `CGROUP`, its mission granting read on `GRANTED`.
    fn new(voters: Vec<Arc<dyn Voter>>) -> Harness {
        let mut h = Harness::over(FakeKernel::default());
        h.twin.confine(CGROUP, confinement(SLOT, voters)).unwrap();
        h
    }

    /// A twin over `kernel` that has confined nothing yet.
    fn over(kernel: FakeKernel) -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let audit = dir.path().join("audit.jsonl");
        let log = AuditLog::open(Some(&audit), "test").unwrap();
        let (twin, results) = Twin::new(kernel, log).unwrap();
        Harness {
            twin,
            results,
            audit,
            dir,
        }
    }

    /// Sends a parked event as ring-buffer bytes and, when it starts a vote,
    /// waits for the vote and applies its verdict.
    async fn park_and_decide(&mut self, event: &AccessEvent) {
        self.twin.handle_record(bytes(event)).unwrap();
        self.decide().await;
    }

    /// Waits for the next vote to end and applies its verdict.
    async fn decide(&mut self) {
        let (key, outcome) = self.results.recv().await.unwrap();
        self.twin.on_outcome(key, outcome).unwrap();
    }

    /// The audit log's records (chain lines left out).
    fn records(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(&self.audit)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .filter(|v| v["chain"].is_null())
            .collect()
    }

    fn kernel(&mut self) -> &mut FakeKernel {
        &mut self.twin.kernel
    }
}

fn confinement(slot: u32, voters: Vec<Arc<dyn Voter>>) -> Confinement {
    Confinement {
        name: "fix-tests".into(),
        slot,
        mode: Mode::Ask,
        report_allowed: false,
        from_exec: false,
        capabilities: pincer_common::caps::DEFAULT,
        userns_home: 0,
        grants: ResolvedGrants {
            inode: vec![(
                key(slot, GRANTED),
                GrantValue {
                    file_ops: ops::READ,
                    tree_ops: 0,
                },
                Reason("mission line 3".into()),
            )],
            names: vec![],
            prefixes: vec![],
            sources: vec![],
            actions: vec![],
        },
        voters,
        policy: policy(),
        policy_set: pincer_model::labels::PolicySet::default(),
        policy_roots: Vec::new(),
        own_roots: Vec::new(),
        assets: None,
        tell: super::refusals::Tell::default(),
    }
}

fn key(slot: u32, ino: u64) -> GrantKey {
    GrantKey {
        slot,
        _pad: 0,
        dev: DEV,
        ino,
    }
}

/// A parked open by thread `tid` of `ino` (in the project directory, named
/// by `names`, leaf first).
fn parked(tid: u32, ino: u64, wanted: u32, names: &[&str]) -> AccessEvent {
    let names: Vec<&[u8]> = names.iter().map(|name| name.as_bytes()).collect();
    AccessEvent {
        cgroup_id: CGROUP,
        dev: DEV,
        ino,
        request_id: u64::from(tid) * 10,
        parent_ino: PROJECT,
        pid: tid,
        tgid: tid,
        slot: SLOT,
        ops: wanted,
        granted: 0,
        verdict: verdict::PARKED,
        ..pincer_model::events::example(b"cat", &names)
    }
}

fn bytes(event: &AccessEvent) -> &[u8] {
    // SAFETY: plain old data, read as bytes like the ring buffer hands it.
    unsafe {
        std::slice::from_raw_parts(
            (event as *const AccessEvent).cast::<u8>(),
            size_of::<AccessEvent>(),
        )
    }
}

#[tokio::test]
async fn an_allow_once_writes_a_one_shot_verdict_continues_the_task_and_audits_it() {
    let mut h = Harness::new(vec![Arc::new(Fixed(allow(Lifetime::Once, Extent::File)))]);
    let event = parked(41, SECRET, ops::READ, &["key", "secret"]);
    h.park_and_decide(&event).await;

    let kernel = h.kernel();
    assert_eq!(kernel.verdicts[&41], ALLOWED_ONCE);
    assert_eq!(kernel.resumed, [41]);
    // Once is not a grant: only the mission's grant is in the map.
    assert_eq!(kernel.grants.len(), 1);
    let records = h.records();
    assert_eq!(records.len(), 1, "{records:?}");
    let record = &records[0];
    assert_eq!(record["event"], "verdict");
    assert_eq!(record["verdict"], "allow");
    assert_eq!(record["lifetime"]["kind"], "once");
    assert_eq!(record["decided_by"], "mission");
    assert_eq!(record["tids"], serde_json::json!([41]));
    // What voters saw: the sanitized request.
    assert_eq!(record["request"]["path"], "…/secret/key");
    assert_eq!(record["request"]["comm"], "cat");
    assert_eq!(record["request"]["operation"], serde_json::json!(["read"]));
    assert_eq!(record["request"]["mission"], "fix-tests");
}

#[tokio::test]
async fn a_deny_writes_a_refusing_verdict() {
    let mut h = Harness::new(vec![Arc::new(Fixed(Vote::Deny {
        reason: "credentials are never part of this task".into(),
    }))]);
    h.park_and_decide(&parked(41, SECRET, ops::READ, &["key"]))
        .await;
    assert_eq!(h.kernel().verdicts[&41].allow, 0);
    assert_eq!(h.kernel().resumed, [41]);
    let records = h.records();
    assert_eq!(records[0]["verdict"], "deny");
    assert_eq!(
        records[0]["reason"],
        "credentials are never part of this task"
    );
}

#[tokio::test]
async fn a_person_answers_through_the_prompt_board() {
    let board = PromptBoard::new(None);
    let mut h = Harness::new(vec![Arc::new(PromptVoter::new(Arc::clone(&board)))]);
    h.twin
        .handle_record(bytes(&parked(41, SECRET, ops::READ, &["key"])))
        .unwrap();
    // The request waits on the board until someone answers.
    let waiting = asked(&board).await;
    assert_eq!(waiting.len(), 1);
    assert_eq!(h.twin.waiting().count(), 1);
    board
        .answer(waiting[0].id, HumanAnswer::Allow(Lifetime::Session))
        .unwrap();
    h.decide().await;
    assert_eq!(h.twin.waiting().count(), 0);
    assert_eq!(h.records()[0]["decided_by"], "prompt");
    assert_eq!(h.kernel().grants[&key_of(SECRET)].file_ops, ops::READ);
}

fn key_of(ino: u64) -> GrantKey {
    key(SLOT, ino)
}

#[tokio::test]
async fn a_session_allow_becomes_a_grant_and_answers_through_it() {
    let mut h = Harness::new(vec![Arc::new(Fixed(allow(
        Lifetime::Session,
        Extent::File,
    )))]);
    h.park_and_decide(&parked(41, SECRET, ops::READ | ops::WRITE, &["key"]))
        .await;
    let kernel = h.kernel();
    // The restarted syscall finds the grant: no one-shot verdict, the
    // pending entry removed, the task continued.
    assert!(kernel.verdicts.is_empty());
    assert_eq!(kernel.resumed, [41]);
    assert_eq!(
        kernel.grants[&key_of(SECRET)],
        GrantValue {
            file_ops: ops::READ | ops::WRITE,
            tree_ops: 0
        }
    );
    let listed = h.twin.vote_grants(SLOT);
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].path, "…/key");
    assert_eq!(listed[0].expires_in_seconds, None);
    assert_eq!(h.records()[0]["lifetime"]["kind"], "session");
}

#[tokio::test]
async fn a_vote_grant_on_a_mission_grant_adds_to_it_and_revoking_restores_it() {
    let mut h = Harness::new(vec![Arc::new(Fixed(allow(
        Lifetime::Session,
        Extent::File,
    )))]);
    // The mission grants read on GRANTED; a write is asked about.
    h.park_and_decide(&parked(41, GRANTED, ops::WRITE, &["notes"]))
        .await;
    assert_eq!(
        h.kernel().grants[&key_of(GRANTED)].file_ops,
        ops::READ | ops::WRITE
    );
    assert_eq!(h.twin.revoke(SLOT, Some("/elsewhere")).unwrap(), 0);
    assert_eq!(h.twin.revoke(SLOT, None).unwrap(), 1);
    assert_eq!(h.kernel().grants[&key_of(GRANTED)].file_ops, ops::READ);
    assert!(h.twin.vote_grants(SLOT).is_empty());
}

#[tokio::test]
async fn identical_requests_share_one_vote_and_one_verdict() {
    let mut h = Harness::new(vec![Arc::new(Fixed(allow(Lifetime::Once, Extent::File)))]);
    let first = parked(41, SECRET, ops::READ, &["key"]);
    let second = parked(42, SECRET, ops::READ, &["key"]);
    h.twin.handle_record(bytes(&first)).unwrap();
    h.twin.handle_record(bytes(&second)).unwrap();
    assert_eq!(h.twin.waiting().count(), 1);
    // Both answers wait: both tasks are held by a pidfd.
    assert_eq!(h.kernel().held, [41, 42]);
    h.decide().await;
    let kernel = h.kernel();
    assert_eq!(kernel.resumed, [41, 42]);
    // Each thread's verdict carries its own request id.
    assert_eq!(kernel.verdicts[&41].id, 410);
    assert_eq!(kernel.verdicts[&42].id, 420);
    let records = h.records();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0]["tids"], serde_json::json!([41, 42]));
    // One vote only: no second outcome is coming.
    assert!(h.results.try_recv().is_err());
}

#[tokio::test]
async fn a_tree_grant_releases_the_waiting_requests_it_covers() {
    // Allows the first read for its whole directory; never answers others.
    let mut h = Harness::new(vec![Arc::new(Scripted(|request: &Request| {
        (request.tid == 41).then(|| allow(Lifetime::Session, Extent::Tree))
    }))]);
    let a = parked(41, 901, ops::READ, &["a", "docs", "project"]);
    let b = parked(42, 902, ops::READ, &["b", "docs", "project"]);
    let mut elsewhere = parked(43, 903, ops::READ, &["c", "other", "project"]);
    elsewhere.parent_ino = PROJECT + 1;
    for event in [&a, &b, &elsewhere] {
        h.twin.handle_record(bytes(event)).unwrap();
    }
    h.decide().await;

    // The tree grant is on the object's directory (the event's parent).
    assert_eq!(h.kernel().grants[&key_of(PROJECT)].tree_ops, ops::READ);
    // 42 (same directory) is released by it; 43 (another) still waits.
    assert_eq!(h.kernel().resumed, [41, 42]);
    assert_eq!(h.twin.waiting().count(), 1);
    let records = h.records();
    assert_eq!(records[0]["extent"], "tree");
    assert_eq!(records[1]["decided_by"], "grant");
    assert_eq!(records[1]["tids"], serde_json::json!([42]));
    assert_eq!(
        records[1]["reason"],
        "covered by the grant made for request 410"
    );
}

#[tokio::test(start_paused = true)]
async fn a_ttl_grant_ends_on_time() {
    let mut h = Harness::new(vec![Arc::new(Fixed(allow(
        Lifetime::Ttl(Duration::from_secs(600)),
        Extent::File,
    )))]);
    h.park_and_decide(&parked(41, SECRET, ops::READ, &["key"]))
        .await;
    assert!(h.kernel().grants.contains_key(&key_of(SECRET)));
    assert_eq!(h.twin.vote_grants(SLOT)[0].expires_in_seconds, Some(600));
    let ends = h.twin.next_expiry().unwrap();
    tokio::time::sleep_until(ends - Duration::from_secs(1)).await;
    h.twin.expire().unwrap();
    assert!(h.kernel().grants.contains_key(&key_of(SECRET)));
    tokio::time::sleep_until(ends).await;
    h.twin.expire().unwrap();
    assert!(!h.kernel().grants.contains_key(&key_of(SECRET)));
    assert_eq!(h.twin.next_expiry(), None);
}

#[tokio::test]
async fn a_ttl_no_clock_can_reach_is_capped_not_a_panic() {
    // A voter that skips the readers' checks: the grant still ends.
    let mut h = Harness::new(vec![Arc::new(Fixed(allow(
        Lifetime::Ttl(Duration::from_secs(u64::MAX)),
        Extent::File,
    )))]);
    h.park_and_decide(&parked(41, SECRET, ops::READ, &["key"]))
        .await;
    assert!(h.kernel().grants.contains_key(&key_of(SECRET)));
    // Whole seconds left, counted a moment after the grant.
    let left = h.twin.vote_grants(SLOT)[0].expires_in_seconds.unwrap();
    let most = pincer_model::vote::MAX_TTL.as_secs();
    assert!((most - 2..=most).contains(&left), "{left}");
}

#[tokio::test]
async fn a_parked_task_of_no_agent_is_refused_at_once() {
    let mut h = Harness::new(vec![Arc::new(Fixed(allow(Lifetime::Once, Extent::File)))]);
    let mut event = parked(41, SECRET, ops::READ, &["key"]);
    event.cgroup_id = CGROUP + 1;
    h.twin.handle_record(bytes(&event)).unwrap();
    assert_eq!(h.kernel().verdicts[&41].allow, 0);
    assert_eq!(h.kernel().resumed, [41]);
    assert_eq!(h.twin.waiting().count(), 0);
}

#[tokio::test]
async fn releasing_an_agent_denies_what_it_waits_for_and_removes_its_grants() {
    // A voter that never answers.
    let board = PromptBoard::new(None);
    let mut h = Harness::new(vec![Arc::new(PromptVoter::new(board))]);
    h.twin
        .handle_record(bytes(&parked(41, SECRET, ops::READ, &["key"])))
        .unwrap();
    h.twin.release(CGROUP).unwrap();
    let kernel = h.kernel();
    assert_eq!(kernel.verdicts[&41].allow, 0);
    assert_eq!(kernel.resumed, [41]);
    assert!(kernel.agents.is_empty());
    assert!(kernel.grants.is_empty());
}

#[tokio::test]
async fn stopping_denies_every_waiting_request() {
    let board = PromptBoard::new(None);
    let mut h = Harness::new(vec![Arc::new(PromptVoter::new(board))]);
    for tid in [41, 42] {
        let event = parked(tid, SECRET + u64::from(tid), ops::READ, &["key"]);
        h.twin.handle_record(bytes(&event)).unwrap();
    }
    h.twin.stop_heartbeat().unwrap();
    h.twin.deny_all().unwrap();
    let kernel = h.kernel();
    assert_eq!(kernel.heartbeat, Some((0, 0)));
    let mut resumed = kernel.resumed.clone();
    resumed.sort_unstable();
    assert_eq!(resumed, [41, 42]);
    assert!(kernel.verdicts.values().all(|v| v.allow == 0));
}

#[tokio::test]
async fn confining_again_moves_the_cgroup_to_its_new_slot_in_one_update() {
    let mut h = Harness::new(vec![]);
    let slot = h.twin.new_slot();
    assert_eq!(slot, SLOT + 1);
    h.twin.confine(CGROUP, confinement(slot, vec![])).unwrap();
    let kernel = h.kernel();
    assert_eq!(kernel.agents[&CGROUP].slot, slot);
    assert_eq!(kernel.agents[&CGROUP].mode, pincer_common::mode::ASK);
    // The old slot's grants are gone, the new slot's written.
    assert!(!kernel.grants.contains_key(&key(SLOT, GRANTED)));
    assert!(kernel.grants.contains_key(&key(slot, GRANTED)));
}

#[tokio::test]
async fn the_agent_entry_carries_its_capabilities_never_one_no_agent_is_given() {
    use pincer_common::caps;
    let mut h = Harness::new(vec![]);
    let mut wide = confinement(SLOT, vec![]);
    wide.capabilities = caps::DEFAULT | caps::bit(caps::NET_ADMIN) | caps::bit(caps::SYS_ADMIN);
    h.twin.confine(CGROUP, wide).unwrap();
    assert_eq!(
        h.kernel().agents[&CGROUP].capabilities,
        caps::DEFAULT | caps::bit(caps::NET_ADMIN)
    );
}

#[tokio::test]
async fn a_new_twin_takes_over_after_the_slots_in_use() {
    let mut kernel = FakeKernel::default();
    let previous = pincer_common::Agent {
        slot: 7,
        mode: pincer_common::mode::ENFORCE,
        flags: 0,
        userns_home: 0,
        capabilities: 0,
    };
    kernel.agents.insert(99, previous);
    kernel.grants.insert(key(7, SECRET), GrantValue::default());
    let mut h = Harness::over(kernel);
    let slot = h.twin.new_slot();
    assert_eq!(slot, 8);
    h.twin.confine(CGROUP, confinement(slot, vec![])).unwrap();
    let before = h.twin.kernel_agents().unwrap();
    h.twin.take_over(&before).unwrap();
    // The previous daemon's agent and slot are gone; ours stay.
    assert_eq!(h.kernel().agents.keys().collect::<Vec<_>>(), [&CGROUP]);
    assert!(h.kernel().grants.keys().all(|k| k.slot == slot));
}

#[tokio::test]
async fn kernel_decisions_are_audited_as_decisions() {
    let mut h = Harness::new(vec![]);
    let mut event = parked(41, SECRET, ops::READ, &["key"]);
    event.verdict = verdict::DENIED;
    event.flags = event_flags::NO_TWIN;
    h.twin.handle_record(bytes(&event)).unwrap();
    // A short record is dropped, not misread.
    h.twin.handle_record(&bytes(&event)[..16]).unwrap();
    let records = h.records();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0]["event"], "decision");
    assert_eq!(records[0]["verdict"], "deny");
    assert!(
        records[0]["reason"]
            .as_str()
            .unwrap()
            .contains("no live twin"),
        "{records:?}"
    );
    assert!(h.kernel().resumed.is_empty());
}

#[tokio::test]
async fn refusals_are_told_in_the_list_kernel_denials_and_votes_alike() {
    let mut h = Harness::over(FakeKernel::default());
    let mut told = confinement(SLOT, vec![mission_rule(RuleVerdict::Deny)]);
    told.tell = super::refusals::Tell {
        stderr: false,
        dir: Some(h.dir.path().to_owned()),
    };
    h.twin.confine(CGROUP, told).unwrap();
    let mut denied = parked(41, SECRET, ops::READ, &["key"]);
    denied.verdict = verdict::DENIED;
    h.twin.handle_record(bytes(&denied)).unwrap();
    // Allowed in audit mode: nothing refused, nothing told.
    let mut audited = parked(41, SECRET, ops::WRITE, &["key"]);
    audited.verdict = verdict::AUDITED;
    h.twin.handle_record(bytes(&audited)).unwrap();
    // The mission's rule answers at once, while the record is handled.
    let handled = h
        .twin
        .handle_record(bytes(&parked(42, SECRET, ops::WRITE, &["key", "secret"])))
        .unwrap();
    assert_eq!(handled, Handled::Answered);
    let list = std::fs::read_to_string(h.dir.path().join(super::refusals::FILE_NAME)).unwrap();
    let lines: Vec<Vec<&str>> = list
        .lines()
        .skip(1)
        .map(|l| l.split('\t').collect())
        .collect();
    assert_eq!(lines.len(), 2, "{list}");
    assert_eq!(lines[0][1..4], ["read", "…/key", "file_open"], "{list}");
    assert!(lines[0][4].starts_with("no grant covers read"), "{list}");
    assert_eq!(
        lines[1][1..4],
        ["write", "…/secret/key", "file_open"],
        "{list}"
    );
    assert!(lines[1][4].contains("the rule on the secret"), "{list}");
}

#[test]
fn journal_entries_follow_parked_tasks_until_their_verdict() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let mut h = Harness::new(vec![Arc::new(Fixed(allow(Lifetime::Once, Extent::File)))]);
        h.twin.set_journal(Journal::new(dir.path().to_owned()));
        let event = parked(41, SECRET, ops::READ, &["key"]);
        h.twin.handle_record(bytes(&event)).unwrap();
        assert!(Path::new(&dir.path().join("41")).exists());
        h.decide().await;
        assert!(!dir.path().join("41").exists());
    });
}

#[tokio::test]
async fn a_vote_the_voters_have_at_once_is_answered_while_the_record_is_handled() {
    let mut h = Harness::new(vec![mission_rule(RuleVerdict::Allow(Lifetime::Once))]);
    let handled = h
        .twin
        .handle_record(bytes(&parked(41, SECRET, ops::READ, &["key", "secret"])))
        .unwrap();
    assert_eq!(handled, Handled::Answered);
    // Written and continued before the record was done with: no vote task,
    // nothing waiting, nothing coming through the channel.
    assert_eq!(h.kernel().verdicts[&41], ALLOWED_ONCE);
    assert_eq!(h.kernel().resumed, [41]);
    // Answered in the step that received it: continued by its numbers,
    // with no pidfd taken.
    assert!(h.kernel().held.is_empty());
    assert_eq!(h.twin.waiting().count(), 0);
    assert!(h.results.try_recv().is_err());
    // The same verdict line as a vote that was waited for: the sanitized
    // request, the ballots, the stages.
    let records = h.records();
    assert_eq!(records.len(), 1);
    let record = &records[0];
    assert_eq!(record["verdict"], "allow");
    assert_eq!(record["lifetime"]["kind"], "once");
    assert_eq!(record["decided_by"], "mission");
    assert_eq!(record["request"]["path"], "…/secret/key");
    assert_eq!(record["request"]["pid"], 41);
    assert_eq!(record["request"]["tid"], 41);
    assert_eq!(record["request"]["comm"], "cat");
    assert_eq!(record["votes"][0]["voter"], "mission");
    assert_eq!(record["votes"][0]["vote"], "allow");
    for stage in ["sanitize_us", "vote_us", "answer_us"] {
        assert!(record["stages"][stage].is_u64(), "{record}");
    }
}

#[tokio::test]
async fn a_deny_at_once_decides_without_asking_the_voters_that_would_be_waited_for() {
    let board = PromptBoard::new(None);
    let mut h = Harness::new(vec![prompt(&board), mission_rule(RuleVerdict::Deny)]);
    let handled = h
        .twin
        .handle_record(bytes(&parked(41, SECRET, ops::READ, &["key", "secret"])))
        .unwrap();
    assert_eq!(handled, Handled::Answered);
    assert_eq!(h.kernel().verdicts[&41].allow, 0);
    assert_eq!(h.kernel().resumed, [41]);
    // Nobody was asked.
    tokio::task::yield_now().await;
    assert!(board.pending().is_empty());
    let record = &h.records()[0];
    assert_eq!(record["verdict"], "deny");
    assert_eq!(record["decided_by"], "mission");
    assert_eq!(record["reason"], "the rule on the secret");
}

#[tokio::test]
async fn an_allow_at_once_still_waits_for_the_other_voters_and_a_later_deny_overrides_it() {
    let board = PromptBoard::new(None);
    let mut h = Harness::new(vec![
        mission_rule(RuleVerdict::Allow(Lifetime::Session)),
        prompt(&board),
    ]);
    let handled = h
        .twin
        .handle_record(bytes(&parked(41, SECRET, ops::READ, &["key", "secret"])))
        .unwrap();
    assert_eq!(handled, Handled::Waiting);
    assert!(h.kernel().resumed.is_empty());
    let asked = asked(&board).await;
    assert_eq!(asked.len(), 1);
    board.answer(asked[0].id, HumanAnswer::Deny(None)).unwrap();
    h.decide().await;
    assert_eq!(h.kernel().verdicts[&41].allow, 0);
    assert!(!h.kernel().grants.contains_key(&key_of(SECRET)));
    let record = &h.records()[0];
    assert_eq!(record["decided_by"], "prompt");
    // Both ballots, the one given at once first.
    assert_eq!(record["votes"][0]["voter"], "mission");
    assert_eq!(record["votes"][0]["vote"], "allow");
    assert_eq!(record["votes"][1]["voter"], "prompt");
    assert_eq!(record["votes"][1]["vote"], "deny");
}

#[tokio::test]
async fn a_grant_made_at_once_releases_the_waiting_requests_it_covers() {
    // Allows 41's read for its whole directory at once; others wait for an
    // answer that never comes.
    let mut h = Harness::new(vec![Arc::new(AtOnce(|request: &Request| {
        (request.tid == 41).then(|| allow(Lifetime::Session, Extent::Tree))
    }))]);
    let waits = parked(42, 902, ops::READ, &["b", "docs", "project"]);
    assert_eq!(
        h.twin.handle_record(bytes(&waits)).unwrap(),
        Handled::Waiting
    );
    let answered = parked(41, 901, ops::READ, &["a", "docs", "project"]);
    assert_eq!(
        h.twin.handle_record(bytes(&answered)).unwrap(),
        Handled::Answered
    );
    assert_eq!(h.kernel().grants[&key_of(PROJECT)].tree_ops, ops::READ);
    assert_eq!(h.kernel().resumed, [41, 42]);
    assert_eq!(h.twin.waiting().count(), 0);
    let records = h.records();
    assert_eq!(records[0]["tids"], serde_json::json!([41]));
    assert_eq!(records[0]["extent"], "tree");
    assert_eq!(records[1]["decided_by"], "grant");
    assert_eq!(records[1]["tids"], serde_json::json!([42]));
}

#[tokio::test]
async fn a_grant_that_cannot_be_written_still_answers_and_continues_the_task() {
    let mut h = Harness::new(vec![mission_rule(RuleVerdict::Allow(Lifetime::Session))]);
    h.kernel().fail_grants = true;
    let handled = h
        .twin
        .handle_record(bytes(&parked(41, SECRET, ops::READ, &["key", "secret"])));
    assert!(matches!(handled, Err(TwinError::Load(_))), "{handled:?}");
    // The voters allowed: this access is, once; the task is not left stopped.
    assert_eq!(h.kernel().verdicts[&41].allow, 1);
    assert_eq!(h.kernel().resumed, [41]);
    let record = &h.records()[0];
    assert_eq!(record["verdict"], "allow");
    assert_eq!(record["lifetime"]["kind"], "once");
}
