//! The policy set's rules, read as the programs read them.

use std::path::Path;

use pincer_common::{POLICY_PAIRS, PolicyRules, label_flags, policy_name_hash_of, policy_rule};

use super::*;
use crate::test_support::temp_file;

/// The class and pattern of the rule that makes a change at `path` the
/// owner's (`exists`: of an existing object), or `None`.
fn rule(set: &PolicySet, path: &str, exists: bool) -> Option<(String, String)> {
    set.place(Path::new(path), exists, false)
        .map(|placed| (placed.entry.class.clone(), placed.entry.pattern.text()))
}

fn class_of(path: &str) -> Option<String> {
    rule(&PolicySet::with_defaults(&[]), path, true).map(|(class, _)| class)
}

fn new_class_of(path: &str) -> Option<String> {
    rule(&PolicySet::with_defaults(&[]), path, false).map(|(class, _)| class)
}

#[test]
fn each_class_of_the_issue_is_covered_by_structure() {
    // Other tools' configuration that runs code or steers an agent.
    for path in [
        "/w/p/.mcp.json",
        "/w/p/.vscode/mcp.json",
        "/w/p/.windsurf/rules/x.md",
        "/w/p/.github/instructions/a.md",
        "/w/p/.devcontainer/devcontainer.json",
        "/w/p/.pre-commit-config.yaml",
        "/w/p/.husky/pre-commit",
        "/w/p/.gitattributes",
        "/w/p/.git/info/attributes",
        "/w/p/.npmrc",
        "/w/p/.yarnrc.yml",
        "/w/p/.github/workflows/ci.yml",
        "/w/p/.venv/lib/python3.11/site-packages/evil.pth",
        "/w/p/.venv/lib/python3.11/site-packages/sitecustomize.py",
        "/w/p/.venv/bin/activate",
        "/w/p/.venv/pyvenv.cfg",
        "/w/p/.vscode/tasks.json",
        "/home/u/.bashrc",
        "/home/u/.ssh/authorized_keys",
    ] {
        assert!(class_of(path).is_some(), "{path}");
    }
    // git's indirections.
    for path in [
        "/w/p/.git/commondir",
        "/w/p/.git/modules/sub/config",
        "/w/p/.git/modules/sub/hooks/pre-commit",
        "/w/p/.git/worktrees/x/gitdir",
        "/w/p/.git/config",
        "/w/p/.git/config.worktree",
        "/w/p/.git/hooks/post-commit",
        "/w/p/.git/objects/info/alternates",
    ] {
        assert_eq!(class_of(path).as_deref(), Some("git"), "{path}");
    }
    // A new `.git` in a person's directory.
    assert_eq!(new_class_of("/w/p/docs/.git").as_deref(), Some("git"));
    // conftest.py is code: the agent's.
    assert_eq!(class_of("/w/p/tests/conftest.py"), None);
}

#[test]
fn ordinary_work_is_not_policy() {
    for path in [
        "/w/p/src/main.rs",
        "/w/p/.git/objects/ab/cdef",
        "/w/p/.git/objects/pack/tmp_pack_1",
        "/w/p/.git/refs/heads/fix",
        "/w/p/.git/refs/heads/fix.lock",
        "/w/p/.git/logs/HEAD",
        "/w/p/.git/index",
        "/w/p/.git/index.lock",
        "/w/p/.git/index.stash.4242",
        "/w/p/.git/next-index-12.lock",
        "/w/p/.git/HEAD",
        "/w/p/.git/HEAD.lock",
        "/w/p/.git/ORIG_HEAD",
        "/w/p/.git/COMMIT_EDITMSG",
        "/w/p/.git/MERGE_MSG",
        "/w/p/.git/REBASE_HEAD",
        "/w/p/.git/AUTO_MERGE",
        "/w/p/.git/rebase-merge/done",
        "/w/p/.git/packed-refs.lock",
        "/w/p/.git/config.lock",
        "/w/p/.git/FETCH_HEAD",
        "/w/p/.pytest_cache/v/cache/nodeids",
        "/w/p/.mypy_cache/3.11/x.json",
        "/w/p/node_modules/.bin/tool",
        "/w/p/node_modules/.package-lock.json",
        "/w/p/node_modules/pkg/.eslintrc",
        "/w/p/.venv/lib/python3.11/site-packages/six.py",
        "/w/p/.venv/lib/python3.11/site-packages/six-1.16.dist-info/RECORD",
        "/w/p/target/debug/.fingerprint/x",
        "/w/p/build/.ninja_log",
        "/w/p/.gitignore",
        "/w/p/.coverage.host.42",
        "/w/p/.aider.chat.history.md",
        "/w/p/.aider.tags.cache.v4/cache.db",
        "/w/p/docs/hooks.md",
        // Temporary names of atomic saves.
        "/w/p/.a.txt.swp",
        "/w/p/.tmpXa3k9",
        "/w/p/.#notes.md",
        "/w/p/.___atomicwriteab12",
    ] {
        assert_eq!(class_of(path), None, "{path}");
        assert_eq!(new_class_of(path), None, "{path}");
    }
    // In a person's repository, the hooks directory is the owner's, samples
    // and all.
    assert_eq!(
        new_class_of("/w/p/.git/hooks/pre-commit.sample"),
        Some("git".into())
    );
}

