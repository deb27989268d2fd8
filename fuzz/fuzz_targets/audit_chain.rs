//! Audit chain verification: the input is a log, verified under a fixed key
//! (the committed seeds are real logs written under it). Verifying never
//! panics and counts the input's lines. When the log verifies, the target
//! also tampers with it, and each tampered log must fail to verify, or
//! verify with a kind of warning the original did not have: a bit flipped
//! in a complete line, a line removed, a line doubled, two different
//! neighbouring lines swapped.
//!
//! Left out, because a chain cannot show it: tampering with the last line
//! of a chain, the line that ends the log or that a malformed line follows
//! (cutting lines there is cutting a chain short; the missing close line's
//! warning, or the malformed line's, is what tells), and the unterminated
//! last line of a killed writer, which is already reported as not covered.

#![no_main]

use libfuzzer_sys::fuzz_target;
use pincer_model::audit::{VerifyReport, verify_reader};

/// The key the seeds were written with.
const KEY: &[u8] = b"pincer's fuzzing key, 32 bytes!!";
/// Tampered copies with a flipped bit tried for each log that verifies.
const FLIPS: usize = 8;

fn verify(log: &[u8]) -> VerifyReport {
    verify_reader(log, KEY).expect("reading from memory cannot fail")
}

/// Whether the verifier finds a line malformed, on its own.
fn malformed(line: &[u8]) -> bool {
    let mut alone = line.to_vec();
    if !alone.ends_with(b"\n") {
        alone.push(b'\n');
    }
    matches!(verify(&alone), VerifyReport::Broken { problem, .. } if problem.starts_with("malformed"))
}

/// A warning without its numbers: what kind of warning it is.
fn kind(warning: &str) -> String {
    warning.replace(|c: char| c.is_ascii_digit(), "")
}

fuzz_target!(|data: &[u8]| {
    let report = verify(data);
    let lines: Vec<&[u8]> = data.split_inclusive(|&b| b == b'\n').collect();
    let warnings: Vec<String> = match &report {
        VerifyReport::Broken { line, .. } => {
            assert!((1..=lines.len()).contains(line), "{report}");
            return;
        }
        VerifyReport::Intact {
            lines: counted,
            warnings,
            ..
        } => {
            assert_eq!(*counted, lines.len(), "{report}");
            warnings.iter().map(|w| kind(w)).collect()
        }
    };

    // The complete lines: all but an unterminated last one.
    let complete = lines.iter().filter(|line| line.ends_with(b"\n")).count();
    let bad: Vec<bool> = lines.iter().map(|line| malformed(line)).collect();
    let chain_end = |i: usize| !bad[i] && (i + 1 == lines.len() || bad[i + 1]);

    let mut seed = data.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    let mut next = |bound: usize| {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (seed >> 33) as usize % bound
    };
    let assert_caught = |what: String, tampered: &[u8]| {
        let result = verify(tampered);
        let unnoticed = match &result {
            VerifyReport::Broken { .. } => false,
            VerifyReport::Intact { warnings: now, .. } => {
                now.iter().all(|w| warnings.contains(&kind(w)))
            }
        };
        assert!(
            !unnoticed,
            "{what} went unnoticed: {result}\noriginal: {report}\n{}",
            String::from_utf8_lossy(tampered)
        );
    };

    let inner: Vec<usize> = (0..complete).filter(|&i| !chain_end(i)).collect();
    if !inner.is_empty() {
        for _ in 0..FLIPS {
            let i = inner[next(inner.len())];
            let start: usize = lines[..i].iter().map(|line| line.len()).sum();
            let at = start + next(lines[i].len());
            let bit = next(8);
            let mut tampered = data.to_vec();
            tampered[at] ^= 1 << bit;
            assert_caught(
                format!("bit {bit} of byte {at} (line {}) flipped", i + 1),
                &tampered,
            );
        }
        let i = inner[next(inner.len())];
        let mut without = lines.clone();
        without.remove(i);
        assert_caught(format!("line {} removed", i + 1), &without.concat());
    }
    if complete >= 1 {
        let i = next(complete);
        let mut doubled = lines.clone();
        doubled.insert(i, lines[i]);
        assert_caught(format!("line {} doubled", i + 1), &doubled.concat());
    }
    if complete >= 2 {
        let i = next(complete - 1);
        if lines[i] != lines[i + 1] {
            let mut swapped = lines.clone();
            swapped.swap(i, i + 1);
            assert_caught(
                format!("lines {} and {} swapped", i + 1, i + 2),
                &swapped.concat(),
            );
        }
    }
});
