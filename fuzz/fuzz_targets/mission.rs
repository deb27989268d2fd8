//! Mission parsing: any text, as the file `/fuzz/mission.toml` with the home
//! `/home/fuzz`. Parsing never panics; an error points into the text; a
//! mission that parses holds only what its checks allow (absolute paths,
//! known operations, a named mission, a webhook table when the webhook
//! votes, a vote timeout within bounds).

#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use pincer_common::{caps, ops};
use pincer_fuzz::assert_points_into;
use pincer_model::{
    mission::{MAX_VOTE_TIMEOUT, Mission, MissionError},
    vote::VoterKind,
};

const SOURCE: &str = "/fuzz/mission.toml";
const HOME: &str = "/home/fuzz";

fuzz_target!(|data: &[u8]| {
    // Invalid UTF-8 is refused before parsing; replacing it keeps the rest
    // of the input for the parser.
    let text = String::from_utf8_lossy(data);
    let source = Path::new(SOURCE);
    let mission = match Mission::parse_with_home(&text, source, Some(Path::new(HOME))) {
        Ok(mission) => mission,
        Err(MissionError::File(error)) => {
            assert_points_into(&text, source, &error);
            return;
        }
        Err(error) => panic!("parsing gave an error only resolving may: {error}"),
    };
    let lines = text.split('\n').count();
    assert!(!mission.name.trim().is_empty());
    assert_eq!(mission.source, source);
    assert_eq!(mission.capabilities & caps::DEFAULT, caps::DEFAULT);
    for grant in &mission.grants {
        assert!(grant.path.is_absolute(), "grant path {:?}", grant.path);
        assert_eq!(grant.ops & !ops::ALL, 0, "unknown operation bits");
        assert!((1..=lines).contains(&grant.line));
    }
    let vote = &mission.vote;
    assert!(!vote.policy.timeout.is_zero() && vote.policy.timeout <= MAX_VOTE_TIMEOUT);
    assert!(
        vote.webhook.is_some() || !vote.voters.contains(&VoterKind::Webhook),
        "the webhook votes without a [vote.webhook] table"
    );
    for rule in &vote.rules {
        assert!(rule.path.is_absolute(), "rule path {:?}", rule.path);
        assert_eq!(rule.ops & !ops::ALL, 0, "unknown operation bits");
        assert!((1..=lines).contains(&rule.line));
    }
    // Parsing is a function of the text.
    let again = Mission::parse_with_home(&text, source, Some(Path::new(HOME))).unwrap();
    assert_eq!(again, mission);
});
