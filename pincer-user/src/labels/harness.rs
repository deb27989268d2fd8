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
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
};

use pincer_common::{Label, ObjectKey, authority, kernel_dev, label_flags};

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
            origin: 0,
            stamp: 0,
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
    origin: u32,
    stamp: u32,
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
                origin: label.origin,
                stamp: label.stamp,
            }
        }
        _ => Content {
            authority: authority::USER,
            taint: 0,
            origin: 0,
            stamp: 0,
        },
    }
}

/// `derive`: a file was made from others. Derived content gets the lowest
/// authority of its inputs and their lowest taint (the low-water mark),
/// with the source that taint came from, so revoking that source revokes
/// it too; it is never raised by this, even when its inputs are the
/// user's.
pub fn derive(
    path: &Path,
    from: &[PathBuf],
    labels: &[(ObjectKey, Label)],
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
            derived.origin = input.origin;
            derived.stamp = input.stamp;
        }
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
            origin: derived.origin,
            stamp: derived.stamp,
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
        // From the user's notes alone: the user's, tainting nobody.
        let derived = derive(&summary, std::slice::from_ref(&notes), &labels).unwrap();
        assert_eq!(
            (derived.label.authority, derived.label.taint),
            (authority::USER, 0)
        );
        // From the page too: evidence, and it taints.
        let derived = derive(&summary, &[notes, page], &labels).unwrap();
        assert_eq!(
            (derived.label.authority, derived.label.taint),
            (authority::EVIDENCE, authority::EVIDENCE)
        );
        assert!(derive(&summary, &[], &labels).is_err());
    }
}
