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
        fd::{AsRawFd, OwnedFd},
        unix::{fs::PermissionsExt, net::UnixListener},
    },
    process::{Command, Stdio},
    thread,
    time::{Duration, Instant},
};

use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
use pincer_tests::{
    EACCES, EPERM, EVERY_OPERATION, READ_WRITE, READ_WRITE_CREATE, Reaped, SECRET, Scratch,
    Terminal,
    ipc::{ForeignIpc, IPC_KEY, foreign_key},
    mounts::{Tmpfs, unmount},
    pending, probe_bin, read_stdout, stdout_lines, wait_for,
};

#[test]
fn a_hard_link_cannot_bring_a_protected_file_into_the_tree() {
    let s = Scratch::with_project_grant("bp-link", EVERY_OPERATION);
    s.assert_probes(&[
        ("link @secret/key @project/key", EACCES),
        ("link @project/a.txt @secret/a.txt", EACCES),
        ("link @project/a.txt @project/a2.txt", 0),
    ]);
    s.assert_absent("project/key");
    s.assert_absent("secret/a.txt");
    assert_eq!(s.read("project/a2.txt"), "alpha\n");
    s.assert_secret_unchanged();
    let reasons = s.deny_reasons("inode_link");
    for reason in ["no grant covers link", "no grant covers create"] {
        assert!(reasons.iter().any(|r| r == reason), "{reasons:?}");
    }
}

#[test]
fn renames_out_of_and_into_the_tree_are_refused() {
    let s = Scratch::with_project_grant("bp-rename", EVERY_OPERATION);
    s.assert_probes(&[
        ("rename @secret/key @project/key", EACCES),
        ("rename @project/a.txt @secret/a.txt", EACCES),
        ("rename @project/a.txt @secret/key", EACCES),
        ("rename @project/b.txt @project/src/b.txt", 0),
    ]);
    s.assert_secret_unchanged();
    s.assert_absent("project/key");
    s.assert_absent("secret/a.txt");
    assert_eq!(s.read("project/a.txt"), "alpha\n");
    assert_eq!(s.read("project/src/b.txt"), "bravo\n");
}

#[test]
fn a_rename_exchange_with_a_protected_file_is_refused() {
    let s = Scratch::with_project_grant("bp-exchange", EVERY_OPERATION);
    s.assert_probes(&[
        ("exchange @project/a.txt @secret/key", EACCES),
        ("exchange @secret/key @project/a.txt", EACCES),
        ("exchange @project/a.txt @project/b.txt", 0),
    ]);
    s.assert_secret_unchanged();
    assert_eq!(s.read("project/a.txt"), "bravo\n");
    assert_eq!(s.read("project/b.txt"), "alpha\n");
}

#[test]
fn unlink_and_rmdir_outside_the_tree_are_refused() {
    let s = Scratch::new("bp-delete");
    fs::create_dir(s.path("secret/sub")).unwrap();
    fs::create_dir(s.path("project/empty")).unwrap();
    s.project_mission(EVERY_OPERATION);
    s.assert_probes(&[
        ("unlink @secret/key", EACCES),
        ("rmdir @secret/sub", EACCES),
        ("unlink @project/b.txt", 0),
        ("rmdir @project/empty", 0),
    ]);
    s.assert_secret_unchanged();
    assert!(s.path("secret/sub").is_dir());
    s.assert_absent("project/b.txt");
    s.assert_absent("project/empty");
    assert!(
        s.deny_reasons("inode_unlink")
            .iter()
            .any(|r| r == "no grant covers delete")
    );
}

#[test]
fn delete_is_its_own_operation() {
    let s = Scratch::with_project_grant("bp-delete-op", READ_WRITE_CREATE);
    s.assert_probes(&[
        ("unlink @project/a.txt", EACCES),
        ("rename @project/a.txt @project/c.txt", EACCES),
        ("mkdir @project/d", EACCES),
        ("chmod @project/a.txt 600", EACCES),
        ("write @project/a.txt x\n", 0),
    ]);
    assert_eq!(s.read("project/a.txt"), "x\n");
    s.assert_absent("project/d");
}

#[test]
fn mkdir_mknod_fifo_and_symlink_outside_the_tree_are_refused() {
    let s = Scratch::with_project_grant("bp-make", EVERY_OPERATION);
    s.assert_probes(&[
        ("mkdir @secret/d", EACCES),
        ("mkfifo @secret/f", EACCES),
        ("symlink /etc/passwd @secret/l", EACCES),
        ("mknod-char @secret/null", EACCES),
        // Device nodes are refused even inside the tree.
        ("mknod-char @project/null", EACCES),
        ("mkdir @project/d", 0),
        ("mkfifo @project/f", 0),
        ("symlink @secret/key @project/l", 0),
        // The link exists, and gives nothing: its target is outside.
        ("read @project/l", EACCES),
    ]);
    for gone in [
        "secret/d",
        "secret/f",
        "secret/l",
        "secret/null",
        "project/null",
    ] {
        s.assert_absent(gone);
    }
    assert!(s.path("project/d").is_dir());
    assert!(
        s.deny_reasons("inode_mknod")
            .iter()
            .any(|r| r == "agents never create device nodes")
    );
    s.assert_secret_unchanged();
}

#[test]
fn truncation_by_path_and_by_descriptor_is_refused() {
    let s = Scratch::with_project_grant("bp-truncate", EVERY_OPERATION);
    // A descriptor open for writing, handed to the agent as fd 9.
    let lines = with_inherited_writer(
        &s,
        "secret/key",
        &[
            "truncate @secret/key 0",
            "ftruncate 9 0",
            "truncate @project/a.txt 2",
        ],
    );
    assert_eq!(lines, ["err 13", "err 13", "ok truncated"]);
    s.assert_secret_unchanged();
    assert_eq!(s.read("project/a.txt"), "al");
    assert_eq!(
        s.deny_reasons("inode_setattr"),
        ["no grant covers write", "no grant covers write"]
    );
}

/// A `security.capability` value (version 2) giving `CAP_NET_RAW`, as
/// `setcap cap_net_raw+p` writes it.
fn file_capability() -> Vec<u8> {
    let mut value = 0x0200_0000u32.to_le_bytes().to_vec();
    for word in [1u32 << 13, 0, 0, 0] {
        value.extend_from_slice(&word.to_le_bytes());
    }
    value
}

fn mode_of(s: &Scratch, rel: &str) -> u32 {
    fs::metadata(s.path(rel)).unwrap().permissions().mode() & 0o7777
}

#[test]
fn a_truncation_that_drops_set_id_bits_or_capabilities_still_needs_write() {
    let s = Scratch::new("bp-truncate-force");
    for name in [
        "secret/capable",
        "secret/capable-control",
        "project/capable",
    ] {
        fs::write(s.path(name), SECRET).unwrap();
        set_xattr(&s.path(name), "security.capability", &file_capability());
    }
    for name in ["secret/setuid", "secret/setuid-control", "project/setuid"] {
        fs::write(s.path(name), SECRET).unwrap();
        fs::set_permissions(s.path(name), fs::Permissions::from_mode(0o4755)).unwrap();
    }
    // Control, outside every agent cgroup: the truncations work, and the
    // kernel drops the capabilities and the set-user-id bit on the way
    // (`ATTR_FORCE`).
    let control = s.probe_outside(&[
        "truncate @secret/capable-control 0",
        "nofsetid",
        "truncate @secret/setuid-control 0",
    ]);
    assert_eq!(control, ["ok truncated", "ok dropped", "ok truncated"]);
    assert_eq!(fs::read(s.path("secret/capable-control")).unwrap(), b"");
    assert_eq!(
        xattr(&s.path("secret/capable-control"), "security.capability"),
        None
    );
    assert_eq!(fs::read(s.path("secret/setuid-control")).unwrap(), b"");
    assert_eq!(mode_of(&s, "secret/setuid-control"), 0o755);

    // The tree may be read and written; its attributes are not granted.
    s.project_mission(READ_WRITE);
    s.assert_probe_lines(&[
        ("truncate @secret/capable 0", "err 13"),
        ("nofsetid", "ok dropped"),
        ("truncate @secret/setuid 0", "err 13"),
        // The kernel's own drops are part of a granted write.
        ("truncate @project/setuid 3", "ok truncated"),
        ("append @project/capable !", "ok wrote 1"),
    ]);
    assert_eq!(s.read("secret/capable"), SECRET);
    assert_eq!(
        xattr(&s.path("secret/capable"), "security.capability"),
        Some(file_capability())
    );
    assert_eq!(s.read("secret/setuid"), SECRET);
    assert_eq!(mode_of(&s, "secret/setuid"), 0o4755);
    assert_eq!(s.read("project/setuid"), "TOP");
    assert_eq!(mode_of(&s, "project/setuid"), 0o755);
    assert_eq!(s.read("project/capable"), format!("{SECRET}!"));
    assert_eq!(
        xattr(&s.path("project/capable"), "security.capability"),
        None
    );
    assert_eq!(
        s.deny_reasons("inode_setattr"),
        ["no grant covers write", "no grant covers write"]
    );
}

