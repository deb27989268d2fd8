//! The first enforcement slice, proven in the guest kernel: grants by
//! identity and extent, `EACCES` for everything else, audit mode, and clean
//! teardown.

use std::{fs, path::Path, process::Command, time::Duration};

use pincer_tests::{
    EACCES, READ_ONLY, READ_WRITE, READ_WRITE_CREATE, Reaped, Scratch, Terminal, agent_cgroups,
    idle_sets, keep_one_idle_set, leftovers_after_exit, mission_granting, pincer_bin,
    pincer_kernel_objects, probe_bin, stdout_lines, tree_mission, wait_for,
};

#[test]
fn doctor_says_the_guest_can_enforce() {
    // A run that ends cleanly leaves its programs idle (it takes over the
    // set an earlier test left, or loads one): the doctor finds them
    // attached and needs load nothing to know this kernel takes them.
    keep_one_idle_set();
    assert!(
        !Path::new("/sys/fs/bpf/pincer").exists(),
        "no daemon's pins for the doctor to find first"
    );
    let s = Scratch::with_project_grant("doctor", READ_ONLY);
    assert_eq!(
        s.run_probe(&[], &["read @project/a.txt"]).status.code(),
        Some(0)
    );
    let idle = idle_sets();
    assert_eq!(idle.len(), 1, "{idle:?}");
    let loaded = pincer_program_ids();

    let out = Command::new(pincer_bin()).arg("doctor").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    eprintln!("{text}");
    assert!(out.status.success(), "doctor failed:\n{text}");
    assert!(text.contains("pincer can enforce"));
    assert!(
        text.contains(&format!(
            "the programs of this build are attached here (pinned under /sys/fs/bpf/pincer-idle/{})",
            idle[0]
        )),
        "{text}"
    );
    assert_eq!(pincer_program_ids(), loaded, "the doctor loaded nothing");
    assert_eq!(idle_sets(), idle, "and took nothing");
}

#[test]
fn granted_tree_allows_read_write_create() {
    let s = Scratch::with_project_grant("tree-rwc", READ_WRITE_CREATE);
    s.assert_probes(&[
        ("read @project/a.txt", 0),
        ("read @project/src/main.rs", 0),
        ("write @project/a.txt changed\n", 0),
        ("create @project/src/new.rs", 0),
        ("list @project/src", 0),
    ]);
    assert_eq!(s.read("project/a.txt"), "changed\n");
    assert!(s.path("project/src/new.rs").exists());
}

#[test]
fn tree_grant_gives_only_its_operations() {
    let s = Scratch::with_project_grant("tree-ro", READ_ONLY);
    s.assert_probes(&[
        ("read @project/a.txt", 0),
        ("write @project/a.txt x", EACCES),
        ("create @project/new.txt", EACCES),
    ]);
    assert_eq!(s.read("project/a.txt"), "alpha\n");
    s.assert_absent("project/new.txt");
}

#[test]
fn file_extent_covers_only_that_file() {
    let s = Scratch::new("file-extent");
    s.mission(&mission_granting(&s.p("project/a.txt"), READ_WRITE, "file"));
    s.assert_probes(&[
        ("read @project/a.txt", 0),
        ("append @project/a.txt more\n", 0),
        ("read @project/b.txt", EACCES),
        ("list @project", EACCES),
        ("create @project/c.txt", EACCES),
    ]);
    s.assert_absent("project/c.txt");
}

#[test]
fn outside_the_grants_is_denied_and_unchanged() {
    let s = Scratch::with_project_grant("outside", READ_WRITE_CREATE);
    s.assert_probes(&[
        ("read @secret/key", EACCES),
        ("write @secret/key pwned", EACCES),
        ("append @secret/key pwned", EACCES),
        ("create @secret/new", EACCES),
        ("create-write @planted x", EACCES),
    ]);
    s.assert_secret_unchanged();
    s.assert_absent("secret/new");
    s.assert_absent("planted");

    // Every denial is audited with the path, the operation and the reason.
    let audit = s.audit();
    let read_denial = audit
        .iter()
        .find(|l| l["verdict"] == "deny" && l["operation"] == serde_json::json!(["read"]))
        .expect("a read denial is audited");
    assert_eq!(read_denial["path"], s.p("secret/key"));
    assert_eq!(read_denial["comm"], "pincer-probe");
    assert_eq!(read_denial["hook"], "file_open");
    assert_eq!(read_denial["reason"], "no grant covers read");
    assert_eq!(read_denial["mission"], "test");
    let create_denial = audit
        .iter()
        .find(|l| l["hook"] == "inode_create" && l["path"] == s.p("secret/new"))
        .expect("a create denial is audited");
    assert_eq!(create_denial["verdict"], "deny");
    assert_eq!(create_denial["operation"], serde_json::json!(["create"]));
}

