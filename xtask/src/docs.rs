//! The documentation's links, checked with the host's unit tests: a page
//! moved, a heading renamed or a section split leaves links and references
//! that still read well and lead nowhere, which only a check finds.
//!
//! - Every relative link of every Markdown file, `[text](page.md#anchor)`,
//!   must reach a file and, with an anchor, a heading of that page.
//! - Every reference from the sources to a section, written as the page's
//!   path from the repository's root, a comma and the heading in quotes
//!   (README.md, "Architecture"), must name a heading of that page. It
//!   stays on one line, so that it can be found.
//! - Every code span of a page that names a path of the repository
//!   (`pincer-model/src/mission/`, `xtask/src/docs.rs`) must name one that
//!   exists: files move, and a page that still sends the reader to the old
//!   place reads as well as before.

use std::{
    collections::HashMap,
    fs,
    path::{Path, PathBuf},
};

/// Files whose text may refer to a section.
const SOURCES: [&str; 6] = ["rs", "toml", "sh", "py", "yaml", "yml"];

/// Every Markdown and source file below `dir`, but build output and git's.
fn files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap();
        if path.is_dir() && name != "target" && name != ".git" {
            files(&path, found);
        } else if path
            .extension()
            .is_some_and(|ext| ext == "md" || SOURCES.iter().any(|source| ext == *source))
        {
            found.push(path);
        }
    }
}

/// The anchor a heading gets on the forge's rendering: lower case, spaces
/// to `-`, every other character but letters, digits, `-` and `_` dropped
/// (the backticks of a code span too).
fn slug(heading: &str) -> String {
    heading
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .flat_map(char::to_lowercase)
        .collect()
}

/// The text outside fenced code blocks, line by line (a fenced line is
/// left empty): a `#` or a link inside one is code, not structure.
fn prose(markdown: &str) -> Vec<&str> {
    let mut fence: Option<&str> = None;
    let mut lines = Vec::new();
    for line in markdown.lines() {
        let marker = ["```", "~~~"].into_iter().find(|m| line.starts_with(m));
        match (fence, marker) {
            (None, Some(marker)) => fence = Some(marker),
            (Some(open), Some(marker)) if open == marker => fence = None,
            _ => {}
        }
        let code = fence.is_some() || marker.is_some();
        lines.push(if code { "" } else { line });
    }
    lines
}

/// The anchors of a page's headings; a repeated heading's anchor gets `-1`,
/// `-2`, ... as the forge numbers them.
fn anchors(markdown: &str) -> Vec<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut anchors = Vec::new();
    for line in prose(markdown) {
        let hashes = line.len() - line.trim_start_matches('#').len();
        if !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(line[hashes..].trim().trim_end_matches('#').trim_end());
        let times = seen.entry(base.clone()).or_default();
        anchors.push(match *times {
            0 => base,
            n => format!("{base}-{n}"),
        });
        *times += 1;
    }
    anchors
}

/// Removes code spans (a run of backticks up to the next run as long, in
/// one paragraph): `[DIR](` in a quoted message is not a link.
fn without_code(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find('`') {
        out.push_str(&rest[..at]);
        let run = rest[at..].len() - rest[at..].trim_start_matches('`').len();
        let after = &rest[at + run..];
        let closing = after
            .match_indices(&"`".repeat(run))
            .map(|(i, _)| i)
            .find(|&i| !after[..i].ends_with('`') && !after[i + run..].starts_with('`'));
        match closing {
            Some(i) if !after[..i].contains("\n\n") => rest = &after[i + run..],
            _ => {
                out.push_str(&rest[at..at + run]);
                rest = after;
            }
        }
    }
    out + rest
}

/// The targets of a page's inline links and images.
fn links(markdown: &str) -> Vec<String> {
    let text = without_code(&prose(markdown).join("\n"));
    text.match_indices("](")
        .map(|(at, _)| {
            let target = &text[at + 2..];
            let end = target.find([')', ' ', '\n']).unwrap_or(target.len());
            target[..end].to_owned()
        })
        .collect()
}

/// The folders at the repository's root that a path in a page starts with.
const TOP: [&str; 11] = [
    "pincer-common/",
    "pincer-ebpf/",
    "pincer-model/",
    "pincer-user/",
    "xtask/",
    "tests/",
    "fuzz/",
    "deploy/",
    "dist/",
    "docs/",
    ".ci/",
];

/// The code spans of a page that name a path of the repository: a span of
/// one backtick that starts with a root folder and holds only what the
/// repository's paths are made of (no pattern, placeholder or space).
fn repository_paths(markdown: &str) -> Vec<&str> {
    prose(markdown)
        .into_iter()
        .flat_map(|line| line.split('`').skip(1).step_by(2))
        .filter(|span| TOP.iter().any(|top| span.starts_with(top)))
        .filter(|span| {
            span.chars()
                .all(|c| c.is_ascii_alphanumeric() || "/_-.".contains(c))
        })
        .collect()
}

