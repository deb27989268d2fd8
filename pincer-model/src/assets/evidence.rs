//! Evidence: the content of a source node as the agent first read it, and
//! where in it a path is named.
//!
//! A path is *named* in evidence when one of its spellings appears there
//! as a whole path: the absolute path, `~/...`, `$HOME/...` or
//! `${HOME}/...` for what is under the home directory, or a path relative
//! to the source's own directory. "As a whole" means no path character
//! right before it, and after it nothing more of a path: `/tmp/data.png`
//! is not named by `/tmp/data.png.bak` nor by `x/tmp/data.png`, and a
//! sentence's full stop after it does not count. A directory is also named
//! by a path inside it (`~/repos/group/README.md` names `~/repos/group`).

use std::{
    fs,
    io::Read,
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
};

use sha2::{Digest, Sha256};

/// The most of a source's content kept as evidence: what lies beyond
/// names nothing.
pub const MAX_EVIDENCE: usize = 1 << 20;

/// The longest excerpt recorded around a match, in bytes.
const EXCERPT: usize = 160;

/// A source node's content as observed at the agent's first read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Evidence {
    /// The file it was read from.
    pub path: PathBuf,
    /// What was read: at most [`MAX_EVIDENCE`] bytes.
    pub bytes: Vec<u8>,
    /// The file's size then.
    pub size: u64,
    /// SHA-256 of `bytes`, hex.
    pub digest: String,
    /// The id of the request whose read observed it.
    pub request: u64,
    /// The sources (`[[source]]`) its content came from, by the file's
    /// label when it was read, with their revocation counters then (none:
    /// no source): when the owner revokes one of them, what this evidence
    /// admitted is withdrawn.
    pub origins: pincer_common::Origins,
    /// Whether the owner revoked its source since: it admits nothing more.
    pub revoked: bool,
}

/// Where evidence names a path.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Excerpt {
    /// Byte offset of the spelling's start in the evidence.
    pub start: usize,
    /// Byte offset just past it.
    pub end: usize,
    /// The spelling found.
    pub spelled: String,
    /// The text around it (its line, cut to a bounded length), escaped.
    pub text: String,
}

impl Evidence {
    /// Reads `path` as evidence, when it is still the object `(dev, ino)`
    /// (st_dev as the kernel encodes it) the agent is opening.
    pub fn read(path: &Path, dev: u64, ino: u64, request: u64) -> Result<Evidence, String> {
        let file =
            fs::File::open(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let metadata = file
            .metadata()
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        if pincer_common::kernel_dev(metadata.dev()) != dev || metadata.ino() != ino {
            return Err(format!(
                "{} is no longer the file the agent opened",
                path.display()
            ));
        }
        if !metadata.is_file() {
            return Err(format!("{} is not a regular file", path.display()));
        }
        let mut bytes = Vec::new();
        file.take(MAX_EVIDENCE as u64)
            .read_to_end(&mut bytes)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let digest = hex::encode(Sha256::digest(&bytes));
        Ok(Evidence {
            path: path.to_owned(),
            bytes,
            size: metadata.len(),
            digest,
            request,
            origins: pincer_common::Origins::NONE,
            revoked: false,
        })
    }

    /// Where this evidence names `object` (a directory also by a path
    /// inside it); `home` is the home `~` means.
    pub fn names(&self, object: &Path, directory: bool, home: Option<&Path>) -> Option<Excerpt> {
        spellings(object, self.path.parent(), home)
            .into_iter()
            .find_map(|spelled| self.find(&spelled, directory))
    }

    /// The first place `spelled` appears as a whole path.
    fn find(&self, spelled: &str, directory: bool) -> Option<Excerpt> {
        let text = &self.bytes;
        memchr::memmem::find_iter(text, spelled.as_bytes())
            .map(|start| (start, start + spelled.len()))
            .find(|&(start, end)| {
                let before = start.checked_sub(1).map(|i| text[i]);
                before.is_none_or(|b| !is_path_byte(b)) && ends_a_path(text, end, directory)
            })
            .map(|(start, end)| Excerpt {
                start,
                end,
                spelled: spelled.to_owned(),
                text: excerpt(text, start, end),
            })
    }
}

/// The ways evidence may spell `object`, most explicit first.
fn spellings(object: &Path, source_dir: Option<&Path>, home: Option<&Path>) -> Vec<String> {
    let mut spelled = Vec::new();
    let Some(absolute) = object.to_str() else {
        return spelled;
    };
    spelled.push(absolute.to_owned());
    if let Some(rest) = home
        .and_then(|home| object.strip_prefix(home).ok())
        .and_then(Path::to_str)
        .filter(|rest| !rest.is_empty())
    {
        for prefix in ["~/", "$HOME/", "${HOME}/"] {
            spelled.push(format!("{prefix}{rest}"));
        }
    }
    if let Some(rest) = source_dir
        .and_then(|dir| object.strip_prefix(dir).ok())
        .and_then(Path::to_str)
        .filter(|rest| !rest.is_empty())
    {
        spelled.push(format!("./{rest}"));
        spelled.push(rest.to_owned());
    }
    spelled
}

/// Bytes a path is written with (besides any non-ASCII byte).
fn is_path_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"/._-~+@%$".contains(&b) || b >= 0x80
}