#[test]
fn symlink_in_tree_to_outside_gives_nothing() {
    let s = Scratch::new("symlink");
    std::os::unix::fs::symlink(s.path("secret/key"), s.path("project/key-link")).unwrap();
    std::os::unix::fs::symlink(s.path("secret"), s.path("project/secret-dir")).unwrap();
    s.project_mission(READ_WRITE_CREATE);
    s.assert_probes(&[
        ("read @project/key-link", EACCES),
        ("write @project/key-link x", EACCES),
        ("read @project/secret-dir/key", EACCES),
        ("create @project/secret-dir/new", EACCES),
    ]);
    s.assert_secret_unchanged();
    s.assert_absent("secret/new");
}

#[test]
fn grant_for_a_file_that_does_not_exist_yet() {
    let s = Scratch::new("future-file");
    s.mission(&format!(
        "[mission]\nname = \"write the report\"\n[[grant]]\npath = \"{}\"\nops = [\"create\", \"write\", \"read\"]\n",
        s.p("project/report.md")
    ));
    s.assert_absent("project/report.md");
    let r = s.probes(&[
        "create-write @project/report.md done\n",
        "read @project/report.md",
        // The name grant is for that name only.
        "create @project/other.md",
    ]);
    assert_eq!(r, [0, 0, EACCES]);
    assert_eq!(s.read("project/report.md"), "done\n");
    s.assert_absent("project/other.md");
}

/// Starts `command`, a `pincer run`, and waits until its agent cgroup
/// appears.
fn spawn_confined(command: &mut Command) -> Reaped {
    let agent = Reaped(command.spawn().unwrap());
    assert!(
        wait_for(Duration::from_secs(250), || !agent_cgroups().is_empty()),
        "the agent cgroup appears"
    );
    agent
}

#[test]
fn process_outside_the_cgroup_is_unaffected() {
    let s = Scratch::with_project_grant("bystander", READ_ONLY);
    let mut agent = spawn_confined(
        s.command(&[], &[probe_bin().to_str().unwrap(), "sleep", "5"])
            .stdout(std::process::Stdio::null()),
    );
    // This test process is outside every agent cgroup.
    s.assert_secret_unchanged();
    fs::write(s.path("secret/key2"), "outside writes\n").unwrap();
    let out = Command::new(probe_bin())
        .args(["read", &s.p("secret/key")])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    // The run ends by itself, cleanly, and leaves its programs idle for the
    // next test (killed, it would leave them confining its agent's cgroup).
    assert!(agent.0.wait().unwrap().success());
}

#[test]
fn exit_status_of_the_command_is_returned() {
    let s = Scratch::with_project_grant("exit-status", READ_ONLY);
    assert_eq!(s.run(&["sh", "-c", "exit 7"]).status.code(), Some(7));
    // Killed by a signal: 128 + signal, as a shell reports it.
    assert_eq!(s.run(&["sh", "-c", "kill -9 $$"]).status.code(), Some(137));
    // Not found: 127.
    assert_eq!(s.run(&["/no/such/program"]).status.code(), Some(127));
}

#[test]
fn baseline_none_cannot_even_exec() {
    let s = Scratch::new("no-baseline");
    s.mission(&format!(
        "{}\n[defaults]\nbaseline = \"none\"\n",
        tree_mission(&s.p("project"), READ_ONLY)
    ));
    // The probe lives in /bin, which only the runtime baseline grants.
    assert_eq!(
        s.run_probe(&[], &["read @project/a.txt"]).status.code(),
        Some(126)
    );
}

#[test]
fn nothing_is_left_behind_after_exit() {
    let s = Scratch::with_project_grant("teardown-exit", READ_ONLY);
    keep_one_idle_set();
    assert_eq!(
        s.run_with(&["--linger", "0"], &["sh", "-c", "sleep 0.2 & exit 0"])
            .status
            .code(),
        Some(0)
    );
    assert_eq!(agent_cgroups(), Vec::<std::path::PathBuf>::new());
    assert_eq!(idle_sets(), Vec::<String>::new());
    assert_eq!(leftovers_after_exit(), Vec::<String>::new());
}

