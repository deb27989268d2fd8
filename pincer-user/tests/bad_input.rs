//! Bad input to the `pincer` command: malformed missions, daemon
//! configurations, command lines, audit logs and control answers. Each case
//! runs the real binary in a directory of its own (no root, nothing loaded:
//! every command fails before it would touch the kernel) and snapshots its
//! exit status and what it printed under `tests/bad-input/`, so a message
//! that changes fails here until its snapshot is accepted
//! (`INSTA_UPDATE=always`). The case's directory reads `[DIR]` in them.
//!
//! The table in docs/bad-input.md, "Bad input" is rendered from the same
//! runs, one row per case, and must match it (`cargo xtask bad-input-table`
//! writes it), so the documentation cannot drift from the messages.

mod common;

use std::{
    fs,
    io::{BufRead, BufReader, Write},
    os::unix::{fs::PermissionsExt, net::UnixListener},
    panic::{AssertUnwindSafe, catch_unwind},
    path::{Path, PathBuf},
    process::Command,
    sync::OnceLock,
    thread,
    time::{Duration, Instant},
};

/// A valid mission every case directory holds, for the cases whose fault is
/// elsewhere.
const OK_MISSION: &str = "[mission]\nname = \"ok\"\n";

/// One bad input.
struct Case {
    /// The snapshot's name: `<command>-<what is wrong>`.
    name: &'static str,
    /// What is wrong, for the documentation's table (Markdown).
    input: &'static str,
    /// The arguments after `pincer`; `[DIR]` stands for the case's
    /// directory.
    args: Vec<String>,
    /// Files written in the directory first: name, contents (`[DIR]` is
    /// replaced in them), mode.
    files: Vec<(&'static str, Vec<u8>, u32)>,
    /// What else the directory needs (a named pipe, an audit log, ...).
    prepare: Option<fn(&Path)>,
    /// With `Some`, a server on `[DIR]/pincer.sock` reads one request and
    /// answers these bytes (or closes at once when they are empty).
    answer: Option<&'static [u8]>,
    /// Whether the command runs with `HOME` set (to `[DIR]/home`).
    home: bool,
}

impl Case {
    fn new(name: &'static str, input: &'static str, args: &[&str]) -> Self {
        Case {
            name,
            input,
            args: args.iter().map(|arg| (*arg).to_owned()).collect(),
            files: Vec::new(),
            prepare: None,
            answer: None,
            home: true,
        }
    }

    /// `pincer mission check m.toml`, `m.toml` holding `text`.
    fn mission(name: &'static str, input: &'static str, text: impl Into<Vec<u8>>) -> Self {
        Case::new(name, input, &["mission", "check", "m.toml"]).file("m.toml", text, 0o644)
    }

    /// `pincer daemon --check --config d.toml`, `d.toml` holding `text`.
    fn daemon(name: &'static str, input: &'static str, text: impl Into<Vec<u8>>) -> Self {
        Case::new(name, input, &["daemon", "--check", "--config", "d.toml"])
            .file("d.toml", text, 0o644)
    }

    /// `pincer approvals serve --config a.toml`, `a.toml` holding `text`,
    /// beside a good secret (`webhook.key`) and token (`token`): these fail
    /// before the service listens.
    fn approvals(name: &'static str, input: &'static str, text: impl Into<Vec<u8>>) -> Self {
        Case::new(
            name,
            input,
            &[
                "approvals",
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--config",
                "a.toml",
            ],
        )
        .file("a.toml", text, 0o644)
        .file("webhook.key", "sixteen bytes!!!\n", 0o600)
        .file("token", "operator token, long\n", 0o600)
    }

    /// `pincer run` with `args`, against a socket where no daemon answers:
    /// these fail before anything is loaded.
    fn run(name: &'static str, input: &'static str, args: &[&str]) -> Self {
        let mut case = Case::new(name, input, &["run", "--socket", "[DIR]/absent.sock"]);
        case.args.extend(args.iter().map(|arg| (*arg).to_owned()));
        case
    }

    /// `pincer audit verify` (or `summary`) of a log that `prepare` writes
    /// as `a.jsonl`.
    fn audit(name: &'static str, input: &'static str, args: &[&str], prepare: fn(&Path)) -> Self {
        let mut case = Case::new(name, input, &["audit"]);
        case.args.extend(args.iter().map(|arg| (*arg).to_owned()));
        case.prepare = Some(prepare);
        case
    }

    /// `pincer recommend` with `args`, from a log that `prepare` writes.
    fn recommend(
        name: &'static str,
        input: &'static str,
        args: &[&str],
        prepare: fn(&Path),
    ) -> Self {
        let mut case = Case::new(name, input, &["recommend"]);
        case.args.extend(args.iter().map(|arg| (*arg).to_owned()));
        case.prepare = Some(prepare);
        case
    }

    /// `args` sent to a control socket that answers `answer`.
    fn control(
        name: &'static str,
        input: &'static str,
        args: &[&str],
        answer: &'static [u8],
    ) -> Self {
        let mut case = Case::new(name, input, args);
        case.args
            .extend(["--socket".to_owned(), "pincer.sock".to_owned()]);
        case.answer = Some(answer);
        case
    }

    fn file(mut self, name: &'static str, contents: impl Into<Vec<u8>>, mode: u32) -> Self {
        self.files.push((name, contents.into(), mode));
        self
    }

    fn prepare(mut self, prepare: fn(&Path)) -> Self {
        self.prepare = Some(prepare);
        self
    }

