//! Parking and the twin, proven in the guest kernel: a task that touches
//! what the mission does not grant is stopped, the request is voted on, and
//! the task resumes with the verdict — or with `EACCES` whenever nobody can
//! answer.

use std::{
    fs,
    process::Stdio,
    thread,
    time::{Duration, Instant},
};

use nix::{
    sys::signal::{Signal, kill},
    unistd::Pid,
};
use pincer_model::paths::{DEFAULT_SOCKET, RUN_DIR};
use pincer_tests::{
    EACCES, EPERM, Reaped, Scratch, Terminal, agent_cgroups, answer, asking_mission, id_of,
    keep_one_idle_set, leftovers_after_exit, pending, pincer_bin, probe_bin, process_state,
    read_stdout, spawn_agent_logged, text, wait_for, wait_new_request, wait_pending,
    webhook::{Behaviour, SECRET, webhook},
};
use serde_json::json;

fn spawn_agent(s: &Scratch, script: &str) -> Reaped {
    Reaped(
        s.command(&[], &["sh", "-c", script])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    )
}

fn finish(agent: &mut Reaped) -> (Option<i32>, Vec<String>) {
    let out = read_stdout(&mut agent.0);
    let status = agent.0.wait().unwrap().code();
    eprintln!("agent output:\n{out}");
    (status, out.lines().map(str::to_owned).collect())
}

/// Runs `pincer <args>` against the twin and checks that it was carried out.
#[track_caller]
fn answered(args: &[&str]) {
    let (code, text) = answer(args);
    assert_eq!(code, 0, "{text}");
}

/// A scratch tree and a mission that asks a person about everything
/// outside its project.
fn asking_person(name: &str) -> Scratch {
    let s = Scratch::new(name);
    s.asking_mission("voters = [\"prompt\"]");
    s
}

/// An agent under [`asking_person`] running the shell script that
/// `script` writes from the probe's path and the secret's.
fn asking_agent(name: &str, script: impl FnOnce(&str, &str) -> String) -> (Scratch, Reaped) {
    let s = asking_person(name);
    let probe = probe_bin().display().to_string();
    let agent = spawn_agent(&s, &script(&probe, &s.p("secret/key")));
    (s, agent)
}

#[test]
fn approved_once_then_the_next_identical_read_parks_again() {
    let (s, mut agent) = asking_agent("park-once", |probe, secret| {
        format!("{probe} read {secret}; {probe} read {secret}")
    });
    let secret = s.p("secret/key");
    let first = wait_pending(1).remove(0);
    assert_eq!(first["path"], secret);
    assert_eq!(first["operation"], serde_json::json!(["read"]));
    assert_eq!(first["comm"], "pincer-probe");
    assert_eq!(first["hook"], "file_open");
    answered(&["approve", &id_of(&first)]);

    let second = wait_new_request(&id_of(&first));
    assert_eq!(second["path"], secret);
    answered(&["deny", &id_of(&second), "--reason", "once was enough"]);

    let (status, lines) = finish(&mut agent);
    assert_eq!(lines, ["ok read 11", &format!("err {EACCES}")]);
    assert_eq!(status, Some(EACCES));
    s.assert_verdicts(&[
        json!({"verdict": "allow", "decided_by": "prompt", "lifetime": {"kind": "once"}}),
        json!({"verdict": "deny", "reason": "once was enough"}),
    ]);
}

