use super::*;
use crate::{
    test_support::temp_file,
    toml_file::{
        FileError,
        test_support::{Parts, field, parts as error},
    },
    vote::Policy,
};

fn parse(text: &str) -> Result<Mission, MissionError> {
    Mission::parse_with_home(text, Path::new("m.toml"), Some(Path::new("/home/me")))
}

/// The position, field and message of an `Invalid` error.
fn invalid(text: &str) -> Parts {
    match parse(text) {
        Err(MissionError::File(FileError::Invalid(error))) => error.parts(),
        other => panic!("expected an invalid mission, got {other:?}"),
    }
}

/// Tests that read each of their texts with the function in parentheses
/// and find the error beside it: its position, field and message. A
/// failure names the text.
macro_rules! refused {
    ($($test:ident($read:ident) { $($text:expr => $expected:expr),+ $(,)? })+) => {
        $(
            #[test]
            fn $test() {
                $(assert_eq!($read($text), $expected, "{}", $text);)+
            }
        )+
    };
}

mod assets;
mod voting;

/// A seed of the fuzz corpus too, so the fuzzer starts from what these
/// tests check.
const GOOD: &str = include_str!("../../../../../fuzz/corpus/mission/tests_good.toml");

#[test]
fn parses_a_good_file() {
    let mission = parse(GOOD).unwrap();
    assert_eq!(
        mission,
        Mission {
            name: "fix the failing test".to_owned(),
            source: PathBuf::from("m.toml"),
            grants: vec![
                GrantSpec {
                    path: PathBuf::from("/home/me/project"),
                    ops: ops::READ | ops::WRITE | ops::CREATE,
                    extent: Extent::Tree,
                    line: 6,
                    make: false,
                    own: false,
                    optional: false,
                },
                GrantSpec {
                    path: PathBuf::from("/home/me/notes.txt"),
                    ops: ops::READ,
                    extent: Extent::File,
                    line: 11,
                    make: false,
                    own: false,
                    optional: false,
                },
                GrantSpec {
                    path: PathBuf::from("/usr/bin/cargo"),
                    ops: ops::READ | ops::EXEC,
                    extent: Extent::File,
                    line: 15,
                    make: false,
                    own: false,
                    optional: false,
                },
            ],
            baseline: Baseline::None,
            on_unknown: Mode::Enforce,
            tmp: Tmp::Private,
            capabilities: caps::DEFAULT,
            vote: Voting::default(),
            profiles: Vec::new(),
            policy: Vec::new(),
            sources: Vec::new(),
            actions: Vec::new(),
            assets: Vec::new(),
        }
    );
}

#[test]
fn a_trailing_star_grants_the_names_that_start_so() {
    let text = "[mission]\nname = \"m\"\n[[grant]]\npath = \"~/.claude.json*\"\nops = [\"read\"]\n";
    let mission = parse(text).unwrap();
    assert_eq!(mission.grants[0].prefix(), Some(&b".claude.json"[..]));
    assert_eq!(parse(GOOD).unwrap().grants[0].prefix(), None);
    let grant = |path: &str, more: &str| {
        invalid(&format!(
            "[mission]\nname = \"m\"\n[[grant]]\npath = \"{path}\"\nops = [\"read\"]\n{more}"
        ))
    };
    let only_at_the_end = "a `*` may only end the path (a prefix of file names)";
    assert_eq!(grant("/a*/b", "").3, only_at_the_end);
    assert_eq!(grant("/a/b**", "").3, only_at_the_end);
    assert_eq!(
        grant("/a/*", ""),
        error(
            4,
            8,
            "grant[1].path",
            "a prefix grant needs a prefix before its `*` (grant the directory as a tree instead)"
        )
    );
    assert_eq!(
        grant("/a/b*", "extent = \"tree\"\n").3,
        "a prefix grant names files: it cannot be extent = \"tree\""
    );
    let long = format!("/a/{}*", "x".repeat(64));
    assert_eq!(grant(&long, "").3, "a prefix is at most 63 bytes");
}