/// The programs' ids, as the kernel lists them.
fn pincer_program_ids() -> Vec<u32> {
    let hooks: Vec<&str> = pincer_common::hook::ALL.iter().map(|h| h.name).collect();
    let mut ids: Vec<u32> = aya::programs::loaded_programs()
        .flatten()
        .filter(|p| {
            let name = p.name_as_str().unwrap_or_default();
            hooks.iter().any(|hook| hook[..hook.len().min(15)] == *name)
        })
        .map(|p| p.id())
        .collect();
    ids.sort_unstable();
    ids
}

#[test]
fn a_clean_run_leaves_its_programs_idle_for_the_next_run_which_starts_clean() {
    let s = Scratch::new("linger");
    // The first run loads the programs or takes over the one set left.
    keep_one_idle_set();
    // The first run may write the whole project.
    s.project_mission(READ_WRITE);
    let first = s.run_probe(&["--linger", "20s"], &["write @project/a.txt"]);
    assert_eq!(first.status.code(), Some(0));
    // Its programs stay attached, idle: one set, no agent cgroup.
    assert_eq!(idle_sets().len(), 1, "{:?}", idle_sets());
    assert_eq!(agent_cgroups(), Vec::<std::path::PathBuf>::new());
    let loaded = pincer_program_ids();
    assert!(!loaded.is_empty());

    // The next run takes them over (not one program more is loaded) and
    // starts from nothing the first one had: only its own grant, counters
    // from zero.
    s.mission(&tree_mission(&s.p("project/src"), READ_ONLY));
    let second = s.run_probe(
        &["--linger", "3s"],
        &[
            "write @project/a.txt",
            "read @project/a.txt",
            "read @project/src/main.rs",
            "read @secret/key",
        ],
    );
    assert_eq!(
        stdout_lines(&second),
        [
            format!("err {EACCES}"),
            format!("err {EACCES}"),
            "ok read 13".to_owned(),
            format!("err {EACCES}"),
        ]
    );
    let counters = s.audit_events("counters");
    assert_eq!(counters.len(), 2, "one counters line per run");
    assert_eq!(counters[0]["counters"]["denied"], 0, "{}", counters[0]);
    let denied = &counters[1]["counters"]["denied"];
    assert_eq!(denied, 3, "the second run's own refusals: {}", counters[1]);
    assert_eq!(pincer_program_ids(), loaded, "no program was loaded again");

    // Once its linger time is up, the last run's watchdog removes them.
    assert_eq!(idle_sets().len(), 1, "{:?}", idle_sets());
    assert!(
        wait_for(Duration::from_secs(60), || idle_sets().is_empty()
            && pincer_program_ids().is_empty()),
        "left: {:?} {:?}",
        idle_sets(),
        pincer_program_ids()
    );
    assert_eq!(leftovers_after_exit(), Vec::<String>::new());
}

