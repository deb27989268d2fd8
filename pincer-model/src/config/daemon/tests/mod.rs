use std::fs;

use super::*;
use crate::{
    test_support::temp_file,
    toml_file::test_support::{Parts, field},
};

mod agents;
mod kubernetes;

const CONFIG: &str = "/etc/pincer/daemon.toml";

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::from_str(text, Path::new(CONFIG))
}

/// The position, field and message of an `Invalid` error.
fn invalid(text: &str) -> Parts {
    match parse(text) {
        Err(ConfigError::Invalid(error)) => error.parts(),
        other => panic!("expected an invalid configuration, got {other:?}"),
    }
}

/// An agent entry whose `cgroup` is on line 3 of the text it starts.
fn agent_with_cgroup(name: &str, cgroup: &str) -> String {
    format!("[[agent]]\nname = \"{name}\"\ncgroup = \"{cgroup}\"\nmission = \"m.toml\"\n")
}

fn pattern(text: &str) -> CgroupPattern {
    CgroupPattern::parse(text).unwrap()
}

#[test]
fn an_empty_file_is_every_default() {
    let config = parse("").unwrap();
    assert_eq!(config, Config::default_at(Path::new(CONFIG)));
    let daemon = &config.daemon;
    assert_eq!(daemon.socket, Path::new("/run/pincer/pincer.sock"));
    assert_eq!(daemon.pin_dir, Path::new("/sys/fs/bpf/pincer"));
    assert_eq!(daemon.on_stop, OnStop::Keep);
    assert_eq!(daemon.audit, Path::new("/var/log/pincer/audit.jsonl"));
    assert_eq!(daemon.audit_key, None);
    assert_eq!(
        daemon.audit_key_path(),
        Path::new("/var/log/pincer/audit.jsonl.key")
    );
    assert_eq!(daemon.metrics, None);
    assert_eq!(daemon.log_format, LogFormat::Text);
    assert_eq!(daemon.cgroup_root, Path::new("/sys/fs/cgroup"));
    assert_eq!(daemon.scan_every, Duration::from_secs(1));
    assert_eq!(daemon.ring_bytes, 262_144);
    assert!(config.agents.is_empty());
    assert_eq!(config.path, Path::new(CONFIG));
    // An empty [daemon] is the same as none.
    assert_eq!(parse("[daemon]\n").unwrap(), config);
}

/// A seed of the fuzz corpus too, so the fuzzer starts from what these
/// tests check.
const FULL: &str = include_str!("../../../../../fuzz/corpus/daemon_config/tests_full.toml");

#[test]
fn a_full_configuration() {
    let config = parse(FULL).unwrap();
    assert_eq!(
        config.daemon,
        DaemonConfig {
            socket: PathBuf::from("/run/p/control.sock"),
            pin_dir: PathBuf::from("/sys/fs/bpf/p"),
            on_stop: OnStop::Remove,
            audit: PathBuf::from("/var/log/p/audit.jsonl"),
            audit_key: Some(PathBuf::from("/var/lib/p/audit.key")),
            siem: Some(PathBuf::from("/var/log/p/ocsf.jsonl")),
            siem_format: SiemFormat::Ocsf,
            metrics: Some("[::1]:9464".parse().unwrap()),
            log_format: LogFormat::Json,
            cgroup_root: PathBuf::from("/mnt/cgroup2"),
            scan_every: Duration::from_millis(250),
            check_every: Duration::from_secs(5),
            ring_bytes: 1 << 20,
        }
    );
    assert_eq!(
        config.daemon.audit_key_path(),
        Path::new("/var/lib/p/audit.key")
    );
    assert_eq!(
        config
            .policy
            .iter()
            .map(crate::labels::PolicyPattern::text)
            .collect::<Vec<_>>(),
        ["README.md", "docs/", "/srv/site/config/"]
    );
    let [claude, codex] = config.agents.as_slice() else {
        panic!("expected two agents, got {:?}", config.agents);
    };
    assert_eq!(claude.name, "claude");
    assert_eq!(claude.cgroup.to_string(), "agents.slice/claude-*.scope");
    assert_eq!(
        claude.mission,
        Path::new("/etc/pincer/missions/claude.toml")
    );
    assert_eq!(claude.mode, Some(Mode::Ask));
    assert_eq!((claude.number, claude.line), (1, 20));
    assert_eq!(codex.name, "codex_2.0-beta");
    // Relative to the configuration's directory.
    assert_eq!(codex.mission, Path::new("/etc/pincer/missions/codex.toml"));
    assert_eq!(codex.mode, None);
    assert_eq!((codex.number, codex.line), (2, 26));
}