    fn without_home(mut self) -> Self {
        self.home = false;
        self
    }
}

/// A mission with a webhook whose secret is `secret`.
fn webhook(secret: &str) -> String {
    format!(
        "[mission]\nname = \"m\"\n\n[vote]\nvoters = [\"webhook\"]\n\n[vote.webhook]\n\
         url = \"https://approvals.example/pincer\"\nsecret_file = \"{secret}\"\n"
    )
}

/// A daemon configuration with one agent whose mission is `mission`.
fn agent(mission: &str) -> String {
    format!("[[agent]]\nname = \"a\"\ncgroup = \"agents/*\"\nmission = \"{mission}\"\n")
}

/// A mission with a `[vote]` section of `vote`.
fn vote(vote: &str) -> String {
    format!("[mission]\nname = \"m\"\n\n[vote]\n{vote}")
}

/// A mission with one rule: `rule`.
fn rule(rule: &str) -> String {
    format!("[mission]\nname = \"m\"\n\n[[vote.rule]]\npath = \"/tmp\"\n{rule}")
}

/// A mission with one grant: `grant`.
fn grant(grant: &str) -> String {
    format!("[mission]\nname = \"m\"\n\n[[grant]]\n{grant}")
}

fn fifo(dir: &Path, name: &str) {
    nix::unistd::mkfifo(
        &dir.join(name),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
}

/// An intact audit log of two decisions, `a.jsonl`, and its key, closed or
/// not.
fn audit_log(dir: &Path, close: bool) -> PathBuf {
    common::audit_log(dir.join("a.jsonl"), &["/p/a", "/p/b"], close)
}

/// The audit log of a run in audit mode, `a.jsonl`, and its key: the run
/// read `[DIR]/ok.toml`.
fn run_log(dir: &Path) -> PathBuf {
    let read = dir.join("ok.toml");
    common::audit_run_log(
        dir.join("a.jsonl"),
        "m",
        &[(&["read"], read.to_str().unwrap())],
    )
}

/// Rewrites the closed log's text with `edit`.
fn edit_log(dir: &Path, edit: impl FnOnce(String) -> String) {
    let path = audit_log(dir, true);
    let text = fs::read_to_string(&path).unwrap();
    fs::write(&path, edit(text)).unwrap();
}

/// Every case: at least 60, each a distinct bad input.
fn cases() -> Vec<Case> {
    let pipe = |dir: &Path| fifo(dir, "pipe");
    vec![
        // Mission files, as `pincer mission check` (and every start) reads
        // them.
        Case::new(
            "mission-file-missing",
            "mission file that does not exist",
            &["mission", "check", "absent.toml"],
        ),
        Case::new(
            "mission-file-directory",
            "mission file that is a directory",
            &["mission", "check", "."],
        ),
        Case::new(
            "mission-file-fifo",
            "mission file that is a named pipe (would block a reader)",
            &["mission", "check", "pipe"],
        )
        .prepare(pipe),
        Case::new(
            "mission-file-device",
            "mission file that is a device (`/dev/zero`, endless)",
            &["mission", "check", "/dev/zero"],
        ),
        Case::new(
            "mission-file-too-large",
            "mission file over 32 MiB",
            &["mission", "check", "big.toml"],
        )
        .prepare(|dir| {
            fs::File::create(dir.join("big.toml"))
                .unwrap()
                .set_len((32 << 20) + 1)
                .unwrap();
        }),
        Case::mission("mission-empty", "empty mission file", ""),
        Case::mission(
            "mission-not-utf8",
            "mission that is not UTF-8",
            b"[mission]\nname = \"caf\xe9\"\n".to_vec(),
        ),
        Case::mission(
            "mission-syntax-header",
            "mission, TOML syntax: unclosed table header",
            "[mission\nname = \"m\"\n",
        ),
        Case::mission(
            "mission-syntax-string",
            "mission, TOML syntax: unterminated string",
            "[mission]\nname = \"m\n",
        ),
        Case::mission(
            "mission-syntax-duplicate-key",
            "mission, TOML syntax: the same key twice",
            "[mission]\nname = \"m\"\nname = \"n\"\n",
        ),
        Case::mission(
            "mission-too-deep",
            "mission with arrays nested 10 000 deep",
            format!("x = {}{}\n", "[".repeat(10_000), "]".repeat(10_000)),
        ),
        Case::mission(
            "mission-no-section",
            "no `[mission]` section",
            "[[grant]]\npath = \"/tmp\"\nops = [\"read\"]\n",
        ),
        Case::mission(
            "mission-no-name",
            "`[mission]` without `name`",
            "[mission]\n",
        ),
        Case::mission(
            "mission-blank-name",
            "blank mission name",
            "[mission]\nname = \"  \"\n",
        ),
        Case::mission(
            "mission-name-integer",
            "mission name that is a number",
            "[mission]\nname = 3\n",
        ),
        Case::mission(
            "mission-name-datetime",
            "mission name that is a TOML datetime",
            "[mission]\nname = 1979-05-27\n",
        ),
        Case::mission(
            "mission-unknown-key",
            "unknown key in `[mission]`",
            "[mission]\nname = \"m\"\ncolour = \"red\"\n",
        ),
        Case::mission(
            "mission-unknown-section",
            "unknown section (`[grants]`)",
            "[mission]\nname = \"m\"\n\n[grants]\n",
        ),
        Case::mission(
            "grant-single-table",
            "`[grant]` instead of `[[grant]]`",
            "[mission]\nname = \"m\"\n\n[grant]\npath = \"/tmp\"\nops = [\"read\"]\n",
        ),
        Case::mission(
            "grant-no-path",
            "grant without `path`",
            grant("ops = [\"read\"]\n"),
        ),
        Case::mission(
            "grant-no-ops",
            "grant without `ops`",
            grant("path = \"/tmp\"\n"),
        ),
        Case::mission(
            "grant-empty-ops",
            "grant with `ops = []`",
            grant("path = \"/tmp\"\nops = []\n"),
        ),
        Case::mission(
            "grant-ops-string",
            "`ops` as a string, not a list",
            grant("path = \"/tmp\"\nops = \"read\"\n"),
        ),
        Case::mission(
            "grant-unknown-op",
            "misspelled operation",
            grant("path = \"/tmp\"\nops = [\"read\", \"wirte\"]\n"),
        ),
        Case::mission(
            "grant-unknown-extent",
            "unknown extent",
            grant("path = \"/tmp\"\nops = [\"read\"]\nextent = \"forest\"\n"),
        ),
        Case::mission(
            "grant-relative-path",
            "relative grant path",
            grant("path = \"src\"\nops = [\"read\"]\n"),
        ),
        Case::mission(
            "grant-other-users-home",
            "`~user` path (only `~` expands)",
            grant("path = \"~bob/src\"\nops = [\"read\"]\n"),
        ),
        Case::mission(
            "grant-unknown-variable",
            "path variable other than `{uid}`",
            grant("path = \"/tmp/x-{user}\"\nops = [\"read\"]\n"),
        ),
        Case::mission(
            "grant-home-unset",
            "`~` path with `HOME` unset",
            grant("path = \"~/src\"\nops = [\"read\"]\n"),
        )
        .without_home(),
        Case::mission(
            "grant-nul-byte",
            "grant path with a NUL byte",
            grant("path = \"/tmp/a\\u0000b\"\nops = [\"read\"]\n"),
        ),
        Case::mission(
            "grant-path-missing",
            "grant of a path whose parent does not exist",
            grant("path = \"/nonexistent/pincer/x\"\nops = [\"read\"]\n"),
        ),
        Case::mission(
            "grant-through-a-file",
            "grant path through a regular file",
            grant("path = \"[DIR]/ok.toml/x\"\nops = [\"read\"]\n"),
        ),
        Case::mission(
            "grant-symlink-loop",
            "grant path through a symbolic link loop",
            grant("path = \"[DIR]/loop/x\"\nops = [\"read\"]\n"),
        )
        .prepare(|dir| {
            std::os::unix::fs::symlink("loop", dir.join("loop")).unwrap();
        }),
        Case::mission(
            "grant-tree-on-a-file",
            "`extent = \"tree\"` on a file",
            grant("path = \"[DIR]/ok.toml\"\nops = [\"read\"]\nextent = \"tree\"\n"),
        ),
        Case::mission(
            "defaults-unknown-baseline",
            "unknown baseline",
            "[mission]\nname = \"m\"\n\n[defaults]\nbaseline = \"all\"\n",
        ),
        Case::mission(
            "grant-star-in-the-middle",
            "a `*` inside a grant's path",
            "[mission]\nname = \"m\"\n\n[[grant]]\npath = \"/etc/*/passwd\"\nops = [\"read\"]\n",
        ),
        Case::mission(
            "grant-prefix-tree",
            "a prefix grant as a tree",
            "[mission]\nname = \"m\"\n\n[[grant]]\npath = \"/tmp/cache*\"\nops = [\"read\"]\nextent = \"tree\"\n",
        ),
        Case::mission(
            "grant-make-file",
            "`make = true` on a file grant",
            "[mission]\nname = \"m\"\n\n[[grant]]\npath = \"/tmp/x\"\nops = [\"read\"]\nmake = true\n",
        ),
        Case::mission(
            "grant-optional-make",
            "`optional = true` with `make = true`",
            "[mission]\nname = \"m\"\n\n[[grant]]\npath = \"/tmp/x\"\nops = [\"read\"]\nextent = \"tree\"\nmake = true\noptional = true\n",
        ),
        Case::mission(
            "grant-own-read-only",
            "`own = true` on a tree it may only read",
            "[mission]\nname = \"m\"\n\n[[grant]]\npath = \"/tmp/x\"\nops = [\"read\"]\nextent = \"tree\"\nown = true\n",
        ),
        Case::mission(
            "labels-policy-unknown-star",
            "a policy pattern with `*` alone",
            "[mission]\nname = \"m\"\n\n[labels]\npolicy = [\"*\"]\n",
        ),
        Case::mission(
            "mission-unknown-profile",
            "unknown profile",
            "[mission]\nname = \"m\"\nprofiles = [\"vim\"]\n",
        ),
        Case::mission(
            "labels-policy-three-names",
            "a policy pattern of three names (the programs compare two)",
            "[mission]\nname = \"m\"\n\n[labels]\npolicy = [\"a/b/c\"]\n",
        ),
        Case::mission(
            "labels-policy-other-home",
            "a policy pattern in another user's home",
            "[mission]\nname = \"m\"\n\n[labels]\npolicy = [\"~bob/.bashrc\"]\n",
        ),
        Case::mission(
            "labels-policy-not-a-list",
            "`policy` as a string, not a list",
            "[mission]\nname = \"m\"\n\n[labels]\npolicy = \"CLAUDE.md\"\n",
        ),
        Case::mission(
            "source-policy-authority",
            "a source of policy authority (it would lower nobody)",
            "[mission]\nname = \"m\"\n\n[[source]]\npath = \"/tmp\"\nauthority = \"policy\"\n",
        ),
        Case::mission(
            "source-without-path",
            "a source without a path",
            "[mission]\nname = \"m\"\n\n[[source]]\nauthority = \"evidence\"\n",
        ),
        Case::mission(
            "action-evidence-authority",
            "an action open to evidence (it would be open to every agent)",
            "[mission]\nname = \"m\"\n\n[[action]]\npath = \"/bin/sh\"\nauthority = \"evidence\"\n",
        ),
        Case::mission(
            "action-with-a-star",
            "an action whose path has a `*`",
            "[mission]\nname = \"m\"\n\n[[action]]\npath = \"/usr/bin/cu*\"\n",
        ),
        Case::mission(
            "action-unknown-op",
            "an action with an unknown operation",
            "[mission]\nname = \"m\"\n\n[[action]]\npath = \"/bin/sh\"\nops = [\"launch\"]\n",
        ),
        Case::mission(
            "asset-unknown-found-in",
            "an asset found in an asset that does not exist",
            "[mission]\nname = \"m\"\n\n[[asset]]\nid = \"repo\"\nfound_in = \"mail\"\nops = [\"read\"]\nconstraints = { under = [\"/srv\"] }\n",
        ),
        Case::mission(
            "asset-cycle",
            "assets found in each other, none identified",
            "[mission]\nname = \"m\"\n\n[[asset]]\nid = \"a\"\nfound_in = \"b\"\nops = [\"read\"]\nconstraints = { under = [\"/srv\"] }\n\n[[asset]]\nid = \"b\"\nfound_in = \"a\"\nops = [\"read\"]\nconstraints = { under = [\"/srv\"] }\n",
        ),
        Case::mission(
            "asset-bad-glob",
            "an asset whose pattern does not parse",
            "[mission]\nname = \"m\"\n\n[[asset]]\nid = \"mail\"\npath = \"/srv/mail.eml\"\nops = [\"read\"]\n\n[[asset]]\nid = \"image\"\nfound_in = \"mail\"\nops = [\"read\"]\nconstraints = { under = [\"/srv\"], glob = \"*.{png\" }\n",
        ),
        Case::mission(
            "asset-without-place",
            "an asset found in evidence with no `under`",
            "[mission]\nname = \"m\"\n\n[[asset]]\nid = \"mail\"\npath = \"/srv/mail.eml\"\nops = [\"read\"]\n\n[[asset]]\nid = \"image\"\nfound_in = \"mail\"\nops = [\"read\"]\n",
        ),
        Case::mission(
            "asset-zero-count",
            "an asset that may become no object",
            "[mission]\nname = \"m\"\n\n[[asset]]\nid = \"mail\"\npath = \"/srv/mail.eml\"\nops = [\"read\"]\n\n[[asset]]\nid = \"image\"\nfound_in = \"mail\"\nops = [\"read\"]\nconstraints = { under = [\"/srv\"], max_count = 0 }\n",
        ),
        Case::mission(
            "defaults-unknown-tmp",
            "unknown `tmp`",
            "[mission]\nname = \"m\"\n\n[defaults]\ntmp = \"shared\"\n",
        ),
        Case::mission(
            "defaults-unknown-mode",
            "unknown `on_unknown`",
            "[mission]\nname = \"m\"\n\n[defaults]\non_unknown = \"ignore\"\n",
        ),
        Case::mission(
            "defaults-capability-never",
            "capability never given to an agent",
            "[mission]\nname = \"m\"\n\n[defaults]\ncapabilities = [\"sys_admin\"]\n",
        ),
        Case::mission(
            "defaults-capability-spelling",
            "capability written `CAP_NET_RAW`",
            "[mission]\nname = \"m\"\n\n[defaults]\ncapabilities = [\"CAP_NET_RAW\"]\n",
        ),
        Case::mission(
            "vote-unknown-voter",
            "unknown voter",
            vote("voters = [\"oracle\"]\n"),
        ),
        Case::mission(
            "vote-duplicate-voter",
            "the same voter twice",
            vote("voters = [\"prompt\", \"prompt\"]\n"),
        ),
        Case::mission(
            "vote-webhook-without-table",
            "webhook voter without `[vote.webhook]`",
            vote("voters = [\"webhook\"]\n"),
        ),
        Case::mission(
            "vote-timeout-too-long",
            "vote timeout over 1h",
            vote("timeout = \"2h\"\n"),
        ),
        Case::mission(
            "vote-timeout-number",
            "vote timeout as a bare number",
            vote("timeout = 30\n"),
        ),
        Case::mission(
            "vote-timeout-garbage",
            "vote timeout that is not a duration",
            vote("timeout = \"soon\"\n"),
        ),
        Case::mission(
            "vote-timeout-integer-overflow",
            "mission integer too large for TOML (`timeout = 99999999999999999999`)",
            vote("timeout = 99999999999999999999\n"),
        ),
        Case::mission(
            "vote-max-ttl-too-long",
            "`max_ttl` over 365 days",
            vote("max_lifetime = \"ttl\"\nmax_ttl = \"400d\"\n"),
        ),
        Case::mission(
            "vote-max-ttl-overflow",
            "`max_ttl` too large for a duration",
            vote("max_lifetime = \"ttl\"\nmax_ttl = \"99999999999999999999999h\"\n"),
        ),
        Case::mission(
            "vote-max-ttl-alone",
            "`max_ttl` without `max_lifetime = \"ttl\"`",
            vote("max_ttl = \"1h\"\n"),
        ),
        Case::mission(
            "rule-single-table",
            "`[vote.rule]` instead of `[[vote.rule]]`",
            "[mission]\nname = \"m\"\n\n[vote.rule]\npath = \"/tmp\"\nverdict = \"allow\"\n",
        ),
        Case::mission(
            "rule-dot-dot",
            "rule path with `..`",
            "[mission]\nname = \"m\"\n\n[[vote.rule]]\npath = \"/tmp/../etc\"\nverdict = \"deny\"\n",
        ),
        Case::mission(
            "rule-unknown-verdict",
            "unknown rule verdict",
            rule("verdict = \"maybe\"\n"),
        ),
        Case::mission(
            "rule-lifetime-with-deny",
            "`lifetime` on a deny rule",
            rule("verdict = \"deny\"\nlifetime = \"session\"\n"),
        ),
        Case::mission(
            "rule-ttl-missing",
            "`lifetime = \"ttl\"` without `ttl`",
            rule("verdict = \"allow\"\nlifetime = \"ttl\"\n"),
        ),
        Case::mission(
            "rule-ttl-zero",
            "rule `ttl = \"0s\"`",
            rule("verdict = \"allow\"\nlifetime = \"ttl\"\nttl = \"0s\"\n"),
        ),
        Case::mission(
            "rule-empty-reason",
            "blank rule reason",
            rule("verdict = \"deny\"\nreason = \" \"\n"),
        ),
        Case::mission(
            "webhook-url-scheme",
            "webhook URL that is not http(s)",
            "[mission]\nname = \"m\"\n\n[vote.webhook]\nurl = \"ftp://approvals.example/\"\nsecret_file = \"/k\"\n",
        ),
        Case::mission(
            "webhook-url-garbage",
            "webhook URL that is not a URL",
            "[mission]\nname = \"m\"\n\n[vote.webhook]\nurl = \"approvals\"\nsecret_file = \"/k\"\n",
        ),
        Case::mission(
            "webhook-secret-relative",
            "relative webhook secret path",
            webhook("webhook.key"),
        ),
        Case::mission(
            "webhook-secret-missing",
            "webhook secret file that does not exist",
            webhook("[DIR]/absent.key"),
        ),
        Case::mission(
            "webhook-secret-directory",
            "webhook secret file that is a directory",
            webhook("[DIR]"),
        ),
        Case::mission(
            "webhook-secret-fifo",
            "webhook secret file that is a named pipe",
            webhook("[DIR]/pipe"),
        )
        .prepare(pipe),
        Case::mission(
            "webhook-secret-empty",
            "empty webhook secret",
            webhook("[DIR]/webhook.key"),
        )
        .file("webhook.key", "\n", 0o600),
        Case::mission(
            "webhook-secret-short",
            "webhook secret under 16 bytes",
            webhook("[DIR]/webhook.key"),
        )
        .file("webhook.key", "hunter2\n", 0o600),
        Case::mission(
            "webhook-secret-too-large",
            "webhook secret file over 64 KiB",
            webhook("[DIR]/webhook.key"),
        )
        .file("webhook.key", vec![b'k'; (64 << 10) + 1], 0o600),
        Case::mission(
            "webhook-secret-readable",
            "webhook secret others can read (mode 644)",
            webhook("[DIR]/webhook.key"),
        )
        .file("webhook.key", "a secret of sixteen bytes or more\n", 0o644),
        // The daemon's configuration, as `pincer daemon --check` (and every
        // start and reload) reads it.
        Case::new(
            "daemon-config-missing",
            "daemon configuration that does not exist",
            &["daemon", "--check", "--config", "absent.toml"],
        ),
        Case::new(
            "daemon-config-directory",
            "daemon configuration that is a directory",
            &["daemon", "--check", "--config", "."],
        ),
        Case::daemon(
            "daemon-not-utf8",
            "daemon configuration that is not UTF-8",
            b"[daemon]\nlog_format = \"\xff\"\n".to_vec(),
        ),
        Case::daemon(
            "daemon-syntax",
            "daemon configuration, TOML syntax: unclosed table header",
            "[daemon\n",
        ),
        Case::daemon(
            "daemon-not-a-table",
            "`daemon = 3` in the daemon configuration",
            "daemon = 3\n",
        ),
        Case::daemon(
            "daemon-unknown-key",
            "misspelled daemon key (`soket`)",
            "[daemon]\nsoket = \"/run/p.sock\"\n",
        ),
        Case::daemon(
            "kubernetes-no-missions",
            "`[kubernetes]` without `missions`",
            "[kubernetes]\nnode = \"worker-1\"\n",
        ),
        Case::daemon(
            "kubernetes-node-name",
            "`kubernetes.node` that is no node name",
            "[kubernetes]\nmissions = \"missions\"\nnode = \"Worker 1\"\n",
        ),
        Case::daemon(
            "daemon-relative-socket",
            "relative `daemon.socket`",
            "[daemon]\nsocket = \"run/p.sock\"\n",
        ),
        Case::daemon(
            "daemon-unknown-on-stop",
            "unknown `on_stop`",
            "[daemon]\non_stop = \"explode\"\n",
        ),
        Case::daemon(
            "daemon-key-is-log",
            "audit key that is the audit log",
            "[daemon]\naudit = \"/var/log/a.jsonl\"\naudit_key = \"/var/log/a.jsonl\"\n",
        ),
        Case::daemon(
            "daemon-siem-relative",
            "relative `daemon.siem`",
            "[daemon]\nsiem = \"ocsf.jsonl\"\n",
        ),
        Case::daemon(
            "daemon-siem-is-log",
            "SIEM export to the audit log itself",
            "[daemon]\naudit = \"/var/log/a.jsonl\"\nsiem = \"/var/log/a.jsonl\"\n",
        ),
        Case::daemon(
            "daemon-siem-unknown-format",
            "unknown SIEM format",
            "[daemon]\nsiem = \"/var/log/o.jsonl\"\nsiem_format = \"cef\"\n",
        ),
        Case::daemon(
            "daemon-siem-format-alone",
            "`siem_format` without `siem`",
            "[daemon]\nsiem_format = \"ocsf\"\n",
        ),
        Case::daemon(
            "daemon-source-relative",
            "relative `[[source]]` path in the daemon configuration",
            "[[source]]\npath = \"downloads\"\n",
        ),
        Case::daemon(
            "daemon-source-missing",
            "daemon `[[source]]` that does not exist, at `--check`",
            "[[source]]\npath = \"[DIR]/absent\"\n\n[[agent]]\nname = \"a\"\ncgroup = \"agents/*\"\nmission = \"m.toml\"\n",
        )
        .file("m.toml", "[mission]\nname = \"m\"\n", 0o644),
        Case::daemon(
            "daemon-metrics-hostname",
            "metrics address with a host name",
            "[daemon]\nmetrics = \"localhost:9464\"\n",
        ),
        Case::daemon(
            "daemon-unknown-log-format",
            "unknown log format",
            "[daemon]\nlog_format = \"xml\"\n",
        ),
        Case::daemon(
            "daemon-scan-too-often",
            "`scan_every` under 100ms",
            "[daemon]\nscan_every = \"10ms\"\n",
        ),
        Case::daemon(
            "daemon-check-too-often",
            "`check_every` under 1s",
            "[daemon]\ncheck_every = \"500ms\"\n",
        ),
        Case::daemon(
            "daemon-ring-not-power-of-two",
            "ring size not a power of two",
            "[daemon]\nring_bytes = 5000\n",
        ),
        Case::daemon(
            "daemon-ring-negative",
            "negative ring size",
            "[daemon]\nring_bytes = -4096\n",
        ),
        Case::daemon(
            "daemon-ring-integer-overflow",
            "ring size too large for TOML",
            "[daemon]\nring_bytes = 99999999999999999999999\n",
        ),
        Case::daemon(
            "agent-single-table",
            "`[agent]` instead of `[[agent]]`",
            "[agent]\nname = \"a\"\n",
        ),
        Case::daemon(
            "agent-no-mission",
            "agent without `mission`",
            "[[agent]]\nname = \"a\"\ncgroup = \"agents/*\"\n",
        ),
        Case::daemon(
            "agent-name-space",
            "agent name with a space",
            "[[agent]]\nname = \"a b\"\ncgroup = \"agents/*\"\nmission = \"ok.toml\"\n",
        ),
        Case::daemon(
            "agent-name-empty",
            "empty agent name",
            "[[agent]]\nname = \"\"\ncgroup = \"agents/*\"\nmission = \"ok.toml\"\n",
        ),
        Case::daemon(
            "agent-name-duplicate",
            "two agents of one name",
            format!(
                "{}\n{}",
                agent("ok.toml"),
                agent("ok.toml").replace("agents/*", "others/*")
            ),
        ),
        Case::daemon(
            "agent-pattern-duplicate",
            "two agents of one cgroup pattern",
            format!(
                "{}\n{}",
                agent("ok.toml"),
                agent("ok.toml").replace("\"a\"", "\"b\"")
            ),
        ),
        Case::daemon(
            "agent-cgroup-absolute",
            "cgroup pattern starting with `/`",
            "[[agent]]\nname = \"a\"\ncgroup = \"/agents/*\"\nmission = \"ok.toml\"\n",
        ),
        Case::daemon(
            "agent-cgroup-dot-dot",
            "cgroup pattern with `..`",
            "[[agent]]\nname = \"a\"\ncgroup = \"agents/../x\"\nmission = \"ok.toml\"\n",
        ),
        Case::daemon(
            "agent-cgroup-partial-glob",
            "`**` inside a component",
            "[[agent]]\nname = \"a\"\ncgroup = \"agents/**x\"\nmission = \"ok.toml\"\n",
        ),
        Case::daemon(
            "agent-mission-tilde",
            "agent mission starting with `~`",
            agent("~/m.toml"),
        ),
        Case::daemon(
            "agent-mission-missing",
            "agent mission that does not exist",
            agent("absent.toml"),
        ),
        Case::daemon(
            "agent-mission-invalid",
            "agent mission with an unknown key",
            agent("m.toml"),
        )
        .file(
            "m.toml",
            "[mission]\nname = \"m\"\ncolour = \"red\"\n",
            0o644,
        ),
        Case::daemon(
            "agent-mission-secret-short",
            "agent mission whose webhook secret is short",
            agent("m.toml"),
        )
        .file("m.toml", webhook("[DIR]/webhook.key"), 0o644)
        .file("webhook.key", "hunter2\n", 0o600),
        // The command line.
        Case::new(
            "cli-unknown-option",
            "unknown option (`pincer --frobnicate`)",
            &["--frobnicate"],
        ),
        Case::new(
            "cli-unknown-command",
            "unknown subcommand (`pincer frobnicate`)",
            &["frobnicate"],
        ),
        Case::new(
            "cli-run-without-separator",
            "`pincer run` with the command not after `--`",
            &["run", "--mission", "ok.toml", "ls", "-l"],
        ),
        Case::new(
            "cli-run-without-command",
            "`pincer run` without a command",
            &["run", "--mission", "ok.toml"],
        ),
        Case::new(
            "cli-run-without-mission",
            "`pincer run` without `--mission`",
            &["run", "--", "true"],
        ),
        Case::new(
            "cli-run-unknown-mode",
            "unknown `--mode`",
            &[
                "run",
                "--mission",
                "ok.toml",
                "--mode",
                "yolo",
                "--",
                "true",
            ],
        ),
        Case::new(
            "cli-run-pass-fd-word",
            "`--pass-fd` that is not a number",
            &[
                "run",
                "--mission",
                "ok.toml",
                "--pass-fd",
                "x",
                "--",
                "true",
            ],
        ),
        Case::new(
            "cli-run-audit-key-alone",
            "`--audit-key` without `--audit`",
            &[
                "run",
                "--mission",
                "ok.toml",
                "--audit-key",
                "k",
                "--",
                "true",
            ],
        ),
        Case::new(
            "cli-approve-without-id",
            "`pincer approve` without an id",
            &["approve"],
        ),
        Case::new(
            "cli-approve-word-id",
            "request id that is not a number",
            &["approve", "seven"],
        ),
        Case::new(
            "cli-approve-huge-id",
            "request id over 64 bits",
            &["approve", "99999999999999999999999"],
        ),
        Case::new(
            "cli-approve-ttl-zero",
            "`--ttl 0s`",
            &["approve", "7", "--ttl", "0s"],
        ),
        Case::new(
            "cli-approve-ttl-garbage",
            "`--ttl` that is not a duration",
            &["approve", "7", "--ttl", "forever"],
        ),
        Case::new(
            "cli-approve-ttl-too-long",
            "`--ttl` over 365 days",
            &["approve", "7", "--ttl", "400d"],
        ),
        Case::new(
            "cli-approve-ttl-overflow",
            "`--ttl` too large for a duration",
            &["approve", "7", "--ttl", "99999999999999999999999h"],
        ),
        Case::new(
            "cli-approve-two-lifetimes",
            "`--session` and `--once` together",
            &["approve", "7", "--session", "--once"],
        ),
        Case::new(
            "cli-deny-reason-missing",
            "`--reason` without a value",
            &["deny", "7", "--reason"],
        ),
        Case::new(
            "cli-log-lines-word",
            "`log -n` that is not a number",
            &["log", "-n", "many"],
        ),
        Case::new(
            "cli-revoke-without-agent",
            "`pincer revoke` without `--agent`",
            &["revoke"],
        ),
        Case::new(
            "cli-daemon-check-and-print",
            "`--check` with `--print-config`",
            &["daemon", "--check", "--print-config"],
        ),
        Case::new(
            "cli-mission-check-two-files",
            "`mission check` of two files",
            &["mission", "check", "a.toml", "b.toml"],
        ),
        Case::new(
            "cli-recommend-without-from",
            "`pincer recommend` without `--from`",
            &["recommend"],
        ),
        // `pincer run`: refused before anything is loaded (exit 125).
        Case::run(
            "run-mission-missing",
            "`pincer run` of a mission that does not exist",
            &["--mission", "absent.toml", "--", "true"],
        ),
        Case::run(
            "run-mission-invalid",
            "`pincer run` of a mission with an unknown key",
            &["--mission", "m.toml", "--", "true"],
        )
        .file(
            "m.toml",
            "[mission]\nname = \"m\"\ncolour = \"red\"\n",
            0o644,
        ),
        Case::run(
            "run-grant-unresolvable",
            "`pincer run` of a grant that does not resolve",
            &["--mission", "m.toml", "--", "true"],
        )
        .file(
            "m.toml",
            grant("path = \"/nonexistent/pincer/x\"\nops = [\"read\"]\n"),
            0o644,
        ),
        Case::run(
            "run-pass-fd-standard",
            "`--pass-fd 1` (always passed)",
            &["--mission", "ok.toml", "--pass-fd", "1", "--", "true"],
        ),
        Case::run(
            "run-pass-fd-negative",
            "`--pass-fd=-5`",
            &["--mission", "ok.toml", "--pass-fd=-5", "--", "true"],
        ),
        Case::run(
            "run-pass-fd-closed",
            "`--pass-fd` of a descriptor that is not open",
            &["--mission", "ok.toml", "--pass-fd", "77", "--", "true"],
        ),
        // Audit logs.
        Case::audit(
            "audit-log-missing",
            "audit log that does not exist",
            &["verify", "absent.jsonl"],
            |_| {},
        ),
        Case::audit(
            "audit-export-malformed-line",
            "audit log to export with a line that is not JSON",
            &["export", "--format", "ocsf", "--from", "a.jsonl"],
            |dir| {
                let path = run_log(dir);
                let text = fs::read_to_string(&path).unwrap();
                // First: a line written before it would put its event on stdout,
                // whose time changes with every run.
                fs::write(&path, format!("{{\"time\":\n{text}")).unwrap();
            },
        ),
        Case::audit(
            "audit-export-unknown-format",
            "audit export to an unknown format",
            &["export", "--format", "cef", "--from", "a.jsonl"],
            |dir| {
                audit_log(dir, true);
            },
        ),
        Case::audit(
            "audit-log-directory",
            "audit log that is a directory",
            &["verify", "."],
            |_| {},
        ),
        Case::audit(
            "audit-log-fifo",
            "audit log that is a named pipe",
            &["verify", "pipe"],
            |dir| fifo(dir, "pipe"),
        ),
        Case::audit(
            "audit-key-missing",
            "audit log whose key file is gone",
            &["verify", "a.jsonl"],
            |dir| {
                audit_log(dir, true);
                fs::remove_file(dir.join("a.jsonl.key")).unwrap();
            },
        ),
        Case::audit(
            "audit-key-short",
            "audit key file of 5 bytes",
            &["verify", "a.jsonl", "--key", "short.key"],
            |dir| {
                audit_log(dir, true);
                fs::write(dir.join("short.key"), "short").unwrap();
                fs::set_permissions(dir.join("short.key"), fs::Permissions::from_mode(0o600))
                    .unwrap();
            },
        ),
        Case::audit(
            "audit-line-edited",
            "audit log with a line edited",
            &["verify", "a.jsonl"],
            |dir| {
                edit_log(dir, |text| text.replacen("/p/a", "/p/x", 1));
            },
        ),
        Case::audit(
            "audit-line-removed",
            "audit log with a line removed",
            &["verify", "a.jsonl"],
            |dir| {
                edit_log(dir, |text| {
                    let mut lines: Vec<&str> = text.lines().collect();
                    lines.remove(1);
                    lines.join("\n") + "\n"
                });
            },
        ),
        Case::audit(
            "audit-line-garbage",
            "audit log with a line of garbage",
            &["verify", "a.jsonl"],
            |dir| {
                edit_log(dir, |text| format!("{text}garbage\n"));
            },
        ),
        Case::audit(
            "audit-line-not-utf8",
            "audit log with a line that is not UTF-8",
            &["verify", "a.jsonl"],
            |dir| {
                let path = audit_log(dir, true);
                let mut bytes = fs::read(&path).unwrap();
                bytes.extend_from_slice(b"\xff\xfe\n");
                fs::write(&path, bytes).unwrap();
            },
        ),
        Case::audit(
            "audit-summary-edited",
            "`audit summary` of an edited log",
            &["summary", "a.jsonl"],
            |dir| {
                edit_log(dir, |text| text.replacen("\"deny\"", "\"allow\"", 1));
            },
        ),
        Case::audit(
            "audit-strict-truncated",
            "`audit verify --strict` of a log cut mid-line",
            &["verify", "--strict", "a.jsonl"],
            |dir| {
                let path = audit_log(dir, false);
                let bytes = fs::read(&path).unwrap();
                fs::write(&path, &bytes[..bytes.len() - 10]).unwrap();
            },
        ),
        Case::audit(
            "audit-strict-empty",
            "`audit verify --strict` of an empty log",
            &["verify", "--strict", "a.jsonl"],
            |dir| {
                audit_log(dir, true);
                fs::write(dir.join("a.jsonl"), "").unwrap();
            },
        ),
        // `pincer recommend`: the log it learns from, and where it writes.
        Case::recommend(
            "recommend-log-missing",
            "`recommend` from an audit log that does not exist",
            &["--from", "absent.jsonl"],
            |_| {},
        ),
        Case::recommend(
            "recommend-chain-broken",
            "`recommend` from an audit log with a line edited",
            &["--from", "a.jsonl"],
            |dir| {
                let path = run_log(dir);
                let text = fs::read_to_string(&path).unwrap();
                fs::write(&path, text.replacen("[\"read\"]", "[\"write\"]", 1)).unwrap();
            },
        ),
        Case::recommend(
            "recommend-key-missing",
            "`recommend` from an audit log whose key file is gone",
            &["--from", "a.jsonl"],
            |dir| {
                run_log(dir);
                fs::remove_file(dir.join("a.jsonl.key")).unwrap();
            },
        ),
        Case::recommend(
            "recommend-no-decisions",
            "`recommend` from an audit log with no decisions",
            &["--from", "a.jsonl"],
            |dir| {
                common::audit_log(dir.join("a.jsonl"), &[], true);
            },
        ),
        Case::recommend(
            "recommend-decision-incomplete",
            "`recommend` from a log whose decision lacks a `reason` (pincer writes one)",
            &["--from", "a.jsonl"],
            |dir| {
                audit_log(dir, true);
            },
        ),
        Case::recommend(
            "recommend-line-garbage-unverified",
            "`recommend --unverified` from a log with a line of garbage",
            &["--from", "a.jsonl", "--unverified"],
            |dir| {
                let path = run_log(dir);
                let mut text = fs::read_to_string(&path).unwrap();
                text.push_str("garbage\n");
                fs::write(&path, text).unwrap();
            },
        ),
        Case::recommend(
            "recommend-several-missions",
            "`recommend` from a log of two missions, without `--mission`",
            &["--from", "a.jsonl"],
            |dir| {
                let path = run_log(dir);
                common::audit_run_log(path, "n", &[(&["read"], "/etc/hostname")]);
            },
        ),
        Case::recommend(
            "recommend-blank-task",
            "`recommend --task` of blanks",
            &["--from", "a.jsonl", "--task", " "],
            |dir| {
                run_log(dir);
            },
        ),
        Case::recommend(
            "recommend-output-is-the-log",
            "`recommend --output` of the audit log itself",
            &["--from", "a.jsonl", "--output", "a.jsonl"],
            |dir| {
                run_log(dir);
            },
        ),
        Case::recommend(
            "recommend-output-unwritable",
            "`recommend --output` in a directory that does not exist",
            &["--from", "a.jsonl", "--output", "absent/m.toml"],
            |dir| {
                run_log(dir);
            },
        ),
        // The control socket: what a client makes of a missing socket and
        // of answers that are not the protocol.
        Case::new(
            "control-no-socket",
            "control socket that does not exist",
            &["pending", "--socket", "absent.sock"],
        ),
        Case::new(
            "control-not-a-socket",
            "control socket path that is a regular file",
            &["pending", "--socket", "ok.toml"],
        ),
        Case::control(
            "control-answer-closed",
            "control server that closes without answering",
            &["pending"],
            b"",
        ),
        Case::control(
            "control-answer-not-json",
            "control answer that is not JSON",
            &["pending"],
            b"hello\n",
        ),
        Case::control(
            "control-answer-unknown-status",
            "control answer of an unknown status",
            &["status"],
            b"{\"status\":\"weird\"}\n",
        ),
        Case::control(
            "control-answer-missing-field",
            "control answer missing a field",
            &["pending"],
            b"{\"status\":\"pending\"}\n",
        ),
        Case::control(
            "control-answer-bad-id",
            "control answer with a negative request id",
            &["pending"],
            b"{\"status\":\"pending\",\"requests\":[{\"id\":-1}]}\n",
        ),
        Case::control(
            "control-answer-wrong-kind",
            "control answer of another request's kind (`approve` answered with a list)",
            &["approve", "7"],
            b"{\"status\":\"pending\",\"requests\":[]}\n",
        ),
        // The approval service's configuration and the operators' commands.
        Case::approvals(
            "approvals-no-secret",
            "approval service configuration without a webhook secret",
            "token_file = \"token\"\n",
        ),
        Case::approvals(
            "approvals-both-secrets",
            "approval service configuration with a shared secret and `[[node]]` secrets",
            "secret_file = \"webhook.key\"\ntoken_file = \"token\"\n\n[[node]]\nname = \"a\"\nsecret_file = \"webhook.key\"\n",
        ),
        Case::approvals(
            "approvals-short-secret",
            "approval service secret shorter than 16 bytes",
            "secret_file = \"short.key\"\ntoken_file = \"token\"\n",
        )
        .file("short.key", "hunter2\n", 0o600),
        Case::approvals(
            "approvals-token-readable",
            "operator token file readable by others",
            "secret_file = \"webhook.key\"\ntoken_file = \"open-token\"\n",
        )
        .file("open-token", "operator token, long\n", 0o644),
        Case::approvals(
            "approvals-no-token",
            "approval service configuration without `token_file`",
            "secret_file = \"webhook.key\"\n",
        ),
        Case::approvals(
            "approvals-unknown-key",
            "misspelled approval service key (`clock_skw`)",
            "secret_file = \"webhook.key\"\ntoken_file = \"token\"\nclock_skw = \"30s\"\n",
        ),
        Case::approvals(
            "approvals-hold-too-long",
            "`hold` over an hour",
            "secret_file = \"webhook.key\"\ntoken_file = \"token\"\nhold = \"2h\"\n",
        ),
        Case::approvals(
            "approvals-node-twice",
            "the same node listed twice",
            "token_file = \"token\"\n\n[[node]]\nname = \"a\"\nsecret_file = \"webhook.key\"\n\n[[node]]\nname = \"a\"\nsecret_file = \"webhook.key\"\n",
        ),
        Case::new(
            "approvals-server-url",
            "operator command with a server URL that is not http or https",
            &[
                "approvals",
                "pending",
                "--server",
                "ftp://approvals.example",
                "--token-file",
                "token",
            ],
        )
        .file("token", "operator token, long\n", 0o600),
        Case::new(
            "approvals-token-missing",
            "operator command whose token file does not exist",
            &["approvals", "pending", "--token-file", "absent"],
        ),
    ]
}

/// What a case did.
struct Outcome {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Outcome {
    /// The snapshot: the command, its exit status and what it printed.
    fn render(&self, case: &Case) -> String {
        let mut text = format!(
            "$ pincer {}\nexit: {}\n",
            shell_words(&case.args),
            self.code
        );
        for (name, output) in [("stdout", &self.stdout), ("stderr", &self.stderr)] {
            if !output.is_empty() {
                text.push_str(&format!("--- {name}\n{output}"));
            }
        }
        text
    }

    /// What the documentation shows: the first line of the message, from standard
    /// error, or standard output when that is where it went (`audit
    /// verify` reports a broken chain there).
    fn message(&self) -> String {
        if !self.stderr.trim().is_empty() {
            // The first line, with the indented lines that go on with it
            // ("required arguments were not provided:" and which).
            let mut lines = self.stderr.lines();
            let mut message = lines.next().unwrap_or_default().to_owned();
            for more in lines.take_while(|line| line.starts_with("  ")) {
                message.push(' ');
                message.push_str(more.trim());
            }
            return message;
        }
        // The verdict's first line says "intact" under a warning that
        // `--strict` fails on: the warning is the message.
        self.stdout
            .lines()
            .find(|line| line.starts_with("warning:"))
            .or_else(|| self.stdout.lines().next())
            .unwrap_or_default()
            .to_owned()
    }
}

/// The arguments as a reader would type them.
fn shell_words(args: &[String]) -> String {
    let quote = |arg: &String| {
        if !arg.is_empty()
            && arg
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./=[]".contains(c))
        {
            arg.clone()
        } else {
            format!("'{arg}'")
        }
    };
    args.iter().map(quote).collect::<Vec<_>>().join(" ")
}

/// Runs a case in a new directory.
fn run(case: &Case) -> Outcome {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let dir_text = root.to_str().unwrap();
    fs::create_dir(root.join("home")).unwrap();
    fs::write(root.join("ok.toml"), OK_MISSION).unwrap();
    for (name, contents, mode) in &case.files {
        let path = root.join(name);
        let contents = match std::str::from_utf8(contents) {
            Ok(text) => text.replace("[DIR]", dir_text).into_bytes(),
            Err(_) => contents.clone(),
        };
        fs::write(&path, contents).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(*mode)).unwrap();
    }
    if let Some(prepare) = case.prepare {
        prepare(root);
    }
    let server = case
        .answer
        .map(|answer| serve_once(&root.join("pincer.sock"), answer));

    let mut command = Command::new(env!("CARGO_BIN_EXE_pincer"));
    command
        .args(case.args.iter().map(|arg| arg.replace("[DIR]", dir_text)))
        .current_dir(root)
        // Nothing from the caller's environment (PINCER_SOCKET, PINCER_LOG,
        // a terminal's colours) changes what is printed.
        .env_clear()
        .env("PATH", "/usr/bin:/bin");
    if case.home {
        command.env("HOME", root.join("home"));
    }
    let output = command.output().unwrap();
    if let Some(server) = server {
        server.join().unwrap();
    }
    let normalize = |bytes: &[u8]| String::from_utf8_lossy(bytes).replace(dir_text, "[DIR]");
    Outcome {
        code: output.status.code().expect("exited, not killed"),
        stdout: normalize(&output.stdout),
        stderr: normalize(&output.stderr),
    }
}

/// A control server that reads one request and answers `answer` (an empty
/// answer closes the connection without a word). It gives up after a few seconds
/// if nobody connects, so a case can never hang the tests.
fn serve_once(path: &Path, answer: &'static [u8]) -> thread::JoinHandle<()> {
    let listener = UnixListener::bind(path).unwrap();
    listener.set_nonblocking(true).unwrap();
    thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(10);
        let stream = loop {
            match listener.accept() {
                Ok((stream, _)) => break stream,
                Err(_) if Instant::now() < deadline => thread::sleep(Duration::from_millis(5)),
                Err(error) => panic!("nobody connected: {error}"),
            }
        };
        stream.set_nonblocking(false).unwrap();
        // The request is read first even when no answer follows: a client
        // writing to a closed connection would fail for another reason.
        let mut request = String::new();
        BufReader::new(&stream).read_line(&mut request).unwrap();
        (&stream).write_all(answer).unwrap();
    })
}

