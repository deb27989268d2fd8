//! What a pod's annotations ask for: which mission each container runs
//! under, and in which mode.
//!
//! ```yaml
//! metadata:
//!   annotations:
//!     pincer.dev/mission: reader          # every container: <missions>/reader.toml
//!     pincer.dev/mission.agent: asking    # the container `agent`: wins over the line above
//!     pincer.dev/mode: ask                # optional: enforce | audit | ask
//! ```
//!
//! A pod with no `pincer.dev/` annotation is not an agent. A pod with one
//! that is wrong (an unknown `pincer.dev/` key, a mission name that is not
//! `[A-Za-z0-9._-]{1,64}` or is `.` or `..`, an unknown mode, a mode with no
//! mission) is refused as a whole: it was meant to be confined, so it is,
//! with nothing granted (see `super`), and the error names the pod and the
//! annotation.

use std::collections::BTreeMap;

use pincer_model::{mission::Mode, toml_file::Named};

/// Every annotation pincer reads starts with this.
pub const PREFIX: &str = "pincer.dev/";
/// The mission of every container of the pod.
pub const MISSION: &str = "pincer.dev/mission";
/// `pincer.dev/mission.<container>`: the mission of one container.
pub const CONTAINER_MISSION: &str = "pincer.dev/mission.";
/// The mode, overriding the missions' `defaults.on_unknown`.
pub const MODE: &str = "pincer.dev/mode";

/// A pod's `pincer.dev/` annotations, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marking {
    /// `pincer.dev/mission`.
    pub mission: Option<String>,
    /// `pincer.dev/mission.<container>`, by container name.
    pub containers: BTreeMap<String, String>,
    /// `pincer.dev/mode`.
    pub mode: Option<Mode>,
}

impl Marking {
    /// Reads a pod's annotations: `None` when none is pincer's, an error
    /// naming the annotation when one is wrong.
    pub fn read(annotations: &BTreeMap<String, String>) -> Option<Result<Marking, String>> {
        let mut ours = annotations
            .iter()
            .filter(|(key, _)| key.starts_with(PREFIX))
            .peekable();
        ours.peek()?;
        let mut marking = Marking {
            mission: None,
            containers: BTreeMap::new(),
            mode: None,
        };
        for (key, value) in ours {
            let checked = if key == MISSION {
                check_mission_name(value).map(|()| marking.mission = Some(value.clone()))
            } else if let Some(container) = key.strip_prefix(CONTAINER_MISSION) {
                check_mission_name(value).map(|()| {
                    marking
                        .containers
                        .insert(container.to_owned(), value.clone());
                })
            } else if key == MODE {
                match Mode::NAMES.iter().find(|(name, _)| *name == value) {
                    Some((_, mode)) => {
                        marking.mode = Some(*mode);
                        Ok(())
                    }
                    None => Err(format!(
                        "unknown mode {value:?} (expected \"enforce\", \"audit\" or \"ask\")"
                    )),
                }
            } else {
                Err(format!(
                    "unknown annotation (pincer reads {MISSION}, {CONTAINER_MISSION}<container> \
                     and {MODE})"
                ))
            };
            if let Err(why) = checked {
                return Some(Err(format!("annotation {key}: {why}")));
            }
        }
        if marking.mission.is_none() && marking.containers.is_empty() {
            return Some(Err(format!(
                "annotation {MODE}: names no mission (add {MISSION} or {CONTAINER_MISSION}<container>)"
            )));
        }
        Some(Ok(marking))
    }

    /// The mission of a container: its own annotation, or else the pod's.
    /// `container` is `None` for a cgroup whose container the pod's status
    /// does not list (yet): only the pod's mission can be meant for it.
    pub fn mission_of(&self, container: Option<&str>) -> Option<&str> {
        container
            .and_then(|name| self.containers.get(name))
            .or(self.mission.as_ref())
            .map(String::as_str)
    }
}

/// A mission name is a file name in the missions directory: nothing that
/// could reach out of it.
fn check_mission_name(name: &str) -> Result<(), String> {
    let valid = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        && name != "."
        && name != "..";
    if valid {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not a mission name (1 to 64 letters, digits, \".\", \"_\" and \"-\"; \
             not \".\" or \"..\")"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(pairs: &[(&str, &str)]) -> Option<Result<Marking, String>> {
        let annotations = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Marking::read(&annotations)
    }

    #[test]
    fn a_pod_without_pincer_annotations_is_no_agent() {
        assert_eq!(read(&[]), None);
        assert_eq!(read(&[("example.com/mission", "x"), ("app", "web")]), None);
    }

    #[test]
    fn container_missions_win_over_the_pods() {
        let marking = read(&[
            (MISSION, "reader"),
            ("pincer.dev/mission.agent", "asking"),
            (MODE, "ask"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(marking.mode, Some(Mode::Ask));
        assert_eq!(marking.mission_of(Some("agent")), Some("asking"));
        assert_eq!(marking.mission_of(Some("sidecar")), Some("reader"));
        assert_eq!(marking.mission_of(None), Some("reader"));

        // Only one container named: the others, and containers the status
        // does not list, are not agents.
        let marking = read(&[("pincer.dev/mission.agent", "asking")])
            .unwrap()
            .unwrap();
        assert_eq!(marking.mode, None);
        assert_eq!(marking.mission_of(Some("agent")), Some("asking"));
        assert_eq!(marking.mission_of(Some("sidecar")), None);
        assert_eq!(marking.mission_of(None), None);
    }

    #[test]
    fn bad_annotations_name_themselves() {
        for (pairs, expected) in [
            (
                vec![(MISSION, "../etc/passwd")],
                "annotation pincer.dev/mission: \"../etc/passwd\" is not a mission name",
            ),
            (
                vec![(MISSION, "a/b")],
                "annotation pincer.dev/mission: \"a/b\" is not a mission name",
            ),
            (
                vec![(MISSION, "..")],
                "annotation pincer.dev/mission: \"..\" is not a mission name",
            ),
            (
                vec![(MISSION, "")],
                "annotation pincer.dev/mission: \"\" is not a mission name",
            ),
            (
                vec![("pincer.dev/mission.web", "x y")],
                "annotation pincer.dev/mission.web: \"x y\" is not a mission name",
            ),
            (
                vec![(MISSION, "reader"), (MODE, "permissive")],
                "annotation pincer.dev/mode: unknown mode \"permissive\"",
            ),
            (
                vec![(MODE, "enforce")],
                "annotation pincer.dev/mode: names no mission",
            ),
            (
                vec![("pincer.dev/misison", "reader")],
                "annotation pincer.dev/misison: unknown annotation",
            ),
        ] {
            let error = read(&pairs).unwrap().unwrap_err();
            assert!(error.starts_with(expected), "{pairs:?}: {error}");
        }
    }
}