/// The voters a verdict line lists, with their votes.
fn ballots(verdict: &serde_json::Value) -> Vec<(String, String)> {
    verdict["votes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (text(&b["voter"]), text(&b["vote"])))
        .collect()
}

#[test]
fn the_mission_s_rules_answer_at_once_and_a_deny_asks_nobody_else() {
    let s = Scratch::new("park-rules");
    fs::write(s.path("secret/other"), "other\n").unwrap();
    fs::write(s.path("secret/third"), "third\n").unwrap();
    let (key, other, third) = (s.p("secret/key"), s.p("secret/other"), s.p("secret/third"));
    let mission = |voters: &str| {
        s.asking_mission(&format!(
            "voters = {voters}\ntimeout = \"10m\"\n\n\
             [[vote.rule]]\npath = \"{key}\"\nverdict = \"allow\"\n\n\
             [[vote.rule]]\npath = \"{other}\"\nverdict = \"deny\"\nreason = \"not this task's\"\n"
        ));
    };
    let probe = probe_bin().display().to_string();
    let script = format!("{probe} read {key}; {probe} read {other}; {probe} read {third}; exit 0");

    // The rules alone: every request is decided as it parks, the one no
    // rule covers by the mission's default.
    mission("[\"mission\"]");
    let (status, lines) = finish(&mut spawn_agent(&s, &script));
    assert_eq!(status, Some(0));
    let denied = format!("err {EACCES}");
    assert_eq!(lines, ["ok read 11", &denied, &denied]);

    // With a person too: an allow by the rules still waits for the person,
    // a deny decides at once without asking.
    mission("[\"mission\", \"prompt\"]");
    let mut agent = spawn_agent(&s, &script);
    let asked = wait_pending(1).remove(0);
    assert_eq!(asked["path"], key);
    answered(&["approve", &id_of(&asked)]);
    let asked = wait_new_request(&id_of(&asked));
    assert_eq!(asked["path"], third, "the denied read was not asked about");
    answered(&["approve", &id_of(&asked)]);
    let (status, lines) = finish(&mut agent);
    assert_eq!(status, Some(0));
    assert_eq!(lines, ["ok read 11", &denied, "ok read 6"]);

    s.assert_verdicts(&[
        json!({"verdict": "allow", "decided_by": "mission", "lifetime": {"kind": "once"}}),
        json!({"verdict": "deny", "decided_by": "mission", "reason": "not this task's"}),
        json!({"verdict": "deny", "decided_by": "default"}),
        json!({"verdict": "allow", "decided_by": "mission"}),
        json!({"verdict": "deny", "decided_by": "mission", "reason": "not this task's"}),
        json!({"verdict": "allow", "decided_by": "prompt"}),
    ]);
    let ballot = |voter: &str, vote: &str| (voter.to_owned(), vote.to_owned());
    let verdicts = s.audit_events("verdict");
    assert_eq!(
        verdicts.iter().map(ballots).collect::<Vec<_>>(),
        [
            // A mission that lists no prompt still has the owner's, which
            // abstains at once on what is not the owner's alone.
            vec![ballot("mission", "allow"), ballot("prompt", "abstain")],
            vec![ballot("mission", "deny")],
            vec![ballot("mission", "abstain"), ballot("prompt", "abstain")],
            vec![ballot("mission", "allow"), ballot("prompt", "allow")],
            vec![ballot("mission", "deny")],
            vec![ballot("mission", "abstain"), ballot("prompt", "allow")],
        ]
    );
}

/// The executable a parked request names is the one the process runs at
/// that moment: read once per process and executable (the kernel names the
/// file in each event), and read again after an `exec` in the same process.
#[test]
fn a_parked_request_names_the_executable_the_process_runs_now() {
    let s = Scratch::new("park-exe");
    let key = s.p("secret/key");
    s.asking_mission(&format!(
        "voters = [\"mission\"]\n\n[[vote.rule]]\npath = \"{key}\"\nverdict = \"allow\"\n"
    ));
    let probe = probe_bin().display().to_string();
    // The shell reads the secret twice, then becomes the probe and reads it
    // again: one process, two executables.
    let script =
        format!("read a < {key} && read b < {key} && echo sh read; exec {probe} read {key}");
    let (status, lines) = finish(&mut spawn_agent(&s, &script));
    assert_eq!(status, Some(0));
    assert_eq!(lines, ["sh read", "ok read 11"]);

    let verdicts = s.audit_events("verdict");
    let named: Vec<(u64, String)> = verdicts
        .iter()
        .map(|v| {
            assert_eq!(v["verdict"], "allow", "{v}");
            (
                v["request"]["pid"].as_u64().unwrap(),
                text(&v["request"]["exe"]),
            )
        })
        .collect();
    let shell = fs::canonicalize("/bin/sh").unwrap().display().to_string();
    let probe = fs::canonicalize(&probe).unwrap().display().to_string();
    let pid = named[0].0;
    assert_eq!(named, [(pid, shell.clone()), (pid, shell), (pid, probe)]);
}

#[test]
fn a_session_approval_lets_later_reads_pass_without_parking() {
    let (s, mut agent) = asking_agent("park-session", |probe, secret| {
        format!("for i in 1 2 3; do {probe} read {secret}; done")
    });
    let first = wait_pending(1).remove(0);
    answered(&["approve", &id_of(&first), "--session"]);
    let (status, lines) = finish(&mut agent);
    assert_eq!(status, Some(0));
    assert_eq!(lines, ["ok read 11"; 3]);
    // Parked once only.
    s.assert_verdicts(&[json!({"lifetime": {"kind": "session"}})]);
}

#[test]
fn no_answer_is_eacces_at_the_deadline() {
    let s = Scratch::new("park-timeout");
    s.asking_mission("voters = [\"prompt\"]\ntimeout = \"2s\"");
    let start = Instant::now();
    let mut agent = spawn_agent(
        &s,
        &format!("{} read {}", probe_bin().display(), s.p("secret/key")),
    );
    let (status, lines) = finish(&mut agent);
    assert_eq!(lines, [format!("err {EACCES}")]);
    assert_eq!(status, Some(EACCES));
    assert!(start.elapsed() >= Duration::from_secs(2));
    s.assert_verdicts(&[json!({"verdict": "deny", "decided_by": "timeout"})]);
}

#[test]
fn a_stray_sigcont_parks_the_same_request_again() {
    let (s, mut agent) = asking_agent("park-sigcont", |probe, secret| {
        format!("{probe} read {secret}")
    });
    let request = wait_pending(1).remove(0);
    let pid = request["pid"].as_u64().unwrap() as u32;
    assert!(wait_for(Duration::from_secs(10), || process_state(pid) == Some('T')));
    for _ in 0..3 {
        kill(Pid::from_raw(pid as i32), Signal::SIGCONT).unwrap();
        thread::sleep(Duration::from_millis(300));
    }
    assert!(
        wait_for(Duration::from_secs(10), || process_state(pid) == Some('T')),
        "stopped again"
    );
    let now = pending();
    assert_eq!(now.len(), 1, "no duplicate request: {now:?}");
    assert_eq!(id_of(&now[0]), id_of(&request), "the same request");
    answered(&["approve", &id_of(&request)]);
    let (status, lines) = finish(&mut agent);
    assert_eq!((status, lines), (Some(0), vec!["ok read 11".to_owned()]));
    s.assert_verdicts(&[json!({})]);
}

#[test]
fn an_agent_cannot_answer_its_own_request() {
    let s = asking_person("park-self");
    let script = format!(
        "{probe} read {secret} & \
         sleep 2; {pincer} approve 1; echo approve=$?; {pincer} pending; echo pending=$?; \
         touch {tried}; wait",
        probe = probe_bin().display(),
        pincer = pincer_bin().display(),
        secret = s.p("secret/key"),
        tried = s.p("project/tried"),
    );
    let (mut agent, log) = spawn_agent_logged(&s, &script);
    let request = wait_pending(1).remove(0);
    assert!(
        wait_for(Duration::from_secs(60), || s.path("project/tried").exists()),
        "the agent tried to answer itself"
    );
    assert_eq!(
        pending().len(),
        1,
        "still waiting: the agent's approval was refused"
    );
    answered(&["deny", &id_of(&request)]);
    let (_, lines) = finish(&mut agent);
    let stderr = log.join().unwrap();
    eprintln!("agent stderr:\n{stderr}");
    assert!(lines.contains(&"approve=2".to_owned()), "{lines:?}");
    assert!(lines.contains(&"pending=2".to_owned()), "{lines:?}");
    assert!(
        stderr.contains("refused: the caller runs in agent cgroup"),
        "{stderr}"
    );
    assert!(lines.contains(&format!("err {EACCES}")), "{lines:?}");
}

#[test]
fn a_connection_flood_from_the_agent_cannot_keep_a_person_from_answering() {
    let s = Scratch::new("park-flood");
    // The runtime directory as `pincer run` makes it, made early so that
    // the mission can grant it.
    fs::create_dir_all(RUN_DIR).unwrap();
    fs::set_permissions(RUN_DIR, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    // The agent may even reach the socket's directory: the limits, not the
    // grants, are what keep the socket answering.
    s.mission(&format!(
        "{}\n[[grant]]\npath = \"{RUN_DIR}\"\nops = [\"read\", \"write\", \"create\"]\nextent = \"tree\"\n",
        asking_mission(&s.p("project"), "voters = [\"prompt\"]")
    ));
    let script = format!(
        "{probe} flood {socket} 2000 25 & sleep 3; {probe} read {secret}; wait",
        probe = probe_bin().display(),
        socket = DEFAULT_SOCKET,
        secret = s.p("secret/key"),
    );
    let (mut agent, log) = spawn_agent_logged(&s, &script);
    // Asked and answered through the socket while the flood holds its
    // connections open.
    let request = wait_pending(1).remove(0);
    let pid = request["pid"].as_u64().unwrap() as u32;
    assert_eq!(process_state(pid), Some('T'), "the parked task is stopped");
    answered(&["approve", &id_of(&request)]);
    let (status, lines) = finish(&mut agent);
    assert_eq!(status, Some(0), "{lines:?}");
    assert!(lines.contains(&"ok read 11".to_owned()), "{lines:?}");
    let flood = lines
        .iter()
        .find(|l| l.starts_with("ok flood "))
        .expect("the flood ran to its end");
    let connected: usize = flood.split_whitespace().nth(2).unwrap().parse().unwrap();
    // Far more than the 16 connections one agent cgroup may keep: the
    // server took them and let go of the excess at once.
    assert!(connected > 100, "{flood}");
    // Refusals are logged a few times, not once per connection.
    let log = log.join().unwrap();
    let refusals = log.matches("refused a caller").count();
    assert!(
        (1..=40).contains(&refusals),
        "{refusals} refusal lines for {connected} connections"
    );
}

#[test]
fn an_exclusive_create_parked_then_approved_succeeds() {
    let s = asking_person("park-create");
    let target = s.p("secret/new-file");
    let mut agent = spawn_agent(&s, &format!("{} create {target}", probe_bin().display()));
    let request = wait_pending(1).remove(0);
    assert_eq!(request["hook"], "inode_create");
    assert_eq!(request["path"], target);
    assert_eq!(request["operation"], serde_json::json!(["create"]));
    assert!(
        !s.path("secret/new-file").exists(),
        "nothing created while parked"
    );
    answered(&["approve", &id_of(&request)]);
    let (status, lines) = finish(&mut agent);
    assert_eq!((status, lines), (Some(0), vec!["ok created".to_owned()]));
    assert!(s.path("secret/new-file").exists());
}

#[test]
fn a_killed_twin_leaves_no_task_stopped() {
    // What is left is checked below: none of the earlier tests' either,
    // but for the set this run takes over.
    keep_one_idle_set();
    let (_s, mut agent) = asking_agent("park-twin-killed", |probe, secret| {
        let project = secret.replace("secret/key", "project/a.txt");
        format!("{probe} read {secret}; {probe} read {project}; {probe} read {secret}")
    });
    wait_pending(1);
    let killed = Instant::now();
    kill(Pid::from_raw(agent.0.id() as i32), Signal::SIGKILL).unwrap();
    // The agent carries on: its parked read fails, its granted read works,
    // and a new ungranted read is refused at once instead of parking.
    let (_, lines) = finish(&mut agent);
    assert_eq!(
        lines,
        [
            format!("err {EACCES}"),
            "ok read 6".to_owned(),
            format!("err {EACCES}")
        ]
    );
    assert!(
        killed.elapsed() < Duration::from_secs(20),
        "no hang: {:?}",
        killed.elapsed()
    );
    assert!(
        wait_for(Duration::from_secs(20), || agent_cgroups().is_empty()),
        "the watchdog removes the cgroup"
    );
    assert_eq!(leftovers_after_exit(), Vec::<String>::new());
}

#[test]
fn a_ring_buffer_overflow_denies_every_overflowed_request() {
    let s = Scratch::new("park-overflow");
    s.asking_mission("voters = [\"prompt\"]\ntimeout = \"2s\"");
    for i in 0..40 {
        fs::write(s.path(&format!("secret/{i}")), "x").unwrap();
    }
    let script = format!(
        "touch {ready}; while [ ! -e {go} ]; do sleep 0.05; done; \
         for i in $(seq 0 39); do {probe} read {secret}/$i > {out}/out.$i & done; wait",
        ready = s.p("project/ready"),
        go = s.p("go"),
        probe = probe_bin().display(),
        secret = s.p("secret"),
        out = s.p("project"),
    );
    // A ring of one page holds three events: the rest of the burst overflows.
    let mut agent = Reaped(
        // Programs with a ring this small fit no other test's run: they go
        // at the end instead of waiting idle.
        s.command(&["--linger", "0"], &["sh", "-c", &script])
            .env("PINCER_RING_BYTES", "4096")
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    assert!(wait_for(Duration::from_secs(250), || s
        .path("project/ready")
        .exists()));
    // Stop the twin so nothing drains the ring during the burst.
    let twin = Pid::from_raw(agent.0.id() as i32);
    kill(twin, Signal::SIGSTOP).unwrap();
    fs::write(s.path("go"), "").unwrap();
    let denied_at_once = || {
        (0..40)
            .filter(|i| {
                fs::read_to_string(s.path(&format!("project/out.{i}")))
                    .is_ok_and(|o| o.trim() == format!("err {EACCES}"))
            })
            .count()
    };
    wait_for(Duration::from_millis(1500), || denied_at_once() >= 30);
    kill(twin, Signal::SIGCONT).unwrap();
    assert_eq!(agent.0.wait().unwrap().code(), Some(0));
    for i in 0..40 {
        let out = fs::read_to_string(s.path(&format!("project/out.{i}"))).unwrap();
        assert_eq!(out.trim(), format!("err {EACCES}"), "reader {i}");
    }
    let counters = s
        .audit()
        .into_iter()
        .find(|l| l["event"] == "counters")
        .expect("the run ends with its counters");
    eprintln!("{counters}");
    assert!(counters["counters"]["ringbuf_full"].as_u64().unwrap() >= 1);
    assert_eq!(counters["counters"]["verdict_allow"], 0);
}

#[test]
fn the_audit_chain_verifies_and_a_one_byte_edit_is_found() {
    let s = Scratch::new("audit-chain");
    s.asking_mission("voters = [\"prompt\"]\ntimeout = \"1s\"");
    let probe = probe_bin();
    let out = s.run(&[
        "sh",
        "-c",
        &format!(
            "{0} read {1}; {0} create {2}",
            probe.display(),
            s.p("secret/key"),
            s.p("secret/x")
        ),
    ]);
    assert_eq!(out.status.code(), Some(EACCES));
    let log = s.audit_path();
    let verify = |log: &std::path::Path| {
        let out = std::process::Command::new(pincer_bin())
            .args(["audit", "verify"])
            .arg(log)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (code, text) = verify(&log);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("intact"), "{text}");

    let original = fs::read(&log).unwrap();
    let second_line = original.iter().position(|&b| b == b'\n').unwrap() + 1;
    let mut edited = original.clone();
    // One byte inside the second line's path.
    let at = second_line
        + String::from_utf8_lossy(&original[second_line..])
            .find("secret")
            .unwrap();
    edited[at] = b'S';
    fs::write(&log, &edited).unwrap();
    let (code, text) = verify(&log);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("line 2"), "{text}");

    // Removing the first line breaks the chain at the new first line.
    let removed = &original[second_line..];
    fs::write(&log, removed).unwrap();
    let (code, text) = verify(&log);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("line 1"), "{text}");
}

#[test]
fn only_a_correctly_signed_webhook_answer_counts() {
    let s = Scratch::new("webhook");
    let hook = webhook();
    fs::write(s.path("webhook.key"), SECRET).unwrap();
    s.asking_mission(&format!(
            "voters = [\"webhook\"]\ntimeout = \"3s\"\n\n[vote.webhook]\nurl = \"{}\"\nsecret_file = \"{}\"\n",
            hook.url,
            s.p("webhook.key")
        ));
    let read = |behaviour| {
        *hook.behaviour.lock().unwrap() = behaviour;
        let before = *hook.requests.lock().unwrap();
        let code = s.probe("read @secret/key");
        assert_eq!(
            *hook.requests.lock().unwrap(),
            before + 1,
            "the webhook was asked"
        );
        code
    };
    assert_eq!(read(Behaviour::Allow), 0, "a signed allow");
    assert_eq!(read(Behaviour::WrongSignature), EACCES, "wrong signature");
    assert_eq!(read(Behaviour::WrongId), EACCES, "wrong request id");
    assert_eq!(read(Behaviour::Replay), EACCES, "a replayed answer");
    assert_eq!(read(Behaviour::Late), EACCES, "a late answer");
    let verdicts = s.audit_events("verdict");
    assert_eq!(verdicts.len(), 5);
    assert_eq!(verdicts[0]["decided_by"], "webhook");
    for v in &verdicts[1..] {
        assert_eq!(v["verdict"], "deny", "{v}");
    }
}

/// The pids of `pincer-probe` processes that are stopped now.
fn stopped_probes() -> usize {
    fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| c.trim() == "pincer-probe")
                && process_state(*pid) == Some('T')
        })
        .count()
}

