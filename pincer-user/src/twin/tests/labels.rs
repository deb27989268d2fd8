//! The twin over the fake kernel where labels come in: an agent's taint
//! and the actions reserved for the owner, sources and revocations, the
//! policy objects it inspects, and the check that the kernel still holds
//! what the twin wrote.

use super::*;

/// The kernel's taint entry of an agent that read `ino`, a source of
/// evidence.
fn lowered_by(h: &mut Harness, ino: u64) {
    h.kernel().taints.insert(
        CGROUP,
        pincer_common::Taint {
            level: pincer_common::authority::EVIDENCE,
            _pad: 0,
            dev: DEV,
            ino,
            origins: pincer_common::Origins::NONE,
        },
    );
}

#[tokio::test]
async fn a_tainting_read_is_audited_and_a_reserved_action_asks_the_owner_with_the_chain() {
    let board = PromptBoard::new(None);
    let mut h = Harness::new(allowed_but_for_the_owner(&board));
    // The kernel lowered the agent as it read the page, and reported it.
    lowered_by(&mut h, SECRET);
    let mut read = parked(41, SECRET, ops::READ, &["key", "secret"]);
    read.verdict = verdict::ALLOWED;
    read.granted = ops::READ;
    read.flags = event_flags::TAINT;
    h.twin.handle_record(bytes(&read)).unwrap();
    let records = h.records();
    assert_eq!(records[0]["taint"], "evidence", "{records:?}");

    // The reserved action parks for the owner alone, with what tainted it.
    let mut exec = parked(42, SECRET, ops::EXEC, &["deploy", "secret"]);
    // The kernel marks a parked request of an agent that has a level.
    exec.flags = event_flags::ACTION | event_flags::TAINTED;
    h.twin.handle_record(bytes(&exec)).unwrap();
    let waiting: Vec<&Request> = h.twin.waiting().collect();
    assert_eq!(waiting.len(), 1, "the mission's allow does not count");
    let request = waiting[0];
    assert_eq!(
        request.owner_only.as_deref(),
        Some(pincer_model::request::OWNER_ONLY_ACTION)
    );
    assert_eq!(request.taint.len(), 1);
    assert!(
        request.taint[0].starts_with("read ")
            && request.taint[0].ends_with("/secret/key (evidence)"),
        "{:?}",
        request.taint
    );
    assert!(
        request.why.contains("an action the mission reserves"),
        "{}",
        request.why
    );
}

#[tokio::test]
async fn the_taint_of_a_request_is_looked_up_only_when_the_kernel_marks_it() {
    let board = PromptBoard::new(None);
    let mut h = Harness::new(vec![Arc::new(PromptVoter::new(board))]);
    lowered_by(&mut h, SECRET);
    // Parked before the agent had a level: the map is not read, and the
    // request carries no chain.
    h.twin
        .handle_record(bytes(&parked(41, SECRET, ops::READ, &["key", "secret"])))
        .unwrap();
    // Parked with a level: the kernel's record names what lowered it.
    let mut later = parked(42, PROJECT, ops::READ, &["project"]);
    later.flags = event_flags::TAINTED;
    h.twin.handle_record(bytes(&later)).unwrap();
    let taints: HashMap<u32, Vec<String>> =
        h.twin.waiting().map(|r| (r.tid, r.taint.clone())).collect();
    assert_eq!(taints[&41], Vec::<String>::new());
    assert_eq!(taints[&42].len(), 1, "{taints:?}");
    assert!(taints[&42][0].ends_with("(evidence)"), "{taints:?}");
}

#[tokio::test]
async fn a_confinement_writes_its_sources_labels_and_its_actions() {
    let mut h = Harness::over(FakeKernel::default());
    let mut confinement = confinement(SLOT, vec![]);
    let source = pincer_common::ObjectKey { dev: DEV, ino: 77 };
    let label = pincer_common::Label {
        authority: pincer_common::authority::EVIDENCE,
        flags: pincer_common::label_flags::SOURCE,
        generation: 0,
        taint: pincer_common::authority::EVIDENCE,
        agent: 0,
        origins: pincer_common::Origins::NONE,
    };
    confinement
        .grants
        .sources
        .push((source, label, "/home/u/Downloads/page.html".into()));
    let action = pincer_common::Action {
        ops: ops::EXEC,
        authority: pincer_common::authority::USER,
    };
    confinement
        .grants
        .actions
        .push((key(SLOT, 88), action, "/usr/bin/curl".into()));
    h.twin.confine(CGROUP, confinement).unwrap();
    assert_eq!(h.kernel().labels.get(&source), Some(&label));
    assert_eq!(h.kernel().actions.get(&key(SLOT, 88)), Some(&action));
    // With nothing reported, the chain names the source by its path.
    lowered_by(&mut h, 77);
    assert_eq!(
        h.twin.taint_chain(CGROUP),
        ["read /home/u/Downloads/page.html (evidence)"]
    );
    // The agent's release takes its actions and its level away.
    h.twin.release(CGROUP).unwrap();
    assert!(h.kernel().actions.is_empty());
    assert!(h.kernel().taints.is_empty());
}