#[test]
fn instructions_hold_below_work_names_and_start_up_code_too() {
    for (path, class) in [
        // Instructions hold everywhere: a dependency's CLAUDE.md is one.
        ("/w/p/node_modules/pkg/CLAUDE.md", Some("instructions")),
        // A work name lifts configuration below it, not start-up code.
        ("/w/p/node_modules/pkg/.npmrc", None),
        (
            "/w/p/.venv/lib/python3.11/site-packages/x.pth",
            Some("start-up code"),
        ),
        // A temporary name keeps nothing of what it is named after.
        ("/w/p/.claude/settings.json.swp", Some("instructions")),
        ("/w/p/.git/config.swp", Some("git")),
        ("/w/p/.venv/bin/python3.11", Some("start-up code")),
        // Configuration above a work name still holds.
        (
            "/home/u/.vscode/extensions/x/node_modules/y/index.js",
            Some("configuration"),
        ),
    ] {
        assert_eq!(class_of(path).as_deref(), class, "{path}");
    }
}

#[test]
fn a_redirecting_git_file_is_policy_but_a_new_repository_directory_is_made_like_any_other() {
    let set = PolicySet::with_defaults(&[]);
    // As a file (a gitfile), anywhere; as a directory, in a person's
    // directory only (which is policy as any new dot-name there).
    let file = set.place(Path::new("/w/p/sub/.git"), false, false).unwrap();
    let dir = set.place(Path::new("/w/p/sub/.git"), false, true).unwrap();
    assert_eq!(file.entry.pattern.text(), ".git/");
    assert_eq!(dir.entry.pattern.text(), ".git/");
}

#[test]
fn the_place_names_the_component_the_rule_met() {
    let set = PolicySet::with_defaults(&[]);
    let placed = set
        .place(Path::new("/w/p/.vscode/tasks.json"), true, false)
        .unwrap();
    assert_eq!(placed.step, 2);
    assert_eq!(placed.at, Path::new("/w/p/.vscode"));
    assert_eq!(placed.entry.pattern.text(), ".*");
    let placed = set.place(Path::new("/w/p/CLAUDE.md"), true, false).unwrap();
    assert_eq!(
        (placed.step, placed.at.as_path()),
        (1, Path::new("/w/p/CLAUDE.md"))
    );
}

#[test]
fn trie_keys_carry_what_their_shorter_prefixes_say() {
    let set = PolicySet::with_defaults(&[]);
    let rules = set.kernel_rules().unwrap();
    let value = |name: &[u8]| -> PolicyRules {
        rules
            .names
            .iter()
            .find(|(bits, key, _)| key.name[..*bits as usize / 8] == *name)
            .unwrap_or_else(|| panic!("no key {:?}", String::from_utf8_lossy(name)))
            .2
    };
    // `.venv` is work alone; in no directory does the dot rule win.
    let venv = value(b".venv\0");
    assert_eq!(venv.bits, policy_rule::WORK);
    // `.gitignore`'s key (work) has no pair; `.git` keeps the dot rule's
    // bits and more.
    let git = value(b".git\0");
    assert_ne!(git.bits & policy_rule::REDIRECT, 0);
    // `config` in `.git` is inspected; `config.lock` is work, and the
    // shorter key's pair is not carried to a longer one where it does
    // not apply.
    let git_hash = policy_name_hash_of(b".git").unwrap();
    let config = value(b"config\0");
    assert_eq!(
        config.resolve(git_hash).0 & policy_rule::INSPECT,
        policy_rule::INSPECT
    );
    let lock = value(b"config.lock\0");
    assert_eq!(lock.resolve(git_hash).0, policy_rule::WORK);
    // `index*` holds for `index.stash.4242` through the prefix key.
    let index = value(b"index");
    assert_eq!(index.resolve(git_hash).0, policy_rule::WORK);
    assert_eq!(index.resolve(0).0, 0);
    // Every value fits the programs'.
    for (_, _, value) in &rules.names {
        assert!(value.pairs.iter().filter(|p| p.parent != 0).count() <= POLICY_PAIRS);
    }
    // Suffix keys are reversed.
    let (bits, key, pth) = rules
        .suffixes
        .iter()
        .find(|(bits, key, _)| &key.tail[..*bits as usize / 8] == b"htp.")
        .unwrap();
    assert_eq!(*bits, 32);
    assert_eq!(key.tail[..4], *b"htp.");
    let site = policy_name_hash_of(b"site-packages").unwrap();
    assert_ne!(pth.resolve(site).0 & policy_rule::UNLIFTED, 0);
}

