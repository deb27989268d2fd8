//! The OCSF mapping's tests, apart so the mapping itself reads without them.

use super::*;

fn origin() -> Origin {
    Origin {
        hostname: "host".to_owned(),
    }
}

fn decision(hook: &str, ops: &[&str], path: &str, verdict: &str) -> Value {
    json!({
        "time": "2025-06-01T09:30:00.123456Z", "mission": "docs", "seq": 3,
        "event": "decision", "pid": 10, "tid": 11, "comm": "cat",
        "operation": ops, "path": path, "verdict": verdict, "reason": "why",
        "hook": hook, "dev": "0:1", "ino": 5, "cgroup": 9,
        "prev": "00", "mac": "ff",
    })
}

#[test]
fn a_denied_read_is_a_blocked_file_read() {
    let event = event(
        &decision("file_open", &["read"], "/etc/shadow", "deny"),
        &origin(),
    )
    .unwrap()
    .unwrap();
    assert_eq!(event["class_uid"], 1001);
    assert_eq!(event["activity_id"], 2);
    assert_eq!(event["type_uid"], 100102);
    assert_eq!(event["time"], 1_748_770_200_123u64);
    assert_eq!(event["status_id"], 2);
    assert_eq!(event["disposition_id"], 2);
    assert_eq!(event["file"]["name"], "shadow");
    assert_eq!(event["file"]["parent_folder"], "/etc");
    assert_eq!(event["actor"]["process"]["pid"], 10);
    assert_eq!(event["unmapped"]["cgroup"], 9);
    assert_eq!(event["unmapped"]["mission"], "docs");
    // The chain stays in pincer's log.
    let text = event.to_string();
    for chain in ["\"seq\"", "\"prev\"", "\"mac\""] {
        assert!(!text.contains(chain), "{text}");
    }
}

#[test]
fn activities_follow_the_operation() {
    let activity = |hook, ops: &[&str]| {
        let e = event(&decision(hook, ops, "/a/b", "allow"), &origin())
            .unwrap()
            .unwrap();
        (
            e["class_uid"].as_u64().unwrap(),
            e["activity_id"].as_u64().unwrap(),
        )
    };
    assert_eq!(activity("file_open", &["read", "write"]), (1001, 3));
    assert_eq!(activity("inode_create", &["create"]), (1001, 1));
    assert_eq!(activity("inode_unlink", &["delete"]), (1001, 4));
    assert_eq!(activity("inode_rename", &["rename"]), (1001, 5));
    assert_eq!(activity("inode_setattr", &["setattr"]), (1001, 6));
    assert_eq!(activity("sb_mount", &[]), (1001, 12));
    assert_eq!(activity("file_open", &["exec"]), (1007, 1));
    assert_eq!(activity("task_kill", &[]), (1007, 2));
    assert_eq!(activity("bpf", &[]), (1003, 4));
    assert_eq!(activity("unknown", &["write"]), (1001, 3));
}

#[test]
fn bookkeeping_lines_are_not_events_and_broken_ones_are_errors() {
    for line in [
        json!({"time": "2025-06-01T09:30:00Z", "chain": "close", "records": 3}),
        json!({"time": "2025-06-01T09:30:00Z", "event": "counters", "counters": {}}),
    ] {
        assert_eq!(event(&line, &origin()), Ok(None));
    }
    let mut bad = decision("file_open", &["read"], "/x", "deny");
    bad.as_object_mut().unwrap().remove("pid");
    assert_eq!(
        event(&bad, &origin()).unwrap_err().to_string(),
        "no valid pid"
    );
    bad["time"] = json!("yesterday");
    assert!(event(&bad, &origin()).is_err());
    assert!(event(&json!([1]), &origin()).is_err());
}

#[test]
fn an_export_names_the_first_bad_line() {
    let good = decision("file_open", &["read"], "/x", "deny").to_string();
    let log = format!("{good}\n{{\"chain\":\"close\"}}\n{good}\n");
    let mut out = Vec::new();
    assert_eq!(export(log.as_bytes(), &origin(), &mut out).unwrap(), 2);
    assert_eq!(out.iter().filter(|&&b| b == b'\n').count(), 2);

    let log = format!("{good}\n{good}\n{{\"time\":\n");
    let error = export(log.as_bytes(), &origin(), &mut Vec::new()).unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("line 3: not a JSON audit line"),
        "{error}"
    );
    let log = format!("{good}\n{}\n", good.replace("\"pid\":10,", ""));
    let error = export(log.as_bytes(), &origin(), &mut Vec::new()).unwrap_err();
    assert_eq!(error.to_string(), "line 2: no valid pid");
}

#[test]
fn file_names_split_into_parent_and_name() {
    let f = file("/", FileType::Unknown);
    assert_eq!(
        (f["name"].as_str(), f.get("parent_folder")),
        (Some("/"), None)
    );
    let f = file("/top", FileType::Unknown);
    assert_eq!(f["parent_folder"], "/");
    assert_eq!(f["name"], "top");
    let f = file("", FileType::Unknown);
    assert_eq!(f["name"], "");
    assert!(f.get("path").is_none());
}

/// Every event of the schema's classes is checked against the JSON Schema
/// of OCSF 1.5.0 generated from the official schema (see
/// `tests/data/ocsf/README.md`), references resolved from the same
/// directory and never fetched.
mod schema {
    use std::{fs, path::PathBuf};

    use jsonschema::{Retrieve, Uri, Validator};

    use super::*;
    use crate::{
        audit::{AuditLog, Record, VerdictRecord},
        events::Decision,
        request::Request,
    };