#[test]
fn make_is_for_trees_and_profiles_are_named() {
    let text = "[mission]\nname = \"m\"\n[[grant]]\npath = \"/a\"\nops = [\"read\"]\nmake = true\n";
    assert_eq!(
        invalid(text),
        error(
            6,
            8,
            "grant[1].make",
            "make = true makes a directory: it needs extent = \"tree\""
        )
    );
    let text = "[mission]\nname = \"m\"\nprofiles = [\"codex\", \"emacs\"]\n";
    assert_eq!(
        invalid(text),
        error(
            3,
            22,
            "mission.profiles[2]",
            "unknown profile \"emacs\" (known: aider, claude-code, codex)"
        )
    );
    let text = "[mission]\nname = \"m\"\nprofiles = [\"codex\"]\n";
    let mission = parse(text).unwrap();
    assert_eq!(mission.profiles[0].name, "codex");
    assert!(
        mission.profiles[0].grants[0]
            .path
            .starts_with("/home/me/.codex")
    );
}

#[test]
fn optional_is_read_and_never_with_make() {
    let text =
        "[mission]\nname = \"m\"\n[[grant]]\npath = \"/a\"\nops = [\"read\"]\noptional = true\n";
    let mission = Mission::parse(text, Path::new("m.toml")).unwrap();
    assert!(mission.grants[0].optional && !mission.grants[0].make);
    let both = "[mission]\nname = \"m\"\n[[grant]]\npath = \"/a\"\nops = [\"read\"]\nextent = \"tree\"\nmake = true\noptional = true\n";
    let error = Mission::parse(both, Path::new("m.toml")).unwrap_err();
    assert_eq!(
        error.to_string(),
        "m.toml:8:12: grant[1].optional: optional = true with make = true: a directory pincer makes is never missing"
    );
}

#[test]
fn defaults_and_no_grants() {
    let mission = parse("[mission]\nname = \"idle\"\n").unwrap();
    assert_eq!(mission.name, "idle");
    assert!(mission.grants.is_empty());
    assert_eq!(mission.baseline, Baseline::Runtime);
    assert_eq!(mission.capabilities, caps::DEFAULT);
    let mission = parse("[mission]\nname = \"x\"\n[defaults]\n").unwrap();
    assert_eq!(mission.baseline, Baseline::Runtime);
}

#[test]
fn capabilities_add_to_the_default_set() {
    let text = "[mission]\nname = \"m\"\n[defaults]\ncapabilities = [\"net_admin\", \"net_raw\"]\n";
    assert_eq!(
        parse(text).unwrap().capabilities,
        caps::DEFAULT | caps::bit(caps::NET_ADMIN) | caps::bit(caps::NET_RAW)
    );
    let text = "[mission]\nname = \"m\"\n[defaults]\ncapabilities = []\n";
    assert_eq!(parse(text).unwrap().capabilities, caps::DEFAULT);
    // Naming one of the default set again is harmless.
    let text = "[mission]\nname = \"m\"\n[defaults]\ncapabilities = [\"chown\"]\n";
    assert_eq!(parse(text).unwrap().capabilities, caps::DEFAULT);
}

#[test]
fn bad_capabilities_name_their_entry() {
    let capabilities = |list: &str| {
        invalid(&format!(
            "[mission]\nname = \"m\"\n[defaults]\ncapabilities = [{list}]\n"
        ))
    };
    assert_eq!(
        capabilities("\"net_admin\", \"sys_admin\""),
        error(
            4,
            30,
            "defaults.capabilities[2]",
            "sys_admin is never given to an agent: it reaches the kernel or pincer itself"
        )
    );
    assert_eq!(
        capabilities("\"CAP_NET_RAW\""),
        error(
            4,
            17,
            "defaults.capabilities[1]",
            "unknown capability \"CAP_NET_RAW\" (write it \"net_raw\")"
        )
    );
    assert_eq!(
        capabilities("\"superpower\""),
        error(
            4,
            17,
            "defaults.capabilities[1]",
            "unknown capability \"superpower\""
        )
    );
    assert_eq!(
        capabilities("\"kill\", \"kill\""),
        error(
            4,
            25,
            "defaults.capabilities[2]",
            "duplicate capability \"kill\""
        )
    );
    assert_eq!(
        capabilities("7").2,
        field("defaults.capabilities[1]"),
        "a number is not a name"
    );
}

#[test]
fn accepts_inline_tables() {
    let text = "mission = { name = \"x\" }\ngrant = [{ path = \"/a\", ops = [\"read\"] }]\n";
    let mission = parse(text).unwrap();
    assert_eq!(mission.grants[0].path, Path::new("/a"));
    assert_eq!(mission.grants[0].line, 2);
}