/// Every case run once, for both tests.
fn outcomes() -> &'static [(Case, Outcome)] {
    static OUTCOMES: OnceLock<Vec<(Case, Outcome)>> = OnceLock::new();
    OUTCOMES.get_or_init(|| {
        cases()
            .into_iter()
            .map(|case| {
                let outcome = run(&case);
                (case, outcome)
            })
            .collect()
    })
}

#[test]
fn every_bad_input_fails_with_its_message() {
    let outcomes = outcomes();
    assert!(outcomes.len() >= 60, "{} cases", outcomes.len());
    let mut names: Vec<&str> = outcomes.iter().map(|(case, _)| case.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), outcomes.len(), "two cases share a name");

    let mut failed = Vec::new();
    for (case, outcome) in outcomes {
        if outcome.code == 0 || outcome.message().is_empty() {
            failed.push(format!(
                "{}: exit {} with no error",
                case.name, outcome.code
            ));
            continue;
        }
        if outcome.stderr.contains("panicked") {
            failed.push(format!("{}: panicked", case.name));
        }
        let mut settings = insta::Settings::clone_current();
        settings.set_snapshot_path("bad-input");
        settings.set_prepend_module_to_snapshot(false);
        settings.set_omit_expression(true);
        settings.set_description(case.input);
        // Each case is checked even when one before it fails, so that one
        // run shows every changed message.
        let checked = catch_unwind(AssertUnwindSafe(|| {
            settings.bind(|| insta::assert_snapshot!(case.name, outcome.render(case)));
        }));
        if checked.is_err() {
            failed.push(format!("{}: differs from its snapshot", case.name));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// The documentation's table, as the cases render it.
fn table() -> String {
    let mut table = String::from("| input | exit | message |\n|-------|------|---------|\n");
    for (case, outcome) in outcomes() {
        table.push_str(&format!(
            "| {} | {} | {} |\n",
            case.input.replace('|', "\\|"),
            outcome.code,
            code_span(&outcome.message()).replace('|', "\\|")
        ));
    }
    table
}

/// `text` as a Markdown code span: fenced with more backticks than it holds
/// in a row, and padded when it starts or ends with one.
fn code_span(text: &str) -> String {
    let longest = text
        .split(|c| c != '`')
        .map(str::len)
        .max()
        .unwrap_or_default();
    let fence = "`".repeat(longest + 1);
    let pad = if text.starts_with('`') || text.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{text}{pad}{fence}")
}

#[test]
fn the_readme_table_is_the_cases() {
    // The same check as the other generated tables: the one page with the
    // table's marks holds it (`cargo xtask bad-input-table` writes it).
    pincer_model::readme::check_table("bad-input-table", &table());
}
