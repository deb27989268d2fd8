//! `pincer explain`: why an access came out as it did, read back from an
//! audit log: the decision or verdict on it, its reason, the votes and who
//! decided, and what the agent had read that lowered its level.

use std::io::{self, BufRead};

use serde_json::Value;

/// What to explain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A parked request, by its id.
    Request(u64),
    /// The last access to a path.
    Path(String),
}

impl Target {
    /// A request id when `text` is a number, a path otherwise.
    pub fn parse(text: &str) -> Target {
        text.parse()
            .map_or_else(|_| Target::Path(text.to_owned()), Target::Request)
    }
}

/// A read that lowered an agent's level, as its audit line tells it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Lowered {
    /// The object read.
    pub path: String,
    /// The agent's level after it.
    pub level: String,
    /// When.
    pub time: String,
}

/// The explanation of one access.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Explanation {
    /// The last record on it: a kernel decision, or the verdict on a
    /// parked request.
    pub record: Value,
    /// What its agent (cgroup) had read before that lowered its level.
    pub tainted_by: Vec<Lowered>,
    /// Lines that were not JSON records, left out.
    pub skipped: usize,
    /// The asset records of its request: what discovery observed or
    /// admitted on it, with the chain.
    pub assets: Vec<Value>,
}

/// The agent cgroup and the path of a decision or a verdict record.
fn cgroup_and_path(record: &Value) -> Option<(u64, &str)> {
    match record["event"].as_str()? {
        "decision" => Some((record["cgroup"].as_u64()?, record["path"].as_str()?)),
        "verdict" => Some((
            record["request"]["cgroup"].as_u64()?,
            record["request"]["path"].as_str()?,
        )),
        _ => None,
    }
}

/// What made an object a policy object, as a record's `policy` names it
/// (nothing when it names none).
fn policy_line(policy: &Value) -> String {
    let Some(class) = policy["class"].as_str() else {
        return String::new();
    };
    let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    format!(
        "  policy: {class}, rule `{}` at {}: {}\n",
        s(&policy["rule"]),
        s(&policy["at"]),
        s(&policy["why"])
    )
}

/// Reads an audit log and explains `target`: `None` when no record is on
/// it.
pub fn explain(reader: impl BufRead, target: &Target) -> io::Result<Option<Explanation>> {
    let mut lowered: std::collections::HashMap<u64, Vec<Lowered>> = Default::default();
    let mut found: Option<(Value, Vec<Lowered>)> = None;
    let mut assets: std::collections::HashMap<u64, Vec<Value>> = Default::default();
    let mut skipped = 0;
    for line in reader.lines() {
        let line = line?;
        let Ok(record) = serde_json::from_str::<Value>(&line) else {
            skipped += 1;
            continue;
        };
        if record["event"] == "asset"
            && let Some(request) = record["request"].as_u64()
        {
            assets.entry(request).or_default().push(record);
            continue;
        }
        let Some((cgroup, path)) = cgroup_and_path(&record) else {
            continue;
        };
        let matches = match target {
            Target::Request(id) => {
                record["event"] == "verdict" && record["request"]["id"].as_u64() == Some(*id)
            }
            Target::Path(wanted) => path == wanted,
        };
        let before = lowered.get(&cgroup).cloned().unwrap_or_default();
        if let Some(level) = record["taint"].as_str() {
            lowered.entry(cgroup).or_default().push(Lowered {
                path: path.to_owned(),
                level: level.to_owned(),
                time: record["time"].as_str().unwrap_or_default().to_owned(),
            });
        }
        if matches {
            found = Some((record, before));
        }
    }
    Ok(found.map(|(record, tainted_by)| {
        let assets = record["request"]["id"]
            .as_u64()
            .and_then(|id| assets.remove(&id))
            .unwrap_or_default();
        Explanation {
            record,
            tainted_by,
            skipped,
            assets,
        }
    }))
}