    fn dir() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/data/ocsf/{VERSION}"))
    }

    /// Serves `…/schema/1.5.0/objects/<name>?profiles=…` from the
    /// vendored files; refuses anything else.
    struct Vendored;

    impl Retrieve for Vendored {
        fn retrieve(
            &self,
            uri: &Uri<String>,
        ) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
            let prefix = format!("/schema/{VERSION}/objects/");
            let name = uri
                .path()
                .as_str()
                .strip_prefix(&prefix)
                .filter(|name| {
                    name.bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
                })
                .ok_or_else(|| format!("not a vendored OCSF object: {uri}"))?;
            let text = fs::read_to_string(dir().join(format!("objects/{name}.json")))?;
            Ok(serde_json::from_str(&text)?)
        }
    }

    fn validator(class: &str) -> Validator {
        let text = fs::read_to_string(dir().join(format!("classes/{class}.json"))).unwrap();
        let schema: Value = serde_json::from_str(&text).unwrap();
        jsonschema::options()
            .with_retriever(Vendored)
            .build(&schema)
            .unwrap()
    }

    fn class_name(event: &Value) -> &'static str {
        match event["class_uid"].as_u64() {
            Some(FILE_SYSTEM_ACTIVITY) => "file_activity",
            Some(PROCESS_ACTIVITY) => "process_activity",
            Some(KERNEL_ACTIVITY) => "kernel_activity",
            other => panic!("unexpected class {other:?}"),
        }
    }

    fn errors(event: &Value) -> Vec<String> {
        errors_by(&validator(class_name(event)), event)
    }

    fn errors_by(validator: &Validator, event: &Value) -> Vec<String> {
        validator
            .iter_errors(event)
            .map(|e| format!("{}: {e}", e.instance_path()))
            .collect()
    }

    /// A log holding one record of each kind pincer writes, every hook
    /// and verdict of a decision among them; its lines, read back.
    fn lines() -> Vec<String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let mut log = AuditLog::open(Some(&path), "docs").unwrap();
        for hook in &pincer_common::hook::ALL {
            for (verdict, ops, path) in [
                ("allow", &["read"][..], "/srv/a.txt"),
                ("deny", &["write", "create"][..], "/srv/new"),
                ("audit", &["exec"][..], "/usr/bin/curl"),
                ("park", &["delete"][..], "/"),
                ("deny", &[][..], ""),
            ] {
                let mut decision = Decision::example(path);
                decision.hook = hook.name;
                decision.verdict = verdict;
                decision.operation = ops.to_vec();
                decision.taint = Some("evidence");
                log.record(&Record::Decision(&decision)).unwrap();
            }
        }
        let mut request = Request::example(7, "/srv/secret");
        request.exe = Some("/usr/bin/cat".to_owned());
        for verdict in ["allow", "deny"] {
            log.record(&Record::Verdict(VerdictRecord::example(&request, verdict)))
                .unwrap();
        }
        log.record(&Record::Label {
            action: "map",
            path: "/srv/mail/1.eml",
            authority: "evidence",
            taint: "evidence",
            from: &["mail".to_owned()],
            caller: 77,
        })
        .unwrap();
        log.record(&Record::Revoke {
            agent: "a",
            path: None,
            grants: 1,
        })
        .unwrap();
        log.close().unwrap();
        fs::read_to_string(&path)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn every_event_is_valid_ocsf() {
        let lines = lines();
        // Built once: each compiles some sixty object schemas.
        let validators: std::collections::HashMap<&str, Validator> =
            ["file_activity", "process_activity", "kernel_activity"]
                .into_iter()
                .map(|class| (class, validator(class)))
                .collect();
        let mut classes = std::collections::BTreeSet::new();
        let mut events = 0;
        for line in &lines {
            let line: Value = serde_json::from_str(line).unwrap();
            let Some(event) = event(&line, &origin()).unwrap() else {
                continue;
            };
            events += 1;
            classes.insert((event["class_uid"].as_u64(), event["activity_id"].as_u64()));
            let errors = errors_by(&validators[class_name(&event)], &event);
            assert!(errors.is_empty(), "{event:#}\n{errors:#?}");
        }
        // Every decision, both verdicts and the label; not the revoke
        // nor the close line.
        assert_eq!(events, pincer_common::hook::ALL.len() * 5 + 3);
        assert!(classes.len() > 15, "{classes:?}");
    }

    #[test]
    fn the_validator_rejects_what_is_not_ocsf() {
        let line = decision("file_open", &["read"], "/x", "deny");
        let good = event(&line, &origin()).unwrap().unwrap();
        assert!(errors(&good).is_empty());
        let file_activity = validator("file_activity");

        let mut wrong_class = good.clone();
        wrong_class["class_uid"] = json!(1002);
        assert!(!file_activity.is_valid(&wrong_class));

        let mut no_file = good.clone();
        no_file.as_object_mut().unwrap().remove("file");
        assert!(!file_activity.is_valid(&no_file));

        let mut bad_activity = good.clone();
        bad_activity["activity_id"] = json!(42);
        assert!(!file_activity.is_valid(&bad_activity));

        let mut unknown_member = good.clone();
        unknown_member["actor"]["process"]["cgroup"] = json!(9);
        assert!(!file_activity.is_valid(&unknown_member));

        let mut no_product = good;
        no_product["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("product");
        no_product["metadata"]["version"] = json!(1);
        assert!(!file_activity.is_valid(&no_product));
    }
}