#[tokio::test]
async fn revocation_counters_come_back_and_an_earlier_copy_of_them_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = pincer_model::labels::Store::at(dir.path());
    let revoked = pincer_model::labels::Revoked {
        source: 0x51,
        counter: 2,
        path: "/home/u/Downloads".into(),
    };
    store
        .save_revocations(std::slice::from_ref(&revoked))
        .unwrap();
    let mut h = Harness::new(vec![]);
    // After a reboot the kernel holds none: the file's come back.
    h.twin.restore_labels(&store.read().unwrap()).unwrap();
    assert_eq!(h.kernel().revoked.get(&0x51), Some(&2));
    // Revoked once more while this ran; then the file is put back as it
    // was before.
    h.kernel().revoked.insert(0x51, 3);
    let error = h
        .twin
        .restore_labels(&store.read().unwrap())
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("/home/u/Downloads is 2 here but 3 in the kernel"),
        "{error}"
    );
    // A counter the file does not hold at all is the same.
    h.kernel().revoked.insert(0x51, 2);
    h.kernel().revoked.insert(0x77, 1);
    assert!(h.twin.restore_labels(&store.read().unwrap()).is_err());
}

#[tokio::test]
async fn revoked_content_asks_the_owner_alone() {
    let board = PromptBoard::new(None);
    let mut h = Harness::new(allowed_but_for_the_owner(&board));
    let mut read = parked(43, SECRET, ops::READ, &["key", "secret"]);
    read.flags = event_flags::REVOKED;
    h.twin.handle_record(bytes(&read)).unwrap();
    let waiting: Vec<&Request> = h.twin.waiting().collect();
    assert_eq!(waiting.len(), 1, "the mission's allow does not count");
    assert_eq!(
        waiting[0].owner_only.as_deref(),
        Some(pincer_model::request::OWNER_ONLY_REVOKED)
    );
    assert!(
        waiting[0].why.contains("revoked source"),
        "{}",
        waiting[0].why
    );
}

/// A parked change of git's configuration (`.git/config` in the project,
/// which the twin cannot read back here: its path is not the host's), by
/// the rule `entry` of the twin's set.
fn inspected(tid: u32) -> AccessEvent {
    let mut event = parked(tid, PROJECT, ops::DELETE, &["config", ".git"]);
    event.hook = hook::INODE_RENAME;
    event.flags = event_flags::POLICY | event_flags::INSPECT;
    event.policy_entry = policy_entry_of(".git/config");
    event.policy_step = 1;
    event
}

/// The number of the default set's rule written `pattern`.
fn policy_entry_of(pattern: &str) -> u32 {
    let set = PolicySet::with_defaults(&[]);
    let index = set
        .entries
        .iter()
        .position(|e| e.pattern.text() == pattern)
        .unwrap();
    index as u32 + 1
}

#[tokio::test]
async fn an_inspected_change_that_cannot_be_read_back_is_refused_at_once_in_enforce_mode() {
    let mut h = Harness::over(FakeKernel::default());
    let mut confined = confinement(
        SLOT,
        vec![Arc::new(Fixed(allow(Lifetime::Once, Extent::File)))],
    );
    confined.mode = Mode::Enforce;
    h.twin.confine(CGROUP, confined).unwrap();

    // Nobody votes: the inspection answers, and it cannot read a path
    // that is not whole.
    assert_eq!(
        h.twin.handle_record(bytes(&inspected(41))).unwrap(),
        Handled::Answered
    );
    assert_eq!(h.kernel().verdicts[&41].allow, 0);
    assert_eq!(h.kernel().verdicts[&41].pin_ino, 0);
    assert_eq!(h.kernel().resumed, [41]);
    let records = h.records();
    let verdict = records.iter().find(|r| r["event"] == "verdict").unwrap();
    assert_eq!(verdict["decided_by"], "inspection");
    assert_eq!(verdict["verdict"], "deny");
    assert!(
        verdict["reason"]
            .as_str()
            .unwrap()
            .contains("its path cannot be read back exactly"),
        "{verdict}"
    );
    // The request names the rule that made the object policy.
    let policy = &verdict["request"]["policy"];
    assert_eq!(policy["class"], "git");
    assert_eq!(policy["rule"], ".git/config");
    assert_eq!(policy["at"], "…/.git/config");
}