#[test]
fn a_mission_can_make_a_work_name_policy_and_add_names() {
    let set = PolicySet::with_defaults(&[
        PolicyPattern::parse(".venv/", None).unwrap(),
        PolicyPattern::parse("README.md", None).unwrap(),
    ]);
    assert_eq!(
        rule(&set, "/w/p/.venv/lib/six.py", true),
        Some(("named".to_owned(), ".venv/".to_owned()))
    );
    assert_eq!(
        rule(&set, "/w/p/README.md", true),
        Some(("named".to_owned(), "README.md".to_owned()))
    );
    // Entries keep their numbers as a set grows.
    let mut grown = PolicySet::with_defaults(&[]);
    let before = grown.entries.len();
    grown.merge(&set);
    assert_eq!(grown.entries.len(), before + 2);
    assert_eq!(
        grown.entry(before as u32 + 1).unwrap().pattern.text(),
        ".venv/"
    );
}

#[test]
fn the_default_set_reads_and_every_rule_says_why() {
    assert!(DEFAULT_POLICY.entries.len() > 60);
    for entry in &DEFAULT_POLICY.entries {
        let class = class(&entry.class).expect("a known class");
        assert!(
            !entry.why.is_empty() || !class.why.is_empty(),
            "{}",
            entry.pattern.text()
        );
    }
    assert!(PolicySet::with_defaults(&[]).kernel_rules().is_ok());
}

#[test]
fn patterns_read_as_written() {
    let home = Path::new("/home/alice");
    let parse = |text: &str| PolicyPattern::parse(text, Some(home));
    assert_eq!(
        parse("CLAUDE.md").unwrap(),
        PolicyPattern {
            place: Place::Name(NameMatch::Exact("CLAUDE.md".into())),
            protects: Protects::NAMED
        }
    );
    assert_eq!(
        parse(".git/hooks/").unwrap(),
        PolicyPattern {
            place: Place::InDir {
                dir: ".git".into(),
                name: NameMatch::Exact("hooks".into())
            },
            protects: Protects::TREE
        }
    );
    assert_eq!(
        parse(".env*").unwrap().place,
        Place::Name(NameMatch::Prefix(".env".into()))
    );
    assert_eq!(
        parse("site-packages/*.pth").unwrap().place,
        Place::InDir {
            dir: "site-packages".into(),
            name: NameMatch::Suffix(".pth".into())
        }
    );
    assert_eq!(
        parse("~/.config/tool/").unwrap().place,
        Place::Path("/home/alice/.config/tool".into())
    );
    assert_eq!(parse("/etc/x").unwrap().text(), "/etc/x");
    assert_eq!(parse("a/b/").unwrap().text(), "a/b/");
    assert_eq!(parse("a/x*").unwrap().text(), "a/x*");
    for (bad, why) in [
        ("", "must not be empty"),
        ("a/b/c", "at most two names"),
        ("~bob/x", "not \"~bob/x\""),
        ("/etc/../x", "\"..\""),
        ("/etc/*", "no `*`"),
        ("../x", "\"..\" is not a name"),
        ("a//b", "\"\" is not a name"),
        ("*", "`*` alone"),
        ("a/*too-long-end", "up to 8 bytes"),
        ("a*b*", "is not a name"),
        (
            "this-name-is-far-longer-than-31-bytes",
            "longer than 31 bytes",
        ),
    ] {
        let error = parse(bad).unwrap_err();
        assert!(error.contains(why), "{bad:?}: {error}");
    }
    assert!(PolicyPattern::parse("~/x", None).is_err());
    // Outside a mission nobody's id is known: a daemon's or a policy set's
    // `{uid}` would name nothing.
    assert_eq!(
        PolicyPattern::parse("/run/user/{uid}/k", None).unwrap_err(),
        "\"{uid}\" is expanded only in missions (\"/run/user/{uid}/k\")"
    );
}

#[test]
fn the_kernel_reads_names_as_userspace_hashes_them() {
    // The programs read a name with its NUL into a zeroed buffer.
    let mut buf = [0u8; pincer_common::POLICY_NAME_BUF];
    buf[..4].copy_from_slice(b".git");
    assert_eq!(
        pincer_common::policy_name_hash(&buf),
        policy_name_hash_of(b".git").unwrap()
    );
    let longest = "x".repeat(pincer_common::MAX_POLICY_NAME);
    assert!(policy_name_hash_of(longest.as_bytes()).is_some());
    assert!(policy_name_hash_of(format!("{longest}x").as_bytes()).is_none());
}

#[test]
fn existing_paths_are_labelled_by_identity() {
    let (dir, file) = temp_file("rc", "x");
    let set = PolicySet {
        entries: [
            format!("{}/", dir.path().display()),
            file.display().to_string(),
            "/nonexistent/pincer/x".to_owned(),
        ]
        .iter()
        .map(|text| PolicyEntry::named(PolicyPattern::parse(text, None).unwrap()))
        .collect(),
    };
    let objects = set.objects();
    assert_eq!(objects.len(), 2);
    assert_eq!(objects[0].1, label_flags::POLICY | label_flags::TREE);
    assert_eq!(objects[1].1, label_flags::POLICY);
}

#[test]
fn the_readme_table_is_the_default_set() {
    crate::readme::check_table("policy-table", &readme_table());
}
