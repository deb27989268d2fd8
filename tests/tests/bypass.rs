//! The bypass battery, proven in the guest kernel: every way a confined agent
//! could reach a file outside its mission without a plain `open` is tried
//! from inside an agent cgroup, and must fail with the exact errno while the
//! protected object stays byte-for-byte the same. The same operations inside
//! the granted tree still work.

use std::{
    ffi::CString,
    fs,
    os::{
        fd::AsRawFd,
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
    // A descriptor open for writing, inherited by the agent as fd 9.
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
/// agent's descriptor 9, inherited; returns the probe's lines.
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
    let probe = probe_bin();
    let mut cmd_line = vec![probe.to_str().unwrap()];
    cmd_line.extend_from_slice(ops);
    let mut cmd = s.command(mission, &[], &cmd_line);
    let fd = inherited.as_raw_fd();
    // SAFETY: only dup2 and fcntl between fork and exec.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
            // dup2 onto itself would keep close-on-exec: clear it as well.
            if libc::dup2(fd, 9) < 0 || libc::fcntl(9, libc::F_SETFD, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    stdout_lines(&cmd.output().unwrap())
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
            "i",
            ",",
            "append",
            &a,
            "x",
            ",",
            "setflags",
            &a,
            "-",
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
            "ok set 0x10",
            "err 1",
            "ok set 0x0",
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