#[test]
fn accepts_tables_made_of_dotted_keys() {
    // Valid TOML for `[mission]`, `[defaults]`, `[vote]` and `[labels]`:
    // tables with no span of their own.
    let text = "mission.name = \"x\"\n\
                defaults.baseline = \"none\"\n\
                vote.timeout = \"5s\"\n\
                labels.policy = [\"/srv/x\"]\n";
    let mission = parse(text).unwrap();
    assert_eq!(mission.name, "x");
    assert_eq!(mission.baseline, Baseline::None);
    assert_eq!(mission.vote.policy.timeout, Duration::from_secs(5));
    assert_eq!(mission.policy.len(), 1);
    // Dotted keys inside a table make its tables too.
    let text = "[mission]\nname = \"x\"\n\
                [[asset]]\nid = \"page\"\npath = \"/srv/page.html\"\nops = [\"read\"]\n\
                [[asset]]\nid = \"image\"\nfound_in = \"page\"\nops = [\"read\"]\n\
                constraints.under = [\"/srv\"]\n";
    let mission = parse(text).unwrap();
    assert_eq!(mission.assets[1].constraints.under, [PathBuf::from("/srv")]);
    // A missing key of such a table points at its first key.
    assert_eq!(
        invalid("mission.profiles = []\n"),
        error(1, 1, "mission.name", "missing field")
    );
}

#[test]
fn expands_the_home_directory() {
    let grant = |path: &str| {
        let text =
            format!("[mission]\nname = \"x\"\n[[grant]]\npath = {path:?}\nops = [\"read\"]\n");
        parse(&text).map(|mission| mission.grants[0].path.clone())
    };
    assert_eq!(grant("~").unwrap(), Path::new("/home/me"));
    assert_eq!(grant("~/").unwrap(), Path::new("/home/me"));
    assert_eq!(grant("~/a/b").unwrap(), Path::new("/home/me/a/b"));
    // Only a leading `~` is special.
    assert_eq!(grant("/x/~/y").unwrap(), Path::new("/x/~/y"));
    // Lexically as written: no normalisation.
    assert_eq!(grant("/a/../b").unwrap(), Path::new("/a/../b"));
}

#[test]
fn expands_the_user_id() {
    let user = User {
        home: Some(PathBuf::from("/home/me")),
        uid: 1000,
    };
    let at = |path: &str, table: &str| {
        let text =
            format!("[mission]\nname = \"x\"\n[[{table}]]\npath = {path:?}\nops = [\"read\"]\n");
        Mission::parse_for(&text, Path::new("m.toml"), &user)
    };
    let grant = |path: &str| at(path, "grant").map(|m| m.grants[0].path.clone());
    assert_eq!(
        grant("/tmp/cc-daemon-{uid}").unwrap(),
        Path::new("/tmp/cc-daemon-1000")
    );
    assert_eq!(
        grant("/run/user/{uid}/x-{uid}").unwrap(),
        Path::new("/run/user/1000/x-1000")
    );
    assert_eq!(grant("~/{uid}").unwrap(), Path::new("/home/me/1000"));
    // Braces that are not a variable are names like any other.
    assert_eq!(grant("/srv/{a,b}").unwrap(), Path::new("/srv/{a,b}"));
    assert_eq!(grant("/srv/{").unwrap(), Path::new("/srv/{"));
    assert_eq!(grant("/srv/{}").unwrap(), Path::new("/srv/{}"));
    assert_eq!(grant("/srv/{UID}").unwrap(), Path::new("/srv/{UID}"));
    // The mission voter's rules and the policy set read it too.
    let rule = "[mission]\nname = \"x\"\n[defaults]\non_unknown = \"ask\"\n[[vote.rule]]\npath = \"/tmp/a-{uid}\"\nverdict = \"deny\"\n";
    let mission = Mission::parse_for(rule, Path::new("m.toml"), &user).unwrap();
    assert_eq!(mission.vote.rules[0].path, Path::new("/tmp/a-1000"));
    let labels = "[mission]\nname = \"x\"\n[labels]\npolicy = [\"/run/user/{uid}/k\"]\n";
    let mission = Mission::parse_for(labels, Path::new("m.toml"), &user).unwrap();
    assert_eq!(mission.policy[0].text(), "/run/user/1000/k");
}