#[test]
fn agents_may_be_inline_tables() {
    let config = parse(
        "agent = [\n  { name = \"a\", cgroup = \"a/*\", mission = \"/m\" },\n  \
             { name = \"b\", cgroup = \"b/*\", mission = \"/m\", mode = \"enforce\" },\n]\n",
    )
    .unwrap();
    assert_eq!(config.agents.len(), 2);
    assert_eq!(config.agents[1].line, 3);
    assert_eq!(config.agents[1].mode, Some(Mode::Enforce));
    assert!(parse("agent = []\n").unwrap().agents.is_empty());
}

#[test]
fn dotted_keys_are_the_same_as_a_table() {
    let config = parse("daemon.socket = \"/s\"\ndaemon.on_stop = \"remove\"\n").unwrap();
    assert_eq!(config.daemon.socket, Path::new("/s"));
    assert_eq!(config.daemon.on_stop, OnStop::Remove);
    // A table without a span of its own still gets a position.
    assert_eq!(
        invalid("daemon.socket = \"/s\"\ndaemon.sokcet = \"/t\"\n"),
        (
            2,
            8,
            field("daemon.sokcet"),
            "unknown field `sokcet`, expected one of `socket`, `pin_dir`, `on_stop`, \
                 `audit`, `audit_key`, `siem`, `siem_format`, `metrics`, `log_format`, \
                 `cgroup_root`, `scan_every`, `check_every`, `ring_bytes`"
                .to_owned()
        )
    );
}

#[test]
fn relative_missions_follow_the_configuration_file() {
    let text = agent_with_cgroup("a", "x");
    let config = Config::from_str(&text, Path::new("/srv/conf/daemon.toml")).unwrap();
    assert_eq!(config.agents[0].mission, Path::new("/srv/conf/m.toml"));
    // A relative configuration path is taken from the working directory.
    let config = Config::from_str(&text, Path::new("daemon.toml")).unwrap();
    let cwd = std::env::current_dir().unwrap();
    assert_eq!(config.agents[0].mission, cwd.join("m.toml"));
    assert!(config.agents[0].mission.is_absolute());
}

#[test]
fn from_file_reads_and_names_the_file() {
    let (dir, path) = temp_file("daemon.toml", agent_with_cgroup("a", "x"));
    let config = Config::from_file(&path).unwrap();
    assert_eq!(config.path, path);
    assert_eq!(config.agents[0].mission, dir.path().join("m.toml"));

    fs::write(&path, "[daemon]\nbogus = 1\n").unwrap();
    let error = Config::from_file(&path).unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "{}:2:1: daemon.bogus: unknown field `bogus`, expected one of `socket`, \
                 `pin_dir`, `on_stop`, `audit`, `audit_key`, `siem`, `siem_format`, \
                 `metrics`, `log_format`, `cgroup_root`, `scan_every`, `check_every`, `ring_bytes`",
            path.display()
        )
    );

    let missing = dir.path().join("missing.toml");
    let error = Config::from_file(&missing).unwrap_err();
    assert!(
        matches!(&error, ConfigError::Io { path, source, .. }
                if *path == missing && source.kind() == std::io::ErrorKind::NotFound),
        "{error:?}"
    );
}

#[test]
fn toml_syntax_errors_have_a_position() {
    let (line, column, field_name, message) = invalid("[daemon]\nsocket = \"/s\n");
    assert_eq!((line, field_name), (2, None));
    assert!(column > 1, "{column}");
    assert!(message.contains("invalid basic string"), "{message}");

    let (line, _, field_name, message) = invalid("[daemon]\nsocket = \"/a\"\nsocket = \"/b\"\n");
    assert_eq!((line, field_name), (3, None));
    assert!(message.contains("duplicate key"), "{message}");
}

#[test]
fn unknown_top_level_keys() {
    assert_eq!(
        invalid("\n[agents]\nname = \"a\"\n"),
        (
            2,
            2,
            field("agents"),
            "unknown field `agents`, expected one of `daemon`, `agent`, `labels`, `source`, \
                 `kubernetes`"
                .to_owned()
        )
    );
}

