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
    EACCES, EPERM, Reaped, Scratch, Terminal, asking_mission, pending, probe_bin, read_stdout,
    stdout_lines, tree_mission, wait_for,
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
    let lines = with_inherited_writer(
        &s,
        &m,
        "secret/key",
        &[
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
    assert_eq!(lines, ["err 13", "err 13", "ok truncated"]);
    secret_unchanged(&s);
    assert_eq!(fs::read_to_string(s.path("project/a.txt")).unwrap(), "al");
    assert_eq!(
        deny_reasons(&s, "inode_setattr"),
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

/// Runs the probe outside every agent cgroup: the control that shows a
/// mechanism works before it is tried from inside one.
fn unconfined(args: &[&str]) -> Vec<String> {
    let out = Command::new(probe_bin())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    stdout_lines(&out)
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
    let control = unconfined(&[
        "truncate",
        &s.p("secret/capable-control"),
        "0",
        ",",
        "nofsetid",
        ",",
        "truncate",
        &s.p("secret/setuid-control"),
        "0",
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
    let m = s.project_mission(r#""read", "write""#);
    let r = s.probe_lines(
        &m,
        &[
            &["truncate", &s.p("secret/capable"), "0"],
            &["nofsetid"],
            &["truncate", &s.p("secret/setuid"), "0"],
            // The kernel's own drops are part of a granted write.
            &["truncate", &s.p("project/setuid"), "3"],
            &["append", &s.p("project/capable"), "!"],
        ],
    );
    assert_eq!(
        r,
        [
            "err 13",
            "ok dropped",
            "err 13",
            "ok truncated",
            "ok wrote 1"
        ]
    );
    assert_eq!(
        fs::read_to_string(s.path("secret/capable")).unwrap(),
        SECRET
    );
    assert_eq!(
        xattr(&s.path("secret/capable"), "security.capability"),
        Some(file_capability())
    );
    assert_eq!(fs::read_to_string(s.path("secret/setuid")).unwrap(), SECRET);
    assert_eq!(mode_of(&s, "secret/setuid"), 0o4755);
    assert_eq!(fs::read_to_string(s.path("project/setuid")).unwrap(), "TOP");
    assert_eq!(mode_of(&s, "project/setuid"), 0o755);
    assert_eq!(
        fs::read_to_string(s.path("project/capable")).unwrap(),
        format!("{SECRET}!")
    );
    assert_eq!(
        xattr(&s.path("project/capable"), "security.capability"),
        None
    );
    assert_eq!(
        deny_reasons(&s, "inode_setattr"),
        ["no grant covers write", "no grant covers write"]
    );
}

/// Runs `pincer run` with the probe and `file` open for writing as the
/// agent's descriptor 9, passed on purpose (`pincer run` closes what it is
/// not told to pass); returns the probe's lines.
fn with_inherited_writer(
    s: &Scratch,
    mission: &std::path::Path,
    file: &str,
    ops: &[&str],
) -> Vec<String> {
    let inherited = fs::OpenOptions::new()
        .write(true)
        .open(s.path(file))
        .unwrap();
    s.probe_holding(mission, &inherited, 9, &["--pass-fd", "9"], ops)
}

/// `FIFREEZE`, for the probe's `ioctl`.
const FIFREEZE: &str = "c0045877";

#[test]
fn ioctls_that_change_a_file_need_setattr_or_write() {
    let s = Scratch::new("bp-ioctl");
    let key = s.p("secret/key");
    let a = s.p("project/a.txt");
    let b = s.p("project/b.txt");
    let project = s.p("project");
    // Control, outside every agent cgroup: a descriptor open for reading is
    // enough to make a file immutable, which its owner then cannot write.
    let control = unconfined(&[
        "setflags",
        &key,
        "i",
        ",",
        "write",
        &key,
        "x",
        ",",
        "setflags32",
        &key,
        "i",
        ",",
        "setflags",
        &key,
        "-",
        ",",
        "fsxattr-immutable",
        &key,
        ",",
        "setflags",
        &key,
        "-",
        ",",
        "clone",
        &key,
        &a,
        ",",
        "ioctl",
        &project,
        FIFREEZE,
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
    let m = s.mission(&format!(
        "[mission]\nname = \"test\"\n\n[[grant]]\npath = \"{}\"\nops = [{ALL_OPS}]\nextent = \"tree\"\n\n[[grant]]\npath = \"{key}\"\nops = [\"read\"]\n",
        s.p("project")
    ));
    let r = with_inherited_writer(
        &s,
        &m,
        "secret/key",
        &[
            "getflags",
            &key,
            ",",
            "setflags",
            &key,
            "i",
            ",",
            "setflags32",
            &key,
            "a",
            ",",
            "fsxattr-immutable",
            &key,
            ",",
            "clone-fd",
            "9",
            &a,
            ",",
            "setflags",
            &a,
            "d",
            ",",
            "getflags",
            &a,
            ",",
            "setflags",
            &a,
            "-",
            ",",
            "setflags",
            &a,
            "i",
            ",",
            "clone",
            &b,
            &a,
            ",",
            "ioctl",
            &project,
            FIFREEZE,
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
    secret_unchanged(&s);
    assert_eq!(unconfined(&["getflags", &key]), ["ok flags 0x0"]);
    assert_eq!(unconfined(&["getflags", &a]), ["ok flags 0x0"]);
    let mut reasons = deny_reasons(&s, "file_ioctl");
    reasons.extend(deny_reasons(&s, "file_ioctl_compat"));
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
    let m = s.mission(&format!(
        "{}\n[[grant]]\npath = \"/dev/tty1\"\nops = [\"read\"]\n",
        tree_mission(&s.p("project"), r#""read", "write""#)
    ));
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
        .command(&m, &[], &cmd_line)
        .stdin(terminal.slave())
        .output()
        .unwrap();
    assert_eq!(stdout_lines(&out), ["err 1", "err 1", "err 1", "ok tty"]);
    assert_eq!(terminal.pending_input(), "", "nothing was typed");
    let refused: Vec<String> = s
        .decisions()
        .into_iter()
        .filter(|d| d["verdict"] == "deny")
        .map(|d| {
            format!(
                "{} {}",
                d["hook"].as_str().unwrap(),
                d["reason"].as_str().unwrap()
            )
        })
        .collect();
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
    fs::set_permissions(s.path("secret/key"), fs::Permissions::from_mode(0o600)).unwrap();
    set_acl(&s.path("secret/key"));
    set_acl(&s.path("project/a.txt"));
    let key_mode = fs::metadata(s.path("secret/key"))
        .unwrap()
        .permissions()
        .mode();
    let m = full_tree(&s);
    let key = s.p("secret/key");
    let a = s.p("project/a.txt");
    let acl = "system.posix_acl_access";
    let r = s.probes(
        &m,
        &[
            &["chmod", &key, "644"],
            &["chown", &key, "1000", "1000"],
            &["setxattr", &key, "user.evil", "1"],
            &["removexattr", &key, acl],
            &["chmod", &a, "640"],
            &["chown", &a, "1000", "1000"],
            &["removexattr", &a, acl],
            // `trusted.*` attributes need `CAP_SYS_ADMIN`, which no agent
            // has, even inside its tree.
            &["setxattr", &a, "trusted.new", "1"],
            // Through `inode_setxattr` on 6.1, `inode_set_acl` since 6.2.
            &["setfacl", &key],
            &["setfacl", &s.p("project/b.txt")],
        ],
    );
    assert_eq!(
        r,
        [EACCES, EACCES, EACCES, EACCES, 0, 0, 0, EPERM, EACCES, 0]
    );
    let meta = fs::metadata(s.path("secret/key")).unwrap();
    assert_eq!(meta.permissions().mode(), key_mode);
    assert_eq!(std::os::unix::fs::MetadataExt::uid(&meta), 0);
    assert_eq!(xattr(&s.path("secret/key"), acl).map(|v| v.len()), Some(44));
    assert_eq!(xattr(&s.path("secret/key"), "user.evil"), None);
    assert_eq!(xattr(&s.path("project/a.txt"), acl), None);
    assert_eq!(xattr(&s.path("project/a.txt"), "trusted.new"), None);
    let meta = fs::metadata(s.path("project/a.txt")).unwrap();
    assert_eq!(meta.permissions().mode() & 0o7777, 0o640);
    secret_unchanged(&s);
}

#[test]
fn reopening_through_proc_and_opening_with_io_uring_are_checked_like_opens() {
    let s = Scratch::new("bp-reopen");
    let m = full_tree(&s);
    let (secret, project) = (s.p("secret/key"), s.p("project/a.txt"));
    let r = s.probe_lines(
        &m,
        &[
            // An `O_PATH` descriptor reopened through `/proc/self/fd`.
            &["opath-reopen", &secret],
            &["opath-reopen", &project],
            &["uring-open", &secret],
            &["uring-open", &project],
        ],
    );
    assert_eq!(r, ["err 13", "ok read 6", "err 13", "ok read 6"]);
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

/// Listens on `socket` and sends each of `fds`, in order, to one
/// connection (`SCM_RIGHTS`). Gives up, failing the thread, after a minute
/// without a connection: a probe that never connects fails the test
/// instead of leaving it waiting.
fn send_on_connect(socket: &std::path::Path, fds: Vec<OwnedFd>) -> thread::JoinHandle<()> {
    let listener = UnixListener::bind(socket).unwrap();
    listener.set_nonblocking(true).unwrap();
    thread::spawn(move || {
        for fd in fds {
            let deadline = Instant::now() + Duration::from_secs(60);
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
    let s = Scratch::new("bp-scm");
    let m = full_tree(&s);
    let socket = s.path("project/sock");
    let files = [s.path("secret/key"), s.path("project/a.txt")]
        .map(|file| OwnedFd::from(fs::File::open(file).unwrap()));
    let sender = send_on_connect(&socket, files.into());
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
    // `bpf(2)` may also ask for `CAP_BPF` first (6.1): the capability rule's
    // refusals are left out here.
    let hooks: Vec<String> = s
        .decisions()
        .into_iter()
        .filter(|d| d["verdict"] == "deny" && d["hook"] != "capable")
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
fn every_thread_of_the_twin_is_guarded() {
    let s = Scratch::new("bp-threads");
    let m = full_tree(&s);
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
    let mut command = s.command(&m, &[], &["sh", "-c", &script]);
    terminal.attach(&mut command, false);
    let mut run = Reaped(command.stdout(Stdio::piped()).spawn().unwrap());
    let twin = run.0.id();
    assert!(
        wait_for(Duration::from_secs(120), || fs::metadata(&ready).is_ok()),
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
        wait_for(Duration::from_secs(60), || {
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
    let hooks: Vec<String> = s
        .decisions()
        .into_iter()
        .filter(|d| d["verdict"] == "deny")
        .map(|d| d["hook"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        hooks,
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
    let s = Scratch::new("bp-mount");
    let m = full_tree(&s);
    let r = s.probes(&m, &[&["bind-mount", &s.p("secret"), &s.p("project/src")]]);
    assert_eq!(r, [EPERM]);
    assert!(s.path("project/src/main.rs").exists());
    assert!(!s.path("project/src/key").exists());
    // The new mount namespace needs `CAP_SYS_ADMIN`: refused there, before
    // `sb_mount` (which would refuse the mount itself) is reached.
    assert_eq!(
        decisions_of(&s, "capable"),
        [(
            "deny".to_owned(),
            "the capability sys_admin is never given to agents: it reaches the kernel or pincer"
                .to_owned()
        )]
    );
    assert!(decisions_of(&s, "sb_mount").is_empty());
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

/// The decisions of one hook, as (verdict, reason).
fn decisions_of(s: &Scratch, hook: &str) -> Vec<(String, String)> {
    s.decisions()
        .into_iter()
        .filter(|d| d["hook"] == hook)
        .map(|d| {
            (
                d["verdict"].as_str().unwrap_or_default().to_owned(),
                d["reason"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// A file that is no kernel module: the loader refuses it as soon as it
/// reads it (`ENOEXEC`), which shows a load got past every check before.
/// It is longer than an ELF header: `init_module` refuses anything shorter
/// before it asks `kernel_load_data`.
fn not_a_module(s: &Scratch) -> String {
    let mut bytes = b"\x7fELF not really a module\n".to_vec();
    bytes.resize(256, b'\n');
    fs::write(s.path("project/evil.ko"), bytes).unwrap();
    s.p("project/evil.ko")
}

#[test]
fn kernel_modules_and_kexec_are_refused_to_agents() {
    let s = Scratch::new("bp-modules");
    let module = not_a_module(&s);
    let m = full_tree(&s);
    let ops: &[&[&str]] = &[
        &["finit-module", &module],
        &["init-module", &module],
        &["kexec-unload"],
    ];
    // Outside every agent cgroup the calls reach the module loader and
    // kexec.
    assert_eq!(
        pincer_tests::probe_outside(ops),
        ["err 8", "err 8", "ok unloaded"]
    );
    assert_eq!(s.probes(&m, ops), [EPERM, EPERM, EPERM]);
    let refused: Vec<_> = decisions_of(&s, "capable")
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
    let module = not_a_module(&s);
    let m = full_tree(&s);
    let out = s.run_with(
        &m,
        &["--mode", "audit"],
        &[
            probe_bin().to_str().unwrap(),
            "finit-module",
            &module,
            ",",
            "init-module",
            &module,
        ],
    );
    assert_eq!(stdout_lines(&out), ["err 8", "err 8"]);
    for hook in ["kernel_read_file", "kernel_load_data"] {
        let seen = decisions_of(&s, hook);
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
        decisions_of(&s, "capable")
            .iter()
            .any(|(verdict, reason)| verdict == "audit" && reason.contains("sys_module"))
    );
}

#[test]
fn kernel_memory_and_raw_devices_stay_closed_whatever_the_grants() {
    let s = Scratch::new("bp-kmem");
    // Grants that name the kernel's memory outright.
    let mut mission = tree_mission_all(&s);
    for path in ["/proc/kcore", "/proc/kmsg", "/dev/mem", "/dev/port"] {
        mission.push_str(&format!(
            "\n[[grant]]\npath = \"{path}\"\nops = [\"read\", \"write\"]\n"
        ));
    }
    let m = s.mission(&mission);
    let mut ops: Vec<&[&str]> = vec![
        &["peek", "/proc/kcore"],
        &["open", "/proc/kmsg"],
        &["peek", "/dev/mem"],
    ];
    // The 6.12 cloud kernel has no `/dev/port` (`CONFIG_DEVPORT` off); where
    // it exists its open asks for `CAP_SYS_RAWIO` like `/dev/mem`.
    if std::path::Path::new("/dev/port").exists() {
        ops.push(&["open", "/dev/port"]);
    }
    let outside = pincer_tests::probe_outside(&ops);
    assert_eq!(outside[0], "ok peeked 64", "{outside:?}");
    assert_eq!(outside[1..3], ["ok opened", "ok peeked 64"]);
    assert!(outside[3..].iter().all(|l| l == "ok opened"), "{outside:?}");
    assert_eq!(s.probes(&m, &ops), vec![EPERM; ops.len()]);
    let refused: Vec<_> = decisions_of(&s, "capable")
        .into_iter()
        .map(|(_, reason)| reason)
        .collect();
    for cap in ["sys_rawio", "syslog"] {
        assert!(refused.iter().any(|r| r.contains(cap)), "{refused:?}");
    }
}

/// A mission granting every operation on `project/` (and the runtime
/// baseline), as TOML to add to.
fn tree_mission_all(s: &Scratch) -> String {
    format!(
        "[mission]\nname = \"test\"\n\n[[grant]]\npath = \"{}\"\nops = [{ALL_OPS}]\nextent = \"tree\"\n",
        s.p("project")
    )
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
    let mut mission = tree_mission_all(&s);
    mission.push_str(
        "\n[[grant]]\npath = \"/sys/kernel/debug\"\nops = [\"read\"]\nextent = \"tree\"\n",
    );
    let m = s.mission(&mission);
    let ops: &[&[&str]] = &[&["open", &s.p("project/disk")], &["peek", &debugfs]];
    let outside = pincer_tests::probe_outside(ops);
    // Outside, the open reaches the block layer (no loop device is set up,
    // hence `ENXIO`) and debugfs.
    assert_eq!(outside[0], "err 6", "{outside:?}");
    assert!(outside[1].starts_with("ok peeked"), "{outside:?}");
    assert_eq!(s.probes(&m, ops), [EACCES, EACCES]);
    let reasons = deny_reasons(&s, "file_open");
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
    let s = Scratch::new("bp-proc-rule");
    let m = full_tree(&s);
    // Outside, init's entries and the kernel's files are there to read.
    assert_eq!(
        pincer_tests::probe_outside(&[&["open", "/proc/1/status"], &["open", "/proc/1/cmdline"]]),
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
    let out = s.run(&m, &["sh", "-c", &script]);
    let lines = stdout_lines(&out);
    assert_eq!(lines.len(), 17, "{lines:?}");
    for (i, line) in lines[..8].iter().enumerate() {
        assert!(line.starts_with("ok"), "{i}: {lines:?}");
    }
    // `/proc/self` names the reader's own entries.
    let own = lines[6].strip_prefix("ok target ").unwrap_or_default();
    assert!(own.parse::<u32>().is_ok(), "{lines:?}");
    assert_eq!(lines[8..], ["err 13"; 9], "{lines:?}");
    let reasons = deny_reasons(&s, "file_open");
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
    let s = Scratch::new("bp-ps");
    let m = full_tree(&s);
    // `ps` once the child has become `sleep` (until its exec it is a
    // second `sh`).
    let out = s.run(
        &m,
        &[
            "sh",
            "-c",
            "sleep 30 & until grep -q sleep /proc/$!/comm; do :; done; ps -o pid,comm; kill $!",
        ],
    );
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
    let s = Scratch::new("bp-caps-ok");
    let m = full_tree(&s);
    let a = s.p("project/a.txt");
    let lines = s.probe_lines(
        &m,
        &[
            &["chown", &a, "1000", "1000"],
            &["chmod", &a, "600"],
            // Root reads a file its mode closes to everyone.
            &["read", &a],
            &["chown", &a, "0", "0"],
            &["kill-child"],
            &["bind-port", "8080"],
            &["bind-port", "80"],
            &["mkfifo", &s.p("project/fifo")],
        ],
    );
    assert_eq!(
        lines,
        [
            "ok changed",
            "ok changed",
            "ok read 6",
            "ok changed",
            "ok killed",
            "ok bound",
            "ok bound",
            "ok made"
        ]
    );
    assert!(
        decisions_of(&s, "capable").is_empty(),
        "{:?}",
        s.decisions()
    );
}

#[test]
fn a_capability_outside_the_set_is_refused_unless_the_mission_adds_it() {
    let s = Scratch::new("bp-caps-mission");
    let ops: &[&[&str]] = &[&["raw-socket"]];
    assert_eq!(pincer_tests::probe_outside(ops), ["ok opened"]);
    let m = full_tree(&s);
    assert_eq!(s.probes(&m, ops), [EPERM]);
    assert_eq!(
        decisions_of(&s, "capable"),
        [(
            "deny".to_owned(),
            "the capability net_raw is not among the agent's (a mission may add it: defaults.capabilities)"
                .to_owned()
        )]
    );
    let m = s.mission(&format!(
        "{}\n[defaults]\ncapabilities = [\"net_raw\"]\n",
        tree_mission_all(&s)
    ));
    assert_eq!(s.probes(&m, ops), [0]);
}

#[test]
fn the_new_mount_api_is_refused() {
    let s = Scratch::new("bp-mount-api");
    let m = full_tree(&s);
    // A mount the agent's owner made, which the agent must not turn
    // read-only or reconfigure.
    let mnt = s.path("mnt");
    fs::create_dir(&mnt).unwrap();
    let _mounted = Tmpfs::mount(&mnt);
    let target = s.p("project/src");
    let mnt = s.p("mnt");
    let ops: &[&[&str]] = &[
        &["fsopen-mount", &target],
        &["fspick-ro", &mnt],
        &["mount-setattr-ro", &mnt],
        &["open-tree-clone", &mnt],
        &["bind-mount", &mnt, &target],
    ];
    assert_eq!(s.probes(&m, ops), [EPERM; 5]);
    fs::write(s.path("mnt/still-writable"), "yes").unwrap();
    assert!(s.path("project/src/main.rs").exists());
    let refused = decisions_of(&s, "capable");
    assert_eq!(refused.len(), 5, "{refused:?}");
    assert!(
        refused.iter().all(|(_, r)| r.contains("sys_admin")),
        "{refused:?}"
    );
    // Outside every agent cgroup each call works: a tmpfs mounted on the
    // target, the mount made read-only twice over, a clone of it.
    let outside = pincer_tests::probe_outside(&ops[..4]);
    assert_eq!(
        outside,
        ["ok mounted", "ok reconfigured", "ok set", "ok cloned"]
    );
    assert!(!s.path("project/src/main.rs").exists(), "tmpfs on top");
    unmount(&target);
    assert!(fs::write(s.path("mnt/now"), "no").is_err());
}

/// A tmpfs mounted for a test, unmounted on drop.
struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    fn mount(dir: &std::path::Path) -> Tmpfs {
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "tmpfs"])
            .arg(dir)
            .status()
            .unwrap();
        assert!(status.success());
        Tmpfs(dir.to_owned())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        unmount(&self.0.to_string_lossy());
    }
}

fn unmount(path: &str) {
    let _ = std::process::Command::new("umount").arg(path).status();
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
    let s = Scratch::new("bp-metadata");
    let m = full_tree(&s);
    set_acl(&s.path("secret/key"));
    set_acl(&s.path("project/a.txt"));
    std::os::unix::fs::symlink("key", s.path("secret/link")).unwrap();
    std::os::unix::fs::symlink("a.txt", s.path("project/link")).unwrap();
    let acl = "system.posix_acl_access";
    let ops: &[&[&str]] = &[
        &["getxattr", &s.p("secret/key"), acl],
        &["listxattr", &s.p("secret/key")],
        &["readlink", &s.p("secret/link")],
        &["inotify", &s.p("secret")],
        &["inotify", &s.p("secret/key")],
        &["fanotify-perm", &s.p("project/a.txt")],
        &["getxattr", &s.p("project/a.txt"), acl],
        &["listxattr", &s.p("project/a.txt")],
        &["readlink", &s.p("project/link")],
        &["inotify", &s.p("project")],
        // The line: `stat` shows what a directory search shows.
        &["stat", &s.p("secret/key")],
    ];
    // Outside every agent cgroup each of them works.
    let outside = pincer_tests::probe_outside(ops);
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
    let inside = s.probe_lines(&m, ops);
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
    let mut hooks: Vec<String> = s
        .decisions()
        .into_iter()
        .filter(|d| d["verdict"] == "deny")
        .map(|d| {
            format!(
                "{} {}",
                d["hook"].as_str().unwrap(),
                d["reason"].as_str().unwrap()
            )
        })
        .collect();
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
    let s = Scratch::new("bp-dnotify");
    let m = full_tree(&s);
    let secret = fs::File::open(s.path("secret")).unwrap();
    let project = fs::File::open(s.path("project")).unwrap();
    let probe = probe_bin();
    // Handed over on purpose: `pincer run` closes what it is not told to pass.
    let mut cmd = s.command(
        &m,
        &["--pass-fd", "9", "--pass-fd", "10"],
        &[
            probe.to_str().unwrap(),
            "dnotify",
            "9",
            ",",
            "dnotify",
            "10",
        ],
    );
    let fds = [(secret.as_raw_fd(), 9), (project.as_raw_fd(), 10)];
    // SAFETY: only dup2 and fcntl between fork and exec.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
            for (from, to) in fds {
                if libc::dup2(from, to) < 0 || libc::fcntl(to, libc::F_SETFD, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    assert_eq!(stdout_lines(&out), ["err 13", "ok watching"]);
    assert_eq!(deny_reasons(&s, "path_notify"), ["no grant covers read"]);
}

/// System V IPC keys of the objects made outside the agent's cgroup.
const IPC_KEY: i32 = 0x5049_4e43;

/// A message queue, a shared memory segment and a semaphore set made
/// outside every agent cgroup, open to everyone by their modes; removed on
/// drop.
struct ForeignIpc {
    msg: i32,
    shm: i32,
    sem: i32,
}

impl ForeignIpc {
    fn new() -> ForeignIpc {
        let flags = libc::IPC_CREAT | 0o666;
        // SAFETY: plain System V calls with valid arguments.
        let ipc = unsafe {
            ForeignIpc {
                msg: libc::msgget(IPC_KEY, flags),
                shm: libc::shmget(IPC_KEY + 1, 4096, flags),
                sem: libc::semget(IPC_KEY + 2, 1, flags),
            }
        };
        assert!(ipc.msg >= 0 && ipc.shm >= 0 && ipc.sem >= 0);
        ipc
    }

    /// Whether all three still exist.
    fn exist(&self) -> bool {
        // SAFETY: IPC_STAT into zeroed structures of the right types.
        unsafe {
            let mut msg: libc::msqid_ds = std::mem::zeroed();
            let mut shm: libc::shmid_ds = std::mem::zeroed();
            libc::msgctl(self.msg, libc::IPC_STAT, &mut msg) == 0
                && libc::shmctl(self.shm, libc::IPC_STAT, &mut shm) == 0
                && libc::semctl(self.sem, 0, libc::GETVAL) >= 0
        }
    }
}

impl Drop for ForeignIpc {
    fn drop(&mut self) {
        // SAFETY: removing what `new` made; errors (already gone) are fine.
        unsafe {
            libc::msgctl(self.msg, libc::IPC_RMID, std::ptr::null_mut());
            libc::shmctl(self.shm, libc::IPC_RMID, std::ptr::null_mut());
            libc::semctl(self.sem, 0, libc::IPC_RMID);
        }
    }
}

#[test]
fn ipc_objects_made_outside_the_cgroup_are_out_of_reach() {
    let s = Scratch::new("bp-ipc");
    let m = full_tree(&s);
    let ipc = ForeignIpc::new();
    let (msg, shm, sem) = (
        ipc.msg.to_string(),
        ipc.shm.to_string(),
        ipc.sem.to_string(),
    );
    let (msg_key, shm_key, sem_key) = (
        IPC_KEY.to_string(),
        (IPC_KEY + 1).to_string(),
        (IPC_KEY + 2).to_string(),
    );
    let uses: &[&[&str]] = &[
        &["msg-get", &msg_key],
        &["msg-send", &msg],
        &["msg-stat", &msg],
        &["shm-get", &shm_key],
        &["shm-attach", &shm],
        &["sem-get", &sem_key],
        &["sem-op", &sem],
    ];
    let removals: &[&[&str]] = &[&["msg-rm", &msg], &["shm-rm", &shm], &["sem-rm", &sem]];
    let mut inside: Vec<&[&str]> = uses.iter().chain(removals).copied().collect();
    inside.push(&["ipc-own"]);
    let lines = s.probe_lines(&m, &inside);
    assert_eq!(lines[..10], ["err 13"; 10], "{lines:?}");
    assert_eq!(lines[10], "ok queue, segment and semaphores used");
    assert!(ipc.exist(), "the agent removed nothing");
    let hooks: Vec<String> = s
        .decisions()
        .into_iter()
        .filter(|d| d["verdict"] == "deny")
        .map(|d| {
            assert_eq!(
                d["reason"],
                "IPC objects and keys created outside the agent's cgroup are never open to it"
            );
            d["hook"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(
        hooks,
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
    let outside: Vec<&[&str]> = uses.iter().chain(removals).copied().collect();
    let lines = pincer_tests::probe_outside(&outside);
    assert!(lines.iter().all(|l| l.starts_with("ok")), "{lines:?}");
    assert!(!ipc.exist());
}

#[test]
fn keys_made_outside_the_cgroup_are_out_of_reach() {
    let s = Scratch::new("bp-keys");
    let m = full_tree(&s);
    let serial = foreign_key();
    let ops: &[&[&str]] = &[&["key-read", &serial]];
    assert_eq!(pincer_tests::probe_outside(ops), ["ok read 11"]);
    let lines = s.probe_lines(&m, &[&["key-read", &serial], &["key-own"]]);
    // `keyctl read` looks the key up with its permission check deferred to
    // the security modules, and reports a refused lookup as `ENOKEY`.
    assert_eq!(lines, ["err 126", "ok read 4"]);
    let denied = decisions_of(&s, "key_permission");
    assert!(!denied.is_empty());
    assert!(denied.iter().all(|(verdict, reason)| verdict == "deny"
        && reason
            == "IPC objects and keys created outside the agent's cgroup are never open to it"));
}

/// Adds a user key holding the secret to root's user keyring, readable by
/// anyone its permissions concern; returns its serial number.
fn foreign_key() -> String {
    const KEY_SPEC_USER_KEYRING: i32 = -4;
    const KEYCTL_SETPERM: i32 = 5;
    let (kind, name) = (c"user", c"pincer-test-secret");
    // SAFETY: add_key and keyctl with valid strings and lengths.
    let serial = unsafe {
        libc::syscall(
            libc::SYS_add_key,
            kind.as_ptr(),
            name.as_ptr(),
            SECRET.as_ptr(),
            SECRET.len(),
            KEY_SPEC_USER_KEYRING,
        )
    };
    assert!(serial > 0, "add_key: {}", std::io::Error::last_os_error());
    // Every permission to possessor, user, group and others: only pincer
    // stands between an agent and the key.
    let r = unsafe { libc::syscall(libc::SYS_keyctl, KEYCTL_SETPERM, serial, 0x3f3f_3f3fu32) };
    assert_eq!(r, 0, "setperm: {}", std::io::Error::last_os_error());
    serial.to_string()
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
    // Written and closed on this side first: the agent reads to the end.
    let (pipe_out, pipe_in) = nix::unistd::pipe().unwrap();
    nix::unistd::write(&pipe_in, b"piped\n").unwrap();
    drop(pipe_in);
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    (&ours).write_all(b"sock\n").unwrap();
    drop(ours);
    let sender = send_on_connect(&socket, vec![pipe_out, theirs.into()]);
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

#[test]
fn descriptors_opened_before_the_agent_are_not_inherited_unless_passed() {
    let s = Scratch::new("bp-inherit");
    let m = full_tree(&s);
    let secret = s.p("secret/key");
    let held = fs::File::open(&secret).unwrap();
    // Not passed: closed on exec.
    let lines = s.probe_holding(&m, &held, 7, &[], &["fd-read", "7"]);
    assert_eq!(lines, [format!("err {}", libc::EBADF)]);
    // Passed on purpose: the agent reads through it, and the audit log
    // says what was passed.
    let lines = s.probe_holding(&m, &held, 7, &["--pass-fd", "7"], &["fd-read", "7"]);
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
    // B's programs are pinned while it runs.
    let pins = std::path::Path::new("/sys/fs/bpf/pincer-runs").join(run_b.to_string());
    assert!(pins.join("links/file_open").exists(), "{}", pins.display());

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