#[test]
fn nothing_is_left_behind_after_sigterm() {
    let s = Scratch::with_project_grant("teardown-term", READ_ONLY);
    keep_one_idle_set();
    let mut child = spawn_confined(&mut s.command(
        &["--linger", "0"],
        &[probe_bin().to_str().unwrap(), "sleep", "60"],
    ));
    assert!(
        !pincer_kernel_objects().is_empty(),
        "programs are loaded while it runs"
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.0.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = child.0.wait().unwrap();
    // The probe died of the forwarded SIGTERM: 128 + 15.
    assert_eq!(status.code(), Some(143));
    assert_eq!(agent_cgroups(), Vec::<std::path::PathBuf>::new());
    assert_eq!(leftovers_after_exit(), Vec::<String>::new());
}

#[test]
fn audit_mode_denies_nothing_and_reports() {
    let s = Scratch::with_project_grant("audit-mode", READ_ONLY);
    let out = s.run_probe(&["--mode", "audit"], &["read @secret/key"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ok read 11");
    assert_eq!(
        s.run_probe(&["--mode", "audit"], &["create @secret/new"])
            .status
            .code(),
        Some(0)
    );
    assert!(s.path("secret/new").exists());
    let audit = s.decisions();
    assert_eq!(audit.len(), 2, "{audit:?}");
    assert!(audit.iter().all(|l| l["verdict"] == "audit"), "{audit:?}");
    let read = audit
        .iter()
        .find(|l| l["path"] == s.p("secret/key"))
        .expect("the read is reported");
    assert_eq!(
        read["reason"],
        "audit mode: would be denied, no grant covers read"
    );
    assert!(
        audit
            .iter()
            .any(|l| l["path"] == s.p("secret/new") && l["hook"] == "inode_create")
    );
}

#[test]
fn malformed_mission_is_refused_before_anything_runs() {
    let s = Scratch::new("bad-mission");
    s.mission("[mission]\nname = \"x\"\n\n[[grant]]\npath = \"/tmp\"\nops = [\"raed\"]\n");
    let marker = s.path("ran");
    let out = s.run(&["sh", "-c", &format!("touch {}", marker.display())]);
    assert_eq!(out.status.code(), Some(125));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("{}:6:", s.mission_path().display())),
        "{err}"
    );
    assert!(err.contains("ops"), "{err}");
    assert!(!marker.exists());
    assert_eq!(agent_cgroups(), Vec::<std::path::PathBuf>::new());
}

#[test]
fn a_file_moved_out_of_the_tree_is_no_longer_granted() {
    // The first read caches the walk's result for the object; the move must
    // invalidate it, or the agent would keep reading it at its new place.
    let s = Scratch::with_project_grant("moved-out", READ_WRITE_CREATE);
    assert_read_refused_once_moved(&s, || {
        fs::rename(s.path("project/a.txt"), s.path("secret/a.txt")).unwrap();
    });
}

#[test]
fn a_file_linked_out_of_the_tree_is_no_longer_granted_once_its_name_there_is_gone() {
    // A hard link keeps the cached walk (the name it went up from is still
    // there); removing that name, which leaves the object only its name
    // outside the tree, must invalidate it.
    let s = Scratch::with_project_grant("linked-out", READ_WRITE_CREATE);
    assert_read_refused_once_moved(&s, || {
        fs::hard_link(s.path("project/a.txt"), s.path("secret/a.txt")).unwrap();
        fs::remove_file(s.path("project/a.txt")).unwrap();
    });
}

/// The agent reads `project/a.txt` twice (the second read meets the cached
/// walk), waits while `relocate` gives the file the name `secret/a.txt`
/// outside the tree, then reads it there and must be refused.
fn assert_read_refused_once_moved(s: &Scratch, relocate: impl FnOnce()) {
    let script = format!(
        "{probe} read {a}; {probe} read {a}; touch {ready}; \
         while [ ! -e {moved} ]; do sleep 0.05; done; {probe} read {b}; exit 0",
        probe = probe_bin().display(),
        a = s.p("project/a.txt"),
        b = s.p("secret/a.txt"),
        ready = s.p("project/ready"),
        moved = s.p("moved"),
    );
    let mut agent = Reaped(
        s.command(&[], &["sh", "-c", &script])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    assert!(wait_for(Duration::from_secs(250), || s
        .path("project/ready")
        .exists()));
    relocate();
    fs::write(s.path("moved"), "").unwrap();
    let mut out = String::new();
    std::io::Read::read_to_string(&mut agent.0.stdout.take().unwrap(), &mut out).unwrap();
    assert_eq!(agent.0.wait().unwrap().code(), Some(0));
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        ["ok read 6", "ok read 6", "err 13"],
        "{out}"
    );
}

#[test]
fn a_tree_grant_reaches_far_below_its_directory() {
    let s = Scratch::with_project_grant("deep-tree", READ_WRITE_CREATE);
    // Deeper than the 32 levels the walk once stopped at: node_modules,
    // Java packages and build output go this deep.
    let deep = |top: &str| {
        let mut path = s.path(top);
        for _ in 0..300 {
            path.push("d");
        }
        fs::create_dir_all(&path).unwrap();
        fs::write(path.join("f.txt"), "deep\n").unwrap();
        path.to_str().unwrap().to_owned()
    };
    let project = deep("project");
    let secret = deep("secret");
    s.assert_probes(&[
        (&format!("read {project}/f.txt"), 0),
        (&format!("create {project}/new.txt"), 0),
        (&format!("read {secret}/f.txt"), EACCES),
    ]);
    assert!(Path::new(&format!("{project}/new.txt")).exists());
}

#[test]
fn the_command_gets_a_private_temporary_directory_and_tmp_stays_closed() {
    let s = Scratch::with_project_grant("private-tmp", READ_ONLY);
    let probe = probe_bin();
    let script = format!(
        "echo \"$TMPDIR\"; {p} create \"$TMPDIR/work\" , write \"$TMPDIR/work\" data , read \"$TMPDIR/work\" , mkdir \"$TMPDIR/sub\" , create /tmp/pincer-test-private-tmp-outside; \
         cp {p} \"$TMPDIR/prog\"; \"$TMPDIR/prog\" read /dev/null; echo \"exec $?\"",
        p = probe.display()
    );
    let out = s.run(&["sh", "-c", &script]);
    let lines = stdout_lines(&out);
    assert_eq!(lines.len(), 7, "{lines:?}");
    let tmp = std::path::PathBuf::from(&lines[0]);
    let name = tmp.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        tmp.parent() == Some(Path::new("/tmp")) && name.starts_with("pincer-run-"),
        "{tmp:?}"
    );
    assert_eq!(
        lines[1..6],
        [
            "ok created".to_owned(),
            "ok wrote 4".to_owned(),
            "ok read 4".to_owned(),
            "ok made".to_owned(),
            format!("err {EACCES}"),
        ]
    );
    // Nothing written there runs.
    assert_eq!(lines[6], "exec 126");
    assert!(!Path::new("/tmp/pincer-test-private-tmp-outside").exists());
    // Removed with the run.
    assert!(!tmp.exists(), "{tmp:?} is still there");

    // `tmp = "none"`: no directory, no `TMPDIR`.
    s.project_mission_and(READ_ONLY, "[defaults]\ntmp = \"none\"\n");
    let out = s.run(&["sh", "-c", "echo \"${TMPDIR-unset}\""]);
    assert_eq!(stdout_lines(&out), ["unset"]);
}

