//! Verifying a log's chain: the reader's side, apart from the writer's
//! ([`super::AuditLog`]) because it trusts nothing in the file and reports
//! the first line that breaks the chain instead of failing.

use std::{
    fmt,
    fs::File,
    io::{self, BufRead, BufReader},
    path::Path,
};

use hmac::Mac;

use super::{AuditError, CHAIN_START, HmacSha256, Link, lines, read_key, sha256_hex, unseal};
use crate::files;

/// The outcome of [`verify`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VerifyReport {
    /// Every line is authentic and in its place.
    Intact {
        /// Lines in the file.
        lines: usize,
        /// New chains started after a malformed line.
        restarts: usize,
        /// What the chain does not vouch for: lines set aside by a restart,
        /// an incomplete last line, the lack of a close line at the end.
        warnings: Vec<String>,
    },
    /// The first line that is not.
    Broken {
        /// Its number in the file, from 1.
        line: usize,
        /// What is wrong with it, and what that means.
        problem: String,
    },
}

impl VerifyReport {
    /// Whether the log is intact (warnings or not).
    pub fn is_intact(&self) -> bool {
        matches!(self, Self::Intact { .. })
    }
}

impl fmt::Display for VerifyReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Intact {
                lines,
                restarts,
                warnings,
            } => {
                write!(f, "intact: {lines} line(s), {restarts} restart(s)")?;
                for warning in warnings {
                    write!(f, "\nwarning: {warning}")?;
                }
                Ok(())
            }
            Self::Broken { line, problem } => write!(f, "broken: line {line}: {problem}"),
        }
    }
}

/// Verifies the chain of the log at `log` under `key`.
pub fn verify(log: &Path, key: &[u8]) -> Result<VerifyReport, AuditError> {
    let file = open_log(log)?;
    verify_reader(BufReader::new(file), key).map_err(|source| AuditError::Read {
        path: log.to_owned(),
        source,
    })
}

/// Verifies the chain of the log at `log` under the key in `key`: the log is
/// opened first, so a log that is not there is named as such, not its key.
pub fn verify_file(log: &Path, key: &Path) -> Result<VerifyReport, AuditError> {
    let file = open_log(log)?;
    let key = read_key(key)?;
    verify_reader(BufReader::new(file), &key).map_err(|source| AuditError::Read {
        path: log.to_owned(),
        source,
    })
}

/// Opens a log to read it: a regular file only (a named pipe would wait for a
/// writer forever).
pub fn open_log(log: &Path) -> Result<File, AuditError> {
    files::open_regular(log).map_err(|source| AuditError::Read {
        path: log.to_owned(),
        source,
    })
}

/// A malformed line, until the next line says whether a restart set it
/// aside.
struct Malformed {
    line: usize,
    problem: String,
    digest: String,
    terminated: bool,
}

/// Verifies the chain of a log read from `reader` under `key`, as [`verify`]
/// does for a file. Public so that a log's bytes can be checked without a
/// file behind them: the fuzz targets feed it their inputs.
pub fn verify_reader(mut reader: impl BufRead, key: &[u8]) -> io::Result<VerifyReport> {
    let key = HmacSha256::new_from_slice(key).expect("HMAC takes keys of any length");
    let broken = |line, problem: String| Ok(VerifyReport::Broken { line, problem });
    let mut lines = 0;
    let mut restarts = 0;
    let mut warnings = Vec::new();
    // `None` where a chain must start: the first line, or after a restart.
    let mut next: Option<Link> = None;
    let mut malformed: Option<Malformed> = None;
    let mut closed = false;
    let mut buf = Vec::new();
    while let Some(end) = lines::read_line(&mut reader, &mut buf)? {
        lines += 1;
        let terminated = end.terminated;
        let unsealed = match end.overlong {
            Some((len, digest)) => Err((format!("{len} bytes, longer than any line"), digest)),
            None => unseal(&buf).map_err(|problem| (problem, sha256_hex(&buf))),
        };
        let sealed = match unsealed {
            Ok(sealed) => sealed,
            Err((problem, digest)) => {
                if let Some(earlier) = malformed {
                    return broken(earlier.line, malformed_problem(&earlier.problem));
                }
                malformed = Some(Malformed {
                    line: lines,
                    problem,
                    digest,
                    terminated,
                });
                closed = false;
                continue;
            }
        };
        let authentic = sealed.authentic(&key);
        let members = &sealed.members;
        let restart = members.chain.as_deref() == Some("restart");
        if let Some(earlier) = malformed.take() {
            // Only the restart line a writer put after it, naming it, makes a
            // malformed line acceptable.
            if !(authentic && restart) {
                return broken(earlier.line, malformed_problem(&earlier.problem));
            }
            if members.abandoned.as_deref() != Some(earlier.digest.as_str()) {
                return broken(
                    earlier.line,
                    format!(
                        "not the malformed line the restart on line {lines} set aside \
                         (it was edited)"
                    ),
                );
            }
            restarts += 1;
            next = None;
            warnings.push(format!(
                "line {} is malformed ({}) and not covered by the chain: it was the last \
                 line when the log was opened again, and a new chain starts on line {lines}",
                earlier.line, earlier.problem
            ));
        } else if !authentic {
            return broken(
                lines,
                "mac mismatch (the line was edited, or the key is not this log's)".to_owned(),
            );
        } else if restart {
            return broken(
                lines,
                "a restart line without the malformed line it sets aside before it \
                 (that line was removed)"
                    .to_owned(),
            );
        }
        match &next {
            None if members.seq != 0 || members.prev != CHAIN_START => {
                return broken(
                    lines,
                    format!(
                        "seq {} does not start a chain (the lines before it were removed)",
                        members.seq
                    ),
                );
            }
            Some(link) if members.prev != link.prev => {
                return broken(
                    lines,
                    format!(
                        "prev does not match line {} (a line was removed or reordered: \
                         seq {} follows {})",
                        lines - 1,
                        members.seq,
                        link.seq - 1
                    ),
                );
            }
            Some(link) if members.seq != link.seq => {
                return broken(
                    lines,
                    format!(
                        "seq {} follows {} (a line was removed or reordered)",
                        members.seq,
                        link.seq - 1
                    ),
                );
            }
            _ => {}
        }
        next = Some(sealed.next_link());
        closed = members.chain.as_deref() == Some("close");
    }
    if let Some(last) = malformed {
        if last.terminated {
            return broken(last.line, malformed_problem(&last.problem));
        }
        warnings.push(format!(
            "line {} is incomplete (its writer was killed in the middle of it) and not \
             covered by the chain",
            last.line
        ));
    }
    if !closed {
        warnings.push(
            "no close line at the end: the log may have been truncated, or its writer killed"
                .to_owned(),
        );
    }
    Ok(VerifyReport::Intact {
        lines,
        restarts,
        warnings,
    })
}

fn malformed_problem(problem: &str) -> String {
    format!("malformed: {problem} (the line was edited or corrupted)")
}
