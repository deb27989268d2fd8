//! `[[agent]]`: which cgroups are which agent's, and under which mission.

use std::{collections::HashMap, path::Path};

use toml::Spanned;

use super::{AgentConfig, CgroupPattern, Mode};
use crate::toml_file::{
    Document, TomlError,
    fields::{Fields, raw_tables},
    toml_string,
};

raw_tables! {
    pub(super) struct RawAgent {
        name: String,
        cgroup: String,
        mission: String,
        mode: String,
        confine_from: String,
    }
}

/// What `confine_from` is written with: whether confinement starts at the
/// first program executed.
const CONFINE_FROM: [(&str, bool); 2] = [("start", false), ("exec", true)];

/// The `[[agent]]` entries, numbered from 1: names and patterns unique.
pub(super) fn parse_agents(
    doc: &Document<'_>,
    raw: &[Spanned<RawAgent>],
) -> Result<Vec<AgentConfig>, TomlError> {
    let mut agents: Vec<AgentConfig> = Vec::new();
    // Names and patterns seen so far, to the agent (from 1) that has them.
    let mut names = HashMap::new();
    let mut patterns = HashMap::new();
    // Missions are relative to the configuration file's directory.
    let directory = doc.path().parent().unwrap_or(Path::new(""));
    for (table, number) in Fields::each(doc, "agent", raw).zip(1..) {
        let field = |key: &str| table.field(key);
        let agent = table.raw();

        let name = table.required(&agent.name, "name")?;
        doc.check(name, &field("name"), |name| check_agent_name(name))?;
        if let Some(first) = names.insert(name.get_ref().as_str(), number) {
            return Err(doc.field_error(
                name.span().start,
                &field("name"),
                format!(
                    "duplicate agent name {} (agent[{first}] has it)",
                    toml_string(name.get_ref())
                ),
            ));
        }

        let cgroup = table.required(&agent.cgroup, "cgroup")?;
        let pattern = doc.check(cgroup, &field("cgroup"), |text| CgroupPattern::parse(text))?;
        if let Some(first) = patterns.insert(pattern.as_str().to_owned(), number) {
            return Err(doc.field_error(
                cgroup.span().start,
                &field("cgroup"),
                format!(
                    "same pattern as agent[{first}], which wins every cgroup it matches: \
                     this agent would never confine anything"
                ),
            ));
        }

        let mission = table.required(&agent.mission, "mission")?;
        let line = doc.line(mission.span().start);
        let mission = doc.path_from(mission, &field("mission"), directory)?;

        let mode = agent
            .mode
            .as_ref()
            .map(|mode| doc.named::<Mode>(mode, &field("mode")))
            .transpose()?;
        let from_exec = agent
            .confine_from
            .as_ref()
            .map(|from| doc.choice(from, &field("confine_from"), "value", &CONFINE_FROM))
            .transpose()?
            .unwrap_or(false);

        agents.push(AgentConfig {
            name: name.get_ref().clone(),
            cgroup: pattern,
            mission,
            mode,
            from_exec,
            number,
            line,
        });
    }
    Ok(agents)
}

/// Agent names end up in file names, metric labels and log lines.
fn check_agent_name(name: &str) -> Result<(), String> {
    let valid_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if let Some(bad) = name.chars().find(|c| !valid_char(*c)) {
        return Err(format!(
            "{} is not allowed in {} (only letters, digits, \".\", \"_\" and \"-\")",
            toml_string(&bad.to_string()),
            toml_string(name)
        ));
    }
    // ASCII from here on: bytes are characters.
    if name.is_empty() || name.len() > 64 {
        return Err(format!(
            "must be 1 to 64 characters long (not {})",
            name.len()
        ));
    }
    if name == "." || name == ".." {
        return Err(format!(
            "must not be {} (it means a directory when used as a file name)",
            toml_string(name)
        ));
    }
    Ok(())
}