impl Explanation {
    /// The explanation as `pincer explain` prints it.
    pub fn text(&self) -> String {
        let r = &self.record;
        let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        let ops = |v: &Value| {
            v.as_array()
                .map(|ops| ops.iter().map(s).collect::<Vec<_>>().join("+"))
                .unwrap_or_default()
        };
        let mut out = if r["event"] == "verdict" {
            let q = &r["request"];
            let mut out = format!(
                "request {}: {} {} by {} (pid {}), {}\n  verdict: {}, decided by {}: {}\n  why it was asked: {}\n",
                q["id"],
                ops(&q["operation"]),
                s(&q["path"]),
                s(&q["comm"]),
                q["pid"],
                s(&r["time"]),
                s(&r["verdict"]),
                s(&r["decided_by"]),
                s(&r["reason"]),
                s(&q["why"]),
            );
            if let Some(owner) = q["owner_only"].as_str() {
                out.push_str(&format!("  {owner}\n"));
            }
            out.push_str(&policy_line(&q["policy"]));
            if let Some(why) = q["discovery"].as_str() {
                out.push_str(&format!("  not discovered: {why}\n"));
            }
            for asset in &self.assets {
                out.push_str(&format!(
                    "  asset `{}`: {} {} [{}] {}\n",
                    s(&asset["node"]),
                    s(&asset["action"]),
                    s(&asset["path"]),
                    ops(&asset["ops"]),
                    s(&asset["extent"]),
                ));
                if let Some(source) = asset["source"].as_str() {
                    let excerpt = &asset["excerpt"];
                    out.push_str(&format!(
                        "    named in `{source}`'s evidence (sha256 {}) at bytes {}..{}: \"{}\"\n",
                        s(&asset["evidence"]),
                        excerpt["start"],
                        excerpt["end"],
                        s(&excerpt["text"]),
                    ));
                } else if let Some(digest) = asset["evidence"].as_str() {
                    out.push_str(&format!(
                        "    its content is evidence now (sha256 {digest}, {} bytes kept)\n",
                        asset["bytes"][0]
                    ));
                }
            }
            for vote in r["votes"].as_array().into_iter().flatten() {
                out.push_str(&format!(
                    "  vote: {} {}{}\n",
                    s(&vote["voter"]),
                    s(&vote["vote"]),
                    vote["reason"]
                        .as_str()
                        .map(|why| format!(" ({why})"))
                        .unwrap_or_default()
                ));
            }
            out
        } else {
            format!(
                "{} {} {} ({}) by {} (pid {}), {}\n  why: {}\n",
                s(&r["verdict"]),
                ops(&r["operation"]),
                s(&r["path"]),
                s(&r["hook"]),
                s(&r["comm"]),
                r["pid"],
                s(&r["time"]),
                s(&r["reason"]),
            ) + &policy_line(&r["policy"])
        };
        if self.tainted_by.is_empty() {
            out.push_str("  the agent had read nothing that lowered its level\n");
        }
        for read in &self.tainted_by {
            out.push_str(&format!(
                "  the agent had read {} ({}), {}\n",
                read.path, read.level, read.time
            ));
        }
        if self.skipped > 0 {
            out.push_str(&format!(
                "  ({} lines of the log were not records and were left out)\n",
                self.skipped
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `log` says of `target`, if anything.
    fn explained(log: &str, target: &str) -> Option<Explanation> {
        explain(log.as_bytes(), &Target::parse(target)).unwrap()
    }

    const LOG: &str = r#"{"time":"t1","event":"decision","verdict":"allow","path":"/p/a.txt","cgroup":7,"operation":["read"],"reason":"granted by the mission","hook":"file_open","comm":"cat","pid":3}
{"time":"t2","event":"decision","verdict":"allow","path":"/d/page.html","cgroup":7,"operation":["read"],"reason":"granted by the mission","hook":"file_open","comm":"cat","pid":3,"taint":"evidence"}
not json
{"time":"t3","event":"decision","verdict":"allow","path":"/d/other.html","cgroup":8,"operation":["read"],"reason":"granted","hook":"file_open","comm":"cat","pid":4,"taint":"evidence"}
{"time":"t4","event":"decision","verdict":"deny","path":"/p/deploy","cgroup":7,"operation":["exec"],"reason":"exec of an action the mission reserves","hook":"file_open","comm":"sh","pid":5}
{"time":"t5","event":"verdict","request":{"id":42,"path":"/p/CLAUDE.md","cgroup":7,"operation":["write"],"comm":"sh","pid":5,"why":"write of a policy object","owner_only":"only the owner"},"verdict":"deny","decided_by":"prompt","reason":"no","votes":[{"voter":"mission","vote":"abstain","reason":"only the owner may allow this"}]}
"#;

    #[test]
    fn an_access_is_explained_with_what_its_agent_had_read() {
        let found = explained(LOG, "/p/deploy").unwrap();
        assert_eq!(found.record["verdict"], "deny");
        // Only its own agent's reads, and only those before it.
        assert_eq!(
            found.tainted_by,
            [Lowered {
                path: "/d/page.html".into(),
                level: "evidence".into(),
                time: "t2".into()
            }]
        );
        assert_eq!(found.skipped, 1);
        says(
            &found,
            &[
                "the agent had read /d/page.html (evidence), t2",
                "why: exec of an action the mission reserves",
            ],
        );
        says(
            &explained(LOG, "42").unwrap(),
            &[
                "decided by prompt: no",
                "vote: mission abstain (only the owner may allow this)",
            ],
        );

        let untainted = explained(LOG, "/p/a.txt").unwrap();
        assert!(untainted.tainted_by.is_empty());
        assert!(explained(LOG, "/nowhere").is_none());
        assert!(explained(LOG, "7").is_none());
    }

    #[test]
    fn a_discovered_access_is_explained_with_its_chain() {
        let log = r#"{"time":"t1","event":"asset","action":"admit","agent":"upload","node":"image","path":"/tmp/data.png","request":9,"ops":["read"],"extent":"file","source":"email","evidence":"abc","excerpt":{"start":14,"end":27,"spelled":"/tmp/data.png","text":"upload /tmp/data.png"}}
{"time":"t2","event":"verdict","request":{"id":9,"path":"/tmp/data.png","cgroup":7,"operation":["read"],"comm":"cat","pid":5,"why":"no grant"},"verdict":"allow","decided_by":"discovery","reason":"`image` is named","votes":[]}
{"time":"t3","event":"verdict","request":{"id":10,"path":"/srv/drop/k","cgroup":7,"operation":["create"],"comm":"cp","pid":5,"why":"no grant","discovery":"no asset of the mission matches"},"verdict":"deny","decided_by":"default","reason":"every voter abstained","votes":[]}
"#;
        says(
            &explained(log, "9").unwrap(),
            &[
                "asset `image`: admit /tmp/data.png [read] file",
                "named in `email`'s evidence (sha256 abc) at bytes 14..27: \"upload /tmp/data.png\"",
            ],
        );
        says(
            &explained(log, "/srv/drop/k").unwrap(),
            &["not discovered: no asset of the mission matches"],
        );
    }

    /// Asserts that the explanation's text has each of `lines`.
    fn says(found: &Explanation, lines: &[&str]) {
        let text = found.text();
        for line in lines {
            assert!(text.contains(line), "{line:?} is not in:\n{text}");
        }
    }
}
