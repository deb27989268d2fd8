//! `[vote]`, its webhook and its rules.

use super::*;

/// The error of a mission whose text after `[mission]` starts on line 3.
fn vote_invalid(rest: &str) -> Parts {
    invalid(&format!("[mission]\nname = \"m\"\n{rest}"))
}

/// A webhook section whose `url` is on line 6 and `secret_file` on 7.
fn webhook(url: &str, secret_file: &str) -> String {
    format!(
        "[vote]\nvoters = [\"webhook\"]\n[vote.webhook]\nurl = {url:?}\n\
             secret_file = {secret_file:?}\n"
    )
}

#[test]
fn vote_defaults_when_absent() {
    let mission = parse("[mission]\nname = \"m\"\n").unwrap();
    assert_eq!(mission.on_unknown, Mode::Enforce);
    assert_eq!(mission.vote, Voting::default());
    assert_eq!(
        mission.vote,
        Voting {
            voters: vec![VoterKind::Mission, VoterKind::Prompt],
            policy: Policy {
                timeout: Duration::from_secs(60),
                default: DefaultVerdict::Deny,
                max_lifetime: Lifetime::Session,
                max_extent: Extent::File,
            },
            webhook: None,
            rules: Vec::new(),
        }
    );
    let mission = parse("[mission]\nname = \"m\"\n[defaults]\n[vote]\n").unwrap();
    assert_eq!(mission.on_unknown, Mode::Enforce);
    assert_eq!(mission.vote, Voting::default());
}

/// A seed of the fuzz corpus too, so the fuzzer starts from what these
/// tests check.
const GOOD_VOTE: &str = include_str!("../../../../../fuzz/corpus/mission/tests_good_vote.toml");

#[test]
fn parses_a_full_vote_policy() {
    let mission = parse(GOOD_VOTE).unwrap();
    assert_eq!(mission.on_unknown, Mode::Ask);
    assert_eq!(
        mission.vote,
        Voting {
            voters: vec![VoterKind::Webhook, VoterKind::Mission, VoterKind::Prompt],
            policy: Policy {
                timeout: Duration::from_secs(90),
                default: DefaultVerdict::AllowOnce,
                max_lifetime: Lifetime::Ttl(Duration::from_secs(3600)),
                max_extent: Extent::Tree,
            },
            webhook: Some(WebhookConfig {
                url: "https://approvals.example/pincer".to_owned(),
                secret_file: PathBuf::from("/home/me/.config/pincer/webhook.key"),
                clock_skew: Duration::from_secs(10),
                line: 13,
                secret_line: 15,
                owner: false,
                node: None,
            }),
            rules: vec![
                Rule {
                    path: PathBuf::from("/home/me/.ssh"),
                    extent: Extent::Tree,
                    ops: ops::READ,
                    verdict: RuleVerdict::Deny,
                    reason: Some("credentials are never part of this task".to_owned()),
                    line: 19,
                },
                Rule {
                    path: PathBuf::from("/home/me/project/Cargo.lock"),
                    extent: Extent::File,
                    ops: ops::WRITE | ops::CREATE,
                    verdict: RuleVerdict::Allow(Lifetime::Ttl(Duration::from_secs(600))),
                    reason: None,
                    line: 26,
                },
                Rule {
                    path: PathBuf::from("/tmp/scratch"),
                    extent: Extent::File,
                    ops: ops::ALL,
                    verdict: RuleVerdict::Allow(Lifetime::Session),
                    reason: None,
                    line: 34,
                },
                Rule {
                    path: PathBuf::from("/tmp/log"),
                    extent: Extent::File,
                    ops: ops::ALL,
                    verdict: RuleVerdict::Allow(Lifetime::Once),
                    reason: None,
                    line: 39,
                },
            ],
        }
    );
}

#[test]
fn vote_caps_and_single_settings() {
    let vote = |rest: &str| parse(&format!("[mission]\nname = \"m\"\n{rest}")).unwrap();
    let mission = vote("[vote]\nmax_lifetime = \"once\"\ntimeout = \"1h\"\n");
    assert_eq!(mission.vote.policy.max_lifetime, Lifetime::Once);
    assert_eq!(mission.vote.policy.timeout, MAX_VOTE_TIMEOUT);
    assert_eq!(
        vote("[vote]\nmax_lifetime = \"session\"\n")
            .vote
            .policy
            .max_lifetime,
        Lifetime::Session
    );
    assert_eq!(
        vote("[vote]\ntimeout = \"250ms\"\n").vote.policy.timeout,
        Duration::from_millis(250)
    );
    assert_eq!(
        vote("[defaults]\non_unknown = \"audit\"\n").on_unknown,
        Mode::Audit
    );
    // Webhook settings without the webhook voter are allowed, and unused.
    let mission = vote(
        &webhook("http://127.0.0.1:8080/vote", "/k")
            .replace("voters = [\"webhook\"]", "voters = [\"prompt\"]"),
    );
    assert_eq!(mission.vote.voters, [VoterKind::Prompt]);
    let spec = mission.vote.webhook.unwrap();
    assert_eq!(spec.clock_skew, Duration::from_secs(30));
    assert_eq!(spec.line, 5);
    // Inline tables work as well as sections.
    let mission = parse(
        "vote = { rule = [{ path = \"/a\", verdict = \"deny\" }], \
             webhook = { url = \"https://h\", secret_file = \"/k\" } }\n\
             [mission]\nname = \"m\"\n",
    )
    .unwrap();
    assert_eq!(mission.vote.rules[0].line, 1);
    assert_eq!(mission.vote.webhook.unwrap().line, 1);
}