#[test]
fn sources_are_every_agents_and_named_in_this_file() {
    let config = parse(
        "[[source]]\npath = \"/srv/fetched\"\n\n[[source]]\npath = \"/srv/notes\"\n\
             authority = \"user\"\n",
    )
    .unwrap();
    let found: Vec<_> = config
        .sources
        .iter()
        .map(|s| {
            (
                s.path.to_str().unwrap(),
                s.authority,
                s.line,
                s.file.clone(),
            )
        })
        .collect();
    let file = Some(PathBuf::from(CONFIG));
    assert_eq!(
        found,
        [
            (
                "/srv/fetched",
                pincer_common::authority::EVIDENCE,
                2,
                file.clone()
            ),
            ("/srv/notes", pincer_common::authority::USER, 5, file),
        ]
    );
    // A mission keeps its own entry for a path both declare, and gets
    // the others.
    let mut mission = crate::mission::Mission::parse(
        "[mission]\nname = \"m\"\n\n[[source]]\npath = \"/srv/notes\"\n",
        Path::new("/m.toml"),
    )
    .unwrap();
    mission = config.with_sources(&mission);
    let sources: Vec<_> = mission
        .sources
        .iter()
        .map(|s| (s.path.to_str().unwrap(), s.file.is_some()))
        .collect();
    assert_eq!(sources, [("/srv/notes", false), ("/srv/fetched", true)]);
    // And the effective configuration prints them back.
    let printed = config.render();
    let reread: Vec<_> = parse(&printed)
        .unwrap()
        .sources
        .into_iter()
        .map(|s| (s.path, s.authority))
        .collect();
    let written: Vec<_> = config
        .sources
        .iter()
        .map(|s| (s.path.clone(), s.authority))
        .collect();
    assert_eq!(reread, written, "{printed}");
}

#[test]
fn bad_sources() {
    for (text, expected) in [
        (
            "[[source]]\nauthority = \"user\"\n",
            (1, 1, Some("source[1].path"), "missing field"),
        ),
        (
            "[[source]]\npath = \"fetched\"\n",
            (
                2,
                8,
                Some("source[1].path"),
                "must be absolute (\"fetched\")",
            ),
        ),
        (
            "[[source]]\npath = \"/a\"\nauthority = \"policy\"\n",
            (
                3,
                13,
                Some("source[1].authority"),
                "unknown authority \"policy\" (expected evidence or user)",
            ),
        ),
        (
            "[[source]]\npath = \"/a\"\n[[source]]\npath = \"/a\"\n",
            (4, 8, Some("source[2].path"), "is already a source above"),
        ),
        (
            "[[source]]\npath = \"/a\"\nowner = true\n",
            (3, 1, Some("source[1].owner"), "unknown field `owner`"),
        ),
        ("source = \"/a\"\n", (1, 10, Some("source"), "invalid type")),
    ] {
        let (line, column, field_name, message) = invalid(text);
        assert_eq!(
            (line, column, field_name.as_deref()),
            (expected.0, expected.1, expected.2),
            "{text}: {message}"
        );
        assert!(message.contains(expected.3), "{text}: {message}");
    }
}

#[test]
fn unknown_keys_in_daemon() {
    let (line, column, field_name, message) =
        invalid("[daemon]\nsocket = \"/s\"\n  pinned = true\n");
    assert_eq!((line, column), (3, 3));
    assert_eq!(field_name, field("daemon.pinned"));
    assert!(
        message.starts_with("unknown field `pinned`, expected one of `socket`"),
        "{message}"
    );
    // Tables inside [daemon] are unknown keys too.
    let (line, column, field_name, _) = invalid("[daemon.extra]\nx = 1\n");
    assert_eq!((line, column, field_name), (1, 9, field("daemon.extra")));
}

#[test]
fn unknown_keys_in_an_agent() {
    let text = format!(
        "{}\n[[agent]]\nname = \"b\"\ncgroup = \"b\"\nmission = \"/m\"\nverdict = \"deny\"\n",
        agent_with_cgroup("a", "a")
    );
    assert_eq!(
            invalid(&text),
            (
                10,
                1,
                field("agent[2].verdict"),
                "unknown field `verdict`, expected one of `name`, `cgroup`, `mission`, `mode`, `confine_from`"
                    .to_owned()
            )
        );
}