/// What is wrong with a link from `page` to `target`, if anything.
fn broken(page: &Path, target: &str) -> Option<String> {
    if target.contains("://") || target.starts_with("mailto:") {
        return None;
    }
    let (file, anchor) = target.split_once('#').unwrap_or((target, ""));
    let file = match file {
        "" => page.to_path_buf(),
        file => page.parent().unwrap().join(file),
    };
    if !file.exists() {
        return Some(format!("{target}: no such file"));
    }
    if anchor.is_empty() {
        return None;
    }
    let text = fs::read_to_string(&file).unwrap();
    let found = anchors(&text).iter().any(|a| a == anchor);
    (!found).then(|| format!("{target}: no such heading"))
}

/// The references to sections on one line of a source: the page and the
/// heading, or `None` when the heading's quotes do not close on the line.
fn references(line: &str) -> Vec<Option<(&str, &str)>> {
    let needle = ".md, \"";
    line.match_indices(needle)
        .map(|(at, _)| {
            // The page's path runs back to the first character a path
            // here never holds.
            let start = line[..at]
                .char_indices()
                .rev()
                .find(|&(_, c)| !(c.is_alphanumeric() || "/_-.".contains(c)))
                .map_or(0, |(i, c)| i + c.len_utf8());
            let heading = &line[at + needle.len()..];
            let end = heading.find('"')?;
            Some((&line[start..at + ".md".len()], &heading[..end]))
        })
        .collect()
}

/// What is wrong with the references on one line of a source.
fn unfounded(root: &Path, line: &str) -> Vec<String> {
    let mut wrong = Vec::new();
    if line.contains("README's \"") {
        wrong.push("write a section as the page, a comma and the heading in quotes".to_owned());
    }
    for reference in references(line) {
        let Some((page, heading)) = reference else {
            wrong.push("a section's heading must close on its line".to_owned());
            continue;
        };
        match fs::read_to_string(root.join(page)) {
            Err(_) => wrong.push(format!("{page}: no such file")),
            Ok(text) if !anchors(&text).contains(&slug(heading)) => {
                wrong.push(format!("{page} has no heading \"{heading}\""));
            }
            Ok(_) => {}
        }
    }
    wrong
}

#[test]
fn every_link_and_section_reference_leads_somewhere() {
    let root = crate::workspace_root();
    let mut all = Vec::new();
    files(root, &mut all);
    let mut wrong = Vec::new();
    let mut checked = 0;
    for path in &all {
        // Data files that are not text are no documentation either.
        let Ok(text) = fs::read_to_string(path) else {
            continue;
        };
        let shown = path.strip_prefix(root).unwrap().display();
        if path.extension().is_some_and(|ext| ext == "md") {
            for named in repository_paths(&text) {
                checked += 1;
                if !root.join(named).exists() {
                    wrong.push(format!("{shown}: `{named}`: no such file or folder"));
                }
            }
            for target in links(&text) {
                checked += 1;
                if let Some(why) = broken(path, &target) {
                    wrong.push(format!("{shown}: {why}"));
                }
            }
            continue;
        }
        for (n, line) in text.lines().enumerate() {
            checked += references(line).len();
            for why in unfounded(root, line) {
                wrong.push(format!("{shown}:{}: {why}", n + 1));
            }
        }
    }
    assert!(wrong.is_empty(), "leading nowhere:\n{}", wrong.join("\n"));
    // A check that found nothing would pass whatever the pages say.
    assert!(checked > 50, "only {checked} links and references found");
}

#[test]
fn anchors_are_the_forges() {
    let page = "# pincer\n## `pincer run`\n```sh\n# a comment\n```\n\
                ## Agents' own sandboxes\n## A, b (c)\n## A, b (c)\n#hashtag\n";
    assert_eq!(
        anchors(page),
        [
            "pincer",
            "pincer-run",
            "agents-own-sandboxes",
            "a-b-c",
            "a-b-c-1"
        ]
    );
}

#[test]
fn links_in_code_are_not_links() {
    let page = "[a](x.md#y) `[DIR](z)` and ``[q](r)``\n```\n[c](d)\n```\n![i](e.svg \"t\")";
    assert_eq!(links(page), ["x.md#y", "e.svg"]);
}

#[test]
fn references_name_a_page_and_a_heading() {
    // Escaped quotes, so that this file holds no reference itself.
    let line = "see docs/daemon.md, \"Pods\" (README.md, \"Layout\") and x.md, \"cut";
    assert_eq!(
        references(line),
        [
            Some(("docs/daemon.md", "Pods")),
            Some(("README.md", "Layout")),
            None
        ]
    );
    let root = crate::workspace_root();
    assert!(unfounded(root, "README.md, \"Architecture\"").is_empty());
    assert_eq!(
        unfounded(root, "README.md, \"Nowhere\""),
        ["README.md has no heading \"Nowhere\""]
    );
    // The form the sections were named in before they had pages.
    assert_eq!(unfounded(root, "the README's \"Fuzzing\"").len(), 1);
}

#[test]
fn paths_in_pages_are_the_repositorys() {
    let page = "`pincer-model/src/paths.rs` and `xtask/` but not `tests/*.rs`, \
                `dist/<unit>`, `docs` or `a/b`\n```\n`fuzz/x`\n```\n";
    assert_eq!(
        repository_paths(page),
        ["pincer-model/src/paths.rs", "xtask/"]
    );
}
