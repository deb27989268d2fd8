//! The daemon's configuration: any text, as the file
//! `/etc/pincer/fuzz.toml`. Parsing never panics; an error points into the
//! text; a configuration that parses renders to TOML that parses back to
//! the same configuration (and renders the same again), its agents' names
//! are what the documentation allows, and every cgroup pattern matches its
//! own text read as a path (`*` and `?` match themselves, `**` any
//! components), which also drives the matcher with whatever patterns the
//! input holds.

#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use pincer_fuzz::assert_points_into;
use pincer_model::config::daemon::Config;

const PATH: &str = "/etc/pincer/fuzz.toml";

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let path = Path::new(PATH);
    let config = match Config::from_str(&text, path) {
        Ok(config) => config,
        Err(error) => {
            assert_points_into(&text, path, &error);
            return;
        }
    };
    let rendered = config.render();
    let again = Config::from_str(&rendered, path).unwrap_or_else(|error| {
        panic!("the rendered configuration is refused: {error}\n{rendered}")
    });
    assert_eq!(again, config, "rendered:\n{rendered}");
    assert_eq!(again.render(), rendered);

    for (index, agent) in config.agents.iter().enumerate() {
        let name = agent.name.as_str();
        assert!(
            (1..=64).contains(&name.len())
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b".-_".contains(&b))
                && name != "."
                && name != "..",
            "agent name {name:?}"
        );
        assert!(agent.mission.is_absolute());
        let own = Path::new(agent.cgroup.as_str());
        assert!(
            agent.cgroup.matches(own),
            "pattern {:?} does not match its own text",
            agent.cgroup.as_str()
        );
        // The first agent whose pattern matches wins: never a later one.
        let first = config.agent_for(own).expect("it matches");
        let position = config.agents.iter().position(|a| a == first).unwrap();
        assert!(position <= index);
    }
});