#[test]
fn identical_requests_share_one_prompt_and_one_verdict() {
    let (s, mut agent) = asking_agent("park-merge", |probe, secret| {
        format!("{probe} read {secret} & {probe} read {secret} & wait")
    });
    assert!(
        wait_for(Duration::from_secs(250), || stopped_probes() == 2),
        "both readers are parked"
    );
    let requests = wait_pending(1);
    answered(&["approve", &id_of(&requests[0])]);
    let (status, lines) = finish(&mut agent);
    assert_eq!(status, Some(0));
    assert_eq!(lines, ["ok read 11", "ok read 11"]);
    let verdicts = s.audit_events("verdict");
    assert_eq!(verdicts.len(), 1, "{verdicts:?}");
    assert_eq!(verdicts[0]["tids"].as_array().unwrap().len(), 2);
}

#[test]
fn a_session_grant_releases_the_waiting_requests_it_covers() {
    let s = Scratch::new("park-release");
    let hook = webhook();
    *hook.behaviour.lock().unwrap() = Behaviour::TreeFirst;
    fs::write(s.path("webhook.key"), SECRET).unwrap();
    fs::write(s.path("secret/other"), "other\n").unwrap();
    s.asking_mission(&format!(
            "voters = [\"webhook\"]\ntimeout = \"5s\"\nmax_extent = \"tree\"\n\n[vote.webhook]\nurl = \"{}\"\nsecret_file = \"{}\"\n",
            hook.url,
            s.p("webhook.key")
        ));
    let script = format!(
        "{probe} read {a} > {out}/a & sleep 0.5; {probe} read {b} > {out}/b & wait",
        probe = probe_bin().display(),
        a = s.p("secret/key"),
        b = s.p("secret/other"),
        out = s.p("project"),
    );
    let out = s.run(&["sh", "-c", &script]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(s.read("project/a"), "ok read 11\n");
    // Its own vote gets no answer before the deadline (a deny): only the
    // release by the first request's tree grant lets the second reader in.
    assert_eq!(s.read("project/b"), "ok read 6\n");
    s.assert_verdicts(&[
        json!({"decided_by": "webhook", "extent": "tree"}),
        json!({"decided_by": "grant", "verdict": "allow"}),
    ]);
}

/// Starts `pincer run` of `sh -c script` on `terminal`, as from an
/// interactive shell.
fn on_terminal(s: &Scratch, terminal: &mut Terminal, script: &str) -> Reaped {
    let mut command = s.command(&[], &["sh", "-c", script]);
    terminal.attach(&mut command, true);
    Reaped(command.spawn().unwrap())
}

#[test]
fn a_person_answers_at_the_terminal_prompt_with_the_request_s_code() {
    let s = asking_person("park-terminal");
    let mut terminal = Terminal::new();
    let script = format!(
        "{0} read {1}; {0} read {1}",
        probe_bin().display(),
        s.p("secret/key")
    );
    let mut run = on_terminal(&s, &mut terminal, &script);
    assert!(
        terminal.read_until("[o]nce / [s]ession / [d]eny, with the code "),
        "the prompt appears: {:?}",
        terminal.screen
    );
    assert!(
        terminal
            .screen
            .contains(&format!("wants to read {}", s.p("secret/key"))),
        "{}",
        terminal.screen
    );
    let code = terminal.last_code().expect("the prompt shows a code");
    let request = wait_pending(1).remove(0);
    assert!(
        !request.to_string().contains(&code),
        "the code is not in the listed request: {request}"
    );
    terminal.type_text(&format!("s {code}\n"));
    assert!(
        // The twin's own line may come between them.
        terminal.read_until_times("ok read 11\r\n", 2),
        "both reads pass after one session answer: {:?}",
        terminal.screen
    );
    assert!(
        terminal.screen.contains(&format!(
            "request {} allowed for the session",
            id_of(&request)
        )),
        "{}",
        terminal.screen
    );
    assert_eq!(run.0.wait().unwrap().code(), Some(0));
    s.assert_verdicts(&[json!({"decided_by": "prompt", "lifetime": {"kind": "session"}})]);
    let log = fs::read_to_string(s.audit_path()).unwrap();
    assert!(!log.contains(&code), "the code is not in the audit log");
}

#[test]
fn an_answer_without_the_request_s_code_answers_nothing() {
    let s = asking_person("park-terminal-inject");
    let mut terminal = Terminal::new();
    let probe = probe_bin();
    // The agent parks a read, then, once the prompt is up, pushes `o` and
    // a newline into the terminal it shares with the prompt, through both
    // system call entries.
    let script = format!(
        "{probe} read {secret} > {out}/read & \
         while [ ! -e {go} ]; do sleep 0.05; done; \
         {probe} sti 0 'o\\n' , sti32 0 'o\\n' > {out}/injected; touch {out}/tried; wait",
        probe = probe.display(),
        secret = s.p("secret/key"),
        out = s.p("project"),
        go = s.p("go"),
    );
    let mut run = on_terminal(&s, &mut terminal, &script);
    assert!(
        terminal.read_until("with the code "),
        "the prompt appears: {:?}",
        terminal.screen
    );
    let code = terminal.last_code().expect("the prompt shows a code");
    let request = wait_pending(1).remove(0);
    fs::write(s.path("go"), "").unwrap();
    assert!(
        wait_for(Duration::from_secs(60), || s.path("project/tried").exists()),
        "the agent tried to type its answer"
    );
    assert_eq!(
        s.read("project/injected"),
        format!("err {EPERM}\nerr {EPERM}\n"),
        "the kernel refused the keystrokes"
    );
    // What an agent would type if it could: an answer alone, the request's
    // id, a guessed code. None answers.
    for line in ["o", &format!("o {}", id_of(&request)), "s abcde"] {
        terminal.type_text(&format!("{line}\n"));
        assert!(
            terminal.read_until("nothing answered"),
            "{line:?} is refused: {:?}",
            terminal.screen
        );
        terminal.screen.clear();
        assert_eq!(pending().len(), 1, "still waiting after {line:?}");
    }
    terminal.type_text(&format!("d {code}\n"));
    assert!(
        terminal.read_until(&format!("request {} denied", id_of(&request))),
        "{:?}",
        terminal.screen
    );
    assert_eq!(run.0.wait().unwrap().code(), Some(0));
    assert_eq!(s.read("project/read"), format!("err {EACCES}\n"));
    s.assert_verdicts(&[json!({"verdict": "deny", "decided_by": "prompt"})]);
    let refused: Vec<_> = s
        .audit()
        .into_iter()
        .filter(|l| l["event"] == "decision" && l["verdict"] == "deny")
        .filter(|l| l["hook"].as_str().unwrap().starts_with("file_ioctl"))
        .collect();
    assert_eq!(refused.len(), 2, "{refused:#?}");
    for line in refused {
        let reason = line["reason"].as_str().unwrap();
        assert!(
            reason.contains("typing into a terminal (TIOCSTI)"),
            "{reason}"
        );
    }
}
