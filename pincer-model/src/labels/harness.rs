//! The harness API: labels a harness gives the files it writes, through
//! the daemon's control socket (`map`, `derive`), so that a harness with
//! its own memory pager (fetched pages, tool results, summaries) sits on
//! the same labels the programs decide on.
//!
//! Only callers the control socket trusts reach it: root or the daemon's
//! own user, never a process in an agent cgroup. Even they label no higher
//! than `user`: raising content to `policy` is the owner's promotion
//! (`pincer label promote`), one file at a time, with its digest recorded.

use std::{
    collections::HashMap,
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
};

use pincer_common::{Label, ObjectKey, Origins, authority, kernel_dev, label_flags};

/// A label to write, with the object and its escaped path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Labelled {
    /// The object.
    pub key: ObjectKey,
    /// Its new label.
    pub label: Label,
    /// Its path, resolved and escaped.
    pub path: String,
}

/// The object an absolute path names, links followed, and its generation.
fn object(path: &Path) -> Result<(ObjectKey, u32, PathBuf), String> {
    if !path.is_absolute() {
        return Err(format!("{}: must be absolute", path.display()));
    }
    let real = std::fs::canonicalize(path)
        .map_err(|e| format!("{}: cannot resolve: {e}", path.display()))?;
    let meta =
        std::fs::metadata(&real).map_err(|e| format!("{}: cannot stat: {e}", real.display()))?;
    if !meta.is_file() {
        return Err(format!(
            "{}: not a regular file: only files are labelled",
            real.display()
        ));
    }
    let key = ObjectKey {
        dev: kernel_dev(meta.dev()),
        ino: meta.ino(),
    };
    Ok((key, super::generation(&real).unwrap_or(0), real))
}

fn escaped(path: &Path) -> String {
    crate::escape::escape(path.as_os_str().as_encoded_bytes())
}

/// `map`: a file holds content of `authority` (`evidence`: reading it
/// lowers the reader to evidence; `user`: a teammate's notes).
pub fn map(path: &Path, authority: &str) -> Result<Labelled, String> {
    let level = match authority {
        "evidence" => authority::EVIDENCE,
        "user" => authority::USER,
        "policy" => {
            return Err(
                "a harness labels no higher than user: policy is the owner's promotion (`pincer label promote`)"
                    .to_owned(),
            );
        }
        other => {
            return Err(format!(
                "unknown authority {other:?} (expected evidence or user)"
            ));
        }
    };
    let (key, generation, real) = object(path)?;
    Ok(Labelled {
        key,
        label: Label {
            authority: level,
            flags: label_flags::SOURCE,
            generation,
            taint: level,
            agent: 0,
            // Not a declared source: nothing revokes it.
            origins: Origins::NONE,
        },
        path: escaped(&real),
    })
}

/// What an object's label says of its content, by the rules the programs
/// read it with: no label (or one of an earlier object with the same inode
/// number) is the user's own content, which taints no one.
#[derive(Clone, Copy)]
struct Content {
    authority: u32,
    taint: u32,
    origins: Origins,
}

fn content_of(key: ObjectKey, generation: u32, labels: &[(ObjectKey, Label)]) -> Content {
    match labels.iter().find(|(k, _)| *k == key) {
        Some((_, label))
            if label.generation == 0 || generation == 0 || label.generation == generation =>
        {
            Content {
                authority: match label.authority {
                    0 => authority::USER,
                    level => level,
                },
                taint: label.taint,
                origins: label.origins,
            }
        }
        _ => Content {
            authority: authority::USER,
            taint: 0,
            origins: Origins::NONE,
        },
    }
}

