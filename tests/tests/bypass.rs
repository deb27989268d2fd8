//! The bypass battery, proven in the guest kernel: every way a confined agent
//! could reach a file outside its mission without a plain `open` is tried
//! from inside an agent cgroup, and must fail with the exact errno while the
//! protected object stays byte-for-byte the same. The same operations inside
//! the granted tree still work.

use std::{
    ffi::CString,
    fs,
    io::Write,
    os::{
        fd::AsRawFd,
        unix::{fs::PermissionsExt, net::UnixListener},
    },
    process::Stdio,
    thread,
    time::{Duration, Instant},
};

use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
use pincer_tests::{
    EACCES, EPERM, Reaped, Scratch, asking_mission, pending, probe_bin, read_stdout, stdout_lines,
};

const SECRET: &str = "TOP SECRET\n";

const ALL_OPS: &str =
    r#""read", "write", "create", "exec", "delete", "rename", "link", "setattr", "mkdir""#;

/// A mission granting every operation on `project/` (and the runtime
/// baseline), nothing else.
fn full_tree(s: &Scratch) -> std::path::PathBuf {
    s.mission(&format!(
        "[mission]\nname = \"test\"\n\n[[grant]]\npath = \"{}\"\nops = [{ALL_OPS}]\nextent = \"tree\"\n",
        s.p("project")
    ))
}

fn secret_unchanged(s: &Scratch) {
    assert_eq!(fs::read_to_string(s.path("secret/key")).unwrap(), SECRET);
}

