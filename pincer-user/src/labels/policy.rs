//! The policy set: which objects only the owner changes.
//!
//! A pattern names objects by their name (`CLAUDE.md`), by their name in a
//! directory of a given name (`.git/config`), or by path (`/etc/pincer/`,
//! `~/.bashrc`), and says what of them needs the owner ([`Protects`]). The
//! programs match the first two kinds by name on every change an agent
//! makes ([`PolicySet::kernel_rules`]); paths are resolved when pincer
//! starts, and their objects labelled policy by identity
//! ([`PolicySet::objects`]). The default set is `policy.toml` beside this
//! file, each entry with its reason; missions and the daemon configuration
//! add patterns (`[labels] policy = [...]`).

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    sync::LazyLock,
};

use pincer_common::{ObjectKey, PolicyName, label_flags, policy_name_hash_of, policy_rule};
use serde::Deserialize;

/// What of a matching object needs the owner (bits of
/// [`pincer_common::policy_rule`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Protects(pub u32);

impl Protects {
    /// An existing object and a new one of that name: what a plain pattern
    /// protects.
    pub const NAMED: Protects = Protects(policy_rule::OBJECT | policy_rule::NEW);
    /// A directory, a new one, and everything below it: what a pattern with
    /// a trailing `/` protects.
    pub const TREE: Protects = Protects(policy_rule::OBJECT | policy_rule::NEW | policy_rule::TREE);

    /// Whether everything below is protected.
    pub fn tree(self) -> bool {
        self.0 & policy_rule::TREE != 0
    }

    /// The words `policy.toml` and the README use.
    pub fn words(self) -> Vec<&'static str> {
        [
            (policy_rule::OBJECT, "object"),
            (policy_rule::NEW, "new"),
            (policy_rule::TREE, "tree"),
        ]
        .into_iter()
        .filter(|(bit, _)| self.0 & bit != 0)
        .map(|(_, word)| word)
        .collect()
    }
}

/// Where a pattern finds its objects.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Place {
    /// A name, in any directory.
    Name(String),
    /// A name in a directory of a given name.
    InDir {
        /// The directory's name.
        dir: String,
        /// The name.
        name: String,
    },
    /// An absolute path (a leading `~` expanded).
    Path(PathBuf),
}

/// One pattern of the policy set.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PolicyPattern {
    /// Where its objects are.
    pub place: Place,
    /// What of them needs the owner.
    pub protects: Protects,
}

impl PolicyPattern {
    /// Reads a pattern as missions and configurations write it: a name, a
    /// `dir/name`, or an absolute (or `~/`) path; a trailing `/` protects
    /// everything below. `home` expands `~`.
    pub fn parse(text: &str, home: Option<&Path>) -> Result<PolicyPattern, String> {
        let (body, tree) = match text.strip_suffix('/') {
            Some(body) if !body.is_empty() => (body, true),
            _ => (text, false),
        };
        let protects = if tree {
            Protects::TREE
        } else {
            Protects::NAMED
        };
        if body.is_empty() {
            return Err("must not be empty".to_owned());
        }
        if body.contains('\0') {
            return Err("must not contain a NUL byte".to_owned());
        }
        let place = if body == "~" || body.starts_with("~/") {
            let home = home.ok_or("cannot expand ~: HOME is not set")?;
            Place::Path(home.join(body.trim_start_matches('~').trim_start_matches('/')))
        } else if body.starts_with('~') {
            return Err(format!(
                "only \"~\" and \"~/...\" are expanded, not {body:?}"
            ));
        } else if body.starts_with('/') {
            if body.split('/').any(|part| part == "..") {
                return Err(format!("must not contain \"..\" ({body:?})"));
            }
            Place::Path(PathBuf::from(body))
        } else {
            let parts: Vec<&str> = body.split('/').collect();
            for part in &parts {
                check_name(part)?;
            }
            match parts.as_slice() {
                [name] => Place::Name((*name).to_owned()),
                [dir, name] => Place::InDir {
                    dir: (*dir).to_owned(),
                    name: (*name).to_owned(),
                },
                _ => {
                    return Err(format!(
                        "a name, a directory's name and a name in it, or an absolute path (not {body:?}: the programs compare at most two names)"
                    ));
                }
            }
        };
        Ok(PolicyPattern { place, protects })
    }