/// `derive`: a file was made from others. Derived content gets the lowest
/// authority of its inputs and their lowest taint (the low-water mark),
/// with every source its inputs came from, so revoking any of them revokes
/// it too (`counters`: the sources' revocation counters now); it is never
/// raised by this, even when its inputs are the user's.
pub fn derive(
    path: &Path,
    from: &[PathBuf],
    labels: &[(ObjectKey, Label)],
    counters: &HashMap<u32, u32>,
) -> Result<Labelled, String> {
    if from.is_empty() {
        return Err("`from` must name at least one file".to_owned());
    }
    let (key, generation, real) = object(path)?;
    let mut derived = content_of(key, generation, labels);
    for input in from {
        let (input_key, input_generation, _) = object(input)?;
        let input = content_of(input_key, input_generation, labels);
        derived.authority = derived.authority.min(input.authority);
        if input.taint != 0 && (derived.taint == 0 || input.taint < derived.taint) {
            derived.taint = input.taint;
        }
        derived.origins = derived
            .origins
            .union(&input.origins, |s| counters.get(&s).copied().unwrap_or(0));
    }
    Ok(Labelled {
        key,
        label: Label {
            authority: derived.authority,
            flags: if derived.taint != 0 {
                label_flags::SOURCE
            } else {
                0
            },
            generation,
            taint: derived.taint,
            agent: 0,
            origins: derived.origins,
        },
        path: escaped(&real),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_labels_up_to_user_and_derive_takes_the_lowest() {
        let dir = tempfile::tempdir().unwrap();
        let page = dir.path().join("page.html");
        let notes = dir.path().join("notes.md");
        let summary = dir.path().join("summary.md");
        for file in [&page, &notes, &summary] {
            std::fs::write(file, "x").unwrap();
        }
        let mapped = map(&page, "evidence").unwrap();
        assert_eq!(
            (mapped.label.authority, mapped.label.taint),
            (authority::EVIDENCE, authority::EVIDENCE)
        );
        assert!(
            map(&page, "policy")
                .unwrap_err()
                .contains("owner's promotion")
        );
        assert!(
            map(&page, "root")
                .unwrap_err()
                .contains("unknown authority")
        );
        assert!(
            map(Path::new("rel.txt"), "user")
                .unwrap_err()
                .contains("absolute")
        );
        assert!(
            map(dir.path(), "user")
                .unwrap_err()
                .contains("regular file")
        );

        let labels = vec![(mapped.key, mapped.label)];
        let counters = HashMap::new();
        // From the user's notes alone: the user's, tainting nobody.
        let derived = derive(&summary, std::slice::from_ref(&notes), &labels, &counters).unwrap();
        assert_eq!(
            (derived.label.authority, derived.label.taint),
            (authority::USER, 0)
        );
        // From the page too: evidence, and it taints.
        let derived = derive(&summary, &[notes.clone(), page.clone()], &labels, &counters).unwrap();
        assert_eq!(
            (derived.label.authority, derived.label.taint),
            (authority::EVIDENCE, authority::EVIDENCE)
        );
        assert!(derive(&summary, &[], &labels, &counters).is_err());

        // Inputs from two sources (one a teammate's notes, of higher
        // authority): the derived file names both, so revoking either
        // revokes it.
        let (user_source, page_source) = (pincer_common::source_id(b"/notes"), 0x8000_0003);
        let from = |key: ObjectKey, level: u32, source: u32| {
            (
                key,
                Label {
                    authority: level,
                    taint: level,
                    origins: Origins::one(source, 0),
                    generation: 0,
                    ..mapped.label
                },
            )
        };
        let notes_key = object(&notes).unwrap().0;
        let labels = vec![
            from(mapped.key, authority::EVIDENCE, page_source),
            from(notes_key, authority::USER, user_source),
        ];
        let derived = derive(&summary, &[notes, page], &labels, &counters).unwrap();
        assert_eq!(derived.label.taint, authority::EVIDENCE);
        let mut named: Vec<u32> = derived.label.origins.sources().map(|o| o.source).collect();
        named.sort_unstable();
        let mut both = vec![user_source, page_source];
        both.sort_unstable();
        if Origins::position(user_source) != Origins::position(page_source) {
            assert_eq!(named, both);
        }
        for revoked in both {
            assert!(
                derived
                    .label
                    .origins
                    .revoked(|s| u32::from(s == revoked || s == pincer_common::ANY_SOURCE)),
                "{revoked:#x}"
            );
        }
    }
}
