//! Reading an audit log a line at a time with a bound on what a line may
//! hold in memory. A log is text the agent may have had a hand in (a path, a
//! `comm`) and a file anyone with write access may have grown: one 8 GiB line
//! must not abort `pincer audit verify`, `summary` or a `pincer run` that
//! continues the log. A line longer than [`MAX_LINE_BYTES`] is not kept: it is
//! hashed as it streams by (a restart line names a malformed line by its
//! digest) and reported as malformed.

use std::io::{self, BufRead};

use sha2::{Digest, Sha256};

/// The longest line kept. pincer writes far shorter ones: a decision's path
/// is at most 4096 characters, its parents eight `comm`s and executables.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// How a line read by [`read_line`] ended.
#[derive(Debug, PartialEq, Eq)]
pub struct LineEnd {
    /// Whether a newline ended it (the last line of a log whose writer was
    /// killed may have none).
    pub terminated: bool,
    /// For a line longer than [`MAX_LINE_BYTES`]: its length and the hex
    /// SHA-256 of its bytes; the buffer is then left empty.
    pub overlong: Option<(u64, String)>,
}

/// Reads the next line into `line` (without its newline); `None` at the end
/// of the input.
pub fn read_line(reader: &mut impl BufRead, line: &mut Vec<u8>) -> io::Result<Option<LineEnd>> {
    line.clear();
    let mut hasher: Option<Sha256> = None;
    let mut len = 0u64;
    loop {
        let available = match reader.fill_buf() {
            Ok(available) => available,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(error),
        };
        if available.is_empty() {
            if len == 0 && hasher.is_none() && line.is_empty() {
                return Ok(None);
            }
            return Ok(Some(end(false, len, hasher)));
        }
        let newline = available.iter().position(|&b| b == b'\n');
        let chunk = &available[..newline.unwrap_or(available.len())];
        len += chunk.len() as u64;
        match &mut hasher {
            Some(hasher) => hasher.update(chunk),
            None if line.len() + chunk.len() > MAX_LINE_BYTES => {
                let mut started = Sha256::new();
                started.update(&line[..]);
                started.update(chunk);
                hasher = Some(started);
                *line = Vec::new();
            }
            None => line.extend_from_slice(chunk),
        }
        let used = chunk.len() + usize::from(newline.is_some());
        reader.consume(used);
        if newline.is_some() {
            return Ok(Some(end(true, len, hasher)));
        }
    }
}

fn end(terminated: bool, len: u64, hasher: Option<Sha256>) -> LineEnd {
    LineEnd {
        terminated,
        overlong: hasher.map(|hasher| (len, hex::encode(hasher.finalize()))),
    }
}

#[cfg(test)]
mod tests {
    use std::io::{BufReader, Read};

    use super::*;

    fn all(input: impl Read) -> Vec<(Vec<u8>, LineEnd)> {
        let mut reader = BufReader::with_capacity(7, input);
        let mut out = Vec::new();
        let mut line = Vec::new();
        while let Some(end) = read_line(&mut reader, &mut line).unwrap() {
            out.push((line.clone(), end));
        }
        out
    }

    #[test]
    fn lines_are_split_across_buffer_refills() {
        let lines = all(&b"first line\n\nlast, unterminated"[..]);
        let kept: Vec<(&[u8], bool)> = lines
            .iter()
            .map(|(l, e)| (l.as_slice(), e.terminated))
            .collect();
        assert_eq!(
            kept,
            [
                (&b"first line"[..], true),
                (b"", true),
                (b"last, unterminated", false)
            ]
        );
        assert!(lines.iter().all(|(_, e)| e.overlong.is_none()));
    }

    #[test]
    fn an_overlong_line_is_hashed_not_kept() {
        // 8 GiB would be the same: only the buffer's bytes are ever held.
        let long = MAX_LINE_BYTES as u64 * 3 + 5;
        let input = io::repeat(b'x').take(long).chain(&b"\nnext\n"[..]);
        let lines = all(input);
        assert_eq!(lines.len(), 2);
        let (kept, end) = &lines[0];
        assert!(kept.is_empty());
        let expected = hex::encode(Sha256::digest(vec![b'x'; long as usize]));
        assert_eq!(end.overlong, Some((long, expected)));
        assert_eq!(lines[1].0, b"next");
    }
}