#[test]
fn the_root_and_terminals_are_listed_and_ps_stays_quiet_about_what_it_may_not_see() {
    let s = Scratch::with_project_grant("quiet-tools", READ_ONLY);
    let out = s.run(&["sh", "-c", "ls / >/dev/null && echo root ok; ls /dev/pts >/dev/null && echo pts ok; ps >/dev/null && echo ps ok"],
    );
    assert_eq!(stdout_lines(&out), ["root ok", "pts ok", "ps ok"]);
    // In audit mode `ps` reads other processes' `stat` (each read is
    // reported), and the kernel asks quietly whether it could trace each
    // of them, to choose what to show: not reported.
    let out = s.run_with(&["--mode", "audit"], &["ps"]);
    assert!(out.status.success());
    let decisions = s.decisions();
    let stat_reads = decisions
        .iter()
        .filter(|d| d["verdict"] == "audit" && d["path"] == "/proc/1/stat")
        .count();
    assert_eq!(stat_reads, 1, "ps read init's stat");
    let traced: Vec<_> = decisions
        .iter()
        .filter(|d| d["hook"] == "ptrace_access_check")
        .collect();
    assert_eq!(traced, Vec::<&serde_json::Value>::new());
}

#[test]
fn the_command_may_reopen_its_own_terminal_and_no_other() {
    let s = Scratch::with_project_grant("own-terminal", READ_ONLY);
    let ours = Terminal::new();
    let theirs = Terminal::new();
    let probe = probe_bin();
    let (own, other) = (ours.path(), theirs.path());
    let ops = [
        probe.to_str().unwrap(),
        "write",
        own.to_str().unwrap(),
        "mine\n",
        ",",
        "write",
        other.to_str().unwrap(),
        "theirs\n",
    ];
    let mut command = s.command(&[], &ops);
    // pincer run reads and writes on `ours`; the probe's answers come back
    // on a pipe.
    ours.attach(&mut command, false);
    command.stdout(std::process::Stdio::piped());
    let out = command.output().unwrap();
    assert_eq!(
        stdout_lines(&out),
        ["ok wrote 5".to_owned(), format!("err {EACCES}")]
    );
    // The control: outside the cgroup, another session's terminal opens.
    assert_eq!(
        s.probe_outside(&[&format!("write {} x", other.display())]),
        ["ok wrote 1"]
    );
}