fn deny_reasons(s: &Scratch, hook: &str) -> Vec<String> {
    s.decisions()
        .into_iter()
        .filter(|d| d["hook"] == hook && d["verdict"] == "deny")
        .map(|d| d["reason"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn a_hard_link_cannot_bring_a_protected_file_into_the_tree() {
    let s = Scratch::new("bp-link");
    let m = full_tree(&s);
    let r = s.probes(
        &m,
        &[
            &["link", &s.p("secret/key"), &s.p("project/key")],
            &["link", &s.p("project/a.txt"), &s.p("secret/a.txt")],
            &["link", &s.p("project/a.txt"), &s.p("project/a2.txt")],
        ],
    );
    assert_eq!(r, [EACCES, EACCES, 0]);
    assert!(!s.path("project/key").exists());
    assert!(!s.path("secret/a.txt").exists());
    assert_eq!(
        fs::read_to_string(s.path("project/a2.txt")).unwrap(),
        "alpha\n"
    );
    secret_unchanged(&s);
    let reasons = deny_reasons(&s, "inode_link");
    assert!(
        reasons.iter().any(|r| r == "no grant covers link"),
        "{reasons:?}"
    );
    assert!(
        reasons.iter().any(|r| r == "no grant covers create"),
        "{reasons:?}"
    );
}

#[test]
fn renames_out_of_and_into_the_tree_are_refused() {
    let s = Scratch::new("bp-rename");
    let m = full_tree(&s);
    let r = s.probes(
        &m,
        &[
            &["rename", &s.p("secret/key"), &s.p("project/key")],
            &["rename", &s.p("project/a.txt"), &s.p("secret/a.txt")],
            &["rename", &s.p("project/a.txt"), &s.p("secret/key")],
            &["rename", &s.p("project/b.txt"), &s.p("project/src/b.txt")],
        ],
    );
    assert_eq!(r, [EACCES, EACCES, EACCES, 0]);
    secret_unchanged(&s);
    assert!(!s.path("project/key").exists());
    assert_eq!(
        fs::read_to_string(s.path("project/a.txt")).unwrap(),
        "alpha\n"
    );
    assert!(!s.path("secret/a.txt").exists());
    assert_eq!(
        fs::read_to_string(s.path("project/src/b.txt")).unwrap(),
        "bravo\n"
    );
}

#[test]
fn a_rename_exchange_with_a_protected_file_is_refused() {
    let s = Scratch::new("bp-exchange");
    let m = full_tree(&s);
    let r = s.probes(
        &m,
        &[
            &["exchange", &s.p("project/a.txt"), &s.p("secret/key")],
            &["exchange", &s.p("secret/key"), &s.p("project/a.txt")],
            &["exchange", &s.p("project/a.txt"), &s.p("project/b.txt")],
        ],
    );
    assert_eq!(r, [EACCES, EACCES, 0]);
    secret_unchanged(&s);
    assert_eq!(
        fs::read_to_string(s.path("project/a.txt")).unwrap(),
        "bravo\n"
    );
    assert_eq!(
        fs::read_to_string(s.path("project/b.txt")).unwrap(),
        "alpha\n"
    );
}

#[test]
fn unlink_and_rmdir_outside_the_tree_are_refused() {
    let s = Scratch::new("bp-delete");
    fs::create_dir(s.path("secret/sub")).unwrap();
    fs::create_dir(s.path("project/empty")).unwrap();
    let m = full_tree(&s);
    let r = s.probes(
        &m,
        &[
            &["unlink", &s.p("secret/key")],
            &["rmdir", &s.p("secret/sub")],
            &["unlink", &s.p("project/b.txt")],
            &["rmdir", &s.p("project/empty")],
        ],
    );
    assert_eq!(r, [EACCES, EACCES, 0, 0]);
    secret_unchanged(&s);
    assert!(s.path("secret/sub").is_dir());
    assert!(!s.path("project/b.txt").exists());
    assert!(!s.path("project/empty").exists());
    assert!(
        deny_reasons(&s, "inode_unlink")
            .iter()
            .any(|r| r == "no grant covers delete")
    );
}

#[test]
fn delete_is_its_own_operation() {
    let s = Scratch::new("bp-delete-op");
    let m = s.project_mission(r#""read", "write", "create""#);
    let r = s.probes(
        &m,
        &[
            &["unlink", &s.p("project/a.txt")],
            &["rename", &s.p("project/a.txt"), &s.p("project/c.txt")],
            &["mkdir", &s.p("project/d")],
            &["chmod", &s.p("project/a.txt"), "600"],
            &["write", &s.p("project/a.txt"), "x\n"],
        ],
    );
    assert_eq!(r, [EACCES, EACCES, EACCES, EACCES, 0]);
    assert_eq!(fs::read_to_string(s.path("project/a.txt")).unwrap(), "x\n");
    assert!(!s.path("project/d").exists());
}

#[test]
fn mkdir_mknod_fifo_and_symlink_outside_the_tree_are_refused() {
    let s = Scratch::new("bp-make");
    let m = full_tree(&s);
    let r = s.probes(
        &m,
        &[
            &["mkdir", &s.p("secret/d")],
            &["mkfifo", &s.p("secret/f")],
            &["symlink", "/etc/passwd", &s.p("secret/l")],
            &["mknod-char", &s.p("secret/null")],
            // Device nodes are refused even inside the tree.
            &["mknod-char", &s.p("project/null")],
            &["mkdir", &s.p("project/d")],
            &["mkfifo", &s.p("project/f")],
            &["symlink", &s.p("secret/key"), &s.p("project/l")],
            // The link exists, and gives nothing: its target is outside.
            &["read", &s.p("project/l")],
        ],
    );
    assert_eq!(r, [EACCES, EACCES, EACCES, EACCES, EACCES, 0, 0, 0, EACCES]);
    for gone in [
        "secret/d",
        "secret/f",
        "secret/l",
        "secret/null",
        "project/null",
    ] {
        assert!(fs::symlink_metadata(s.path(gone)).is_err(), "{gone} exists");
    }
    assert!(s.path("project/d").is_dir());
    assert!(
        deny_reasons(&s, "inode_mknod")
            .iter()
            .any(|r| r == "agents never create device nodes")
    );
    secret_unchanged(&s);
}

#[test]
fn truncation_by_path_and_by_descriptor_is_refused() {
    let s = Scratch::new("bp-truncate");
    let m = full_tree(&s);
    // A descriptor open for writing, handed to the agent as fd 9.
    let inherited = fs::OpenOptions::new()
        .write(true)
        .open(s.path("secret/key"))
        .unwrap();
    let probe = probe_bin();
    let mut cmd = s.command(
        &m,
        &["--pass-fd", "9"],
        &[
            probe.to_str().unwrap(),
            "truncate",
            &s.p("secret/key"),
            "0",
            ",",
            "ftruncate",
            "9",
            "0",
            ",",
            "truncate",
            &s.p("project/a.txt"),
            "2",
        ],
    );
    let fd = inherited.as_raw_fd();
    // SAFETY: only dup2 between fork and exec.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
            // dup2 onto itself would keep close-on-exec: clear it as well.
            if libc::dup2(fd, 9) < 0 || libc::fcntl(9, libc::F_SETFD, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    let lines = stdout_lines(&out);
    assert_eq!(lines, ["err 13", "err 13", "ok truncated"]);
    secret_unchanged(&s);
    assert_eq!(fs::read_to_string(s.path("project/a.txt")).unwrap(), "al");
    assert_eq!(
        deny_reasons(&s, "inode_setattr"),
        ["no grant covers write", "no grant covers write"]
    );
}

fn xattr(path: &std::path::Path, name: &str) -> Option<Vec<u8>> {
    let path = CString::new(path.to_str().unwrap()).unwrap();
    let name = CString::new(name).unwrap();
    let mut buf = [0u8; 64];
    // SAFETY: valid strings and a buffer of the given length.
    let n = unsafe {
        libc::getxattr(
            path.as_ptr(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    (n >= 0).then(|| buf[..n as usize].to_vec())
}

fn set_xattr(path: &std::path::Path, name: &str, value: &[u8]) {
    let path = CString::new(path.to_str().unwrap()).unwrap();
    let name = CString::new(name).unwrap();
    // SAFETY: valid strings and a value of the given length.
    let r = unsafe {
        libc::setxattr(
            path.as_ptr(),
            name.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    assert_eq!(r, 0, "setxattr: {}", std::io::Error::last_os_error());
}

#[test]
fn chmod_chown_and_xattrs_outside_the_tree_are_refused() {
    let s = Scratch::new("bp-attr");
    set_xattr(&s.path("secret/key"), "trusted.pincer", b"keep");
    set_xattr(&s.path("project/a.txt"), "trusted.gone", b"x");
    fs::set_permissions(s.path("secret/key"), fs::Permissions::from_mode(0o600)).unwrap();
    let m = full_tree(&s);
    let key = s.p("secret/key");
    let a = s.p("project/a.txt");
    let r = s.probes(
        &m,
        &[
            &["chmod", &key, "644"],
            &["chown", &key, "1000", "1000"],
            &["setxattr", &key, "trusted.evil", "1"],
            &["removexattr", &key, "trusted.pincer"],
            &["chmod", &a, "640"],
            &["chown", &a, "1000", "1000"],
            &["setxattr", &a, "trusted.new", "1"],
            &["removexattr", &a, "trusted.gone"],
            // Through `inode_setxattr` on 6.1, `inode_set_acl` since 6.2.
            &["setfacl", &key],
            &["setfacl", &s.p("project/b.txt")],
        ],
    );
    assert_eq!(r, [EACCES, EACCES, EACCES, EACCES, 0, 0, 0, 0, EACCES, 0]);
    let meta = fs::metadata(s.path("secret/key")).unwrap();
    assert_eq!(meta.permissions().mode() & 0o7777, 0o600);
    assert_eq!(std::os::unix::fs::MetadataExt::uid(&meta), 0);
    assert_eq!(
        xattr(&s.path("secret/key"), "trusted.pincer").as_deref(),
        Some(&b"keep"[..])
    );
    assert_eq!(xattr(&s.path("secret/key"), "trusted.evil"), None);
    assert_eq!(
        xattr(&s.path("project/a.txt"), "trusted.new").as_deref(),
        Some(&b"1"[..])
    );
    assert_eq!(xattr(&s.path("project/a.txt"), "trusted.gone"), None);
    let meta = fs::metadata(s.path("project/a.txt")).unwrap();
    assert_eq!(meta.permissions().mode() & 0o7777, 0o640);
    secret_unchanged(&s);
}

#[test]
fn an_o_path_descriptor_reopened_through_proc_is_still_checked() {
    let s = Scratch::new("bp-opath");
    let m = full_tree(&s);
    let r = s.probe_lines(
        &m,
        &[
            &["opath-reopen", &s.p("secret/key")],
            &["opath-reopen", &s.p("project/a.txt")],
        ],
    );
    assert_eq!(r, ["err 13", "ok read 6"]);
}

#[test]
fn exec_outside_the_mission_of_a_memfd_and_through_execveat_is_refused() {
    let s = Scratch::new("bp-exec");
    let probe = probe_bin();
    for dir in ["secret", "project"] {
        let copy = s.path(&format!("{dir}/tool"));
        fs::copy(&probe, &copy).unwrap();
        fs::set_permissions(&copy, fs::Permissions::from_mode(0o755)).unwrap();
    }
    // The tree is granted for exec too; the baseline grants /bin.
    let m = full_tree(&s);
    let r = s.probes(
        &m,
        &[
            &["exec", &s.p("secret/tool")],
            &["execveat", &s.p("secret"), "tool"],
            &["exec-memfd", probe.to_str().unwrap()],
            &["exec", probe.to_str().unwrap()],
            &["exec", &s.p("project/tool")],
            &["execveat", &s.p("project"), "tool"],
        ],
    );
    assert_eq!(r, [EACCES, EACCES, EACCES, 0, 0, 0]);
    let decisions = s.decisions();
    let exec_denials = decisions
        .iter()
        .filter(|d| d["verdict"] == "deny" && d["operation"] == serde_json::json!(["exec"]))
        .count();
    assert_eq!(exec_denials, 3, "{decisions:#?}");
}

#[test]
fn io_uring_opens_are_checked_like_opens() {
    let s = Scratch::new("bp-uring");
    let m = full_tree(&s);
    let r = s.probe_lines(
        &m,
        &[
            &["uring-open", &s.p("secret/key")],
            &["uring-open", &s.p("project/a.txt")],
        ],
    );
    assert_eq!(r, ["err 13", "ok read 6"]);
}

#[test]
fn an_asking_agent_using_io_uring_is_denied_at_once_not_parked() {
    let s = Scratch::new("bp-uring-ask");
    // A parked request would wait for this deadline.
    let m = s.mission(&asking_mission(
        &s.p("project"),
        "voters = [\"prompt\"]\ntimeout = \"10m\"",
    ));
    let started = Instant::now();
    let r = s.probe_lines(
        &m,
        &[
            &["uring-open", &s.p("secret/key")],
            &["read", &s.p("secret/key")],
        ],
    );
    // The read after the ring was set up is refused too: the task has an
    // io_uring instance, so none of its accesses park.
    assert_eq!(r, ["err 13", "err 13"]);
    assert!(
        started.elapsed() < Duration::from_secs(300),
        "nothing waited for the vote's deadline"
    );
    assert!(pending().is_empty());
    let reasons = deny_reasons(&s, "file_open");
    assert_eq!(reasons.len(), 2, "{reasons:?}");
    for reason in reasons {
        assert!(reason.contains("io_uring"), "{reason}");
    }
}

#[test]
fn a_descriptor_passed_over_a_unix_socket_is_checked_on_receipt() {
    let s = Scratch::new("bp-scm");
    let m = full_tree(&s);
    let socket = s.path("project/sock");
    let listener = UnixListener::bind(&socket).unwrap();
    let files = [s.path("secret/key"), s.path("project/a.txt")];
    let sender = thread::spawn(move || {
        for file in files {
            let (stream, _) = listener.accept().unwrap();
            let file = fs::File::open(file).unwrap();
            let fds = [file.as_raw_fd()];
            let iov = [std::io::IoSlice::new(b"x")];
            sendmsg::<()>(
                stream.as_raw_fd(),
                &iov,
                &[ControlMessage::ScmRights(&fds)],
                MsgFlags::empty(),
                None,
            )
            .unwrap();
        }
    });
    let sock = s.p("project/sock");
    let r = s.probe_lines(&m, &[&["recv-fd", &sock], &["recv-fd", &sock]]);
    sender.join().unwrap();
    assert_eq!(r, ["ok no-fd ctrunc", "ok fd read 6"]);
    let denials: Vec<_> = s
        .decisions()
        .into_iter()
        .filter(|d| d["hook"] == "file_receive")
        .collect();
    assert_eq!(denials.len(), 1, "{denials:?}");
    assert_eq!(denials[0]["verdict"], "deny");
    assert_eq!(denials[0]["path"], s.p("secret/key"));
}

#[test]
fn an_agent_cannot_leave_its_cgroup() {
    let s = Scratch::new("bp-cgroup");
    let m = full_tree(&s);
    let r = s.probes(
        &m,
        &[
            &["cgroup-join", "/sys/fs/cgroup"],
            &["clone-into-cgroup", "/sys/fs/cgroup"],
        ],
    );
    assert_eq!(r, [EACCES, EPERM]);
    let guarded: Vec<_> = s
        .decisions()
        .into_iter()
        .filter(|d| d["hook"] == "task_alloc")
        .collect();
    assert_eq!(guarded.len(), 1);
    assert_eq!(guarded[0]["verdict"], "deny");
}

#[test]
fn an_agent_cannot_signal_or_trace_pincer() {
    let s = Scratch::new("bp-twin");
    let m = full_tree(&s);
    // A bystander outside every agent cgroup.
    let bystander = Reaped(
        std::process::Command::new(probe_bin())
            .args(["sleep", "60"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let other = bystander.0.id().to_string();
    let out = s.run(
        &m,
        &[
            probe_bin().to_str().unwrap(),
            "kill",
            "parent",
            "15",
            ",",
            "kill",
            "parent",
            "9",
            ",",
            "kill",
            "parent",
            "0",
            ",",
            "ptrace",
            "parent",
            ",",
            "read",
            "/proc/self/environ",
            ",",
            "ptrace",
            &other,
            ",",
            "bpf",
        ],
    );
    let lines = stdout_lines(&out);
    assert_eq!(lines.len(), 7, "{lines:?}");
    assert_eq!(
        lines[..4],
        ["err 1", "err 1", "ok sent", "err 1"],
        "{lines:?}"
    );
    assert!(lines[4].starts_with("ok read"), "{lines:?}");
    assert_eq!(lines[5..], ["err 1", "err 1"], "{lines:?}");
    // The twin survived to report the probe's status.
    assert_eq!(out.status.code(), Some(EPERM));
    let hooks: Vec<String> = s
        .decisions()
        .into_iter()
        .filter(|d| d["verdict"] == "deny")
        .map(|d| d["hook"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        hooks,
        [
            "task_kill",
            "task_kill",
            "ptrace_access_check",
            "ptrace_access_check",
            "bpf"
        ]
    );
    drop(bystander);
}

#[test]
fn the_twin_s_proc_entries_are_closed_to_the_agent() {
    let s = Scratch::new("bp-proc");
    let m = full_tree(&s);
    // The shell's parent is `pincer run`, the twin.
    let script = format!(
        "exec {0} read /proc/$PPID/environ , read /proc/$PPID/mem , read /proc/$PPID/fd/0 , read /proc/$PPID/status , read /proc/$PPID/cmdline , read /proc/self/environ , read /proc/self/status",
        probe_bin().display()
    );
    let out = s.run(&m, &["sh", "-c", &script]);
    let lines = stdout_lines(&out);
    assert_eq!(lines.len(), 7, "{lines:?}");
    assert_eq!(lines[..5], ["err 13"; 5], "{lines:?}");
    // The agent's own entries stay readable.
    assert!(lines[5].starts_with("ok read"), "{lines:?}");
    assert!(lines[6].starts_with("ok read"), "{lines:?}");
    let denials: Vec<_> = s
        .decisions()
        .into_iter()
        .filter(|d| d["verdict"] == "deny")
        .collect();
    assert_eq!(denials.len(), 5, "{denials:#?}");
    for d in &denials {
        let reason = d["reason"].as_str().unwrap();
        assert!(reason.starts_with("pincer protects itself"), "{reason}");
    }
    // `fd/0` is a link the ptrace check guards while it is looked up; the
    // other entries are refused when opened.
    let hooks: Vec<&str> = denials
        .iter()
        .map(|d| d["hook"].as_str().unwrap())
        .collect();
    assert_eq!(
        hooks,
        [
            "file_open",
            "file_open",
            "ptrace_access_check",
            "file_open",
            "file_open"
        ]
    );
}

#[test]
fn a_bind_mount_in_a_new_mount_namespace_is_refused() {
    let s = Scratch::new("bp-mount");
    let m = full_tree(&s);
    let r = s.probes(&m, &[&["bind-mount", &s.p("secret"), &s.p("project/src")]]);
    assert_eq!(r, [EPERM]);
    assert!(s.path("project/src/main.rs").exists());
    assert!(!s.path("project/src/key").exists());
    let guarded: Vec<_> = s
        .decisions()
        .into_iter()
        .filter(|d| d["hook"] == "sb_mount")
        .collect();
    assert_eq!(guarded.len(), 1);
}

#[test]
fn a_parked_rename_resumes_once_approved() {
    let s = Scratch::new("bp-park-rename");
    let m = s.mission(&asking_mission(&s.p("project"), "voters = [\"prompt\"]"));
    let probe = probe_bin();
    fs::write(s.path("secret/other"), "other\n").unwrap();
    let mut agent = Reaped(
        s.command(
            &m,
            &[],
            &[
                probe.to_str().unwrap(),
                "rename",
                &s.p("secret/key"),
                &s.p("project/key"),
                ",",
                "unlink",
                &s.p("secret/other"),
            ],
        )
        .stdout(Stdio::piped())
        .spawn()
        .unwrap(),
    );
    let first = pincer_tests::wait_pending(1).remove(0);
    assert_eq!(first["operation"], serde_json::json!(["rename"]));
    assert_eq!(first["path"], s.p("secret/key"));
    assert_eq!(first["hook"], "inode_rename");
    let (code, text) = pincer_tests::answer(&["approve", &first["id"].to_string()]);
    assert_eq!(code, 0, "{text}");
    let second = wait_other(&first);
    assert_eq!(second["operation"], serde_json::json!(["delete"]));
    assert_eq!(second["path"], s.p("secret/other"));
    let (code, text) = pincer_tests::answer(&["deny", &second["id"].to_string()]);
    assert_eq!(code, 0, "{text}");
    let out = read_stdout(&mut agent.0);
    let status = agent.0.wait().unwrap().code();
    assert_eq!(out.lines().collect::<Vec<_>>(), ["ok renamed", "err 13"]);
    assert_eq!(status, Some(EACCES));
    assert_eq!(
        fs::read_to_string(s.path("project/key")).unwrap(),
        SECRET,
        "the approved rename happened"
    );
    assert_eq!(
        fs::read_to_string(s.path("secret/other")).unwrap(),
        "other\n",
        "the denied unlink did not"
    );
}

fn wait_other(first: &serde_json::Value) -> serde_json::Value {
    let mut found = None;
    assert!(
        pincer_tests::wait_for(Duration::from_secs(60), || {
            found = pending().into_iter().find(|r| r["id"] != first["id"]);
            found.is_some()
        }),
        "a second request is parked"
    );
    found.unwrap()
}

#[test]
fn anonymous_pipes_and_sockets_are_not_files_to_protect() {
    let s = Scratch::new("bp-pipes");
    let m = full_tree(&s);
    // A pipe on standard input, reopened as `/dev/stdin` and `<(...)` do.
    let out = s.run(&m, &["sh", "-c", "echo piped | cat /proc/self/fd/0"]);
    assert_eq!(stdout_lines(&out), ["piped"]);
    assert_eq!(out.status.code(), Some(0));
    // A named pipe is a file like any other: not granted, refused.
    let fifo = CString::new(s.p("secret/fifo")).unwrap();
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    assert_eq!(s.probe(&m, &["read", &s.p("secret/fifo")]), EACCES);

    // A pipe and a socket passed in over a Unix socket arrive and work.
    let socket = s.path("project/sock");
    let listener = UnixListener::bind(&socket).unwrap();
    let sender = thread::spawn(move || {
        // Written and closed on this side first: the agent reads to the end.
        let (pipe_out, pipe_in) = nix::unistd::pipe().unwrap();
        nix::unistd::write(&pipe_in, b"piped\n").unwrap();
        drop(pipe_in);
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        (&ours).write_all(b"sock\n").unwrap();
        drop(ours);
        for fd in [pipe_out.as_raw_fd(), theirs.as_raw_fd()] {
            let (stream, _) = listener.accept().unwrap();
            let iov = [std::io::IoSlice::new(b"x")];
            sendmsg::<()>(
                stream.as_raw_fd(),
                &iov,
                &[ControlMessage::ScmRights(&[fd])],
                MsgFlags::empty(),
                None,
            )
            .unwrap();
        }
    });
    let sock = s.p("project/sock");
    let r = s.probe_lines(&m, &[&["recv-fd", &sock], &["recv-fd", &sock]]);
    sender.join().unwrap();
    assert_eq!(r, ["ok fd read 6", "ok fd read 5"]);
    let receipts: Vec<_> = s
        .decisions()
        .into_iter()
        .filter(|d| d["hook"] == "file_receive" || d["path"] == s.p("secret/fifo"))
        .collect();
    // Only the named pipe was refused.
    assert_eq!(receipts.len(), 1, "{receipts:?}");
    assert_eq!(receipts[0]["verdict"], "deny");
}

/// `pincer run` with descriptor 7 open on `file`; `extra` flags before the
/// command.
fn run_holding_fd7(
    s: &Scratch,
    m: &std::path::Path,
    file: &str,
    extra: &[&str],
    ops: &[&str],
) -> Vec<String> {
    let held = fs::OpenOptions::new().read(true).open(file).unwrap();
    let probe = probe_bin();
    let mut cmd_line = vec![probe.to_str().unwrap()];
    cmd_line.extend_from_slice(ops);
    let mut cmd = s.command(m, extra, &cmd_line);
    let fd = held.as_raw_fd();
    // SAFETY: only dup2 and fcntl between fork and exec.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
            // Open across exec into `pincer run`, as `7<file` in a shell.
            if libc::dup2(fd, 7) < 0 || libc::fcntl(7, libc::F_SETFD, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    stdout_lines(&cmd.output().unwrap())
}

#[test]
fn descriptors_opened_before_the_agent_are_not_inherited_unless_passed() {
    let s = Scratch::new("bp-inherit");
    let m = full_tree(&s);
    let secret = s.p("secret/key");
    // Not passed: closed on exec.
    let lines = run_holding_fd7(&s, &m, &secret, &[], &["fd-read", "7"]);
    assert_eq!(lines, [format!("err {}", libc::EBADF)]);
    // Passed on purpose: the agent reads through it, and the audit log
    // says what was passed.
    let lines = run_holding_fd7(&s, &m, &secret, &["--pass-fd", "7"], &["fd-read", "7"]);
    assert_eq!(lines, ["ok fd read 11"]);
    let passed: Vec<_> = s
        .audit()
        .into_iter()
        .filter(|l| l["event"] == "descriptors")
        .collect();
    assert_eq!(passed.len(), 2, "{passed:?}");
    let fds = passed[1]["fds"].as_array().unwrap();
    assert!(
        fds.iter().any(|d| d["fd"] == 7 && d["target"] == secret),
        "{fds:?}"
    );
    assert!(
        passed[0]["fds"]
            .as_array()
            .unwrap()
            .iter()
            .all(|d| d["fd"] != 7)
    );
    // Standard descriptors are always passed; naming one is an error.
    let out = s.run_with(&m, &["--pass-fd", "1"], &["true"]);
    assert_eq!(out.status.code(), Some(125));
}

/// The `pincer` watchdog of the `pincer run` with process id `run`.
fn watchdog_of(run: u32) -> Option<u32> {
    fs::read_dir("/proc").ok()?.flatten().find_map(|entry| {
        let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let (comm, rest) = stat.split_once(") ")?;
        let ppid: u32 = rest.split_whitespace().nth(1)?.parse().ok()?;
        (comm.ends_with("(pincer") && ppid == run).then_some(pid)
    })
}

#[test]
fn one_run_cannot_free_another_and_a_killed_run_stays_confined() {
    let s = Scratch::new("bp-two-runs");
    let m = full_tree(&s);
    let fifo = CString::new(s.p("project/go")).unwrap();
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    let probe = probe_bin();
    // Run B's agent waits for the word, then tries the secret and the tree.
    let script = format!(
        "read word < {go}; {p} read {secret}; {p} read {project}",
        go = s.p("project/go"),
        p = probe.display(),
        secret = s.p("secret/key"),
        project = s.p("project/a.txt"),
    );
    let b = Reaped(
        s.command(&m, &[], &["sh", "-c", &script])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let run_b = b.0.id();
    let mut watchdog = None;
    assert!(pincer_tests::wait_for(Duration::from_secs(60), || {
        watchdog = watchdog_of(run_b);
        watchdog.is_some()
    }));
    let watchdog = watchdog.unwrap();
    // B's links are pinned while it runs.
    let pins = std::path::Path::new("/sys/fs/bpf/pincer-runs").join(run_b.to_string());
    assert!(pins.join("file_open").exists(), "{}", pins.display());

    // Run A's agent cannot signal B's processes.
    let r = s.probes(
        &m,
        &[
            &["kill", &run_b.to_string(), "9"],
            &["kill", &watchdog.to_string(), "9"],
        ],
    );
    assert_eq!(r, [EPERM, EPERM]);

    // Root outside every agent cgroup can: B's twin and watchdog die, and
    // B's agent stays confined by the pinned links (no twin: refused).
    for pid in [run_b, watchdog] {
        assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGKILL) }, 0);
    }
    assert!(pincer_tests::wait_for(Duration::from_secs(30), || {
        !std::path::Path::new(&format!("/proc/{watchdog}")).exists()
    }));
    fs::write(s.path("project/go"), "go\n").unwrap();
    let mut b = b;
    let out = read_stdout(&mut b.0);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines, [format!("err {EACCES}").as_str(), "ok read 6"]);
    secret_unchanged(&s);
    // Its agent gone, the next run removes what B left.
    let _ = b.0.wait();
    assert!(pincer_tests::wait_for(Duration::from_secs(30), || {
        s.run(&m, &["true"]);
        !pins.exists()
    }));
}