#[tokio::test]
async fn an_inspected_change_that_is_not_the_agents_goes_to_the_owner_in_ask_mode() {
    let board = PromptBoard::new(None);
    let mut h = Harness::new(vec![
        Arc::new(Fixed(allow(Lifetime::Session, Extent::Tree))),
        prompt(&board),
    ]);
    h.twin.handle_record(bytes(&inspected(41))).unwrap();
    let waiting: Vec<Request> = h.twin.waiting().cloned().collect();
    assert_eq!(waiting.len(), 1);
    assert!(
        waiting[0]
            .owner_only
            .as_deref()
            .is_some_and(|why| why.contains("cannot be read back")
                && why.ends_with("only the owner may allow it")),
        "{waiting:?}"
    );
    assert!(
        waiting[0]
            .why
            .contains("of a policy object (git: `.git/config` at ")
    );
}

#[test]
fn the_integrity_check_names_what_the_kernel_lost_or_changed() {
    let mut h = Harness::new(vec![]);
    h.kernel().programs = vec![("file_open", true), ("inode_create", true)];
    let none = HashMap::new();
    let (healthy, changed) = h.twin.check_integrity(&none).unwrap();
    assert!(healthy.healthy(), "{:?}", healthy.problems);
    assert!(!changed, "no problem before, none now");
    assert_eq!(healthy.programs, 2);
    assert_eq!(healthy.agents.len(), 1);
    let agent = &healthy.agents[0];
    assert_eq!((agent.grants, agent.live), (1, 1));
    assert_eq!(agent.digest, agent.live_digest);
    assert_eq!(agent.canary, None);

    // A vote grant is part of what the kernel must hold.
    h.twin.grants.add_vote(crate::twin::grants::VoteGrant {
        target: crate::twin::grants::Target::Inode(key(SLOT, SECRET)),
        path: "/p/secret".into(),
        ops: ops::READ,
        tree: false,
        expires: None,
    });
    let (lacking, changed) = h.twin.check_integrity(&none).unwrap();
    assert!(changed);
    assert_eq!(lacking.problems.len(), 1, "{:?}", lacking.problems);
    // The same problem again is not news: shown, not audited again.
    let (again, changed) = h.twin.check_integrity(&none).unwrap();
    assert_eq!((again.problems, changed), (lacking.problems.clone(), false));
    assert!(
        lacking.problems[0].contains("the kernel holds 1 grants")
            && lacking.problems[0].contains("pincer wrote 2"),
        "{:?}",
        lacking.problems
    );
    h.kernel().grants.insert(
        key(SLOT, SECRET),
        GrantValue {
            file_ops: ops::READ,
            tree_ops: 0,
        },
    );
    let (healed, changed) = h.twin.check_integrity(&none).unwrap();
    assert!(healed.healthy() && changed);

    // Same count, another value: the digest tells.
    h.kernel().grants.insert(
        key(SLOT, SECRET),
        GrantValue {
            file_ops: ops::READ | ops::WRITE,
            tree_ops: 0,
        },
    );
    let (changed, _) = h.twin.check_integrity(&none).unwrap();
    assert_eq!(changed.agents[0].grants, changed.agents[0].live);
    assert_ne!(changed.agents[0].digest, changed.agents[0].live_digest);
    assert_eq!(changed.problems.len(), 1, "{:?}", changed.problems);

    // The agent's entry gone, and a program detached.
    h.kernel().agents.clear();
    h.kernel().programs[1].1 = false;
    let (broken, _) = h.twin.check_integrity(&none).unwrap();
    let all = broken.problems.join("\n");
    assert!(
        all.contains("program inode_create is not attached"),
        "{all}"
    );
    assert!(
        all.contains("agent `fix-tests` (cgroup 7000) is not in the kernel's agent map"),
        "{all}"
    );
    assert_eq!(broken.programs, 1);
}