/// Runs `pincer run` with the probe and `file` open for writing as the
/// agent's descriptor 9, passed on purpose (`pincer run` closes what it is
/// not told to pass); returns the probe's lines.
fn with_inherited_writer(s: &Scratch, file: &str, ops: &[&str]) -> Vec<String> {
    let inherited = fs::OpenOptions::new()
        .write(true)
        .open(s.path(file))
        .unwrap();
    s.probe_holding(&[(&inherited, 9)], &["--pass-fd", "9"], ops)
}

/// The probe's `ioctl` of `FIFREEZE` on the project's filesystem.
const FREEZE_PROJECT: &str = "ioctl @project c0045877";

#[test]
fn ioctls_that_change_a_file_need_setattr_or_write() {
    let s = Scratch::new("bp-ioctl");
    // Control, outside every agent cgroup: a descriptor open for reading is
    // enough to make a file immutable, which its owner then cannot write.
    let control = s.probe_outside(&[
        "setflags @secret/key i",
        "write @secret/key x",
        "setflags32 @secret/key i",
        "setflags @secret/key -",
        "fsxattr-immutable @secret/key",
        "setflags @secret/key -",
        "clone @secret/key @project/a.txt",
        FREEZE_PROJECT,
    ]);
    assert_eq!(
        control,
        [
            "ok set 0x10",
            "err 1",
            "ok set 0x10",
            "ok set 0x0",
            "ok set",
            "ok set 0x0",
            // tmpfs has no shared extents and cannot be frozen: the calls
            // reached the filesystem.
            "err 95",
            "err 95",
        ]
    );
    // The secret may be read, the project changed in every way.
    s.project_mission_and(
        EVERY_OPERATION,
        &format!(
            "[[grant]]\npath = \"{}\"\nops = [\"read\"]\n",
            s.p("secret/key")
        ),
    );
    let r = with_inherited_writer(
        &s,
        "secret/key",
        &[
            "getflags @secret/key",
            "setflags @secret/key i",
            "setflags32 @secret/key a",
            "fsxattr-immutable @secret/key",
            "clone-fd 9 @project/a.txt",
            "setflags @project/a.txt d",
            "getflags @project/a.txt",
            "setflags @project/a.txt -",
            "setflags @project/a.txt i",
            "clone @project/b.txt @project/a.txt",
            FREEZE_PROJECT,
        ],
    );
    assert_eq!(
        r,
        [
            "ok flags 0x0",
            "err 13",
            "err 13",
            "err 13",
            "err 13",
            "ok set 0x40",
            "ok flags 0x40",
            "ok set 0x0",
            // The immutable flag needs CAP_LINUX_IMMUTABLE, which is never
            // an agent's, whatever the grants.
            "err 1",
            "err 95",
            "err 1",
        ]
    );
    s.assert_secret_unchanged();
    assert_eq!(
        s.probe_outside(&["getflags @secret/key", "getflags @project/a.txt"]),
        ["ok flags 0x0", "ok flags 0x0"]
    );
    let mut reasons = s.deny_reasons("file_ioctl");
    reasons.extend(s.deny_reasons("file_ioctl_compat"));
    reasons.sort();
    assert_eq!(
        reasons,
        [
            "no grant covers setattr",
            "no grant covers setattr",
            "no grant covers setattr",
            "no grant covers write",
            "pincer protects itself and the confinement: changing a whole filesystem (FIFREEZE) is never allowed to agents",
        ]
    );
}

#[test]
fn keystrokes_cannot_be_pushed_into_the_terminal() {
    let s = Scratch::new("bp-tiocsti");
    // The virtual console may be read: only its ioctl is refused.
    s.project_mission_and(
        READ_WRITE,
        "[[grant]]\npath = \"/dev/tty1\"\nops = [\"read\"]\n",
    );
    let terminal = Terminal::new();
    let injections = [
        "sti",
        "0",
        "touch /tmp/pwned\\n",
        ",",
        "sti32",
        "0",
        "true\\n",
        ",",
        "tioclinux",
        "/dev/tty1",
        "6",
    ];
    // Control, outside every agent cgroup: the line lands in the terminal's
    // input, where the shell reads it once the agent is gone.
    let out = Command::new(probe_bin())
        .args(injections)
        .stdin(terminal.slave())
        .output()
        .unwrap();
    assert_eq!(
        stdout_lines(&out),
        ["ok injected 17", "ok injected 5", "ok done"]
    );
    assert_eq!(terminal.pending_input(), "touch /tmp/pwned\ntrue\n");

    let probe = probe_bin();
    let mut cmd_line = vec![probe.to_str().unwrap()];
    cmd_line.extend_from_slice(&injections);
    // What a program on a terminal does, still allowed.
    cmd_line.extend_from_slice(&[",", "tcgets", "0"]);
    let out = s
        .command(&[], &cmd_line)
        .stdin(terminal.slave())
        .output()
        .unwrap();
    assert_eq!(stdout_lines(&out), ["err 1", "err 1", "err 1", "ok tty"]);
    assert_eq!(terminal.pending_input(), "", "nothing was typed");
    let refused = s.denials_with_reasons();
    assert_eq!(refused.len(), 3, "{refused:#?}");
    for (line, name) in refused.iter().zip(["TIOCSTI", "TIOCSTI", "TIOCLINUX"]) {
        assert!(line.starts_with("file_ioctl"), "{line}");
        assert!(
            line.ends_with(&format!(
                "pincer protects itself and the confinement: typing into a terminal ({name}) is never allowed to agents"
            )),
            "{line}"
        );
    }
}

fn xattr(path: &std::path::Path, name: &str) -> Option<Vec<u8>> {
    let mut buf = [0u8; 64];
    let n = rustix::fs::getxattr(path, name, &mut buf[..]).ok()?;
    Some(buf[..n].to_vec())
}

fn set_xattr(path: &std::path::Path, name: &str, value: &[u8]) {
    rustix::fs::setxattr(path, name, value, rustix::fs::XattrFlags::empty())
        .unwrap_or_else(|e| panic!("setxattr {name} on {}: {e}", path.display()));
}