#[test]
fn vote_tables_need_no_vote_header() {
    let text = "[mission]\nname = \"m\"\n[[vote.rule]]\npath = \"/a\"\nverdict = \"deny\"\n\
                    [vote.webhook]\nurl = \"https://h\"\nsecret_file = \"/k\"\n";
    let mission = parse(text).unwrap();
    assert_eq!(mission.vote.rules[0].line, 4);
    assert_eq!(mission.vote.webhook.unwrap().line, 6);
    assert_eq!(mission.vote.voters, Voting::default().voters);
}

refused! {
    fields_are_named_across_split_tables(invalid) {
        "[mission]\nname = \"m\"\n[vote]\ntimeout = \"5s\"\n[[vote.rule]]\n\
         path = \"/a\"\nverdict = \"deny\"\n[[vote.rule]]\npath = 3\n"
            => error(9, 8, "vote.rule[2].path", "invalid type: integer `3`, expected a string"),
        "[mission]\nname = \"m\"\n[vote.webhook]\nurl = \"https://h\"\n\
         secret_file = \"/k\"\n[vote]\nvoters = [\"prompt\", 1]\n"
            => error(7, 21, "vote.voters[2]", "invalid type: integer `1`, expected a string"),
    }
    unknown_on_unknown(vote_invalid) {
        "[defaults]\non_unknown = \"allow\"\n"
            => error(
                4,
                14,
                "defaults.on_unknown",
                "unknown value \"allow\" (expected deny, audit or ask)",
            ),
    }
    bad_voters(vote_invalid) {
        "[vote]\nvoters = []\n" => error(4, 10, "vote.voters", "must list at least one voter"),
        "[vote]\nvoters = [\"prompt\", \"mission\", \"prompt\"]\n"
            => error(4, 32, "vote.voters[3]", "duplicate voter \"prompt\""),
        "[vote]\nvoters = [\"mission\", \"slack\"]\n"
            => error(
                4,
                22,
                "vote.voters[2]",
                "unknown voter \"slack\" (expected mission, prompt or webhook)",
            ),
        "[vote]\nvoters = \"prompt\"\n"
            => error(4, 10, "vote.voters", "invalid type: string \"prompt\", expected an array"),
    }
    unknown_default_verdict(vote_invalid) {
        "[vote]\ndefault = \"allow\"\n"
            => error(
                4,
                11,
                "vote.default",
                "unknown default verdict \"allow\" (expected deny or allow-once)",
            ),
    }
    ttl_cap_needs_max_ttl(vote_invalid) {
        "[vote]\ntimeout = \"10s\"\nmax_lifetime = \"ttl\"\n"
            => error(5, 16, "vote.max_ttl", "missing field (max_lifetime = \"ttl\" needs it)"),
        "[vote]\nmax_lifetime = \"forever\"\n"
            => error(
                4,
                16,
                "vote.max_lifetime",
                "unknown lifetime \"forever\" (expected once, ttl or session)",
            ),
        "[vote]\nmax_lifetime = \"ttl\"\nmax_ttl = \"0s\"\n"
            => error(5, 11, "vote.max_ttl", "must be longer than zero"),
        // Lifetimes are recorded in seconds.
        "[vote]\nmax_lifetime = \"ttl\"\nmax_ttl = \"1500ms\"\n"
            => error(5, 11, "vote.max_ttl", "must be a whole number of seconds"),
    }
    unknown_max_extent(vote_invalid) {
        "[vote]\nmax_extent = \"dir\"\n"
            => error(4, 14, "vote.max_extent", "unknown extent \"dir\" (expected file or tree)"),
    }
}

#[test]
fn webhook_voter_without_its_section() {
    let expected = error(
        4,
        21,
        "vote.voters",
        "the webhook voter needs a [vote.webhook] table",
    );
    assert_eq!(
        vote_invalid("[vote]\nvoters = [\"prompt\", \"webhook\"]\n"),
        expected
    );
    assert_eq!(
        parse("[mission]\nname = \"m\"\n[vote]\nvoters = [\"prompt\", \"webhook\"]\n")
            .unwrap_err()
            .to_string(),
        "m.toml:4:21: vote.voters: the webhook voter needs a [vote.webhook] table"
    );
}