/// Whether a path spelled up to `end` ends there: nothing of a path
/// follows, or only a punctuation mark that ends a sentence or clause, or,
/// for a directory, a `/` (a path inside it).
fn ends_a_path(text: &[u8], end: usize, directory: bool) -> bool {
    match text.get(end) {
        None => true,
        Some(b'/') => directory,
        Some(b'.' | b',' | b';' | b':') => text.get(end + 1).is_none_or(|&b| !is_path_byte(b)),
        Some(&b) => !is_path_byte(b),
    }
}

/// The line around `start..end`, at most [`EXCERPT`] bytes, escaped.
fn excerpt(text: &[u8], start: usize, end: usize) -> String {
    let line_start = text[..start]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let line_end = text[end..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(text.len(), |i| end + i);
    let half = EXCERPT.saturating_sub(end - start) / 2;
    let from = line_start.max(start.saturating_sub(half));
    let to = line_end.min(end + half);
    crate::escape::escape(text[from..to].trim_ascii())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::temp_file;

    fn evidence(text: &str) -> Evidence {
        Evidence {
            path: PathBuf::from("/home/u/mail/alice.eml"),
            bytes: text.as_bytes().to_vec(),
            size: text.len() as u64,
            digest: String::new(),
            request: 1,
            origins: pincer_common::Origins::NONE,
            revoked: false,
        }
    }

    fn named(text: &str, object: &str, directory: bool) -> Option<(usize, usize, String)> {
        evidence(text)
            .names(Path::new(object), directory, Some(Path::new("/home/u")))
            .map(|e| (e.start, e.end, e.spelled))
    }

    #[test]
    fn a_path_is_named_absolute_from_home_or_beside_the_source() {
        let text = "Please upload /tmp/data.png to ~/repos/group.\n";
        assert_eq!(
            named(text, "/tmp/data.png", false),
            Some((14, 27, "/tmp/data.png".into()))
        );
        assert_eq!(
            named(text, "/home/u/repos/group", true),
            Some((31, 44, "~/repos/group".into()))
        );
        assert!(named("see $HOME/x.png", "/home/u/x.png", false).is_some());
        assert!(named("see ${HOME}/x.png", "/home/u/x.png", false).is_some());
        assert!(
            named(
                "the file pic.png beside this mail",
                "/home/u/mail/pic.png",
                false
            )
            .is_some()
        );
        assert!(named("the file ./pic.png", "/home/u/mail/pic.png", false).is_some());
    }

    #[test]
    fn only_a_whole_path_names_it() {
        assert_eq!(named("/tmp/data.png.bak", "/tmp/data.png", false), None);
        assert_eq!(named("x/tmp/data.png", "/tmp/data.png", false), None);
        assert_eq!(named("/tmp/data.pngx", "/tmp/data.png", false), None);
        // A relative name inside another path is that path's, not this one.
        assert_eq!(named("/srv/pic.png", "/home/u/mail/pic.png", false), None);
        // A file is not named by a path below it; a directory is.
        assert_eq!(named("/tmp/data.png/x", "/tmp/data.png", false), None);
        assert!(named("~/repos/group/README.md", "/home/u/repos/group", true).is_some());
        // Punctuation that ends a sentence is not part of the path.
        assert!(named("upload /tmp/data.png.", "/tmp/data.png", false).is_some());
        assert!(named("(/tmp/data.png)", "/tmp/data.png", false).is_some());
        assert!(named("\"/tmp/data.png\",", "/tmp/data.png", false).is_some());
    }

    #[test]
    fn the_excerpt_is_the_line_around_the_match() {
        let text = "Hi,\nplease upload /tmp/data.png today.\nBye\n";
        let found = evidence(text)
            .names(
                Path::new("/tmp/data.png"),
                false,
                Some(Path::new("/home/u")),
            )
            .unwrap();
        assert_eq!(found.text, "please upload /tmp/data.png today.");
        assert_eq!(&text[found.start..found.end], "/tmp/data.png");
    }

    #[test]
    fn evidence_is_read_only_from_the_object_the_agent_opened() {
        let (_dir, path) = temp_file("mail.eml", "upload /tmp/data.png");
        let metadata = fs::metadata(&path).unwrap();
        let dev = pincer_common::kernel_dev(metadata.dev());
        let read = Evidence::read(&path, dev, metadata.ino(), 7).unwrap();
        assert_eq!(read.bytes, b"upload /tmp/data.png");
        assert_eq!(read.size, 20);
        assert_eq!(read.digest.len(), 64);
        assert!(Evidence::read(&path, dev, metadata.ino() + 1, 7).is_err());
    }
}