#[test]
fn a_prefix_grant_covers_the_names_that_start_so_and_survives_their_replacement() {
    let s = Scratch::new("prefix");
    s.project_mission_and(
        READ_ONLY,
        &format!(
            "[[grant]]\npath = \"{}\"\nops = [\"read\", \"write\", \"create\", \"rename\", \"delete\"]\n",
            s.p("secret/notes.json*")
        ),
    );
    fs::write(s.path("secret/notes.json"), "{}\n").unwrap();
    s.assert_probes(&[
        // A program's atomic save: a temporary file named after the file,
        // renamed over it; the new file keeps the grant by its name.
        ("create @secret/notes.json.tmp.7", 0),
        ("write @secret/notes.json.tmp.7 {\"saved\":1}", 0),
        ("rename @secret/notes.json.tmp.7 @secret/notes.json", 0),
        ("write @secret/notes.json {\"saved\":2}", 0),
        ("read @secret/notes.json", 0),
        // Nothing else in the directory: not a shorter name, not another.
        ("create @secret/notes.jso", EACCES),
        ("create @secret/other.json", EACCES),
        ("read @secret/key", EACCES),
        ("rename @secret/notes.json @secret/key", EACCES),
    ]);
    assert_eq!(s.read("secret/notes.json"), "{\"saved\":2}");
    s.assert_secret_unchanged();
    s.assert_absent("secret/notes.jso");
    s.assert_absent("secret/other.json");
}

/// The lines `pincer run` printed on standard error to tell of refusals.
/// Each is one `write`, whole, but the agent shares the stream: one may
/// land inside a line of the agent's own that was written in pieces (busybox
/// `sh` writes its "can't create" message that way), so it is found where
/// it starts, not only at the start of a line.
fn told(out: &std::process::Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter_map(|line| line.find("pincer: refused").map(|at| line[at..].to_owned()))
        .collect()
}

#[test]
fn the_agent_is_told_why_it_was_refused_and_programs_reading_stderr_see_their_own() {
    let s = Scratch::with_project_grant("en-tell", READ_ONLY);
    let key = s.p("secret/key");
    // Three refused reads of one object, a program that captures its
    // child's standard error, then the list the agent can read.
    let script = format!(
        "cat {key}; cat {key}; out=$(cat {key} 2>&1); echo \"captured [$out]\"; \
         echo x > {project}/new.txt; sleep 1; cat \"$TMPDIR/pincer-refusals\"",
        project = s.p("project"),
    );
    let out = s.run(&["sh", "-c", &script]);
    assert!(out.status.success(), "{out:?}");
    let stdout = stdout_lines(&out);
    // What the program captured is its child's own message, nothing of
    // pincer's: pincer speaks on its own standard error.
    assert_eq!(
        stdout[0],
        format!("captured [cat: can't open '{key}': Permission denied]")
    );
    // One line per refused object, whatever the number of refusals.
    let lines = told(&out);
    assert_eq!(lines.len(), 2, "{lines:#?}");
    assert!(
        lines[0].starts_with(&format!("pincer: refused read {key}: no grant covers read")),
        "{}",
        lines[0]
    );
    assert!(
        lines[0].contains("every recent refusal: /tmp/pincer-run-"),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].starts_with(&format!(
            "pincer: refused create {}/new.txt: no grant covers create",
            s.p("project")
        )),
        "{}",
        lines[1]
    );
    // The list has every refusal, each with its hook and rule.
    let list: Vec<&String> = stdout[1..].iter().collect();
    assert!(
        list[0].starts_with("# pincer: the last 100 refusals"),
        "{list:#?}"
    );
    let entries: Vec<Vec<&str>> = list[1..].iter().map(|l| l.split('\t').collect()).collect();
    assert_eq!(entries.len(), 4, "{list:#?}");
    for entry in &entries[..3] {
        assert_eq!(
            entry[1..4],
            ["read", key.as_str(), "file_open"],
            "{entry:?}"
        );
        assert!(entry[4].starts_with("no grant covers read"), "{entry:?}");
    }
    assert_eq!(entries[3][1], "create");
    assert_eq!(entries[3][3], "inode_create");
    // The audit log has the same four denials.
    assert_eq!(s.denials().len(), 4, "{:#?}", s.denials());

    // `--tell file`: the list, no line; `--tell off`: neither.
    let list = "sleep 1; cat \"$TMPDIR/pincer-refusals\" | tail -n 1";
    let script = format!("cat {key} 2>/dev/null; {list}");
    let out = s.run_with(&["--tell", "file"], &["sh", "-c", &script]);
    assert!(told(&out).is_empty(), "{out:?}");
    assert!(
        stdout_lines(&out)[0].contains(&format!("\tread\t{key}\tfile_open\t")),
        "{out:?}"
    );
    let out = s.run_with(&["--tell", "off"], &["sh", "-c", &script]);
    assert!(told(&out).is_empty(), "{out:?}");
    assert!(stdout_lines(&out).is_empty(), "{out:?}");
}