#[test]
fn bad_timeouts() {
    let hint = "(write it like \"30s\", \"10m\" or \"1h30m\")";
    for (value, message) in [
        ("\"soon\"", format!("invalid duration \"soon\" {hint}")),
        // A number needs its unit.
        ("\"30\"", format!("invalid duration \"30\" {hint}")),
        ("\"\"", format!("invalid duration \"\" {hint}")),
        ("\"0s\"", "must be longer than zero".to_owned()),
        ("\"61m\"", "must be at most 1h (not 1h 1m)".to_owned()),
        (
            "30",
            "invalid type: integer `30`, expected a string".to_owned(),
        ),
    ] {
        assert_eq!(
            vote_invalid(&format!("[vote]\ntimeout = {value}\n")),
            error(4, 11, "vote.timeout", &message),
            "{value}"
        );
    }
}

#[test]
fn durations_too_large() {
    assert_eq!(
        vote_invalid("[vote]\ntimeout = \"99999999999999999999s\"\n"),
        error(
            4,
            11,
            "vote.timeout",
            "duration \"99999999999999999999s\" is too large"
        )
    );
    // More seconds than a duration holds.
    assert_eq!(
        vote_invalid("[vote]\nmax_lifetime = \"ttl\"\nmax_ttl = \"600000000000y\"\n"),
        error(
            5,
            11,
            "vote.max_ttl",
            "duration \"600000000000y\" is too large"
        )
    );
    // A duration, longer than any ttl may be.
    assert_eq!(
        rule_invalid(
            "path = \"/a\"\nverdict = \"allow\"\nlifetime = \"ttl\"\nttl = \"300000000000y\"\n"
        ),
        error(7, 7, "vote.rule[1].ttl", "must be at most 365 days")
    );
    assert_eq!(
        vote_invalid("[vote]\nmax_lifetime = \"ttl\"\nmax_ttl = \"366d\"\n"),
        error(5, 11, "vote.max_ttl", "must be at most 365 days")
    );
    // The longest one is fine.
    let mission =
        parse("[mission]\nname = \"m\"\n[vote]\nmax_lifetime = \"ttl\"\nmax_ttl = \"365d\"\n")
            .unwrap();
    assert_eq!(
        mission.vote.policy.max_lifetime,
        Lifetime::Ttl(vote::MAX_TTL)
    );
}

#[test]
fn max_ttl_without_a_ttl_cap() {
    let expected = error(
        4,
        11,
        "vote.max_ttl",
        "only allowed with max_lifetime = \"ttl\"",
    );
    assert_eq!(vote_invalid("[vote]\nmax_ttl = \"1h\"\n"), expected);
    assert_eq!(
        vote_invalid("[vote]\nmax_ttl = \"1h\"\nmax_lifetime = \"once\"\n"),
        expected
    );
}

#[test]
fn bad_webhook_urls() {
    for (url, message) in [
        (
            "ftp://approvals.example/x",
            "must use http or https, not \"ftp\"",
        ),
        ("https://", "not a valid URL (empty host)"),
        (
            "approvals.example",
            "not a valid URL (relative URL without a base)",
        ),
        ("", "not a valid URL (relative URL without a base)"),
        (
            "mailto:ops@approvals.example",
            "must use http or https, not \"mailto\"",
        ),
    ] {
        assert_eq!(
            vote_invalid(&webhook(url, "/k")),
            error(6, 7, "vote.webhook.url", message),
            "{url}"
        );
    }
}

#[test]
fn bad_webhook_settings() {
    assert_eq!(
        vote_invalid(&webhook("https://h", "webhook.key")),
        error(
            7,
            15,
            "vote.webhook.secret_file",
            "must be absolute (\"webhook.key\")"
        )
    );
    assert_eq!(
        vote_invalid("[vote.webhook]\nsecret_file = \"/k\"\n"),
        error(3, 1, "vote.webhook.url", "missing field")
    );
    assert_eq!(
        vote_invalid("[vote.webhook]\nurl = \"https://h\"\n"),
        error(3, 1, "vote.webhook.secret_file", "missing field")
    );
    let skew = |value: &str| {
        vote_invalid(&format!(
            "{}clock_skew = {value:?}\n",
            webhook("https://h", "/k")
        ))
    };
    assert_eq!(
        skew("0s"),
        error(8, 14, "vote.webhook.clock_skew", "must be longer than zero")
    );
    assert_eq!(
        skew("2h"),
        error(
            8,
            14,
            "vote.webhook.clock_skew",
            "must be at most 1h (not 2h)"
        )
    );
    // The secret itself has no place in the mission.
    let (line, column, field_name, message) = vote_invalid(&format!(
        "{}secret = \"hunter2\"\n",
        webhook("https://h", "/k")
    ));
    assert_eq!(
        (line, column, field_name),
        (8, 1, field("vote.webhook.secret"))
    );
    assert!(message.starts_with("unknown field `secret`"), "{message}");
}

