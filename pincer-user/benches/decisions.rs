//! Decisions per second in the twin with local voters, on one core: a raw
//! ring-buffer record is parsed, sanitized into a request (path joined and
//! escaped, names decoded), voted on by the mission voter, and the verdict
//! encoded as the bytes written into the kernel's verdict map.
//!
//! Reading `/proc` for the process facts is left out: it is per parked
//! request, not per decision of the engine, and costs what the kernel
//! charges for three small file reads.
//!
//! Run with `cargo bench -p pincer-user --bench decisions` (or
//! `cargo xtask bench --host`). Prints figures; asserts nothing.

use std::{hint::black_box, path::PathBuf, time::Instant};

use pincer::voters::mission::MissionVoter;
use pincer_common::{AccessEvent, Verdict, event_flags, ops, verdict};
use pincer_model::{
    events::{self, Mounts},
    vote::{
        Extent, Lifetime, Vote,
        rules::{Rule, RuleVerdict},
    },
};

fn event(components: &[&str]) -> AccessEvent {
    let names: Vec<&[u8]> = components.iter().map(|name| name.as_bytes()).collect();
    AccessEvent {
        cgroup_id: 4242,
        dev: 26,
        ino: 99,
        request_id: 1,
        parent_ino: 98,
        pid: 1000,
        tgid: 1000,
        ops: ops::READ,
        granted: 0,
        verdict: verdict::PARKED,
        flags: event_flags::ROOT_REACHED,
        ..events::example(b"node", &names)
    }
}

fn rule(path: &str, verdict: RuleVerdict, line: usize) -> Rule {
    Rule {
        path: PathBuf::from(path),
        extent: Extent::Tree,
        ops: ops::ALL,
        verdict,
        reason: None,
        line,
    }
}

fn main() {
    let mounts = Mounts::parse("22 1 0:26 / / rw - tmpfs tmpfs rw\n");
    let voter = MissionVoter::new(vec![
        rule("/home/alice/.ssh", RuleVerdict::Deny, 10),
        rule("/home/alice/.aws", RuleVerdict::Deny, 14),
        rule("/etc", RuleVerdict::Deny, 18),
        rule("/home/alice/docs", RuleVerdict::Allow(Lifetime::Once), 22),
    ]);
    // Leaf first, as the kernel sends them.
    let records: Vec<Vec<u8>> = [
        event(&["id_ed25519", ".ssh", "alice", "home"]),
        event(&["notes.md", "2026", "docs", "alice", "home"]),
        event(&[
            "package.json",
            "node_modules",
            "app",
            "src",
            "alice",
            "home",
        ]),
    ]
    .iter()
    .map(|e| {
        // SAFETY: AccessEvent is plain old data.
        unsafe {
            std::slice::from_raw_parts(
                (e as *const AccessEvent).cast::<u8>(),
                size_of::<AccessEvent>(),
            )
        }
        .to_vec()
    })
    .collect();

    let decide = |bytes: &[u8]| {
        let event = events::parse(bytes).expect("a whole record");
        let request = events::sanitize(&event, &mounts, "bench", None, Vec::new());
        let vote = voter.decide(&request);
        let verdict = Verdict {
            id: request.id,
            allow: u32::from(matches!(vote, Vote::Allow { .. })),
            _pad: 0,
            pin_dev: 0,
            pin_ino: 0,
        };
        // The bytes the map update sends.
        // SAFETY: Verdict is plain old data.
        let bytes: [u8; size_of::<Verdict>()] = unsafe { std::mem::transmute(verdict) };
        black_box(bytes);
    };

    for _ in 0..50_000 {
        decide(black_box(&records[0]));
    }
    const N: usize = 2_000_000;
    let mut rounds = Vec::new();
    for _ in 0..5 {
        let start = Instant::now();
        for i in 0..N {
            decide(black_box(&records[i % records.len()]));
        }
        rounds.push(N as f64 / start.elapsed().as_secs_f64());
    }
    rounds.sort_by(f64::total_cmp);
    println!(
        "decisions per second, one core: sanitize + mission voter (4 rules) + verdict encoding"
    );
    println!(
        "  median {:.0}/s ({:.0} ns each), best {:.0}/s, worst {:.0}/s  (target >= 1,000,000/s)",
        rounds[2],
        1e9 / rounds[2],
        rounds[4],
        rounds[0]
    );
}
