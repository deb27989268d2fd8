//! git configuration as the twin reads it when an agent renames its lock
//! over `.git/config`: any bytes, split at the first `0xff` into the
//! current file and the new one. Reading never panics; a file compared
//! with itself changes nothing; and a change found to be the agent's only
//! sets or removes keys that run nothing.

#![no_main]

use libfuzzer_sys::fuzz_target;
use pincer_model::gitconfig::{compare, parse};

fuzz_target!(|data: &[u8]| {
    let (old, new) = match data.iter().position(|&b| b == 0xff) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (&b""[..], data),
    };
    if let Ok(settings) = parse(new) {
        let same = compare(new, new).expect("a readable file compared with itself");
        assert!(same.set.is_empty() && same.removed.is_empty(), "{same:?}");
        if let Ok(changes) = compare(old, new) {
            for name in &changes.set {
                let setting = settings
                    .iter()
                    .find(|s| &s.name() == name)
                    .unwrap_or_else(|| panic!("{name} is set but not in the new file"));
                assert!(
                    setting.is_inert(),
                    "{name} runs something and was the agent's"
                );
            }
        }
    }
});