    /// The pattern as written.
    pub fn text(&self) -> String {
        let body = match &self.place {
            Place::Name(name) => name.clone(),
            Place::InDir { dir, name } => format!("{dir}/{name}"),
            Place::Path(path) => path.display().to_string(),
        };
        if self.protects.tree() {
            format!("{body}/")
        } else {
            body
        }
    }
}

/// A name the programs can compare: not empty, no `/`, not `.` or `..`,
/// short enough for their hash.
fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name == "." || name == ".." {
        return Err(format!("{name:?} is not a name"));
    }
    if policy_name_hash_of(name.as_bytes()).is_none() {
        return Err(format!(
            "{name:?} is longer than {} bytes",
            pincer_common::MAX_POLICY_NAME
        ));
    }
    Ok(())
}

/// One entry of the default set, with its reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefaultEntry {
    /// The pattern.
    pub pattern: PolicyPattern,
    /// Why its objects are policy, for the documentation.
    pub why: String,
}

/// The default policy set: `policy.toml` beside this file.
pub static DEFAULT_POLICY: LazyLock<Vec<DefaultEntry>> =
    LazyLock::new(|| parse_defaults(include_str!("policy.toml")).expect("policy.toml is valid"));

fn parse_defaults(text: &str) -> Result<Vec<DefaultEntry>, String> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct RawEntry {
        pattern: String,
        protects: Vec<String>,
        why: String,
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Raw {
        entry: Vec<RawEntry>,
    }
    let raw: Raw = toml::from_str(text).map_err(|e| e.to_string())?;
    raw.entry
        .into_iter()
        .map(|entry| {
            let mut pattern = PolicyPattern::parse(&entry.pattern, None)
                .map_err(|e| format!("{}: {e}", entry.pattern))?;
            let mut bits = 0;
            for word in &entry.protects {
                bits |= match word.as_str() {
                    "object" => policy_rule::OBJECT,
                    "new" => policy_rule::NEW,
                    "tree" => policy_rule::TREE,
                    other => return Err(format!("{}: unknown {other:?}", entry.pattern)),
                };
            }
            if (bits & policy_rule::TREE != 0) != pattern.protects.tree() {
                return Err(format!(
                    "{}: a tree entry is written with a trailing /, and only it",
                    entry.pattern
                ));
            }
            pattern.protects = Protects(bits);
            Ok(DefaultEntry {
                pattern,
                why: entry.why,
            })
        })
        .collect()
}

/// A set of patterns: the default set and what a mission or configuration
/// adds.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PolicySet {
    /// The patterns, defaults first.
    pub patterns: Vec<PolicyPattern>,
}

impl PolicySet {
    /// The default set, with `extra` added.
    pub fn with_defaults(extra: &[PolicyPattern]) -> PolicySet {
        let mut patterns: Vec<PolicyPattern> =
            DEFAULT_POLICY.iter().map(|e| e.pattern.clone()).collect();
        for pattern in extra {
            if !patterns.contains(pattern) {
                patterns.push(pattern.clone());
            }
        }
        PolicySet { patterns }
    }

    /// The name rules for the programs: every name pattern, keyed by its
    /// hash (and its directory's), with what it protects; rules for one key
    /// are merged.
    pub fn kernel_rules(&self) -> Vec<(PolicyName, u32)> {
        let mut rules: BTreeMap<(u64, u64), u32> = BTreeMap::new();
        for pattern in &self.patterns {
            let key = match &pattern.place {
                Place::Name(name) => policy_name_hash_of(name.as_bytes()).map(|name| (0, name)),
                Place::InDir { dir, name } => {
                    policy_name_hash_of(dir.as_bytes()).zip(policy_name_hash_of(name.as_bytes()))
                }
                Place::Path(_) => None,
            };
            if let Some(key) = key {
                *rules.entry(key).or_default() |= pattern.protects.0;
            }
        }
        rules
            .into_iter()
            .map(|((parent, name), bits)| (PolicyName { parent, name }, bits))
            .collect()
    }

