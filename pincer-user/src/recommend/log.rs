//! Reading the decisions out of an audit log: its chain verified as
//! `pincer audit verify` does, then its lines read with the audit module's
//! bounded reader.

use std::{io::BufReader, path::Path};

use pincer_common::ops;
use pincer_model::audit::{self, AuditError, VerifyReport};
use serde::Deserialize;

use super::RecommendError;

/// The log to read.
pub(super) struct Source<'a> {
    /// The log.
    pub path: &'a Path,
    /// Its key.
    pub key: &'a Path,
    /// Read it even when its chain does not verify.
    pub unverified: bool,
    /// Only the decisions of this mission.
    pub mission: Option<&'a str>,
}

/// Whether the chain vouched for the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Verification {
    /// Intact.
    Verified,
    /// Not verified (`--unverified`), and why.
    Unverified(String),
}

/// One kernel decision, as its audit line has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Decision {
    /// `allow`, `deny`, `audit` or `park`.
    pub verdict: String,
    /// The operations asked for, as bits of [`ops`].
    pub ops: u32,
    /// The object's path, escaped (empty for what names no file).
    pub path: String,
    /// Why the kernel decided so.
    pub reason: String,
    /// The hook that decided.
    pub hook: String,
    /// The object's inode (a capability's number at `capable`).
    pub ino: u64,
    /// The task's `comm`, escaped.
    pub comm: String,
}

/// What a log says.
#[derive(Debug, Clone)]
pub(super) struct Logged {
    /// The mission the decisions are of.
    pub mission: String,
    /// The decisions, in the log's order.
    pub decisions: Vec<Decision>,
    /// The `time` of the first and the last.
    pub first: String,
    /// See `first`.
    pub last: String,
    /// Whether the chain vouched for them.
    pub verification: Verification,
    /// What the chain does not vouch for.
    pub warnings: Vec<String>,
}

/// An audit line as far as a decision goes; every member optional, so
/// that what is missing is named.
#[derive(Deserialize)]
struct Line {
    event: Option<String>,
    chain: Option<String>,
    mission: Option<String>,
    time: Option<String>,
    verdict: Option<String>,
    operation: Option<Vec<String>>,
    path: Option<String>,
    reason: Option<String>,
    hook: Option<String>,
    ino: Option<u64>,
    comm: Option<String>,
    /// A verdict's request.
    request: Option<Asked>,
    /// Who decided a verdict.
    decided_by: Option<String>,
}

/// What a parked request asked, as its verdict line has it.
#[derive(Deserialize)]
struct Asked {
    operation: Option<Vec<String>>,
    path: Option<String>,
    hook: Option<String>,
    comm: Option<String>,
}

