//! Agents' cgroup patterns: `/`-separated globs with `*`, `?` and `**`
//! components, matched against cgroup paths relative to the cgroup root. The
//! syntax is in the [configuration's documentation](super#cgroup-patterns).

use std::{
    fmt,
    os::unix::ffi::OsStrExt,
    path::{Component, Path, PathBuf},
};

use crate::toml_file::fields::check_names_files;

/// A pattern of cgroup paths relative to the cgroup root; see the
/// [configuration's documentation](super#cgroup-patterns) for the syntax.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupPattern {
    text: String,
    parts: Vec<Part>,
}

/// One `/`-separated component of a pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    /// `**`: any number of components.
    AnyDepth,
    /// A glob matching one component.
    Glob(Vec<Token>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    /// `*`
    Star,
    /// `?`
    One,
    Literal(char),
}

/// One character of a cgroup's name, or one byte of it that is not UTF-8,
/// kept apart from every character (cgroup names are bytes, patterns text).
type Unit = u32;

const NOT_UTF8: Unit = char::MAX as Unit + 1;

impl CgroupPattern {
    /// Parses a pattern; the error says what is wrong with it.
    pub fn parse(text: &str) -> Result<Self, String> {
        check_names_files(text)?;
        if text.starts_with('/') {
            return Err(format!(
                "must not start with \"/\": it is relative to cgroup_root ({text:?})"
            ));
        }
        let parts = text
            .split('/')
            .map(|component| match component {
                "" => Err(format!("must not contain empty components ({text:?})")),
                "." | ".." => Err(format!(
                    "must not contain {component:?} components ({text:?})"
                )),
                "**" => Ok(Part::AnyDepth),
                _ if component.contains("**") => Err(format!(
                    "\"**\" must be a whole component ({component:?} in {text:?})"
                )),
                _ => Ok(Part::Glob(
                    component
                        .chars()
                        .map(|c| match c {
                            '*' => Token::Star,
                            '?' => Token::One,
                            c => Token::Literal(c),
                        })
                        .collect(),
                )),
            })
            .collect::<Result<_, _>>()?;
        Ok(Self {
            text: text.to_owned(),
            parts,
        })
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The deepest cgroup every match lies below: the pattern's leading
    /// components without a wildcard, less the last component (every match
    /// is a cgroup below this one, never this one). Empty for the root.
    /// New cgroups below it are held until the daemon decides what they are.
    pub fn literal_parent(&self) -> PathBuf {
        let literal = self
            .parts
            .iter()
            .map_while(|part| match part {
                Part::Glob(tokens) => tokens
                    .iter()
                    .map(|token| match token {
                        Token::Literal(c) => Some(*c),
                        Token::Star | Token::One => None,
                    })
                    .collect::<Option<String>>(),
                Part::AnyDepth => None,
            })
            .collect::<Vec<_>>();
        let whole = literal.len() == self.parts.len();
        let keep = if whole {
            literal.len().saturating_sub(1)
        } else {
            literal.len()
        };
        literal[..keep].iter().collect()
    }

    /// Whether a cgroup, by its path relative to the cgroup root, matches.
    ///
    /// A leading `/` is ignored, so a path as `/proc/PID/cgroup` shows it
    /// (`/agents.slice/a.scope`) works too; a path with a `..` component
    /// matches nothing, since where it leads is not known.
    pub fn matches(&self, relative: &Path) -> bool {
        let mut names = Vec::new();
        for component in relative.components() {
            match component {
                Component::Normal(name) => names.push(units(name.as_bytes())),
                Component::RootDir | Component::CurDir => {}
                Component::ParentDir | Component::Prefix(_) => return false,
            }
        }
        wildcard(
            &self.parts,
            &names,
            |part| *part == Part::AnyDepth,
            |part, name| match part {
                Part::AnyDepth => false,
                Part::Glob(tokens) => glob_matches(tokens, name),
            },
        )
    }
}

/// Whether one component's glob matches a name.
fn glob_matches(tokens: &[Token], name: &[Unit]) -> bool {
    wildcard(
        tokens,
        name,
        |token| *token == Token::Star,
        |token, unit| match token {
            Token::Star => false,
            Token::One => true,
            Token::Literal(c) => *c as Unit == *unit,
        },
    )
}

impl fmt::Display for CgroupPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// The characters of a name, with bytes that are not UTF-8 as units no
/// character equals.
fn units(bytes: &[u8]) -> Vec<Unit> {
    let mut units = Vec::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        units.extend(chunk.valid().chars().map(|c| c as Unit));
        units.extend(
            chunk
                .invalid()
                .iter()
                .map(|byte| NOT_UTF8 + Unit::from(*byte)),
        );
    }
    units
}