    /// The patterns whose names or places cover `path` (absolute, links
    /// resolved): a name pattern matches a component of the path (the
    /// last, or any for a tree pattern), a directory-and-name pattern two
    /// consecutive ones, a path pattern the path itself or, for a tree,
    /// what is below it.
    pub fn covering(&self, path: &Path) -> Vec<&PolicyPattern> {
        let names: Vec<&[u8]> = path
            .components()
            .filter_map(|part| match part {
                std::path::Component::Normal(name) => Some(name.as_encoded_bytes()),
                _ => None,
            })
            .collect();
        let last = names.len().saturating_sub(1);
        self.patterns
            .iter()
            .filter(|pattern| {
                let tree = pattern.protects.tree();
                match &pattern.place {
                    Place::Name(name) => names
                        .iter()
                        .enumerate()
                        .any(|(i, part)| *part == name.as_bytes() && (i == last || tree)),
                    Place::InDir { dir, name } => names.windows(2).enumerate().any(|(i, pair)| {
                        pair[0] == dir.as_bytes()
                            && pair[1] == name.as_bytes()
                            && (i + 1 == last || tree)
                    }),
                    Place::Path(place) => path == place || (tree && path.starts_with(place)),
                }
            })
            .collect()
    }

    /// The objects of the path patterns that exist here, with the label
    /// flags they get (policy, and tree for a directory of a tree pattern),
    /// and the path each was found at. Paths that do not exist are skipped:
    /// they are protected by the name rules, if any match them.
    pub fn objects(&self) -> Vec<(ObjectKey, u32, PathBuf)> {
        use std::os::unix::fs::MetadataExt;
        let mut objects = Vec::new();
        for pattern in &self.patterns {
            let Place::Path(path) = &pattern.place else {
                continue;
            };
            let Ok(meta) = std::fs::metadata(path) else {
                continue;
            };
            let mut flags = label_flags::POLICY;
            if pattern.protects.tree() && meta.is_dir() {
                flags |= label_flags::TREE;
            }
            objects.push((
                ObjectKey {
                    dev: pincer_common::kernel_dev(meta.dev()),
                    ino: meta.ino(),
                },
                flags,
                path.clone(),
            ));
        }
        objects
    }
}

