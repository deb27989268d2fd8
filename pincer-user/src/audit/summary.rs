//! `pincer audit summary`: what an audit log says, for people.

use std::fmt;

use super::Record;

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
    /// Summarizes audit lines; the chain's own lines (close, restart) are
    /// not records and are skipped.
    pub fn from_lines<'a>(lines: impl IntoIterator<Item = &'a str>) -> Self {
        let mut summary = Summary::default();
        for line in lines.into_iter().filter(|l| !l.trim().is_empty()) {
            let Ok(value) = serde_json::from_str::<serde_json::Value>(line) else {
                summary.unreadable += 1;
                continue;
            };
            if value["chain"].is_string() {
                continue;
            }
            let field = |name: &str| match &value[name] {
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Array(items) => items
                    .iter()
                    .filter_map(|i| i.as_str())
                    .collect::<Vec<_>>()
                    .join(","),
                _ => String::new(),
            };
            // Only decisions and verdicts decide something; the kernel's
            // counters, revocations and the like do not. (Lines written
            // before records were tagged have no `event`: decisions.)
            if !matches!(
                value["event"].as_str(),
                None | Some(Record::DECISION | Record::VERDICT)
            ) {
                continue;
            }
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

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
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
            r#"{"event":"counters","counters":{"denied":3}}"#,
            r#"{"event":"revoke","agent":"a","path":null,"grants":1}"#,
            r#"{"event":"decision","verdict":"deny","operation":["write"],"path":"/etc/x","comm":"sh"}"#,
            r#"{"time":"t","mission":"m","seq":0,"chain":"restart","abandoned":"00","prev":"0","mac":"0"}"#,
            r#"{"time":"t","mission":"m","seq":5,"chain":"close","records":4,"prev":"0","mac":"0"}"#,
            "not json",
        ];
        let summary = Summary::from_lines(lines);
        assert_eq!(
            summary.verdicts,
            [("allow".to_owned(), 1), ("deny".to_owned(), 4)]
        );
        assert_eq!(summary.refusals.len(), 2);
        assert_eq!(summary.refusals[0].4, 2);
        assert_eq!(summary.refusals[1].4, 2);
        assert_eq!(summary.unreadable, 1);
        let text = summary.to_string();
        assert!(
            text.contains("deny   read           /home/a/.ssh/id  by cat (x2)"),
            "{text}"
        );
    }
}