/// Verifies the log's chain, then reads its decisions (of `source.mission`,
/// or of the one mission it has).
pub(super) fn read(source: &Source<'_>) -> Result<Logged, RecommendError> {
    let log = source.path;
    let (verification, lines, warnings) = verify(source)?;
    let verified = verification == Verification::Verified;
    let file = audit::open_log(log)?;
    let read_error = |error| AuditError::Read {
        path: log.to_owned(),
        source: error,
    };
    let malformed = |line, problem: String| RecommendError::Malformed {
        log: log.to_owned(),
        line,
        problem,
    };
    let mut reader = BufReader::new(file);
    let mut buf = Vec::new();
    let mut number = 0;
    let mut missions: Vec<String> = Vec::new();
    // Only the chosen mission's are kept: the one asked for, or the first
    // (a second one is an error at the end).
    let mut chosen: Option<String> = source.mission.map(str::to_owned);
    let (mut first, mut last) = (None, String::new());
    let mut decisions: Vec<Decision> = Vec::new();
    while let Some(end) = audit::read_line(&mut reader, &mut buf).map_err(read_error)? {
        number += 1;
        // What a writer appended after the chain was verified is not read.
        if lines.is_some_and(|verified| number > verified) {
            break;
        }
        if buf.trim_ascii().is_empty() && end.overlong.is_none() {
            continue;
        }
        let parsed = match end.overlong {
            Some((len, _)) => Err(format!("{len} bytes, longer than any audit line")),
            None => serde_json::from_slice::<Line>(&buf)
                .map_err(|error| format!("not an audit record ({error})")),
        };
        let line = match parsed {
            Ok(line) => line,
            // A line the chain sets aside (a restart follows it, or a
            // killed writer left it last): the verifier warned about it.
            Err(_) if verified => continue,
            Err(problem) => return Err(malformed(number, problem)),
        };
        if line.chain.is_some() {
            continue;
        }
        let mission = line.mission.clone().unwrap_or_default();
        let time = line.time.clone().unwrap_or_default();
        let decision = match line.event.as_deref() {
            // A parked access is decided by its verdict, further on.
            None | Some("decision") if line.verdict.as_deref() == Some("park") => continue,
            None | Some("decision") => decision(line),
            Some("verdict") => verdict(line),
            _ => continue,
        };
        let decision = decision.map_err(|problem| malformed(number, problem))?;
        if !missions.contains(&mission) {
            missions.push(mission.clone());
        }
        let chosen = chosen.get_or_insert_with(|| mission.clone());
        if *chosen == mission {
            first.get_or_insert_with(|| time.clone());
            last = time;
            decisions.push(decision);
        }
    }
    let found = || {
        missions
            .iter()
            .map(|name| format!("{name:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mission = match source.mission {
        Some(name) if missions.iter().any(|m| m == name) => name.to_owned(),
        Some(name) if !missions.is_empty() => {
            return Err(RecommendError::NoSuchMission {
                log: log.to_owned(),
                name: name.to_owned(),
                found: found(),
            });
        }
        None if missions.len() > 1 => {
            return Err(RecommendError::SeveralMissions {
                log: log.to_owned(),
                found: found(),
            });
        }
        _ => match missions.first() {
            Some(name) => name.clone(),
            None => {
                return Err(RecommendError::NoDecisions {
                    log: log.to_owned(),
                });
            }
        },
    };
    Ok(Logged {
        mission,
        decisions,
        first: first.unwrap_or_default(),
        last,
        verification,
        warnings,
    })
}

/// The chain's verdict on the log, with the lines it verified and what it
/// does not vouch for as warnings; a broken chain, or a key that cannot be
/// read, refuses the log unless it is read unverified. A log that cannot be
/// read is refused in any case.
fn verify(
    source: &Source<'_>,
) -> Result<(Verification, Option<usize>, Vec<String>), RecommendError> {
    let log = source.path;
    let unverified = |why: String| Ok((Verification::Unverified(why), None, Vec::new()));
    match audit::verify_file(log, source.key) {
        Ok(VerifyReport::Intact {
            lines, warnings, ..
        }) => Ok((
            Verification::Verified,
            Some(lines),
            warnings
                .into_iter()
                .map(|warning| format!("{}: {warning}", log.display()))
                .collect(),
        )),
        Ok(VerifyReport::Broken { line, problem }) if source.unverified => {
            unverified(format!("broken: line {line}: {problem}"))
        }
        Ok(VerifyReport::Broken { line, problem }) => Err(RecommendError::Broken {
            log: log.to_owned(),
            line,
            problem,
        }),
        Err(error @ (AuditError::ReadKey { .. } | AuditError::KeyLength { .. }))
            if source.unverified =>
        {
            unverified(format!("{:#}", anyhow::Error::new(error)))
        }
        Err(error @ (AuditError::ReadKey { .. } | AuditError::KeyLength { .. })) => {
            Err(RecommendError::Unverifiable {
                log: log.to_owned(),
                source: error,
            })
        }
        Err(error) => Err(error.into()),
    }
}

/// The verdict on a parked request as the access it decided: what was
/// asked, allowed (and used) or refused (and why).
fn verdict(line: Line) -> Result<Decision, String> {
    let missing = |member: &str| format!("a verdict without `{member}`");
    let asked = line.request.ok_or_else(|| missing("request"))?;
    let verdict = line.verdict.ok_or_else(|| missing("verdict"))?;
    let reason = if verdict == "allow" {
        "allowed when asked".to_owned()
    } else {
        format!(
            "refused when asked, by {}: {}",
            line.decided_by.unwrap_or_default(),
            line.reason.unwrap_or_default()
        )
    };
    Ok(Decision {
        verdict,
        ops: op_bits(
            asked
                .operation
                .ok_or_else(|| missing("request.operation"))?,
        )?,
        path: asked.path.ok_or_else(|| missing("request.path"))?,
        reason,
        hook: asked.hook.ok_or_else(|| missing("request.hook"))?,
        ino: 0,
        comm: asked.comm.unwrap_or_default(),
    })
}

/// Operation names as bits of [`ops`].
fn op_bits(names: Vec<String>) -> Result<u32, String> {
    let mut bits = 0;
    for name in names {
        let (bit, _) = ops::NAMES
            .iter()
            .find(|(_, known)| *known == name)
            .ok_or_else(|| format!("an unknown operation {name:?}"))?;
        bits |= bit;
    }
    Ok(bits)
}

/// A decision line's members, or what it lacks.
fn decision(line: Line) -> Result<Decision, String> {
    let missing = |member: &str| format!("a decision without `{member}`");
    let bits = op_bits(line.operation.ok_or_else(|| missing("operation"))?)?;
    Ok(Decision {
        verdict: line.verdict.ok_or_else(|| missing("verdict"))?,
        ops: bits,
        path: line.path.ok_or_else(|| missing("path"))?,
        reason: line.reason.ok_or_else(|| missing("reason"))?,
        hook: line.hook.ok_or_else(|| missing("hook"))?,
        ino: line.ino.unwrap_or_default(),
        comm: line.comm.unwrap_or_default(),
    })
}