#[test]
fn other_variables_are_errors() {
    let text = "[mission]\nname = \"x\"\n[[grant]]\npath = \"/tmp/x-{user}\"\nops = [\"read\"]\n";
    assert_eq!(
        invalid(text),
        error(
            4,
            8,
            "grant[1].path",
            "unknown variable \"{user}\": only \"{uid}\" is expanded"
        )
    );
    let text = "[mission]\nname = \"x\"\n[labels]\npolicy = [\"/home/{home}/k\"]\n";
    assert_eq!(
        invalid(text).3,
        "unknown variable \"{home}\": only \"{uid}\" is expanded"
    );
}

#[test]
fn tilde_without_a_home_is_an_error() {
    let text = "[mission]\nname = \"x\"\n[[grant]]\npath = \"~/x\"\nops = [\"read\"]\n";
    let error = Mission::parse_with_home(text, Path::new("m.toml"), None).unwrap_err();
    assert_eq!(
        error.to_string(),
        "m.toml:4:8: grant[1].path: cannot expand ~: HOME is not set"
    );
    let error =
        Mission::parse_with_home(text, Path::new("m.toml"), Some(Path::new("rel"))).unwrap_err();
    assert_eq!(
        error.to_string(),
        "m.toml:4:8: grant[1].path: cannot expand ~: HOME is not absolute (\"rel\")"
    );
}

#[test]
fn unknown_operation() {
    let text = r#"[mission]
name = "m"

[[grant]]
path = "/a"
ops = ["read"]

[[grant]]
path = "/b"
ops = ["write", "raed"]
"#;
    assert_eq!(
        invalid(text),
        error(
            10,
            17,
            "grant[2].ops",
            "unknown operation \"raed\" (expected read, write, create, exec, delete, rename, link, setattr or mkdir)"
        )
    );
    assert_eq!(
        parse(text).unwrap_err().to_string(),
        "m.toml:10:17: grant[2].ops: unknown operation \"raed\" \
             (expected read, write, create, exec, delete, rename, link, setattr or mkdir)"
    );
}

#[test]
fn missing_mission_name() {
    let text = "# no name\n\n[mission]\n\n[[grant]]\npath = \"/a\"\nops = [\"read\"]\n";
    assert_eq!(invalid(text), error(3, 1, "mission.name", "missing field"));
    assert_eq!(
        parse(text).unwrap_err().to_string(),
        "m.toml:3:1: mission.name: missing field"
    );
}