/// A mission whose only rule starts on line 3, its first key on line 4.
fn rule_invalid(keys: &str) -> Parts {
    vote_invalid(&format!("[[vote.rule]]\n{keys}"))
}

refused! {
    rule_without_a_verdict(rule_invalid) {
        "path = \"/a\"\nverdict = \"deny\"\n\n[[vote.rule]]\npath = \"/b\"\n"
            => error(7, 1, "vote.rule[2].verdict", "missing field"),
        "path = \"/a\"\nverdict = \"ask\"\n"
            => error(
                5,
                11,
                "vote.rule[1].verdict",
                "unknown verdict \"ask\" (expected deny or allow)",
            ),
        "verdict = \"deny\"\n" => error(3, 1, "vote.rule[1].path", "missing field"),
    }
    rule_ttl_lifetime_without_a_ttl(rule_invalid) {
        "path = \"/a\"\nverdict = \"allow\"\nlifetime = \"ttl\"\n"
            => error(3, 1, "vote.rule[1].ttl", "missing field (lifetime = \"ttl\" needs it)"),
        "path = \"/a\"\nverdict = \"allow\"\nlifetime = \"ttl\"\nttl = \"1.5s\"\n"
            => error(7, 7, "vote.rule[1].ttl", "must be a whole number of seconds"),
    }
    rule_lifetime_needs_allow(rule_invalid) {
        "path = \"/a\"\nverdict = \"deny\"\nlifetime = \"once\"\n"
            => error(6, 12, "vote.rule[1].lifetime", "only allowed with verdict = \"allow\""),
        "path = \"/a\"\nverdict = \"allow\"\nlifetime = \"always\"\n"
            => error(
                6,
                12,
                "vote.rule[1].lifetime",
                "unknown lifetime \"always\" (expected once, ttl or session)",
            ),
    }
    bad_rule_values(rule_invalid) {
        "path = \"~/../root\"\nverdict = \"deny\"\n"
            => error(4, 8, "vote.rule[1].path", "must not contain \"..\" (\"~/../root\")"),
        "path = \".ssh\"\nverdict = \"deny\"\n"
            => error(4, 8, "vote.rule[1].path", "must be absolute (\".ssh\")"),
        "path = \"/a\"\nverdict = \"deny\"\nops = []\n"
            => error(6, 7, "vote.rule[1].ops", "must list at least one operation"),
        "path = \"/a\"\nverdict = \"deny\"\nextent = \"all\"\n"
            => error(
                6,
                10,
                "vote.rule[1].extent",
                "unknown extent \"all\" (expected file or tree)",
            ),
        "path = \"/a\"\nverdict = \"deny\"\nreason = \" \"\n"
            => error(6, 10, "vote.rule[1].reason", "must not be empty"),
    }
}

#[test]
fn rule_ttl_without_a_ttl_lifetime() {
    let expected = error(
        6,
        7,
        "vote.rule[1].ttl",
        "only allowed with lifetime = \"ttl\"",
    );
    assert_eq!(
        rule_invalid("path = \"/a\"\nverdict = \"allow\"\nttl = \"1h\"\nlifetime = \"session\"\n"),
        expected
    );
    // The default lifetime is "once".
    assert_eq!(
        rule_invalid("path = \"/a\"\nverdict = \"allow\"\nttl = \"1h\"\n"),
        expected
    );
    assert_eq!(
        rule_invalid("path = \"/a\"\nverdict = \"deny\"\nttl = \"1h\"\n"),
        expected
    );
}

#[test]
fn unknown_key_in_a_rule() {
    let (line, column, field_name, message) = rule_invalid("path = \"/a\"\naction = \"deny\"\n");
    assert_eq!(
        (line, column, field_name),
        (5, 1, field("vote.rule[1].action"))
    );
    assert_eq!(
        message,
        "unknown field `action`, expected one of `path`, `extent`, `ops`, `verdict`, \
             `lifetime`, `ttl`, `reason`"
    );
}

#[test]
fn a_single_rule_table_gets_a_hint() {
    let (line, column, field_name, message) =
        vote_invalid("[vote.rule]\npath = \"/a\"\nverdict = \"deny\"\n");
    assert_eq!((line, column, field_name), (3, 1, field("vote.rule")));
    assert_eq!(
        message,
        "invalid type: table, expected an array (write each rule as a [[vote.rule]] table)"
    );
}