#[test]
fn wrong_types() {
    // The text, then the line, column, field and message of its error.
    type Case<'a> = (&'a str, (usize, usize, &'a str, &'a str));
    let cases: &[Case<'_>] = &[
        (
            "[daemon]\nsocket = 5\n",
            (
                2,
                10,
                "daemon.socket",
                "invalid type: integer `5`, expected a string",
            ),
        ),
        (
            "[daemon]\nring_bytes = \"4096\"\n",
            (
                2,
                14,
                "daemon.ring_bytes",
                "invalid type: string \"4096\", expected an integer",
            ),
        ),
        (
            "[daemon]\nring_bytes = 4096.0\n",
            (
                2,
                14,
                "daemon.ring_bytes",
                "invalid type: floating point `4096.0`, expected an integer",
            ),
        ),
        (
            "[daemon]\nscan_every = 1\n",
            (
                2,
                14,
                "daemon.scan_every",
                "invalid type: integer `1`, expected a string",
            ),
        ),
        (
            "[daemon]\non_stop = false\n",
            (
                2,
                11,
                "daemon.on_stop",
                "invalid type: boolean `false`, expected a string",
            ),
        ),
        (
            "[daemon]\naudit = 1979-05-27T07:32:00Z\n",
            (
                2,
                9,
                "daemon.audit",
                "invalid type: datetime, expected a string",
            ),
        ),
        (
            "[daemon]\nmetrics = [\"127.0.0.1:1\"]\n",
            (
                2,
                11,
                "daemon.metrics",
                "invalid type: array, expected a string",
            ),
        ),
        (
            "daemon = \"yes\"\n",
            (
                1,
                10,
                "daemon",
                "invalid type: string \"yes\", expected a table",
            ),
        ),
        (
            "[[daemon]]\nsocket = \"/s\"\n",
            (1, 1, "daemon[1]", "invalid type: array, expected a table"),
        ),
        (
            "[agent]\nname = \"a\"\n",
            (
                1,
                1,
                "agent",
                "invalid type: table, expected an array (write each agent as a [[agent]] table)",
            ),
        ),
        (
            "agent = [\"a\"]\n",
            (
                1,
                10,
                "agent[1]",
                "invalid type: string \"a\", expected a table",
            ),
        ),
        (
            "[[agent]]\nname = 7\n",
            (
                2,
                8,
                "agent[1].name",
                "invalid type: integer `7`, expected a string",
            ),
        ),
        (
            "[[agent]]\nname = \"a\"\ncgroup = [\"a\", \"b\"]\n",
            (
                3,
                10,
                "agent[1].cgroup",
                "invalid type: array, expected a string",
            ),
        ),
        (
            "[[agent]]\nname = \"a\"\ncgroup = \"a\"\nmission = { path = \"/m\" }\n",
            (
                4,
                11,
                "agent[1].mission",
                "invalid type: table, expected a string",
            ),
        ),
    ];
    for (text, (line, column, field_name, message)) in cases {
        assert_eq!(
            invalid(text),
            (*line, *column, field(field_name), (*message).to_owned()),
            "{text}"
        );
    }
}

#[test]
fn confinement_starts_at_the_first_instruction_unless_told_exec() {
    let config = Config::from_str(&agent_with_cgroup("a", "a"), Path::new("/d.toml")).unwrap();
    assert!(!config.agents[0].from_exec);
    let text = format!("{}confine_from = \"exec\"\n", agent_with_cgroup("a", "a"));
    let config = Config::from_str(&text, Path::new("/d.toml")).unwrap();
    assert!(config.agents[0].from_exec);
    let text = format!("{}confine_from = \"later\"\n", agent_with_cgroup("a", "a"));
    let (_, _, field_name, message) = invalid(&text);
    assert_eq!(field_name, field("agent[1].confine_from"));
    assert_eq!(message, "unknown value \"later\" (expected start or exec)");
}

#[test]
fn bad_choices() {
    assert_eq!(
        invalid("[daemon]\non_stop = \"unpin\"\n"),
        (
            2,
            11,
            field("daemon.on_stop"),
            "unknown value \"unpin\" (expected keep or remove)".to_owned()
        )
    );
    assert_eq!(
        invalid("[daemon]\nlog_format = \"JSON\"\n"),
        (
            2,
            14,
            field("daemon.log_format"),
            "unknown value \"JSON\" (expected text or json)".to_owned()
        )
    );
    // The mission's word for enforcing is not a mode.
    let text = format!("{}mode = \"deny\"\n", agent_with_cgroup("a", "a"));
    assert_eq!(
        invalid(&text),
        (
            5,
            8,
            field("agent[1].mode"),
            "unknown value \"deny\" (expected enforce, audit or ask)".to_owned()
        )
    );
}

