//! `pincer audit summary`: what an audit log says, for people.
//!
//! A log is read a line at a time (lines over [`super::MAX_LINE_BYTES`] are
//! not kept), in time linear in its size however many distinct refusals it
//! holds (an agent chooses how many paths are refused), and everything it
//! prints from the log is escaped for the terminal: a log edited by hand may
//! hold escape sequences that the writer never wrote.

use std::{
    collections::HashMap,
    fmt,
    io::{self, BufRead},
};

use super::{Record, lines};
use crate::escape::for_terminal;

/// What identifies a refusal: verdict, operation, path, `comm`.
type RefusalKey = (String, String, String, String);

/// Counts and refusals of an audit log, for people.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Lines per verdict (`allow`, `deny`, `audit`), in first-seen order.
    pub verdicts: Vec<(String, usize)>,
    /// Distinct (verdict, operation, path, comm) of every line that was not
    /// an `allow`, in first-seen order, with how often each occurred.
    pub refusals: Vec<(RefusalKey, usize)>,
    /// Where each refusal stands in `refusals`.
    index: HashMap<RefusalKey, usize>,
    /// Lines that were not audit records (reported, never fatal): not
    /// JSON, not UTF-8, or too long.
    pub unreadable: usize,
}

impl Summary {
    /// Summarizes audit lines; the chain's own lines (close, restart) are
    /// not records and are skipped.
    pub fn from_lines<'a>(lines: impl IntoIterator<Item = &'a str>) -> Self {
        let mut summary = Summary::default();
        for line in lines {
            summary.add(line.as_bytes());
        }
        summary
    }

    /// Summarizes the lines `reader` yields.
    pub fn read(mut reader: impl BufRead) -> io::Result<Self> {
        let mut summary = Summary::default();
        let mut line = Vec::new();
        while let Some(end) = lines::read_line(&mut reader, &mut line)? {
            if end.overlong.is_some() {
                summary.unreadable += 1;
            } else {
                summary.add(&line);
            }
        }
        Ok(summary)
    }

    /// Whether the log held no record at all.
    pub fn is_empty(&self) -> bool {
        self.verdicts.is_empty() && self.unreadable == 0
    }

    fn add(&mut self, line: &[u8]) {
        if line.trim_ascii().is_empty() {
            return;
        }
        let Ok(value) = serde_json::from_slice::<serde_json::Value>(line) else {
            self.unreadable += 1;
            return;
        };
        if value["chain"].is_string() {
            return;
        }
        // A verdict names what it answered in its request.
        let subject = if value["event"] == Record::VERDICT {
            &value["request"]
        } else {
            &value
        };
        let field = |name: &str| match &subject[name] {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Array(items) => items
                .iter()
                .filter_map(|i| i.as_str())
                .collect::<Vec<_>>()
                .join(","),
            _ => String::new(),
        };
        // Only decisions and verdicts decide something; the kernel's
        // counters, revocations and the like do not. (Lines written before
        // records were tagged have no `event`: decisions.)
        if !matches!(
            value["event"].as_str(),
            None | Some(Record::DECISION | Record::VERDICT)
        ) {
            return;
        }
        let verdict = value["verdict"].as_str().unwrap_or_default().to_owned();
        if verdict.is_empty() {
            self.unreadable += 1;
            return;
        }
        match self.verdicts.iter_mut().find(|(v, _)| *v == verdict) {
            Some((_, n)) => *n += 1,
            None => self.verdicts.push((verdict.clone(), 1)),
        }
        if verdict == "allow" {
            return;
        }
        let key = (verdict, field("operation"), field("path"), field("comm"));
        match self.index.get(&key) {
            Some(&at) => self.refusals[at].1 += 1,
            None => {
                self.index.insert(key.clone(), self.refusals.len());
                self.refusals.push((key, 1));
            }
        }
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return writeln!(f, "no records");
        }
        for (verdict, n) in &self.verdicts {
            writeln!(f, "{:<6} {n}", for_terminal(verdict))?;
        }
        if !self.refusals.is_empty() {
            writeln!(f, "not granted:")?;
        }
        for ((verdict, op, path, comm), n) in &self.refusals {
            let times = if *n > 1 {
                format!(" (x{n})")
            } else {
                String::new()
            };
            writeln!(
                f,
                "  {:<6} {:<14} {}  by {}{times}",
                for_terminal(verdict),
                for_terminal(op),
                for_terminal(path),
                for_terminal(comm)
            )?;
        }
        if self.unreadable > 0 {
            writeln!(f, "{} line(s) were not audit records", self.unreadable)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_counts_and_lists_refusals() {
        let lines = [
            r#"{"verdict":"allow","operation":["read"],"path":"/p/a","comm":"cat"}"#,
            r#"{"verdict":"deny","operation":["read"],"path":"/home/a/.ssh/id","comm":"cat"}"#,
            r#"{"verdict":"deny","operation":["read"],"path":"/home/a/.ssh/id","comm":"cat"}"#,
            r#"{"verdict":"deny","operation":["write"],"path":"/etc/x","comm":"sh"}"#,
            r#"{"event":"counters","counters":{"denied":3}}"#,
            r#"{"event":"revoke","agent":"a","path":null,"grants":1}"#,
            r#"{"event":"decision","verdict":"deny","operation":["write"],"path":"/etc/x","comm":"sh"}"#,
            // A parked request denied by a voter: what it asked is its request's.
            r#"{"event":"verdict","request":{"operation":["read"],"path":"/home/a/.ssh/id","comm":"cat"},"verdict":"deny","decided_by":"prompt"}"#,
            r#"{"time":"t","mission":"m","seq":0,"chain":"restart","abandoned":"00","prev":"0","mac":"0"}"#,
            r#"{"time":"t","mission":"m","seq":5,"chain":"close","records":4,"prev":"0","mac":"0"}"#,
            "not json",
        ];
        let summary = Summary::from_lines(lines);
        assert_eq!(
            summary.verdicts,
            [("allow".to_owned(), 1), ("deny".to_owned(), 5)]
        );
        assert_eq!(summary.refusals.len(), 2);
        assert_eq!(summary.refusals[0].1, 3);
        assert_eq!(summary.refusals[1].1, 2);
        assert_eq!(summary.unreadable, 1);
        let text = summary.to_string();
        assert!(
            text.contains("deny   read           /home/a/.ssh/id  by cat (x3)"),
            "{text}"
        );
    }

    #[test]
    fn what_the_log_holds_is_escaped_and_bad_lines_are_counted() {
        let mut log = Vec::new();
        log.extend_from_slice(
            br#"{"verdict":"deny","operation":["read"],"path":"/a\u001b[2J\u202e","comm":"x\u0007"}"#,
        );
        log.extend_from_slice(b"\n\xff\xfe not UTF-8\n");
        log.extend_from_slice(&vec![b'{'; crate::audit::MAX_LINE_BYTES + 1]);
        log.push(b'\n');
        let summary = Summary::read(&log[..]).unwrap();
        assert_eq!(summary.unreadable, 2);
        assert_eq!(
            summary.to_string(),
            "deny   1\nnot granted:\n  deny   read           /a\\x1b[2J\\xe2\\x80\\xae  by x\\x07\n\
             2 line(s) were not audit records\n"
        );
        assert_eq!(Summary::read(&b""[..]).unwrap().to_string(), "no records\n");
    }

    #[test]
    fn many_distinct_refusals_are_counted_in_linear_time() {
        // An agent chooses how many distinct paths are refused.
        let lines: Vec<String> = (0..100_000)
            .map(|i| {
                format!(
                    r#"{{"verdict":"deny","operation":["read"],"path":"/p/{}","comm":"c"}}"#,
                    i % 50_000
                )
            })
            .collect();
        let summary = Summary::from_lines(lines.iter().map(String::as_str));
        assert_eq!(summary.refusals.len(), 50_000);
        assert!(summary.refusals.iter().all(|(_, n)| *n == 2));
        assert_eq!(summary.refusals[7].0.2, "/p/7");
    }
}