/// Whether `items` match `pattern`, in which stars match any run of items
/// and every other element exactly one item that `one` accepts.
///
/// Greedy with a single backtracking point: when a later element fails, only
/// the last star needs to take one more item, because everything before it
/// already matched as early as it could. Linear in practice, unlike trying
/// every split.
fn wildcard<P, I>(
    pattern: &[P],
    items: &[I],
    is_star: impl Fn(&P) -> bool,
    one: impl Fn(&P, &I) -> bool,
) -> bool {
    let (mut p, mut i) = (0, 0);
    // Where to resume after the last star: its next element, and the first
    // item the star has not taken.
    let mut resume: Option<(usize, usize)> = None;
    while i < items.len() {
        match pattern.get(p) {
            Some(element) if is_star(element) => {
                p += 1;
                resume = Some((p, i));
            }
            Some(element) if one(element, &items[i]) => {
                p += 1;
                i += 1;
            }
            _ => match resume {
                Some((after_star, taken)) => {
                    p = after_star;
                    i = taken + 1;
                    resume = Some((after_star, taken + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(is_star)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    fn pattern(text: &str) -> CgroupPattern {
        CgroupPattern::parse(text).unwrap()
    }

    #[test]
    fn the_literal_parent_is_the_deepest_cgroup_every_match_is_below() {
        for (text, parent) in [
            ("agents.slice/*", "agents.slice"),
            ("agents.slice/claude-*.scope", "agents.slice"),
            ("agents.slice/claude", "agents.slice"),
            ("a.slice/b.slice/**/c-*", "a.slice/b.slice"),
            ("a.slice/b?.slice/c", "a.slice"),
            ("*", ""),
            ("**/x", ""),
            ("claude", ""),
        ] {
            assert_eq!(pattern(text).literal_parent(), Path::new(parent), "{text}");
            // Whatever it matches lies below that parent.
        }
        let p = pattern("agents.slice/claude-*.scope");
        assert!(p.matches(Path::new("agents.slice/claude-1.scope")));
        assert!(Path::new("agents.slice/claude-1.scope").starts_with(p.literal_parent()));
    }

    /// Patterns that are refused, and why.
    pub(crate) const BAD_PATTERNS: [(&str, &str); 7] = [
        ("", "must not be empty"),
        (
            "/agents.slice/*",
            "must not start with \"/\": it is relative to cgroup_root (\"/agents.slice/*\")",
        ),
        (
            "agents.slice/../system.slice",
            "must not contain \"..\" components (\"agents.slice/../system.slice\")",
        ),
        (
            "./agents.slice",
            "must not contain \".\" components (\"./agents.slice\")",
        ),
        (
            "agents.slice//a",
            "must not contain empty components (\"agents.slice//a\")",
        ),
        (
            "agents.slice/",
            "must not contain empty components (\"agents.slice/\")",
        ),
        (
            "agents.slice/a**",
            "\"**\" must be a whole component (\"a**\" in \"agents.slice/a**\")",
        ),
    ];

    #[test]
    fn bad_patterns() {
        for (text, message) in BAD_PATTERNS {
            assert_eq!(
                CgroupPattern::parse(text),
                Err(message.to_owned()),
                "{text}"
            );
        }
        assert_eq!(
            CgroupPattern::parse("a\0b"),
            Err("must not contain a NUL byte".to_owned())
        );
    }

    #[test]
    fn the_pattern_is_kept_as_written() {
        let text = "agents.slice/claude-*.scope";
        assert_eq!(pattern(text).to_string(), text);
        assert_eq!(pattern(text).as_str(), text);
    }

    #[test]
    fn pattern_matching() {
        let table: &[(&str, &[&str], &[&str])] = &[
            (
                "agents.slice/*",
                &[
                    "agents.slice/a",
                    "agents.slice/claude-1.scope",
                    "agents.slice/*",
                ],
                &["agents.slice", "agents.slice/a/b", "other.slice/a", "", "a"],
            ),
            (
                // `**` matches zero components too, so the slice itself.
                "agents.slice/**",
                &["agents.slice", "agents.slice/a", "agents.slice/a/b/c"],
                &["other.slice/a", "agents.slice2/a", "agents", ""],
            ),
            (
                "a/**/leaf-*",
                &["a/leaf-1", "a/leaf-", "a/x/leaf-1", "a/x/y/z/leaf-abc"],
                &[
                    "a/leaf",
                    "a/x/leaf-1/z",
                    "b/leaf-1",
                    "leaf-1",
                    "a/x/notleaf-1",
                ],
            ),
            (
                "agents.slice/agent-?.scope",
                &["agents.slice/agent-1.scope", "agents.slice/agent-é.scope"],
                &[
                    "agents.slice/agent-.scope",
                    "agents.slice/agent-10.scope",
                    "agents.slice/agent-1/x.scope",
                ],
            ),
            (
                // Literal names, dots and backslashes included.
                "system.slice/system-getty.slice/getty@tty1.service",
                &["system.slice/system-getty.slice/getty@tty1.service"],
                &[
                    "system.slice/system-getty.slice/getty@tty2.service",
                    "system.slice/system-getty.slice",
                    "system.slice/system-getty.slice/getty@tty1.service/x",
                    "system.slice/system-getty.slice/getty@tty1xservice",
                ],
            ),
            (
                "user.slice/user-1000.slice/app\\x2dclaude.scope",
                &["user.slice/user-1000.slice/app\\x2dclaude.scope"],
                &["user.slice/user-1000.slice/app-claude.scope"],
            ),
            ("**", &["", "a", "a/b/c"], &[]),
            ("*", &["a", "agents.slice"], &["", "a/b"]),
            (
                // Several stars in one component need backtracking.
                "x/*a*b*c",
                &["x/abc", "x/aXbYc", "x/aabbcc", "x/zzabcab-c"],
                &["x/acb", "x/abcX", "x/ab"],
            ),
            (
                "**/claude-*.scope/**",
                &[
                    "claude-1.scope",
                    "a/b/claude-1.scope",
                    "a/claude-1.scope/x/y",
                ],
                &["a/claude-1.scop", "a/b"],
            ),
        ];
        for (text, matching, not_matching) in table {
            let pattern = pattern(text);
            for path in *matching {
                assert!(
                    pattern.matches(Path::new(path)),
                    "{text} should match {path:?}"
                );
            }
            for path in *not_matching {
                assert!(
                    !pattern.matches(Path::new(path)),
                    "{text} should not match {path:?}"
                );
            }
        }
    }

    /// Every way to match, tried one by one.
    fn naive(pattern: &[Token], name: &[Unit]) -> bool {
        match pattern.split_first() {
            None => name.is_empty(),
            Some((Token::Star, rest)) => (0..=name.len()).any(|taken| naive(rest, &name[taken..])),
            Some((token, rest)) => name.split_first().is_some_and(|(unit, name)| {
                (*token == Token::One || *token == Token::Literal(char::from_u32(*unit).unwrap()))
                    && naive(rest, name)
            }),
        }
    }

    /// All sequences of up to `length` elements of `alphabet`.
    fn sequences<T: Copy>(alphabet: &[T], length: usize) -> Vec<Vec<T>> {
        let mut all = vec![Vec::new()];
        let mut last = vec![Vec::new()];
        for _ in 0..length {
            last = last
                .iter()
                .flat_map(|prefix| {
                    alphabet.iter().map(move |element| {
                        let mut longer: Vec<T> = prefix.clone();
                        longer.push(*element);
                        longer
                    })
                })
                .collect();
            all.extend(last.iter().cloned());
        }
        all
    }

    #[test]
    fn the_single_backtrack_agrees_with_trying_everything() {
        // Backtracking only to the last star is the subtle part of matching;
        // every short pattern against every short name settles it.
        let patterns = sequences(
            &[
                Token::Star,
                Token::One,
                Token::Literal('a'),
                Token::Literal('b'),
            ],
            5,
        );
        let names = sequences(&['a' as Unit, 'b' as Unit], 6);
        for pattern in &patterns {
            for name in &names {
                assert_eq!(
                    glob_matches(pattern, name),
                    naive(pattern, name),
                    "{pattern:?} against {name:?}"
                );
            }
        }
    }

    #[test]
    fn matched_paths_as_proc_shows_them() {
        let slice = pattern("agents.slice/*");
        assert!(slice.matches(Path::new("/agents.slice/a")));
        assert!(slice.matches(Path::new("agents.slice/a/")));
        assert!(slice.matches(Path::new("./agents.slice/a")));
        // Where `..` leads depends on the tree, so it matches nothing.
        assert!(!slice.matches(Path::new("agents.slice/b/../a")));
        assert!(!pattern("**").matches(Path::new("..")));
    }

    #[test]
    fn names_that_are_not_utf8_match_only_wildcards() {
        use std::ffi::OsStr;
        let name = |bytes: &[u8]| Path::new(OsStr::from_bytes(bytes)).to_owned();
        let weird = name(b"agents.slice/a\xffb");
        assert!(pattern("agents.slice/a*b").matches(&weird));
        assert!(pattern("agents.slice/a?b").matches(&weird));
        assert!(!pattern("agents.slice/a\u{ff}b").matches(&weird));
        assert!(!pattern("agents.slice/a\u{fffd}b").matches(&weird));
        assert!(!pattern("agents.slice/a??b").matches(&weird));
    }
}
