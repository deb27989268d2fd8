//! `[[agent]]`.

use super::*;

#[test]
fn required_agent_fields() {
    let cases = [
        (
            "[[agent]]\ncgroup = \"a\"\nmission = \"/m\"\n",
            "agent[1].name",
        ),
        (
            "[[agent]]\nname = \"a\"\nmission = \"/m\"\n",
            "agent[1].cgroup",
        ),
        (
            "[[agent]]\nname = \"a\"\ncgroup = \"a\"\n",
            "agent[1].mission",
        ),
    ];
    for (text, name) in cases {
        // The entry's header, for want of the missing key.
        let text = format!("[daemon]\n\n{text}");
        assert_eq!(
            invalid(&text),
            (3, 1, field(name), "missing field".to_owned()),
            "{text}"
        );
    }
}

#[test]
fn duplicate_agent_names_point_at_the_second() {
    let text = format!(
        "{}{}{}",
        agent_with_cgroup("a", "x"),
        agent_with_cgroup("b", "y"),
        agent_with_cgroup("a", "z")
    );
    assert_eq!(
        invalid(&text),
        (
            10,
            8,
            field("agent[3].name"),
            "duplicate agent name \"a\" (agent[1] has it)".to_owned()
        )
    );
}

#[test]
fn agent_names() {
    let good = ["a", "Claude-3.5_sonnet", &"x".repeat(64), "..."];
    for name in good {
        let config = parse(&agent_with_cgroup(name, "x")).unwrap();
        assert_eq!(config.agents[0].name, name);
    }
    let bad = [
        ("", "must be 1 to 64 characters long (not 0)"),
        (&"x".repeat(65), "must be 1 to 64 characters long (not 65)"),
        (
            "a b",
            "\" \" is not allowed in \"a b\" (only letters, digits, \".\", \"_\" and \"-\")",
        ),
        (
            "a/b",
            "\"/\" is not allowed in \"a/b\" (only letters, digits, \".\", \"_\" and \"-\")",
        ),
        (
            "é",
            "\"é\" is not allowed in \"é\" (only letters, digits, \".\", \"_\" and \"-\")",
        ),
        (
            "..",
            "must not be \"..\" (it means a directory when used as a file name)",
        ),
        (
            ".",
            "must not be \".\" (it means a directory when used as a file name)",
        ),
    ];
    for (name, message) in bad {
        assert_eq!(
            invalid(&agent_with_cgroup(name, "x")),
            (2, 8, field("agent[1].name"), message.to_owned()),
            "{name:?}"
        );
    }
}

#[test]
fn bad_patterns_point_at_the_cgroup() {
    for (text, message) in pattern::tests::BAD_PATTERNS {
        let config = format!("[daemon]\n{}", agent_with_cgroup("a", text));
        assert_eq!(
            invalid(&config),
            (4, 10, field("agent[1].cgroup"), message.to_owned()),
            "{text}"
        );
    }
}

#[test]
fn the_same_pattern_twice_is_refused() {
    let text = format!(
        "{}{}",
        agent_with_cgroup("a", "x/*"),
        agent_with_cgroup("b", "x/*")
    );
    let (line, column, field_name, message) = invalid(&text);
    assert_eq!(
        (line, column, field_name),
        (7, 10, field("agent[2].cgroup"))
    );
    assert!(message.starts_with("same pattern as agent[1]"), "{message}");
}

#[test]
fn missions() {
    let with_mission = |mission: &str| {
        format!("[[agent]]\nname = \"a\"\ncgroup = \"a\"\nmission = \"{mission}\"\n")
    };
    assert_eq!(
        invalid(&with_mission("")),
        (
            4,
            11,
            field("agent[1].mission"),
            "must not be empty".to_owned()
        )
    );
    assert_eq!(
        invalid(&with_mission("~/mission.toml")).3,
        "\"~\" is not expanded (whose home would it be?): write the path in full"
    );
    // Only a leading `~` component is a home; elsewhere it is a name.
    let config = parse(&with_mission("~x/../m.toml")).unwrap();
    assert_eq!(
        config.agents[0].mission,
        Path::new("/etc/pincer/~x/../m.toml")
    );
    let config = parse(&with_mission("./m.toml")).unwrap();
    assert_eq!(config.agents[0].mission, Path::new("/etc/pincer/m.toml"));
}

#[test]
fn the_first_declared_agent_wins() {
    let text = format!(
        "{}{}{}",
        agent_with_cgroup("claude", "agents.slice/claude-*.scope"),
        agent_with_cgroup("any", "agents.slice/**"),
        agent_with_cgroup("late", "agents.slice/claude-1.scope"),
    );
    let config = parse(&text).unwrap();
    let agent = |path: &str| config.agent_for(Path::new(path)).map(|a| a.name.as_str());
    assert_eq!(agent("agents.slice/claude-1.scope"), Some("claude"));
    assert_eq!(agent("agents.slice/codex-1.scope"), Some("any"));
    assert_eq!(agent("agents.slice"), Some("any"));
    assert_eq!(agent("system.slice/sshd.service"), None);
    assert_eq!(
        Config::default_at(Path::new(CONFIG)).agent_for(Path::new("agents.slice/a")),
        None
    );
}