refused! {
    mission_written_as_an_array(invalid) {
        "[[mission]]\nname = \"m\"\n"
            => error(1, 1, "mission[1]", "invalid type: array, expected a table"),
    }
    vote_written_as_an_array(invalid) {
        "[mission]\nname = \"m\"\n[[vote]]\ntimeout = \"5s\"\n"
            => error(3, 1, "vote[1]", "invalid type: array, expected a table"),
    }
    a_webhook_of_dotted_keys_lacking_a_key(invalid) {
        "[mission]\nname = \"m\"\n[vote]\nwebhook.url = \"https://x/y\"\n"
            => error(3, 1, "vote.webhook.secret_file", "missing field"),
    }
    constraints_written_as_an_array(invalid) {
        "[mission]\nname = \"m\"\n[[asset]]\nid = \"a\"\nops = [\"read\"]\n\
         [[asset.constraints]]\nglob = \"*\"\n"
            => error(6, 1, "asset[1].constraints[1]", "invalid type: array, expected a table"),
    }
    missing_mission_section(invalid) {
        "[[grant]]\npath = \"/a\"\nops = [\"read\"]\n"
            => error(1, 1, "mission", "missing section"),
    }
    empty_mission_name(invalid) {
        "[mission]\nname = \"  \"\n" => error(2, 8, "mission.name", "must not be empty"),
    }
    other_users_homes_are_not_expanded(invalid) {
        "[mission]\nname = \"x\"\n[[grant]]\npath = \"~bob/x\"\nops = [\"read\"]\n"
            => error(
                4,
                8,
                "grant[1].path",
                "must be absolute (\"~bob/x\": only \"~\" and \"~/...\" are expanded, \
                 not \"~user\")",
            ),
    }
    relative_path(invalid) {
        "[mission]\nname = \"m\"\n[[grant]]\nops = [\"read\"]\npath = \"src/x\"\n"
            => error(5, 8, "grant[1].path", "must be absolute (\"src/x\")"),
        "[mission]\nname = \"m\"\n[[grant]]\npath = \"\"\nops = [\"read\"]\n"
            => error(4, 8, "grant[1].path", "must not be empty"),
    }
    nul_in_path(invalid) {
        "[mission]\nname = \"m\"\n[[grant]]\npath = \"/a\\u0000b\"\nops = [\"read\"]\n"
            => error(4, 8, "grant[1].path", "must not contain a NUL byte"),
    }
    duplicate_key(invalid) {
        "[mission]\nname = \"a\"\nname = \"b\"\n"
            => (3, 1, None, "duplicate key `name` in table `mission`".to_owned()),
    }
    wrong_type_of_a_value(invalid) {
        "[mission]\nname = 3\n"
            => error(2, 8, "mission.name", "invalid type: integer `3`, expected a string"),
    }
    wrong_type_of_a_section(invalid) {
        "mission = \"x\"\n"
            => error(1, 11, "mission", "invalid type: string \"x\", expected a table"),
    }
    wrong_type_in_the_ops_list(invalid) {
        "[mission]\nname = \"m\"\n[[grant]]\npath = \"/a\"\nops = [\"read\", 3]\n"
            => error(5, 16, "grant[1].ops[2]", "invalid type: integer `3`, expected a string"),
    }
    ops_must_be_a_list(invalid) {
        "[mission]\nname = \"m\"\n[[grant]]\npath = \"/a\"\nops = \"read\"\n"
            => error(5, 7, "grant[1].ops", "invalid type: string \"read\", expected an array"),
    }
    empty_ops_list(invalid) {
        "[mission]\nname = \"m\"\n[[grant]]\npath = \"/a\"\nops = []\n"
            => error(5, 7, "grant[1].ops", "must list at least one operation"),
    }
    missing_path_and_ops(invalid) {
        "[mission]\nname = \"m\"\n\n[[grant]]\nops = [\"read\"]\n"
            => error(4, 1, "grant[1].path", "missing field"),
        "[mission]\nname = \"m\"\n\n[[grant]]\npath = \"/a\"\n"
            => error(4, 1, "grant[1].ops", "missing field"),
    }
    unknown_extent(invalid) {
        "[mission]\nname = \"m\"\n[[grant]]\npath = \"/a\"\nops = [\"read\"]\n\
         extent = \"subtree\"\n"
            => error(
                6,
                10,
                "grant[1].extent",
                "unknown extent \"subtree\" (expected file or tree)",
            ),
    }
    unknown_baseline(invalid) {
        "[mission]\nname = \"m\"\n[defaults]\nbaseline = \"all\"\n"
            => error(
                4,
                12,
                "defaults.baseline",
                "unknown baseline \"all\" (expected runtime or none)",
            ),
    }
    unknown_key_in_a_grant(invalid) {
        "[mission]\nname = \"m\"\n[[grant]]\npath = \"/a\"\n[[grant]]\npath = \"/b\"\n\
         opz = [\"read\"]\n"
            => error(
                7,
                1,
                "grant[2].opz",
                "unknown field `opz`, expected one of `path`, `ops`, `extent`, `make`, \
                 `optional`, `own`",
            ),
    }
    integers_too_large_for_toml_name_their_field(invalid) {
        "[mission]\nname = 99999999999999999999\n"
            => error(
                2,
                8,
                "mission.name",
                "integer 99999999999999999999 does not fit in 64 bits",
            ),
        "[mission]\nname = \"m\"\n[[grant]]\npath = \"/a\"\n\
         ops = [\"read\", -9_223_372_036_854_775_809]\n"
            => error(
                5,
                16,
                "grant[1].ops[2]",
                "integer -9_223_372_036_854_775_809 does not fit in 64 bits",
            ),
    }
}

#[test]
fn syntax_error() {
    let text = "[mission]\nname = \"m\n";
    let (line, column, field, message) = invalid(text);
    assert_eq!((line, column, field), (2, 10, None));
    assert_eq!(message, "invalid basic string");
    assert_eq!(
        parse(text).unwrap_err().to_string(),
        "m.toml:2:10: invalid basic string"
    );
}