#[test]
fn chmod_chown_and_xattrs_outside_the_tree_are_refused() {
    let s = Scratch::new("bp-attr");
    fs::set_permissions(s.path("secret/key"), fs::Permissions::from_mode(0o600)).unwrap();
    set_acl(&s.path("secret/key"));
    set_acl(&s.path("project/a.txt"));
    let key_mode = fs::metadata(s.path("secret/key"))
        .unwrap()
        .permissions()
        .mode();
    s.project_mission(EVERY_OPERATION);
    let acl = "system.posix_acl_access";
    s.assert_probes(&[
        ("chmod @secret/key 644", EACCES),
        ("chown @secret/key 1000 1000", EACCES),
        ("setxattr @secret/key user.evil 1", EACCES),
        (&format!("removexattr @secret/key {acl}"), EACCES),
        ("chmod @project/a.txt 640", 0),
        ("chown @project/a.txt 1000 1000", 0),
        (&format!("removexattr @project/a.txt {acl}"), 0),
        // `trusted.*` attributes need `CAP_SYS_ADMIN`, which no agent
        // has, even inside its tree.
        ("setxattr @project/a.txt trusted.new 1", EPERM),
        // Through `inode_setxattr` on 6.1, `inode_set_acl` since 6.2.
        ("setfacl @secret/key", EACCES),
        ("setfacl @project/b.txt", 0),
    ]);
    let meta = fs::metadata(s.path("secret/key")).unwrap();
    assert_eq!(meta.permissions().mode(), key_mode);
    assert_eq!(std::os::unix::fs::MetadataExt::uid(&meta), 0);
    assert_eq!(xattr(&s.path("secret/key"), acl).map(|v| v.len()), Some(44));
    assert_eq!(xattr(&s.path("secret/key"), "user.evil"), None);
    assert_eq!(xattr(&s.path("project/a.txt"), acl), None);
    assert_eq!(xattr(&s.path("project/a.txt"), "trusted.new"), None);
    let meta = fs::metadata(s.path("project/a.txt")).unwrap();
    assert_eq!(meta.permissions().mode() & 0o7777, 0o640);
    s.assert_secret_unchanged();
}

#[test]
fn reopening_through_proc_and_opening_with_io_uring_are_checked_like_opens() {
    let s = Scratch::with_project_grant("bp-reopen", EVERY_OPERATION);
    s.assert_probe_lines(&[
        // An `O_PATH` descriptor reopened through `/proc/self/fd`.
        ("opath-reopen @secret/key", "err 13"),
        ("opath-reopen @project/a.txt", "ok read 6"),
        ("uring-open @secret/key", "err 13"),
        ("uring-open @project/a.txt", "ok read 6"),
    ]);
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
    s.project_mission(EVERY_OPERATION);
    let probe = probe.display();
    s.assert_probes(&[
        ("exec @secret/tool", EACCES),
        ("execveat @secret tool", EACCES),
        (&format!("exec-memfd {probe}"), EACCES),
        (&format!("exec {probe}"), 0),
        ("exec @project/tool", 0),
        ("execveat @project tool", 0),
    ]);
    let exec_denials = s
        .denials()
        .iter()
        .filter(|d| d["operation"] == serde_json::json!(["exec"]))
        .count();
    assert_eq!(exec_denials, 3, "{:#?}", s.decisions());
}

#[test]
fn a_file_mapped_executable_needs_exec_as_running_it_does() {
    let s = Scratch::new("bp-mmap-exec");
    fs::copy(probe_bin(), s.path("project/tool")).unwrap();
    fs::set_permissions(s.path("project/tool"), fs::Permissions::from_mode(0o755)).unwrap();
    let probe = probe_bin();
    let probe = probe.display();
    // Readable, not executable: mapping it executable, as `ld.so ./tool`
    // does with no `execve` of the tool, is running it.
    s.project_mission(READ_WRITE);
    s.assert_probe_lines(&[
        ("mmap-read @project/tool", "ok mapped"),
        ("mmap-exec @project/tool", "err 13"),
        ("mprotect-exec @project/tool", "err 13"),
        // Memory that holds no file (a memfd) stays as `mmap` gives it.
        ("memfd-mmap-exec", "ok mapped"),
        // The baseline grants the system's programs and libraries `exec`.
        (&format!("mmap-exec {probe}"), "ok mapped"),
        // A program the kernel maps for `execve` was decided at its open.
        ("exec @project/tool", "err 13"),
    ]);
    assert_eq!(
        s.denial_hooks(),
        ["mmap_file", "file_mprotect", "file_open"],
        "{:#?}",
        s.decisions()
    );
    for denial in s.denials() {
        assert_eq!(
            denial["operation"],
            serde_json::json!(["exec"]),
            "{denial:#}"
        );
        assert!(
            pincer_tests::text(&denial["path"]).ends_with("/project/tool"),
            "{denial:#}"
        );
    }
    // The control: outside the cgroup the same mappings are made.
    assert_eq!(
        s.probe_outside(&["mmap-exec @project/tool", "mprotect-exec @project/tool"]),
        ["ok mapped", "ok protected"]
    );
    // Where the mission grants `exec`, the loader's way works as `execve` does.
    fs::remove_file(s.audit_path()).unwrap();
    s.project_mission(EVERY_OPERATION);
    s.assert_probe_lines(&[
        ("mmap-exec @project/tool", "ok mapped"),
        ("mprotect-exec @project/tool", "ok protected"),
        ("exec @project/tool", "ok ran"),
    ]);
    assert!(s.denials().is_empty(), "{:#?}", s.denials());
}

#[test]
fn an_asking_agent_using_io_uring_is_denied_at_once_not_parked() {
    let s = Scratch::new("bp-uring-ask");
    // A parked request would wait for this deadline.
    s.asking_mission("voters = [\"prompt\"]\ntimeout = \"10m\"");
    let started = Instant::now();
    let r = s.probe_lines(&["uring-open @secret/key", "read @secret/key"]);
    // The read after the ring was set up is refused too: the task has an
    // io_uring instance, so none of its accesses park.
    assert_eq!(r, ["err 13", "err 13"]);
    assert!(
        started.elapsed() < Duration::from_secs(300),
        "nothing waited for the vote's deadline"
    );
    assert!(pending().is_empty());
    let reasons = s.deny_reasons("file_open");
    assert_eq!(reasons.len(), 2, "{reasons:?}");
    for reason in reasons {
        assert!(reason.contains("io_uring"), "{reason}");
    }
}

/// Listens on `socket` and sends each of `fds`, in order, to one
/// connection (`SCM_RIGHTS`). Gives up, failing the thread, after 250 s
/// without a connection (the run may load its programs first): a probe
/// that never connects fails the test instead of leaving it waiting.
fn send_on_connect(socket: &std::path::Path, fds: Vec<OwnedFd>) -> thread::JoinHandle<()> {
    let listener = UnixListener::bind(socket).unwrap();
    listener.set_nonblocking(true).unwrap();
    thread::spawn(move || {
        for fd in fds {
            let deadline = Instant::now() + Duration::from_secs(250);
            let stream = loop {
                match listener.accept() {
                    Ok((stream, _)) => break stream,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        assert!(Instant::now() < deadline, "nobody connected for a minute");
                        thread::sleep(Duration::from_millis(20));
                    }
                    Err(e) => panic!("accept: {e}"),
                }
            };
            stream.set_nonblocking(false).unwrap();
            let iov = [std::io::IoSlice::new(b"x")];
            sendmsg::<()>(
                stream.as_raw_fd(),
                &iov,
                &[ControlMessage::ScmRights(&[fd.as_raw_fd()])],
                MsgFlags::empty(),
                None,
            )
            .unwrap();
        }
    })
}

#[test]
fn a_descriptor_passed_over_a_unix_socket_is_checked_on_receipt() {
    let s = Scratch::with_project_grant("bp-scm", EVERY_OPERATION);
    let socket = s.path("project/sock");
    let files = [s.path("secret/key"), s.path("project/a.txt")]
        .map(|file| OwnedFd::from(fs::File::open(file).unwrap()));
    let sender = send_on_connect(&socket, files.into());
    let r = s.probe_lines(&["recv-fd @project/sock", "recv-fd @project/sock"]);
    sender.join().unwrap();
    assert_eq!(r, ["ok no-fd ctrunc", "ok fd read 6"]);
    let receipts = s.decisions_at("file_receive");
    assert_eq!(receipts.len(), 1, "{receipts:?}");
    assert_eq!(receipts[0]["verdict"], "deny");
    assert_eq!(receipts[0]["path"], s.p("secret/key"));
}

#[test]
fn an_agent_cannot_leave_its_cgroup() {
    let s = Scratch::with_project_grant("bp-cgroup", EVERY_OPERATION);
    s.assert_probes(&[
        ("cgroup-join /sys/fs/cgroup", EACCES),
        ("clone-into-cgroup /sys/fs/cgroup", EPERM),
    ]);
    assert_eq!(
        s.decisions_of("task_alloc")
            .iter()
            .map(|(verdict, _)| verdict)
            .collect::<Vec<_>>(),
        ["deny"]
    );
}