#[test]
fn scan_every_is_a_duration_in_range() {
    assert_eq!(
        invalid("[daemon]\nscan_every = \"often\"\n"),
        (
            2,
            14,
            field("daemon.scan_every"),
            "invalid duration \"often\" (write it like \"30s\", \"10m\" or \"1h30m\")".to_owned()
        )
    );
    assert_eq!(
        invalid("[daemon]\nscan_every = \"10\"\n").3,
        "invalid duration \"10\" (write it like \"30s\", \"10m\" or \"1h30m\")"
    );
    assert_eq!(
        invalid("[daemon]\nscan_every = \"99ms\"\n"),
        (
            2,
            14,
            field("daemon.scan_every"),
            "must be from 100ms to 1h (not 99ms)".to_owned()
        )
    );
    assert_eq!(
        invalid("[daemon]\nscan_every = \"1h 1s\"\n").3,
        "must be from 100ms to 1h (not 1h 1s)"
    );
    assert_eq!(
        invalid("[daemon]\nscan_every = \"0s\"\n").3,
        "must be from 100ms to 1h (not 0s)"
    );
    for (text, duration) in [
        ("100ms", Duration::from_millis(100)),
        ("1h", Duration::from_secs(3600)),
        ("1m 30s", Duration::from_secs(90)),
    ] {
        let config = parse(&format!("[daemon]\nscan_every = \"{text}\"\n")).unwrap();
        assert_eq!(config.daemon.scan_every, duration, "{text}");
    }
}

#[test]
fn ring_bytes_is_a_power_of_two_of_at_least_a_page() {
    for bad in [
        "4097",
        "6144",
        "2048",
        "0",
        "-4096",
        "4294967296",
        "8589934592",
    ] {
        assert_eq!(
            invalid(&format!("[daemon]\nring_bytes = {bad}\n")),
            (
                2,
                14,
                field("daemon.ring_bytes"),
                format!("must be a power of two from 4096 to 2147483648 (not {bad})")
            ),
        );
    }
    for good in [4096u32, 65536, 1 << 31] {
        let config = parse(&format!("[daemon]\nring_bytes = {good}\n")).unwrap();
        assert_eq!(config.daemon.ring_bytes, good);
    }
}

#[test]
fn integers_too_large_for_toml_name_their_field() {
    for (literal, column) in [
        ("99999999999999999999", 14),
        ("-9223372036854775809", 14),
        ("0x1_0000_0000_0000_0000", 14),
    ] {
        assert_eq!(
            invalid(&format!("[daemon]\nring_bytes = {literal}\n")),
            (
                2,
                column,
                field("daemon.ring_bytes"),
                format!("integer {literal} does not fit in 64 bits")
            ),
        );
    }
    // The largest integer TOML holds is only out of the setting's range.
    assert_eq!(
        invalid("[daemon]\nring_bytes = 9223372036854775807\n").3,
        "must be a power of two from 4096 to 2147483648 (not 9223372036854775807)"
    );
    let text = "agent = [{ name = \"a\", cgroup = \"a\", mission = \"/m\", \
                    mode = 18446744073709551616 }]\n";
    assert_eq!(
        invalid(text),
        (
            1,
            61,
            field("agent[1].mode"),
            "integer 18446744073709551616 does not fit in 64 bits".to_owned()
        )
    );
}

#[test]
fn scan_every_too_large() {
    assert_eq!(
        invalid("[daemon]\nscan_every = \"99999999999999999999s\"\n"),
        (
            2,
            14,
            field("daemon.scan_every"),
            "duration \"99999999999999999999s\" is too large".to_owned()
        )
    );
}

#[test]
fn metrics_is_an_ip_address_and_port() {
    let config = parse("[daemon]\nmetrics = \"127.0.0.1:9464\"\n").unwrap();
    assert_eq!(
        config.daemon.metrics,
        Some(SocketAddr::from(([127, 0, 0, 1], 9464)))
    );
    for bad in ["localhost:9464", "127.0.0.1", "9464", "::1:9464", ""] {
        let (line, column, field_name, message) =
            invalid(&format!("[daemon]\nmetrics = \"{bad}\"\n"));
        assert_eq!((line, column, field_name), (2, 11, field("daemon.metrics")));
        assert!(
            message.starts_with(&format!("invalid address \"{bad}\" (write an IP address")),
            "{message}"
        );
    }
}

