//! The audit log's tests: the chain, its sealing and its verification, apart
//! so the log itself reads without them.

use std::{fs, os::unix::fs::PermissionsExt};

use super::*;
use crate::{events::Decision, paths::default_key_path};

fn decision(n: u32) -> Decision {
    Decision::example(&format!("/x/{n}"))
}

/// A log of `n` decisions, closed; returns its key.
fn write_log(path: &Path, n: u32) -> Vec<u8> {
    let mut log = AuditLog::open(Some(path), "m").unwrap();
    for i in 0..n {
        log.record(&decision(i)).unwrap();
    }
    log.close().unwrap();
    read_key(&default_key_path(path)).unwrap()
}

/// A log path in a new temporary directory; the directory goes away
/// when the returned `TempDir` is dropped.
fn temp_log_path() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    (dir, path)
}

/// Verifies the log at `path` with the key file beside it.
fn verify_with_default_key(path: &Path) -> VerifyReport {
    let key = read_key(&default_key_path(path)).unwrap();
    verify(path, &key).unwrap()
}

fn lines(path: &Path) -> Vec<String> {
    fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn write_lines(path: &Path, lines: &[String]) {
    fs::write(
        path,
        lines.iter().map(|l| format!("{l}\n")).collect::<String>(),
    )
    .unwrap();
}

/// Verifies a closed log of `n` decisions after `edit` changed its
/// lines.
fn verify_edited(n: u32, edit: impl FnOnce(&mut Vec<String>)) -> VerifyReport {
    let (_dir, path) = temp_log_path();
    let key = write_log(&path, n);
    let mut lines = lines(&path);
    edit(&mut lines);
    write_lines(&path, &lines);
    verify(&path, &key).unwrap()
}

fn json(line: &str) -> serde_json::Value {
    serde_json::from_str(line).unwrap()
}

#[track_caller]
fn assert_broken(report: &VerifyReport, at: usize, says: &str) {
    match report {
        VerifyReport::Broken { line, problem } => {
            assert_eq!(*line, at, "{problem}");
            assert!(problem.contains(says), "{problem}");
        }
        intact @ VerifyReport::Intact { .. } => {
            panic!("expected broken at line {at}, got {intact:?}")
        }
    }
}

#[track_caller]
fn assert_intact(report: &VerifyReport, at_lines: usize, at_restarts: usize) -> Vec<String> {
    match report {
        VerifyReport::Intact {
            lines,
            restarts,
            warnings,
        } => {
            assert_eq!((*lines, *restarts), (at_lines, at_restarts), "{warnings:?}");
            warnings.clone()
        }
        broken @ VerifyReport::Broken { .. } => panic!("expected intact, got {broken}"),
    }
}

#[test]
fn record_writes_one_chained_json_line_per_decision() {
    let (_dir, path) = temp_log_path();
    let mut log = AuditLog::open(Some(&path), "m").unwrap();
    log.record(&decision(0)).unwrap();
    log.record(&decision(1)).unwrap();
    let lines = lines(&path);
    assert_eq!(lines.len(), 2);
    let (first, second) = (json(&lines[0]), json(&lines[1]));
    assert_eq!(first["mission"], "m");
    assert_eq!(first["path"], "/x/0");
    assert_eq!(first["verdict"], "deny");
    assert!(first["time"].as_str().unwrap().ends_with('Z'));
    assert_eq!((&first["seq"], &second["seq"]), (&0.into(), &1.into()));
    assert_eq!(first["prev"], CHAIN_START);
    assert_eq!(second["prev"], first["mac"]);
    // The chain's members frame the record's, and the mac comes last.
    assert!(lines[0].starts_with(r#"{"time":""#), "{}", lines[0]);
    assert!(lines[0].contains(r#""seq":0,"pid":1,"#), "{}", lines[0]);
    let mac = first["mac"].as_str().unwrap();
    assert!(lines[0].ends_with(&format!(r#","prev":"{CHAIN_START}","mac":"{mac}"}}"#)));
}

#[test]
fn the_mac_covers_the_line_without_its_mac_member() {
    let (_dir, path) = temp_log_path();
    let key = write_log(&path, 1);
    let line = &lines(&path)[0];
    let mac = json(line)["mac"].as_str().unwrap().to_owned();
    let canonical = line.replace(&format!(r#","mac":"{mac}""#), "");
    let mut expected = HmacSha256::new_from_slice(&key).unwrap();
    expected.update(canonical.as_bytes());
    assert_eq!(hex::encode(expected.finalize().into_bytes()), mac);
}

#[test]
fn a_closed_chain_verifies_intact() {
    let (_dir, path) = temp_log_path();
    let key = write_log(&path, 10);
    let report = verify(&path, &key).unwrap();
    assert!(assert_intact(&report, 11, 0).is_empty());
    assert_eq!(report.to_string(), "intact: 11 line(s), 0 restart(s)");
    let close = json(lines(&path).last().unwrap());
    assert_eq!(
        (&close["chain"], &close["records"]),
        (&"close".into(), &10.into())
    );
}

#[test]
fn a_one_byte_edit_anywhere_in_a_line_breaks_that_line() {
    let (_dir, path) = temp_log_path();
    let key = write_log(&path, 6);
    let original = fs::read(&path).unwrap();
    let starts: Vec<usize> = std::iter::once(0)
        .chain(
            original
                .iter()
                .enumerate()
                .filter(|(_, b)| **b == b'\n')
                .map(|(i, _)| i + 1),
        )
        .collect();
    let (start, end) = (starts[3], starts[4]);
    // Every byte of line 4, its newline included.
    for at in start..end {
        let mut edited = original.clone();
        edited[at] = if edited[at] == b'0' { b'1' } else { b'0' };
        fs::write(&path, &edited).unwrap();
        let report = verify(&path, &key).unwrap();
        assert_broken(&report, 4, "");
    }
    // A field's value, and the mac itself: still well-formed lines.
    for (needle, offset) in [(&b"/x/3"[..], 3), (b",\"mac\":\"", 8)] {
        let at = start
            + original[start..end]
                .windows(needle.len())
                .position(|w| w == needle)
                .unwrap()
            + offset;
        let mut edited = original.clone();
        edited[at] = if edited[at] == b'a' { b'b' } else { b'a' };
        fs::write(&path, &edited).unwrap();
        let report = verify(&path, &key).unwrap();
        assert_broken(&report, 4, "mac mismatch (the line was edited");
        assert!(
            report
                .to_string()
                .starts_with("broken: line 4: mac mismatch")
        );
    }
}

#[test]
fn a_removed_line_breaks_the_line_after_the_gap() {
    assert_broken(
        &verify_edited(6, |lines| {
            lines.remove(3);
        }),
        4,
        "prev does not match line 3 (a line was removed or reordered: seq 4 follows 2)",
    );
}

#[test]
fn swapped_lines_break_at_the_first() {
    assert_broken(
        &verify_edited(6, |lines| lines.swap(2, 3)),
        3,
        "prev does not match line 2",
    );
}

#[test]
fn a_removed_beginning_breaks_line_1() {
    assert_broken(
        &verify_edited(3, |lines| {
            lines.remove(0);
        }),
        1,
        "seq 1 does not start a chain",
    );
}

#[test]
fn the_wrong_key_breaks_line_1() {
    let (_dir, path) = temp_log_path();
    write_log(&path, 3);
    assert_broken(&verify(&path, &[7; KEY_LEN]).unwrap(), 1, "mac mismatch");
}

#[test]
fn a_missing_close_line_is_a_warning() {
    let report = verify_edited(3, |lines| lines.truncate(3));
    let warnings = assert_intact(&report, 3, 0);
    assert_eq!(warnings.len(), 1);
    assert!(
        warnings[0].starts_with("no close line at the end"),
        "{warnings:?}"
    );
    assert!(report.to_string().contains("\nwarning: no close line"));
}

#[test]
fn opening_again_continues_the_chain() {
    let (_dir, path) = temp_log_path();
    let key = write_log(&path, 3);
    let mut log = AuditLog::open(Some(&path), "m2").unwrap();
    log.record(&decision(3)).unwrap();
    log.record(&decision(4)).unwrap();
    // Dropping closes too.
    drop(log);
    let lines = lines(&path);
    assert_eq!(lines.len(), 7);
    let first_appended = json(&lines[4]);
    assert_eq!(first_appended["seq"], 4);
    assert_eq!(first_appended["mission"], "m2");
    assert_eq!(first_appended["prev"], json(&lines[3])["mac"]);
    assert_eq!(json(&lines[6])["chain"], "close");
    assert!(assert_intact(&verify(&path, &key).unwrap(), 7, 0).is_empty());
    let summary = Summary::from_lines(lines.iter().map(String::as_str));
    assert_eq!(summary.verdicts, [("deny".to_owned(), 5)]);
    assert_eq!(summary.unreadable, 0);
}

#[test]
fn the_key_file_is_created_private_and_reused() {
    let (dir, path) = temp_log_path();
    let key_path = dir.path().join("audit.jsonl.key");
    assert_eq!(default_key_path(&path), key_path);
    AuditLog::open(Some(&path), "m").unwrap().close().unwrap();
    let meta = fs::metadata(&key_path).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let key = fs::read(&key_path).unwrap();
    assert_eq!(key.len(), KEY_LEN);
    AuditLog::open(Some(&path), "m").unwrap().close().unwrap();
    assert_eq!(fs::read(&key_path).unwrap(), key);
    assert_eq!(read_key(&key_path).unwrap(), key);
    assert!(assert_intact(&verify(&path, &key).unwrap(), 2, 0).is_empty());
}

#[test]
fn a_given_key_file_is_used_instead() {
    let (dir, path) = temp_log_path();
    let key_path = dir.path().join("elsewhere.key");
    let log = AuditLog::open_with_key(Some(&path), "m", AuditKey::File(key_path.clone()));
    log.unwrap().close().unwrap();
    assert!(!default_key_path(&path).exists());
    let key = read_key(&key_path).unwrap();
    assert_intact(&verify(&path, &key).unwrap(), 1, 0);
}

#[test]
fn a_key_file_of_the_wrong_length_is_refused_by_name() {
    let (_dir, path) = temp_log_path();
    let key_path = default_key_path(&path);
    fs::write(&key_path, [1; 16]).unwrap();
    let Err(error) = AuditLog::open(Some(&path), "m") else {
        panic!("a 16-byte key was accepted");
    };
    assert!(matches!(
        error,
        AuditError::KeyLength {
            len: 16,
            too_long: false,
            ..
        }
    ));
    let message = error.to_string();
    assert!(
        message.contains(&key_path.display().to_string()),
        "{message}"
    );
    assert!(message.contains("holds 16 bytes"), "{message}");
    fs::write(&key_path, [1; MAX_KEY_LEN + 100]).unwrap();
    let error = read_key(&key_path).unwrap_err().to_string();
    assert!(error.contains("more than 4096"), "{error}");
}

#[test]
fn standard_error_gets_an_ephemeral_key() {
    assert_eq!(AuditKey::default_for(None), AuditKey::Ephemeral);
    assert_eq!(
        AuditKey::default_for(Some(Path::new("/var/log/a.jsonl"))),
        AuditKey::File("/var/log/a.jsonl.key".into())
    );
    let (a, b) = (
        AuditKey::Ephemeral.load().unwrap(),
        AuditKey::Ephemeral.load().unwrap(),
    );
    assert_eq!(a.len(), KEY_LEN);
    assert_ne!(a, b);
}

/// A log of 3 records whose writer died in the middle of a 4th line,
/// then opened again for one record; returns its key.
fn restarted_log(path: &Path, cut: &str) -> Vec<u8> {
    let key = write_log(path, 3);
    let mut lines = lines(path);
    lines.pop();
    let mut text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    text.push_str(cut);
    fs::write(path, text).unwrap();
    let mut log = AuditLog::open(Some(path), "m").unwrap();
    log.record(&decision(9)).unwrap();
    log.close().unwrap();
    key
}

#[test]
fn an_overlong_last_line_is_set_aside_without_being_read_whole() {
    // What a writer would abort on if it read the line into memory (an
    // 8 GiB line takes only longer): the writer hashes it in chunks,
    // and verify streams it.
    let (_dir, path) = temp_log_path();
    let cut = "x".repeat(MAX_LINE_BYTES * 2 + 3);
    let key = restarted_log(&path, &cut);
    let restart = json(&lines(&path)[4]);
    assert_eq!(restart["chain"], "restart");
    assert_eq!(restart["abandoned"], sha256_hex(cut.as_bytes()));
    let warnings = assert_intact(&verify(&path, &key).unwrap(), 7, 1);
    assert!(
        warnings[0].starts_with(&format!(
            "line 4 is malformed ({} bytes, longer than any line)",
            cut.len()
        )),
        "{warnings:?}"
    );
}

#[test]
fn a_malformed_last_line_starts_a_new_chain() {
    let (dir, path) = temp_log_path();
    let cut = r#"{"time":"2025-06-01T09:30:00.1"#;
    let key = restarted_log(&path, cut);
    let lines = lines(&path);
    assert_eq!(lines.len(), 7);
    // Kept as it was, ended by a newline.
    assert_eq!(lines[3], cut);
    let restart = json(&lines[4]);
    assert_eq!(restart["chain"], "restart");
    assert_eq!(restart["seq"], 0);
    assert_eq!(restart["prev"], CHAIN_START);
    assert_eq!(restart["abandoned"], sha256_hex(cut.as_bytes()));
    assert_eq!(json(&lines[5])["seq"], 1);
    let warnings = assert_intact(&verify(&path, &key).unwrap(), 7, 1);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with("line 4 is malformed"),
        "{warnings:?}"
    );
    assert!(
        warnings[0].ends_with("a new chain starts on line 5"),
        "{warnings:?}"
    );
    let summary = Summary::from_lines(lines.iter().map(String::as_str));
    assert_eq!(summary.verdicts, [("deny".to_owned(), 4)]);
    assert_eq!(summary.unreadable, 1);

    // A whole line of something else is set aside the same way.
    let path = dir.path().join("other.jsonl");
    let key = restarted_log(&path, "garbage\n");
    assert_eq!(self::lines(&path)[3], "garbage");
    assert_intact(&verify(&path, &key).unwrap(), 7, 1);
}

#[test]
fn the_line_a_restart_set_aside_cannot_be_edited_or_removed() {
    let (_dir, path) = temp_log_path();
    let key = restarted_log(&path, "{\"cut");
    let original = lines(&path);

    let mut edited = original.clone();
    edited[3] = "{\"cuT".to_owned();
    write_lines(&path, &edited);
    assert_broken(
        &verify(&path, &key).unwrap(),
        4,
        "restart on line 5 set aside",
    );

    let mut removed = original.clone();
    removed.remove(3);
    write_lines(&path, &removed);
    assert_broken(&verify(&path, &key).unwrap(), 4, "restart line without");

    // Without the restart line, the malformed line is just broken.
    let mut removed = original;
    removed.remove(4);
    write_lines(&path, &removed);
    assert_broken(&verify(&path, &key).unwrap(), 4, "malformed: ");
}

#[test]
fn an_incomplete_last_line_is_a_warning_and_a_complete_one_is_not() {
    let (_dir, path) = temp_log_path();
    let key = write_log(&path, 2);
    let mut text = fs::read_to_string(&path).unwrap();
    text.push_str("{\"time\":");
    fs::write(&path, &text).unwrap();
    let warnings = assert_intact(&verify(&path, &key).unwrap(), 4, 0);
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(
        warnings[0].starts_with("line 4 is incomplete"),
        "{warnings:?}"
    );
    assert!(warnings[1].starts_with("no close line"), "{warnings:?}");

    text.push('\n');
    fs::write(&path, &text).unwrap();
    assert_broken(&verify(&path, &key).unwrap(), 4, "malformed: ");
}

#[test]
fn two_writers_share_one_chain() {
    let (_dir, path) = temp_log_path();
    let mut a = AuditLog::open(Some(&path), "a").unwrap();
    let mut b = AuditLog::open(Some(&path), "b").unwrap();
    a.record(&decision(0)).unwrap();
    b.record(&decision(1)).unwrap();
    a.record(&decision(2)).unwrap();
    a.close().unwrap();
    b.record(&decision(3)).unwrap();
    b.close().unwrap();
    assert!(assert_intact(&verify_with_default_key(&path), 6, 0).is_empty());
    let missions: Vec<_> = lines(&path)
        .iter()
        .map(|l| json(l)["mission"].clone())
        .collect();
    assert_eq!(missions, ["a", "b", "a", "a", "b", "b"]);
}

#[test]
fn a_log_cut_while_open_is_not_chained_over() {
    let (_dir, path) = temp_log_path();
    let mut log = AuditLog::open(Some(&path), "m").unwrap();
    for i in 0..3 {
        log.record(&decision(i)).unwrap();
    }
    let lines = lines(&path);
    write_lines(&path, &lines[..2]);
    log.record(&decision(3)).unwrap();
    log.close().unwrap();
    assert_broken(&verify_with_default_key(&path), 3, "seq 3 follows 1");
}

#[test]
fn any_object_is_a_record() {
    #[derive(Serialize)]
    struct Verdict {
        verdict: &'static str,
        votes: Vec<(&'static str, bool)>,
        decided_by: &'static str,
        lifetime: Option<u64>,
    }
    let (_dir, path) = temp_log_path();
    let mut log = AuditLog::open(Some(&path), "m").unwrap();
    log.record(&Verdict {
        verdict: "allow",
        votes: vec![("prompt", true)],
        decided_by: "prompt",
        lifetime: None,
    })
    .unwrap();
    log.record(&serde_json::json!({})).unwrap();
    log.record(&serde_json::json!({"event": "note", "n": 1}))
        .unwrap();
    log.close().unwrap();
    let lines = lines(&path);
    let verdict = json(&lines[0]);
    assert_eq!(verdict["votes"][0][0], "prompt");
    assert_eq!(verdict["lifetime"], serde_json::Value::Null);
    assert!(lines[1].contains(r#""seq":1,"prev":"#), "{}", lines[1]);
    assert_eq!(json(&lines[2])["event"], "note");
    assert!(assert_intact(&verify_with_default_key(&path), 4, 0).is_empty());
}

#[test]
fn records_that_would_break_the_chain_are_refused() {
    let (_dir, path) = temp_log_path();
    let mut log = AuditLog::open(Some(&path), "m").unwrap();
    for reserved in [
        "time",
        "mission",
        "seq",
        "chain",
        "abandoned",
        "prev",
        "mac",
    ] {
        let error = log
            .record(&serde_json::json!({ reserved: "x" }))
            .unwrap_err();
        assert!(matches!(error, AuditError::Reserved), "{reserved}: {error}");
    }
    assert!(matches!(log.record(&42), Err(AuditError::NotAnObject)));
    assert!(matches!(log.record("text"), Err(AuditError::NotAnObject)));
    assert!(matches!(log.record(&[1, 2]), Err(AuditError::NotAnObject)));
    // Refusals leave no line and no gap.
    log.record(&decision(0)).unwrap();
    log.close().unwrap();
    assert!(assert_intact(&verify_with_default_key(&path), 2, 0).is_empty());
}

#[test]
fn records_also_go_to_the_siem_file_outside_the_chain() {
    let (dir, path) = temp_log_path();
    let siem = dir.path().join("ocsf.jsonl");
    let mut log = AuditLog::open(Some(&path), "m")
        .unwrap()
        .with_siem(Some(&siem));
    log.record(&Record::Decision(&decision(0))).unwrap();
    log.record(&Record::Counters {
        counters: Default::default(),
    })
    .unwrap();
    log.close().unwrap();
    let events = lines(&siem);
    // The counters are no activity, and the close line no record.
    assert_eq!(events.len(), 1, "{events:?}");
    let event = json(&events[0]);
    assert_eq!(event["class_uid"], 1001);
    assert!(event.get("mac").is_none() && event.get("prev").is_none());
    assert!(assert_intact(&verify_with_default_key(&path), 3, 0).is_empty());
}

#[test]
fn a_siem_file_that_cannot_be_written_stops_nothing() {
    let (dir, path) = temp_log_path();
    // A directory: opening it for writing fails, every time.
    let mut log = AuditLog::open(Some(&path), "m")
        .unwrap()
        .with_siem(Some(dir.path()));
    log.record(&Record::Decision(&decision(0))).unwrap();
    log.record(&Record::Decision(&decision(1))).unwrap();
    assert_eq!(log.siem_failures(), 2);
    log.close().unwrap();
    assert!(assert_intact(&verify_with_default_key(&path), 3, 0).is_empty());
}

#[test]
fn an_empty_log_verifies_with_a_warning() {
    let (_dir, path) = temp_log_path();
    fs::write(&path, "").unwrap();
    let warnings = assert_intact(&verify(&path, &[0; KEY_LEN]).unwrap(), 0, 0);
    assert_eq!(warnings.len(), 1);
}