#[test]
fn an_agent_cannot_signal_or_trace_pincer() {
    let s = Scratch::with_project_grant("bp-twin", EVERY_OPERATION);
    // A bystander outside every agent cgroup.
    let bystander = Reaped(
        std::process::Command::new(probe_bin())
            .args(["sleep", "60"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let other = bystander.0.id().to_string();
    let out = s.run_probe(
        &[],
        &[
            "kill parent 15",
            "kill parent 9",
            "kill parent 0",
            "ptrace parent",
            "read /proc/self/environ",
            &format!("ptrace {other}"),
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
    // `bpf(2)` may also ask for `CAP_BPF` first (6.1): the capability rule's
    // refusals are left out here.
    let mut hooks = s.denial_hooks();
    hooks.retain(|hook| hook != "capable");
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
    let s = Scratch::with_project_grant("bp-proc", EVERY_OPERATION);
    // The shell's parent is `pincer run`, the twin.
    let script = format!(
        "exec {0} read /proc/$PPID/environ , read /proc/$PPID/mem , read /proc/$PPID/fd/0 , read /proc/$PPID/status , read /proc/$PPID/cmdline , read /proc/self/environ , read /proc/self/status",
        probe_bin().display()
    );
    let out = s.run(&["sh", "-c", &script]);
    let lines = stdout_lines(&out);
    assert_eq!(lines.len(), 7, "{lines:?}");
    assert_eq!(lines[..5], ["err 13"; 5], "{lines:?}");
    // The agent's own entries stay readable.
    assert!(lines[5].starts_with("ok read"), "{lines:?}");
    assert!(lines[6].starts_with("ok read"), "{lines:?}");
    let denials = s.denials();
    assert_eq!(denials.len(), 5, "{denials:#?}");
    for d in &denials {
        let reason = d["reason"].as_str().unwrap();
        assert!(reason.starts_with("pincer protects itself"), "{reason}");
    }
    // `fd/0` is a link the ptrace check guards while it is looked up; the
    // other entries are refused when opened.
    assert_eq!(
        s.denial_hooks(),
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
fn every_thread_of_the_twin_is_guarded() {
    let s = Scratch::with_project_grant("bp-threads", EVERY_OPERATION);
    let tid_file = s.p("project/tid");
    let ready = s.p("project/ready");
    // The shell's parent is `pincer run`. Once the agent runs, the test
    // tells it which of the twin's threads to try: one besides the main
    // thread that lasts the whole run (on a terminal, the prompt's reader).
    // Threads that help while the programs load are gone by then.
    let script = format!(
        "touch {ready}; while [ ! -e {tid_file} ]; do sleep 0.05; done; t=$(cat {tid_file}); \
         exec {0} read /proc/\"$t\"/status , read /proc/$PPID/task/\"$t\"/status , \
         read /proc/$PPID/task/\"$t\"/comm , tgkill parent \"$t\" 15 , kill \"$t\" 15 , \
         read /proc/thread-self/status , read /proc/$$/task/$$/status",
        probe_bin().display()
    );
    let terminal = Terminal::new();
    let mut command = s.command(&[], &["sh", "-c", &script]);
    terminal.attach(&mut command, false);
    let mut run = Reaped(command.stdout(Stdio::piped()).spawn().unwrap());
    let twin = run.0.id();
    assert!(
        wait_for(Duration::from_secs(250), || fs::metadata(&ready).is_ok()),
        "the agent runs"
    );
    let task = format!("/proc/{twin}/task");
    // The threads of the twin's own name (not the runtime's short-lived
    // blocking pool, `tokio-runtime-w`), with the main thread's left out.
    let threads = || -> Vec<u32> {
        let comm = |tid: u32| fs::read_to_string(format!("{task}/{tid}/comm")).ok();
        let main = comm(twin);
        fs::read_dir(&task)
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter(|&tid| tid != twin && main.is_some() && comm(tid) == main)
            .collect()
    };
    // Seen again a second later; the newest, the prompt's reader being
    // started just before the agent.
    let mut seen = Vec::new();
    let mut thread = None;
    assert!(
        wait_for(Duration::from_secs(250), || {
            let now = threads();
            thread = now.iter().copied().filter(|tid| seen.contains(tid)).max();
            seen = now;
            if thread.is_none() {
                thread::sleep(Duration::from_secs(1));
            }
            thread.is_some()
        }),
        "the twin runs a second thread"
    );
    let thread = thread.unwrap();
    // Control: outside the agent's cgroup the thread's entries are there,
    // and they name the twin as their process.
    let status = fs::read_to_string(format!("/proc/{thread}/status")).unwrap();
    assert!(status.contains(&format!("\nTgid:\t{twin}\n")), "{status}");
    // Written whole, then renamed into place: the shell must never see the
    // file before its number is in it.
    let partial = format!("{tid_file}.partial");
    fs::write(&partial, thread.to_string()).unwrap();
    fs::rename(&partial, &tid_file).unwrap();
    let out = read_stdout(&mut run.0);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 7, "{lines:?}");
    assert_eq!(
        lines[..5],
        ["err 13", "err 13", "err 13", "err 1", "err 1"],
        "{lines:?}"
    );
    // The agent's own threads stay readable.
    assert!(lines[5].starts_with("ok read"), "{lines:?}");
    assert!(lines[6].starts_with("ok read"), "{lines:?}");
    // The twin survived to report the probe's status.
    assert_eq!(run.0.wait().unwrap().code(), Some(EACCES));
    assert_eq!(
        s.denial_hooks(),
        [
            "file_open",
            "file_open",
            "file_open",
            "task_kill",
            "task_kill"
        ]
    );
}

#[test]
fn a_bind_mount_in_a_new_mount_namespace_is_refused() {
    let s = Scratch::with_project_grant("bp-mount", EVERY_OPERATION);
    s.assert_probes(&[("bind-mount @secret @project/src", EPERM)]);
    assert!(s.path("project/src/main.rs").exists());
    s.assert_absent("project/src/key");
    // The new mount namespace needs `CAP_SYS_ADMIN`: refused there, before
    // `sb_mount` (which would refuse the mount itself) is reached.
    assert_eq!(
        s.decisions_of("capable"),
        [(
            "deny".to_owned(),
            "the capability sys_admin is never given to agents: it reaches the kernel or pincer"
                .to_owned()
        )]
    );
    assert!(s.decisions_of("sb_mount").is_empty());
}

#[test]
fn a_parked_rename_resumes_once_approved() {
    let s = Scratch::new("bp-park-rename");
    s.asking_mission("voters = [\"prompt\"]");
    fs::write(s.path("secret/other"), "other\n").unwrap();
    let probe = s.probe_command_line(&["rename @secret/key @project/key", "unlink @secret/other"]);
    let probe: Vec<&str> = probe.iter().map(String::as_str).collect();
    let mut agent = Reaped(
        s.command(&[], &probe)
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
    let second = pincer_tests::wait_new_request(&pincer_tests::id_of(&first));
    assert_eq!(second["operation"], serde_json::json!(["delete"]));
    assert_eq!(second["path"], s.p("secret/other"));
    let (code, text) = pincer_tests::answer(&["deny", &second["id"].to_string()]);
    assert_eq!(code, 0, "{text}");
    let out = read_stdout(&mut agent.0);
    let status = agent.0.wait().unwrap().code();
    assert_eq!(out.lines().collect::<Vec<_>>(), ["ok renamed", "err 13"]);
    assert_eq!(status, Some(EACCES));
    assert_eq!(
        s.read("project/key"),
        SECRET,
        "the approved rename happened"
    );
    assert_eq!(
        s.read("secret/other"),
        "other\n",
        "the denied unlink did not"
    );
}

/// Writes `project/evil.ko`, a file that is no kernel module: the loader
/// refuses it as soon as it reads it (`ENOEXEC`), which shows a load got
/// past every check before. It is longer than an ELF header: `init_module`
/// refuses anything shorter before it asks `kernel_load_data`.
fn write_not_a_module(s: &Scratch) {
    let mut bytes = b"\x7fELF not really a module\n".to_vec();
    bytes.resize(256, b'\n');
    fs::write(s.path("project/evil.ko"), bytes).unwrap();
}

#[test]
fn kernel_modules_and_kexec_are_refused_to_agents() {
    let s = Scratch::new("bp-modules");
    write_not_a_module(&s);
    s.project_mission(EVERY_OPERATION);
    let ops = [
        "finit-module @project/evil.ko",
        "init-module @project/evil.ko",
        "kexec-unload",
    ];
    // Outside every agent cgroup the calls reach the module loader and
    // kexec.
    assert_eq!(s.probe_outside(&ops), ["err 8", "err 8", "ok unloaded"]);
    assert_eq!(s.probes(&ops), [EPERM, EPERM, EPERM]);
    let refused: Vec<_> = s
        .decisions_of("capable")
        .into_iter()
        .map(|(verdict, reason)| {
            assert_eq!(verdict, "deny");
            reason
        })
        .collect();
    for cap in ["sys_module", "sys_boot"] {
        assert!(
            refused.contains(&format!(
                "the capability {cap} is never given to agents: it reaches the kernel or pincer"
            )),
            "{refused:?}"
        );
    }
}

#[test]
fn the_kernel_refuses_to_load_an_agents_module_even_past_the_capability_check() {
    // In audit mode the capability check lets the call through (and
    // reports it): the kernel's own load hooks are then what an agent
    // meets, and they report too.
    let s = Scratch::new("bp-modules-audit");
    write_not_a_module(&s);
    s.project_mission(EVERY_OPERATION);
    let out = s.run_probe(
        &["--mode", "audit"],
        &[
            "finit-module @project/evil.ko",
            "init-module @project/evil.ko",
        ],
    );
    assert_eq!(stdout_lines(&out), ["err 8", "err 8"]);
    for hook in ["kernel_read_file", "kernel_load_data"] {
        let seen = s.decisions_of(hook);
        assert_eq!(
            seen,
            [(
                "audit".to_owned(),
                "audit mode: would be denied, pincer protects itself and the confinement: \
                 loading a module into the kernel is never allowed to agents"
                    .to_owned()
            )],
            "{hook}"
        );
    }
    assert!(
        s.decisions_of("capable")
            .iter()
            .any(|(verdict, reason)| verdict == "audit" && reason.contains("sys_module"))
    );
}

#[test]
fn kernel_memory_and_raw_devices_stay_closed_whatever_the_grants() {
    let s = Scratch::new("bp-kmem");
    // Grants that name the kernel's memory outright.
    let grants: Vec<String> = ["/proc/kcore", "/proc/kmsg", "/dev/mem", "/dev/port"]
        .iter()
        .map(|path| format!("[[grant]]\npath = \"{path}\"\nops = [\"read\", \"write\"]\n"))
        .collect();
    s.project_mission_and(EVERY_OPERATION, &grants.join("\n"));
    let mut ops = vec!["peek /proc/kcore", "open /proc/kmsg", "peek /dev/mem"];
    // The 6.12 cloud kernel has no `/dev/port` (`CONFIG_DEVPORT` off); where
    // it exists its open asks for `CAP_SYS_RAWIO` like `/dev/mem`.
    if std::path::Path::new("/dev/port").exists() {
        ops.push("open /dev/port");
    }
    let outside = s.probe_outside(&ops);
    assert_eq!(outside[0], "ok peeked 64", "{outside:?}");
    assert_eq!(outside[1..3], ["ok opened", "ok peeked 64"]);
    assert!(outside[3..].iter().all(|l| l == "ok opened"), "{outside:?}");
    assert_eq!(s.probes(&ops), vec![EPERM; ops.len()]);
    let refused: Vec<_> = s
        .decisions_of("capable")
        .into_iter()
        .map(|(_, reason)| reason)
        .collect();
    for cap in ["sys_rawio", "syslog"] {
        assert!(refused.iter().any(|r| r.contains(cap)), "{refused:?}");
    }
}

#[test]
fn block_devices_and_debugfs_are_never_opened_by_agents() {
    let s = Scratch::new("bp-blockdev");
    // A block device node (the first loop device) and debugfs, both granted.
    let node = s.path("project/disk");
    let path = std::ffi::CString::new(node.to_str().unwrap()).unwrap();
    // SAFETY: a valid path; a block device node 7:0.
    let r = unsafe { libc::mknod(path.as_ptr(), libc::S_IFBLK | 0o600, libc::makedev(7, 0)) };
    assert_eq!(r, 0, "mknod: {}", std::io::Error::last_os_error());
    let debugfs = debugfs_file();
    s.project_mission_and(
        EVERY_OPERATION,
        "[[grant]]\npath = \"/sys/kernel/debug\"\nops = [\"read\"]\nextent = \"tree\"\n",
    );
    let ops = ["open @project/disk", &format!("peek {debugfs}")];
    let outside = s.probe_outside(&ops);
    // Outside, the open reaches the block layer (no loop device is set up,
    // hence `ENXIO`) and debugfs.
    assert_eq!(outside[0], "err 6", "{outside:?}");
    assert!(outside[1].starts_with("ok peeked"), "{outside:?}");
    assert_eq!(s.probes(&ops), [EACCES, EACCES]);
    let reasons = s.deny_reasons("file_open");
    assert_eq!(
        reasons,
        [
            "agents never open block devices",
            "agents never open the kernel's debugging and tracing file systems"
        ]
    );
}

/// A regular file of debugfs (mounted at `/sys/kernel/debug` if it is not
/// yet).
fn debugfs_file() -> String {
    let dir = std::path::Path::new("/sys/kernel/debug");
    if fs::read_dir(dir).map_or(true, |mut d| d.next().is_none()) {
        let status = std::process::Command::new("mount")
            .args(["-t", "debugfs", "debugfs", "/sys/kernel/debug"])
            .status()
            .unwrap();
        assert!(status.success());
    }
    // A file readable by root on both kernels.
    for candidate in [
        "sched/features",
        "sched_features",
        "gpio",
        "clk/clk_summary",
    ] {
        let path = dir.join(candidate);
        if path.is_file() {
            return path.to_string_lossy().into_owned();
        }
    }
    let found = fs::read_dir(dir)
        .unwrap()
        .filter_map(Result::ok)
        .find(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .expect("a file in debugfs");
    found.path().to_string_lossy().into_owned()
}

#[test]
fn proc_shows_an_agent_its_own_processes_and_harmless_global_files_only() {
    let s = Scratch::with_project_grant("bp-proc-rule", EVERY_OPERATION);
    // Outside, init's entries and the kernel's files are there to read.
    assert_eq!(
        s.probe_outside(&["open /proc/1/status", "open /proc/1/cmdline"]),
        ["ok opened", "ok opened"]
    );
    // The shell's child `sleep` is the agent's own process.
    let script = format!(
        "sleep 30 & exec {0} read /proc/$!/status , read /proc/self/status , read /proc/self/net/dev , \
         read /proc/meminfo , read /proc/sys/kernel/osrelease , list /proc , readlink /proc/self , \
         write /proc/self/comm probe2 , \
         read /proc/1/status , read /proc/1/cmdline , list /proc/1/fd , read /proc/1/net/dev , \
         read /proc/kcore , read /proc/kallsyms , read /proc/kmsg , \
         write /proc/sys/kernel/hostname pwned , write /proc/sysrq-trigger h ; kill $!",
        probe_bin().display()
    );
    let out = s.run(&["sh", "-c", &script]);
    let lines = stdout_lines(&out);
    assert_eq!(lines.len(), 17, "{lines:?}");
    for (i, line) in lines[..8].iter().enumerate() {
        assert!(line.starts_with("ok"), "{i}: {lines:?}");
    }
    // `/proc/self` names the reader's own entries.
    let own = lines[6].strip_prefix("ok target ").unwrap_or_default();
    assert!(own.parse::<u32>().is_ok(), "{lines:?}");
    assert_eq!(lines[8..], ["err 13"; 9], "{lines:?}");
    let reasons = s.deny_reasons("file_open");
    let other = "the /proc entries of processes outside the agent's cgroup are never open to it";
    let setting = "agents never write to /proc outside their own processes' entries";
    assert_eq!(
        reasons,
        [
            other,
            other,
            other,
            other,
            "no grant covers read",
            "no grant covers read",
            "no grant covers read",
            setting,
            setting
        ]
    );
    assert_ne!(
        fs::read_to_string("/proc/sys/kernel/hostname").unwrap(),
        "pwned\n"
    );
}

#[test]
fn ps_lists_only_the_agents_own_processes() {
    let s = Scratch::with_project_grant("bp-ps", EVERY_OPERATION);
    // `ps` once the child has become `sleep` (until its exec it is a
    // second `sh`).
    let out = s.run(&[
        "sh",
        "-c",
        "sleep 30 & until grep -q sleep /proc/$!/comm; do :; done; ps -o pid,comm; kill $!",
    ]);
    let listed: Vec<String> = stdout_lines(&out)
        .iter()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect();
    // The shell, its `sleep` and `ps` itself; not init, not pincer.
    assert!(!listed.contains(&"1".to_owned()), "{listed:?}");
    assert!(listed.len() >= 3, "{listed:?}");
    let names = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(names.contains("sleep") && names.contains("ps"), "{names}");
    assert!(!names.contains("pincer"), "{names}");
}

#[test]
fn ordinary_root_work_keeps_the_default_capabilities() {
    let s = Scratch::with_project_grant("bp-caps-ok", EVERY_OPERATION);
    s.assert_probe_lines(&[
        ("chown @project/a.txt 1000 1000", "ok changed"),
        ("chmod @project/a.txt 600", "ok changed"),
        // Root reads a file its mode closes to everyone.
        ("read @project/a.txt", "ok read 6"),
        ("chown @project/a.txt 0 0", "ok changed"),
        ("kill-child", "ok killed"),
        ("bind-port 8080", "ok bound"),
        ("bind-port 80", "ok bound"),
        ("mkfifo @project/fifo", "ok made"),
    ]);
    assert!(s.decisions_of("capable").is_empty(), "{:?}", s.decisions());
}

#[test]
fn a_capability_outside_the_set_is_refused_unless_the_mission_adds_it() {
    let s = Scratch::new("bp-caps-mission");
    assert_eq!(s.probe_outside(&["raw-socket"]), ["ok opened"]);
    s.project_mission(EVERY_OPERATION);
    s.assert_probes(&[("raw-socket", EPERM)]);
    assert_eq!(
        s.decisions_of("capable"),
        [(
            "deny".to_owned(),
            "the capability net_raw is not among the agent's (a mission may add it: defaults.capabilities)"
                .to_owned()
        )]
    );
    s.project_mission_and(
        EVERY_OPERATION,
        "[defaults]\ncapabilities = [\"net_raw\"]\n",
    );
    s.assert_probes(&[("raw-socket", 0)]);
}

#[test]
fn an_agents_own_sandbox_mounts_but_reaches_nothing_more() {
    let s = Scratch::new("bp-sandbox");
    fs::create_dir(s.path("project/scratch")).unwrap();
    s.project_mission(READ_WRITE);
    // A process outside every agent cgroup, in a user namespace of its own.
    let mut other = Reaped(
        Command::new(probe_bin())
            .args(["sandbox", ",", "sleep", "300"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let other_ns = format!("/proc/{}/ns/user", other.0.id());
    assert!(wait_for(Duration::from_secs(30), || {
        fs::read_link(&other_ns).ok() != fs::read_link("/proc/self/ns/user").ok()
    }));
    let enter_other = format!("setns-user {}", other.0.id());
    let secret_read = format!("ok read {}", SECRET.len());
    // The agent's own user and mount namespaces (as bubblewrap makes them):
    // it mounts there, and every object is still decided by its grants.
    s.assert_probe_lines(&[
        ("sandbox", "ok sandboxed"),
        ("read @project/src/main.rs", "ok read 13"),
        ("bind-mount @secret/key @project/src/main.rs", "ok mounted"),
        // The project's name now shows the secret, which is still the secret.
        ("read @project/src/main.rs", "err 13"),
        ("open-tree-clone @secret", "ok cloned"),
        // A tmpfs of its own holds what the agent puts there.
        ("mount-tmpfs @project/scratch", "ok mounted"),
        ("create-write @project/scratch/notes hello", "ok wrote 5"),
        ("mkdir @project/scratch/dir", "ok made"),
        ("read @project/scratch/notes", "ok read 5"),
        // Running it is still `exec`, which the mission does not grant.
        ("mmap-exec @project/scratch/notes", "err 13"),
        // Its sandbox gives it no capability against the initial
        // namespace, nor a way into a namespace someone else made: the
        // kernel refuses both before pincer is asked.
        ("raw-socket", "err 1"),
        (&enter_other, "err 13"),
        // The limits in `/proc/sys/user` it writes are its own namespace's
        // (bubblewrap's `--disable-userns`): none below it now. Every
        // other kernel setting stays refused.
        ("write /proc/sys/user/max_user_namespaces 0", "ok wrote 1"),
        ("sandbox", "err 28"),
        ("write /proc/sys/kernel/hostname x", "err 13"),
    ]);
    assert_eq!(
        s.denial_hooks(),
        ["file_open", "mmap_file", "file_open"],
        "{:#?}",
        s.decisions()
    );
    assert!(
        pincer_tests::text(&s.denials()[0]["path"]).ends_with("/secret/key"),
        "{:#?}",
        s.denials()
    );
    assert!(s.path("project/src/main.rs").exists());
    s.assert_absent("project/scratch/notes");
    s.assert_secret_unchanged();
    // Outside its sandbox the agent (root, whose credentials hold every
    // capability) still mounts nothing, and pincer keeps the other
    // namespace from it: its `/proc/<pid>/ns` needs the ptrace check.
    fs::remove_file(s.audit_path()).unwrap();
    s.assert_probe_lines(&[
        ("mount-tmpfs @project/scratch", "err 1"),
        (&enter_other, "err 13"),
        // The initial namespace's limits: the kernel refuses the write
        // before pincer is asked, as it takes a capability the agent does
        // not have against that namespace.
        ("write /proc/sys/user/max_user_namespaces 0", "err 13"),
    ]);
    // The mount is refused at `sb_mount`, which the kernel asks before
    // it checks the capability.
    assert_eq!(s.denial_hooks(), ["sb_mount", "ptrace_access_check"]);
    assert!(
        s.deny_reasons("sb_mount")[0].contains("mounting outside a sandbox of the agent's own"),
        "{:?}",
        s.deny_reasons("sb_mount")
    );
    // The control: outside every agent cgroup the same steps reach the
    // secret, run what the tmpfs holds and enter the other namespace.
    assert_eq!(
        s.probe_outside(&[
            "sandbox",
            "bind-mount @secret/key @project/src/main.rs",
            "read @project/src/main.rs",
            "mount-tmpfs @project/scratch",
            "create-write @project/scratch/notes hello",
            "mmap-exec @project/scratch/notes",
        ]),
        [
            "ok sandboxed",
            "ok mounted",
            &secret_read,
            "ok mounted",
            "ok wrote 5",
            "ok mapped",
        ]
    );
    assert_eq!(s.probe_outside(&[&enter_other]), ["ok entered"]);
    let _ = other.0.kill();
}

/// bubblewrap, as agents' own sandboxes run it, makes an empty file or
/// directory in the real tree at each name it binds something over, and
/// the names they protect are policy names: a sandbox of the agent's own
/// may leave such placeholders, empty, and nothing more.
#[test]
fn a_sandbox_of_its_own_leaves_only_empty_placeholders_at_policy_names() {
    let s = Scratch::with_project_grant("bp-placeholder", EVERY_OPERATION);
    fs::write(s.path("project/CLAUDE.md"), "be careful\n").unwrap();
    // The owner writes one placeholder while the agent runs: it is the
    // owner's file from then on.
    let settings = s.path("project/.claude/settings.json");
    let owner = {
        let settings = settings.clone();
        thread::spawn(move || {
            // The programs' first load in a guest takes a minute or more.
            assert!(wait_for(Duration::from_secs(600), || settings.exists()));
            fs::write(&settings, "{\"owner\": true}\n").unwrap();
        })
    };
    s.assert_probe_lines(&[
        ("sandbox", "ok sandboxed"),
        // A placeholder file is made, and the open that made it refused:
        // no descriptor writes it, and none can be had later.
        ("create-write @project/.mcp.json {}", "err 17"),
        ("read @project/.mcp.json", "ok read 0"),
        ("write @project/.mcp.json {}", "err 13"),
        ("mkdir @project/.claude", "ok made"),
        ("create @project/.claude/settings.json", "err 17"),
        ("mkdir @project/.claude/hooks", "ok made"),
        // In a placeholder directory even git's work names are
        // placeholders only: a `.git` it made is no repository of its own.
        ("mkdir @project/.git", "ok made"),
        ("create-write @project/.git/HEAD ref", "err 17"),
        ("read @project/.git/HEAD", "ok read 0"),
        ("mkdir @project/.git/hooks", "ok made"),
        // No executable placeholder, no link, no change to what exists,
        // nothing outside the mission.
        ("create-exec @project/.git/hooks/pre-commit", "err 13"),
        ("symlink @secret/key @project/.envrc", "err 13"),
        ("write @project/CLAUDE.md obey", "err 13"),
        ("mkdir @secret/.git", "err 13"),
        // What is not a policy name is the agent's work, as before.
        ("create-write @project/notes.txt hi", "ok wrote 2"),
        ("sleep 2", "ok slept"),
        // It tidies up its own empty placeholders, not what the owner
        // wrote into one, nor the owner's own files.
        ("unlink @project/.git/HEAD", "ok unlinked"),
        ("unlink @project/.claude/settings.json", "err 13"),
        ("unlink @project/CLAUDE.md", "err 13"),
    ]);
    owner.join().unwrap();
    assert_eq!(
        s.denial_hooks(),
        [
            "file_open",
            "inode_create",
            "inode_symlink",
            "file_open",
            "inode_mkdir",
            "inode_unlink",
            "inode_unlink"
        ],
        "{:#?}",
        s.decisions()
    );
    let meta = fs::metadata(s.path("project/.mcp.json")).unwrap();
    assert!(meta.is_file() && meta.len() == 0, "{meta:?}");
    assert_eq!(
        fs::read_to_string(&settings).unwrap(),
        "{\"owner\": true}\n"
    );
    assert!(s.path("project/.claude/hooks").is_dir());
    s.assert_absent("project/.git/HEAD");
    s.assert_absent("project/.git/hooks/pre-commit");
    s.assert_absent("project/.envrc");
    s.assert_absent("secret/.git");
    assert_eq!(
        fs::read_to_string(s.path("project/CLAUDE.md")).unwrap(),
        "be careful\n"
    );
    // Outside its sandbox, in the same cgroup, a policy name is refused as
    // before: nothing is made. A placeholder an earlier run made is not
    // this run's to remove.
    fs::remove_file(s.audit_path()).unwrap();
    s.assert_probe_lines(&[
        ("create @project/.npmrc", "err 13"),
        ("mkdir @project/.vscode", "err 13"),
        ("create-write @project/.mcp.json x", "err 13"),
        ("unlink @project/.mcp.json", "err 13"),
    ]);
    s.assert_absent("project/.npmrc");
    s.assert_absent("project/.vscode");
    assert_eq!(
        s.denial_hooks(),
        ["inode_create", "inode_mkdir", "file_open", "inode_unlink"]
    );
    // Audit mode changes nothing the program sees: the open keeps its
    // descriptor.
    let out = s.run_probe(
        &["--mode", "audit"],
        &["sandbox", "create-write @project/.prettierrc x"],
    );
    assert_eq!(stdout_lines(&out), ["ok sandboxed", "ok wrote 1"]);
    // The control: outside every agent cgroup, the sandbox writes what it
    // makes.
    assert_eq!(
        s.probe_outside(&["sandbox", "create-write @project/.npmrc x"]),
        ["ok sandboxed", "ok wrote 1"]
    );
}

#[test]
fn the_new_mount_api_is_refused() {
    let s = Scratch::with_project_grant("bp-mount-api", EVERY_OPERATION);
    // A mount the agent's owner made, which the agent must not turn
    // read-only or reconfigure.
    let mnt = s.path("mnt");
    fs::create_dir(&mnt).unwrap();
    let _mounted = Tmpfs::mount(&mnt);
    let ops = [
        "fsopen-mount @project/src",
        "fspick-ro @mnt",
        "mount-setattr-ro @mnt",
        "open-tree-clone @mnt",
        "bind-mount @mnt @project/src",
    ];
    assert_eq!(s.probes(&ops), [EPERM; 5]);
    fs::write(s.path("mnt/still-writable"), "yes").unwrap();
    assert!(s.path("project/src/main.rs").exists());
    let refused = s.decisions_of("capable");
    assert_eq!(refused.len(), 5, "{refused:?}");
    assert!(
        refused.iter().all(|(_, r)| r.contains("sys_admin")),
        "{refused:?}"
    );
    // Outside every agent cgroup each call works: a tmpfs mounted on the
    // target, the mount made read-only twice over, a clone of it.
    let outside = s.probe_outside(&ops[..4]);
    assert_eq!(
        outside,
        ["ok mounted", "ok reconfigured", "ok set", "ok cloned"]
    );
    assert!(!s.path("project/src/main.rs").exists(), "tmpfs on top");
    unmount(&s.p("project/src"));
    assert!(fs::write(s.path("mnt/now"), "no").is_err());
}

/// Sets a POSIX access ACL that gives user 1000 read on `path` (a minimal
/// one would only change the mode): version 2, then (tag, perm, id) entries
/// in tag order, 44 bytes.
fn set_acl(path: &std::path::Path) {
    let mut acl = 2u32.to_le_bytes().to_vec();
    for (tag, perm, id) in [
        (0x01u16, 6u16, u32::MAX),
        (0x02, 4, 1000),
        (0x04, 4, u32::MAX),
        (0x10, 4, u32::MAX),
        (0x20, 4, u32::MAX),
    ] {
        acl.extend_from_slice(&tag.to_le_bytes());
        acl.extend_from_slice(&perm.to_le_bytes());
        acl.extend_from_slice(&id.to_le_bytes());
    }
    set_xattr(path, "system.posix_acl_access", &acl);
}

#[test]
fn attributes_link_targets_and_notifications_need_read() {
    let s = Scratch::with_project_grant("bp-metadata", EVERY_OPERATION);
    set_acl(&s.path("secret/key"));
    set_acl(&s.path("project/a.txt"));
    std::os::unix::fs::symlink("key", s.path("secret/link")).unwrap();
    std::os::unix::fs::symlink("a.txt", s.path("project/link")).unwrap();
    let ops = [
        "getxattr @secret/key system.posix_acl_access",
        "listxattr @secret/key",
        "readlink @secret/link",
        "inotify @secret",
        "inotify @secret/key",
        "fanotify-perm @project/a.txt",
        "getxattr @project/a.txt system.posix_acl_access",
        "listxattr @project/a.txt",
        "readlink @project/link",
        "inotify @project",
        // The line: `stat` shows what a directory search shows.
        "stat @secret/key",
    ];
    // Outside every agent cgroup each of them works.
    let outside = s.probe_outside(&ops);
    assert_eq!(
        outside,
        [
            "ok value 44",
            "ok names 24",
            "ok target key",
            "ok watching",
            "ok watching",
            "ok marked",
            "ok value 44",
            "ok names 24",
            "ok target a.txt",
            "ok watching",
            "ok size 11"
        ]
    );
    let inside = s.probe_lines(&ops);
    assert_eq!(
        inside,
        [
            "err 13",
            "err 13",
            "err 13",
            "err 13",
            "err 13",
            "err 1",
            "ok value 44",
            "ok names 24",
            "ok target a.txt",
            "ok watching",
            "ok size 11"
        ]
    );
    let mut hooks = s.denials_with_reasons();
    hooks.sort();
    // ACLs are read through `inode_get_acl` since 6.2.
    let acl_hook = if kernel_at_least(6, 2) {
        "inode_get_acl"
    } else {
        "inode_getxattr"
    };
    let mut expected = vec![
        format!("{acl_hook} no grant covers read"),
        "capable the capability sys_admin is never given to agents: it reaches the kernel or pincer".to_owned(),
        "inode_listxattr no grant covers read".to_owned(),
        "inode_readlink no grant covers read".to_owned(),
        "path_notify no grant covers read".to_owned(),
        "path_notify no grant covers read".to_owned(),
    ];
    expected.sort();
    assert_eq!(hooks, expected);
}

/// Whether the running kernel is at least `major.minor`.
fn kernel_at_least(major: u32, minor: u32) -> bool {
    let release = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let mut parts = release
        .trim()
        .split(['.', '-'])
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let found = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    found >= (major, minor)
}

#[test]
fn an_inherited_directory_descriptor_gives_no_change_notifications() {
    let s = Scratch::with_project_grant("bp-dnotify", EVERY_OPERATION);
    let secret = fs::File::open(s.path("secret")).unwrap();
    let project = fs::File::open(s.path("project")).unwrap();
    // Handed over on purpose: `pincer run` closes what it is not told to pass.
    let lines = s.probe_holding(
        &[(&secret, 9), (&project, 10)],
        &["--pass-fd", "9", "--pass-fd", "10"],
        &["dnotify 9", "dnotify 10"],
    );
    assert_eq!(lines, ["err 13", "ok watching"]);
    assert_eq!(s.deny_reasons("path_notify"), ["no grant covers read"]);
}

#[test]
fn ipc_objects_made_outside_the_cgroup_are_out_of_reach() {
    let s = Scratch::with_project_grant("bp-ipc", EVERY_OPERATION);
    let ipc = ForeignIpc::new();
    let (msg, shm, sem) = (ipc.msg, ipc.shm, ipc.sem);
    let uses_and_removals = [
        format!("msg-get {IPC_KEY}"),
        format!("msg-send {msg}"),
        format!("msg-stat {msg}"),
        format!("shm-get {}", IPC_KEY + 1),
        format!("shm-attach {shm}"),
        format!("sem-get {}", IPC_KEY + 2),
        format!("sem-op {sem}"),
        format!("msg-rm {msg}"),
        format!("shm-rm {shm}"),
        format!("sem-rm {sem}"),
    ];
    let outside: Vec<&str> = uses_and_removals.iter().map(String::as_str).collect();
    let mut inside = outside.clone();
    inside.push("ipc-own");
    let lines = s.probe_lines(&inside);
    assert_eq!(lines[..10], ["err 13"; 10], "{lines:?}");
    assert_eq!(lines[10], "ok queue, segment and semaphores used");
    assert!(ipc.exist(), "the agent removed nothing");
    for d in s.denials() {
        assert_eq!(
            d["reason"],
            "IPC objects and keys created outside the agent's cgroup are never open to it"
        );
    }
    assert_eq!(
        s.denial_hooks(),
        [
            "ipc_permission",
            "ipc_permission",
            "ipc_permission",
            "ipc_permission",
            "ipc_permission",
            "ipc_permission",
            "ipc_permission",
            "msg_queue_msgctl",
            "shm_shmctl",
            "sem_semctl"
        ]
    );
    // Outside every agent cgroup the same calls work.
    let lines = s.probe_outside(&outside);
    assert!(lines.iter().all(|l| l.starts_with("ok")), "{lines:?}");
    assert!(!ipc.exist());
}

#[test]
fn keys_made_outside_the_cgroup_are_out_of_reach() {
    let s = Scratch::with_project_grant("bp-keys", EVERY_OPERATION);
    let read = format!("key-read {}", foreign_key());
    assert_eq!(s.probe_outside(&[&read]), ["ok read 11"]);
    let lines = s.probe_lines(&[&read, "key-own"]);
    // `keyctl read` looks the key up with its permission check deferred to
    // the security modules, and reports a refused lookup as `ENOKEY`.
    assert_eq!(lines, ["err 126", "ok read 4"]);
    let denied = s.decisions_of("key_permission");
    assert!(!denied.is_empty());
    assert!(denied.iter().all(|(verdict, reason)| verdict == "deny"
        && reason
            == "IPC objects and keys created outside the agent's cgroup are never open to it"));
}

#[test]
fn anonymous_pipes_and_sockets_are_not_files_to_protect() {
    let s = Scratch::with_project_grant("bp-pipes", EVERY_OPERATION);
    // A pipe on standard input, reopened as `/dev/stdin` and `<(...)` do.
    let out = s.run(&["sh", "-c", "echo piped | cat /proc/self/fd/0"]);
    assert_eq!(stdout_lines(&out), ["piped"]);
    assert_eq!(out.status.code(), Some(0));
    // A named pipe is a file like any other: not granted, refused.
    let fifo = CString::new(s.p("secret/fifo")).unwrap();
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    assert_eq!(s.probe("read @secret/fifo"), EACCES);

    // A pipe and a socket passed in over a Unix socket arrive and work.
    let socket = s.path("project/sock");
    // Written and closed on this side first: the agent reads to the end.
    let (pipe_out, pipe_in) = nix::unistd::pipe().unwrap();
    nix::unistd::write(&pipe_in, b"piped\n").unwrap();
    drop(pipe_in);
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    (&ours).write_all(b"sock\n").unwrap();
    drop(ours);
    let sender = send_on_connect(&socket, vec![pipe_out, theirs.into()]);
    let r = s.probe_lines(&["recv-fd @project/sock", "recv-fd @project/sock"]);
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

#[test]
fn descriptors_opened_before_the_agent_are_not_inherited_unless_passed() {
    let s = Scratch::with_project_grant("bp-inherit", EVERY_OPERATION);
    let secret = s.p("secret/key");
    let held = fs::File::open(&secret).unwrap();
    // Not passed: closed on exec.
    let lines = s.probe_holding(&[(&held, 7)], &[], &["fd-read 7"]);
    assert_eq!(lines, [format!("err {}", libc::EBADF)]);
    // Passed on purpose: the agent reads through it, and the audit log
    // says what was passed.
    let lines = s.probe_holding(&[(&held, 7)], &["--pass-fd", "7"], &["fd-read 7"]);
    assert_eq!(lines, ["ok fd read 11"]);
    let passed = s.audit_events("descriptors");
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
    let out = s.run_with(&["--pass-fd", "1"], &["true"]);
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
    let s = Scratch::with_project_grant("bp-two-runs", EVERY_OPERATION);
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
        s.command(&[], &["sh", "-c", &script])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let run_b = b.0.id();
    let mut watchdog = None;
    assert!(pincer_tests::wait_for(Duration::from_secs(250), || {
        watchdog = watchdog_of(run_b);
        watchdog.is_some()
    }));
    let watchdog = watchdog.unwrap();
    // B's programs are pinned while it runs.
    let pins = std::path::Path::new("/sys/fs/bpf/pincer-runs").join(run_b.to_string());
    assert!(pins.join("links/file_open").exists(), "{}", pins.display());

    // Run A's agent cannot signal B's processes.
    s.assert_probes(&[
        (&format!("kill {run_b} 9"), EPERM),
        (&format!("kill {watchdog} 9"), EPERM),
    ]);

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
    s.assert_secret_unchanged();
    // Its agent gone, the next run removes what B left.
    let _ = b.0.wait();
    assert!(pincer_tests::wait_for(Duration::from_secs(30), || {
        s.run(&["true"]);
        !pins.exists()
    }));
}