#[test]
fn duplicate_section() {
    let (line, column, field, message) = invalid("[mission]\nname = \"a\"\n[mission]\n");
    assert_eq!((line, column, field), (3, 1, None));
    assert_eq!(
        message,
        "invalid table header: duplicate key `mission` in document root"
    );
}

#[test]
fn unknown_keys_elsewhere() {
    let (line, column, field_name, message) = invalid("[mission]\nname = \"m\"\ngoal = \"x\"\n");
    assert_eq!((line, column, field_name), (3, 1, field("mission.goal")));
    assert!(message.starts_with("unknown field `goal`"), "{message}");

    let (line, column, field_name, _) = invalid("[mission]\nname = \"m\"\n[policy]\nquorum = 2\n");
    assert_eq!((line, column, field_name), (3, 2, field("policy")));

    let (line, column, field_name, _) = invalid("[mission]\nname = \"m\"\n[vote]\nquorum = 2\n");
    assert_eq!((line, column, field_name), (4, 1, field("vote.quorum")));

    let (line, column, field_name, _) =
        invalid("[mission]\nname = \"m\"\n[defaults]\non_unknwon = \"deny\"\n");
    assert_eq!(
        (line, column, field_name),
        (4, 1, field("defaults.on_unknwon"))
    );

    let (line, _, field_name, _) = invalid("name = \"m\"\n[mission]\nname = \"m\"\n");
    assert_eq!((line, field_name), (1, field("name")));
}

#[test]
fn a_single_grant_table_gets_a_hint() {
    let text = "[mission]\nname = \"m\"\n[grant]\npath = \"/a\"\nops = [\"read\"]\n";
    let (line, column, field_name, message) = invalid(text);
    assert_eq!((line, column, field_name), (3, 1, field("grant")));
    assert_eq!(
        message,
        "invalid type: table, expected an array (write each grant as a [[grant]] table)"
    );
}

#[test]
fn datetimes_are_named_as_such() {
    let (line, column, _, message) = invalid("[mission]\nname = 1979-05-27\n");
    assert_eq!((line, column), (2, 8));
    assert_eq!(message, "invalid type: datetime, expected a string");
}

#[test]
fn columns_count_characters() {
    // "ü" is two bytes and one column: "bad" starts at column 32.
    let text = "grant = [{ path = \"/ü\", ops = [\"bad\"] }]\n[mission]\nname = \"m\"\n";
    let (line, column, field_name, _) = invalid(text);
    assert_eq!((line, column, field_name), (1, 32, field("grant[1].ops")));
}

#[test]
fn forty_thousand_grants() {
    // Each grant's line is looked up in the line index: a scan of the
    // text per grant made this quadratic.
    let mut text = String::from("[mission]\nname = \"many\"\n");
    for index in 0..40_000 {
        text.push_str(&format!(
            "[[grant]]\npath = \"/g/{index}\"\nops = [\"read\"]\n"
        ));
    }
    let mission = parse(&text).unwrap();
    assert_eq!(mission.grants.len(), 40_000);
    let last = &mission.grants[39_999];
    assert_eq!(last.path, Path::new("/g/39999"));
    // `[mission]` and its name, then three lines a grant.
    assert_eq!(last.line, 2 + 3 * 39_999 + 2);
}

#[test]
fn reads_files() {
    let (dir, path) = temp_file("m.toml", "[mission]\nname = \"from a file\"\n");
    let mission = Mission::from_file(&path).unwrap();
    assert_eq!(mission.name, "from a file");
    assert_eq!(mission.source, path);

    let missing = dir.path().join("missing.toml");
    let error = Mission::from_file(&missing).unwrap_err();
    assert!(
        matches!(error, MissionError::File(FileError::Io { ref path, .. }) if *path == missing)
    );
    assert_eq!(
        error.to_string(),
        format!("cannot read mission file {}", missing.display())
    );
}

#[test]
fn error_messages_name_the_file() {
    let error =
        Mission::parse_with_home("[mission]\n", Path::new("/etc/pincer/m.toml"), None).unwrap_err();
    assert_eq!(
        error.to_string(),
        "/etc/pincer/m.toml:1:1: mission.name: missing field"
    );
}

// Parked requests and votes.