#[test]
fn daemon_paths_are_absolute() {
    for key in ["socket", "pin_dir", "audit", "audit_key", "cgroup_root"] {
        assert_eq!(
            invalid(&format!("[daemon]\n{key} = \"run/x\"\n")),
            (
                2,
                key.len() + 4,
                field(&format!("daemon.{key}")),
                "must be absolute (\"run/x\")".to_owned()
            ),
        );
        assert_eq!(
            invalid(&format!("[daemon]\n{key} = \"\"\n")).3,
            "must not be empty"
        );
        assert_eq!(
            invalid(&format!("[daemon]\n{key} = \"/a\\u0000b\"\n")).3,
            "must not contain a NUL byte"
        );
    }
}

#[test]
fn the_audit_key_is_not_the_log() {
    assert_eq!(
        invalid("[daemon]\naudit = \"/var/a.log\"\naudit_key = \"/var/a.log\"\n"),
        (
            3,
            13,
            field("daemon.audit_key"),
            "must not be the audit log itself".to_owned()
        )
    );
    // The default log counts too.
    assert_eq!(
        invalid("[daemon]\naudit_key = \"/var/log/pincer/audit.jsonl\"\n").2,
        field("daemon.audit_key")
    );
    let config = parse("[daemon]\naudit = \"/var/a.log\"\n").unwrap();
    assert_eq!(config.daemon.audit_key_path(), Path::new("/var/a.log.key"));
}

#[test]
fn render_writes_every_setting() {
    let rendered = Config::default_at(Path::new(CONFIG)).render();
    assert_eq!(
        rendered,
        r#"# pincer daemon configuration: "/etc/pincer/daemon.toml", with every default written out.

[daemon]
socket = "/run/pincer/pincer.sock"
pin_dir = "/sys/fs/bpf/pincer"
on_stop = "keep"
audit = "/var/log/pincer/audit.jsonl"
# audit_key is not set: the key is "/var/log/pincer/audit.jsonl.key"
# siem is not set: no SIEM export
# metrics is not set: no Prometheus endpoint
log_format = "text"
cgroup_root = "/sys/fs/cgroup"
scan_every = "1s"
check_every = "30s"
ring_bytes = 262144

# No [[agent]]: only `pincer run` registrations are served.
"#
    );
    let full = parse(FULL).unwrap().render();
    for lines in [
        "\nmetrics = \"[::1]:9464\"\n",
        "\nsiem = \"/var/log/p/ocsf.jsonl\"\nsiem_format = \"ocsf\"\n",
        "\nscan_every = \"250ms\"\n",
        "\nmission = \"/etc/pincer/missions/codex.toml\"\n# mode is not set",
    ] {
        assert!(full.contains(lines), "{full}");
    }
}

#[test]
fn render_round_trips() {
    let defaults = Config::default_at(Path::new(CONFIG));
    assert_eq!(parse(&defaults.render()).unwrap(), defaults);

    let full = parse(FULL).unwrap();
    let rendered = full.render();
    let again = parse(&rendered).unwrap();
    assert_eq!(again, full);
    assert_eq!(again.render(), rendered);
    // Lines move, which equality leaves out.
    assert_ne!(again.agents[0].line, full.agents[0].line);

    // Strings that need escaping survive, in the header comment too.
    let mut odd = Config::default_at(Path::new("/etc/we\"ird\n# dir/daemon.toml"));
    odd.daemon.socket = PathBuf::from("/run/a \"b\"\\c\td");
    odd.daemon.scan_every = Duration::from_millis(1500);
    odd.daemon.ring_bytes = 4096;
    odd.agents.push(AgentConfig {
        name: "x".to_owned(),
        cgroup: pattern("a\\x2db/*/**"),
        mission: PathBuf::from("/m\u{7f}.toml"),
        mode: Some(Mode::Audit),
        from_exec: true,
        number: 1,
        line: 1,
    });
    let again = Config::from_str(&odd.render(), &odd.path).unwrap();
    assert_eq!(again, odd);
}

#[test]
fn agent_modes_stand_for_mission_settings() {
    // The mission writes the same modes with the policy's words.
    for ((mission, mode), name) in Mode::ON_UNKNOWN.iter().zip(["enforce", "audit", "ask"]) {
        assert_eq!(mode.name(), name, "on_unknown = {mission:?}");
    }
    assert_eq!(Mode::Enforce.to_string(), "enforce");
    assert_eq!(OnStop::Remove.to_string(), "remove");
    assert_eq!(LogFormat::Json.to_string(), "json");
}