/// The README's table of the default policy set.
pub fn readme_table() -> String {
    let mut table = String::from("| pattern | protects | why |\n|---------|----------|-----|\n");
    for entry in DEFAULT_POLICY.iter() {
        table.push_str(&format!(
            "| `{}` | {} | {} |\n",
            entry.pattern.text(),
            entry.pattern.protects.words().join(", "),
            entry.why
        ));
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn covering_matches_names_places_and_paths() {
        let home = Path::new("/home/u");
        let set =
            PolicySet::with_defaults(&[PolicyPattern::parse("~/notes/", Some(home)).unwrap()]);
        let covering = |path: &str| -> Vec<String> {
            set.covering(Path::new(path))
                .iter()
                .map(|p| p.text())
                .collect()
        };
        assert!(covering("/w/p/CLAUDE.md").contains(&"CLAUDE.md".to_owned()));
        assert!(
            covering("/w/p/.git/hooks/pre-commit")
                .iter()
                .any(|t| t.contains("hooks"))
        );
        assert!(covering("/home/u/notes/a.md").contains(&"/home/u/notes/".to_owned()));
        assert!(covering("/w/p/src/main.rs").is_empty());
        // A name matches the object, not what is below an object of that
        // name, unless it protects a tree.
        assert!(covering("/w/CLAUDE.md/x").is_empty());
    }

    #[test]
    fn the_default_set_reads_and_every_entry_has_a_reason() {
        assert!(DEFAULT_POLICY.len() > 30);
        for entry in DEFAULT_POLICY.iter() {
            assert!(!entry.why.is_empty(), "{}", entry.pattern.text());
        }
        let git = DEFAULT_POLICY
            .iter()
            .find(|e| e.pattern.text() == ".git")
            .unwrap();
        // Making a repository stays free; renaming one away does not.
        assert_eq!(git.pattern.protects, Protects(policy_rule::OBJECT));
    }

    #[test]
    fn patterns_read_as_written() {
        let home = Path::new("/home/alice");
        let parse = |text: &str| PolicyPattern::parse(text, Some(home));
        assert_eq!(
            parse("CLAUDE.md").unwrap(),
            PolicyPattern {
                place: Place::Name("CLAUDE.md".into()),
                protects: Protects::NAMED
            }
        );
        assert_eq!(
            parse(".git/hooks/").unwrap(),
            PolicyPattern {
                place: Place::InDir {
                    dir: ".git".into(),
                    name: "hooks".into()
                },
                protects: Protects::TREE
            }
        );
        assert_eq!(
            parse("~/.config/tool/").unwrap().place,
            Place::Path("/home/alice/.config/tool".into())
        );
        assert_eq!(parse("/etc/x").unwrap().text(), "/etc/x");
        assert_eq!(parse("a/b/").unwrap().text(), "a/b/");
        for (bad, why) in [
            ("", "must not be empty"),
            ("a/b/c", "at most two names"),
            ("~bob/x", "not \"~bob/x\""),
            ("/etc/../x", "\"..\""),
            ("../x", "\"..\" is not a name"),
            ("a//b", "\"\" is not a name"),
            (
                "this-name-is-far-longer-than-31-bytes",
                "longer than 31 bytes",
            ),
        ] {
            let error = parse(bad).unwrap_err();
            assert!(error.contains(why), "{bad:?}: {error}");
        }
        assert!(PolicyPattern::parse("~/x", None).is_err());
    }

    #[test]
    fn rules_are_keyed_by_name_hashes_and_merged() {
        let set = PolicySet {
            patterns: vec![
                PolicyPattern::parse("CLAUDE.md", None).unwrap(),
                PolicyPattern::parse(".git/hooks/", None).unwrap(),
                PolicyPattern::parse("/etc/pincer/", None).unwrap(),
                PolicyPattern {
                    place: Place::Name("CLAUDE.md".into()),
                    protects: Protects(policy_rule::TREE),
                },
            ],
        };
        let rules = set.kernel_rules();
        assert_eq!(rules.len(), 2, "paths are no name rules");
        let hash = |name: &str| policy_name_hash_of(name.as_bytes()).unwrap();
        assert!(rules.contains(&(
            PolicyName {
                parent: 0,
                name: hash("CLAUDE.md")
            },
            policy_rule::OBJECT | policy_rule::NEW | policy_rule::TREE
        )));
        assert!(rules.contains(&(
            PolicyName {
                parent: hash(".git"),
                name: hash("hooks")
            },
            Protects::TREE.0
        )));
    }

    #[test]
    fn the_kernel_reads_names_as_userspace_hashes_them() {
        // The programs read a name with its NUL into a zeroed buffer.
        let mut buf = [0u8; pincer_common::POLICY_NAME_BUF];
        buf[..9].copy_from_slice(b"CLAUDE.md");
        assert_eq!(
            pincer_common::policy_name_hash(&buf),
            policy_name_hash_of(b"CLAUDE.md").unwrap()
        );
        assert_ne!(
            policy_name_hash_of(b"CLAUDE.md"),
            policy_name_hash_of(b"claude.md")
        );
        let longest = "x".repeat(pincer_common::MAX_POLICY_NAME);
        assert!(policy_name_hash_of(longest.as_bytes()).is_some());
        assert!(policy_name_hash_of(format!("{longest}x").as_bytes()).is_none());
    }

    #[test]
    fn existing_paths_are_labelled_by_identity() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("rc");
        std::fs::write(&file, "x").unwrap();
        let set = PolicySet {
            patterns: vec![
                PolicyPattern::parse(&format!("{}/", dir.path().display()), None).unwrap(),
                PolicyPattern::parse(&file.display().to_string(), None).unwrap(),
                PolicyPattern::parse("/nonexistent/pincer/x", None).unwrap(),
            ],
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
}
