//! Audit chain verification: the input is a log, verified under a fixed key
//! (the committed seeds are real logs written under it). Verifying never
//! panics and counts the input's lines. When the log verifies, the target
//! also tampers with it, and each tampered log must fail to verify, or at
//! least verify with a warning the original did not have: a bit flipped in
//! any complete line (the unterminated last line of a killed writer is
//! already reported as not covered), a line other than the last removed, a
//! line doubled, two different neighbouring lines swapped. Cutting lines
//! from the end is not among them: a chain cannot show it, the missing close
//! line's warning does.

#![no_main]

use libfuzzer_sys::fuzz_target;
use pincer::audit::{VerifyReport, verify_reader};

/// The key the seeds were written with.
const KEY: &[u8] = b"pincer's fuzzing key, 32 bytes!!";
/// Tampered copies tried for each log that verifies.
const FLIPS: usize = 8;

fn verify(log: &[u8]) -> VerifyReport {
    verify_reader(log, KEY).expect("reading from memory cannot fail")
}

/// The lines of a log, each with its newline; the last may have none.
fn lines(log: &[u8]) -> Vec<&[u8]> {
    log.split_inclusive(|&b| b == b'\n').collect()
}

/// Whether a tampered log verifies without a new warning: what tampering
/// must never achieve.
fn passes_for(original: &[String], tampered: &VerifyReport) -> bool {
    match tampered {
        VerifyReport::Broken { .. } => false,
        VerifyReport::Intact { warnings, .. } => warnings.iter().all(|w| original.contains(w)),
    }
}

fuzz_target!(|data: &[u8]| {
    let report = verify(data);
    let lines = lines(data);
    let warnings = match &report {
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
            warnings
        }
    };

    // The complete lines: all but an unterminated last one.
    let complete = lines.iter().filter(|line| line.ends_with(b"\n")).count();
    let covered: usize = lines[..complete].iter().map(|line| line.len()).sum();
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
        assert!(
            !passes_for(warnings, &result),
            "{what} went unnoticed: {result}\noriginal: {report}\n{}",
            String::from_utf8_lossy(tampered)
        );
    };

    if covered > 0 {
        for _ in 0..FLIPS {
            let at = next(covered);
            let bit = next(8);
            let mut tampered = data.to_vec();
            tampered[at] ^= 1 << bit;
            assert_caught(format!("bit {bit} of byte {at} flipped"), &tampered);
        }
    }
    if complete >= 2 {
        let i = next(complete - 1);
        let without: Vec<u8> = lines
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .flat_map(|(_, line)| line.iter().copied())
            .collect();
        assert_caught(format!("line {} removed", i + 1), &without);
        if lines[i] != lines[i + 1] {
            let mut swapped = lines.clone();
            swapped.swap(i, i + 1);
            assert_caught(
                format!("lines {} and {} swapped", i + 1, i + 2),
                &swapped.concat(),
            );
        }
    }
    if complete >= 1 {
        let i = next(complete);
        let mut doubled = lines.clone();
        doubled.insert(i, lines[i]);
        assert_caught(format!("line {} doubled", i + 1), &doubled.concat());
    }
});
