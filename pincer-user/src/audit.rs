//! The audit log: one JSON line per decision.

use std::{
    fs::{File, OpenOptions},
    io::{self, LineWriter, Write},
    path::{Path, PathBuf},
    time::SystemTime,
};

use serde::Serialize;

use crate::events::Decision;

/// Errors writing the audit log.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The log file could not be opened.
    #[error("failed to open audit log {path}")]
    Open {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// A line could not be written.
    #[error("failed to write audit log")]
    Write(#[source] io::Error),
}

/// One line of the log.
#[derive(Serialize)]
struct Line<'a> {
    time: String,
    mission: &'a str,
    #[serde(flatten)]
    decision: &'a Decision,
}

/// Where audit lines go: a file (appended) or standard error.
pub struct AuditLog {
    out: Box<dyn Write + Send>,
    mission: String,
}

impl AuditLog {
    /// Opens the log; `None` writes to standard error.
    pub fn open(path: Option<&Path>, mission: &str) -> Result<Self, AuditError> {
        let out: Box<dyn Write + Send> = match path {
            Some(path) => Box::new(LineWriter::new(open_append(path)?)),
            None => Box::new(io::stderr()),
        };
        Ok(Self {
            out,
            mission: mission.to_owned(),
        })
    }

    /// Appends one decision.
    pub fn record(&mut self, decision: &Decision) -> Result<(), AuditError> {
        let line = Line {
            time: humantime::format_rfc3339_micros(SystemTime::now()).to_string(),
            mission: &self.mission,
            decision,
        };
        let mut text = serde_json::to_string(&line).map_err(|e| AuditError::Write(e.into()))?;
        text.push('\n');
        self.out
            .write_all(text.as_bytes())
            .and_then(|()| self.out.flush())
            .map_err(AuditError::Write)
    }
}

fn open_append(path: &Path) -> Result<File, AuditError> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|source| AuditError::Open {
            path: path.to_owned(),
            source,
        })
}

/// Counts and refusals of an audit log, for people.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Lines per verdict (`allow`, `deny`, `audit`), in first-seen order.
    pub verdicts: Vec<(String, usize)>,
    /// Distinct (verdict, operation, path, comm) of every line that was not
    /// an `allow`, in first-seen order, with how often each occurred.
    pub refusals: Vec<(String, String, String, String, usize)>,
    /// Lines that were not audit records (reported, never fatal).
    pub unreadable: usize,
}

impl Summary {
    /// Summarizes audit lines.
    pub fn from_lines<'a>(lines: impl IntoIterator<Item = &'a str>) -> Self {
        let mut summary = Summary::default();
        for line in lines.into_iter().filter(|l| !l.trim().is_empty()) {
            let Ok(value) = serde_json::from_str::<serde_json::Value>(line) else {
                summary.unreadable += 1;
                continue;
            };
            let field = |name: &str| match &value[name] {
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Array(items) => items
                    .iter()
                    .filter_map(|i| i.as_str())
                    .collect::<Vec<_>>()
                    .join(","),
                _ => String::new(),
            };
            let verdict = field("verdict");
            if verdict.is_empty() {
                summary.unreadable += 1;
                continue;
            }
            match summary.verdicts.iter_mut().find(|(v, _)| *v == verdict) {
                Some((_, n)) => *n += 1,
                None => summary.verdicts.push((verdict.clone(), 1)),
            }
            if verdict == "allow" {
                continue;
            }
            let key = (verdict, field("operation"), field("path"), field("comm"));
            match summary
                .refusals
                .iter_mut()
                .find(|r| (&r.0, &r.1, &r.2, &r.3) == (&key.0, &key.1, &key.2, &key.3))
            {
                Some(r) => r.4 += 1,
                None => summary.refusals.push((key.0, key.1, key.2, key.3, 1)),
            }
        }
        summary
    }
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (verdict, n) in &self.verdicts {
            writeln!(f, "{verdict:<6} {n}")?;
        }
        if !self.refusals.is_empty() {
            writeln!(f, "not granted:")?;
        }
        for (verdict, op, path, comm, n) in &self.refusals {
            let times = if *n > 1 {
                format!(" (x{n})")
            } else {
                String::new()
            };
            writeln!(f, "  {verdict:<6} {op:<14} {path}  by {comm}{times}")?;
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
            "not json",
        ];
        let summary = Summary::from_lines(lines);
        assert_eq!(
            summary.verdicts,
            [("allow".to_owned(), 1), ("deny".to_owned(), 3)]
        );
        assert_eq!(summary.refusals.len(), 2);
        assert_eq!(summary.refusals[0].4, 2);
        assert_eq!(summary.unreadable, 1);
        let text = summary.to_string();
        assert!(
            text.contains("deny   read           /home/a/.ssh/id  by cat (x2)"),
            "{text}"
        );
    }

    #[test]
    fn record_writes_one_json_line_per_decision() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let mut log = AuditLog::open(Some(&path), "m").unwrap();
        let decision = Decision {
            pid: 1,
            tid: 2,
            comm: "cat".into(),
            operation: vec!["read"],
            path: "/x".into(),
            verdict: "deny",
            reason: "no grant covers read".into(),
            hook: "file_open",
            dev: "0:1".into(),
            ino: 5,
            cgroup: 9,
        };
        log.record(&decision).unwrap();
        log.record(&decision).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<_> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        let v: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
        assert_eq!(v["mission"], "m");
        assert_eq!(v["path"], "/x");
        assert_eq!(v["verdict"], "deny");
        assert!(v["time"].as_str().unwrap().ends_with('Z'));
    }
}
