//! Writing the recommended mission: TOML the mission parser reads, each
//! grant under a comment on what it covers, what is not granted as
//! comments at the end. Everything taken from the log into a comment is
//! escaped for the terminal (no newline can end a comment early), and every
//! value is written as a TOML string.

use std::{fmt::Write as _, path::Path};

use pincer_common::{caps, ops};
use pincer_model::{escape::for_terminal, mission::format_ops};

use super::{
    fold::{FOLD_AT, Grant, Plan},
    log::{Logged, Verification},
};

/// What the mission's header says.
pub(super) struct Header<'a> {
    /// The log it was recommended from.
    pub log: &'a Path,
    /// What the log said.
    pub logged: &'a Logged,
    /// `--task`.
    pub task: Option<&'a str>,
}

/// How many paths a grant's comment shows.
const EXAMPLES: usize = 3;

/// The mission's TOML.
pub(super) fn render(plan: &Plan, header: &Header<'_>) -> String {
    let logged = header.logged;
    let mut out = String::new();
    let chain = match &logged.verification {
        Verification::Verified => "its chain verified".to_owned(),
        Verification::Unverified(why) => format!("its chain NOT verified: {}", for_terminal(why)),
    };
    let _ = writeln!(
        out,
        "# Recommended by `pincer recommend` from the audit log {} ({chain}):",
        for_terminal(&header.log.to_string_lossy())
    );
    let _ = writeln!(
        out,
        "# {} decision(s) of mission \"{}\", {} to {}.",
        logged.decisions.len(),
        for_terminal(&logged.mission),
        for_terminal(&logged.first),
        for_terminal(&logged.last)
    );
    if let Some(task) = header.task {
        let mut lines = task.lines();
        let _ = writeln!(
            out,
            "# Task: {}",
            for_terminal(lines.next().unwrap_or_default())
        );
        for line in lines {
            let _ = writeln!(out, "#   {}", for_terminal(line));
        }
    }
    let _ = writeln!(
        out,
        "#\n\
         # What the run used, beside the runtime baseline and a private temporary\n\
         # directory. A directory where the run made names, or used {FOLD_AT} or more\n\
         # objects, is one tree grant, unless it is too broad or holds a secret or\n\
         # pincer's own files. Review it before you use it."
    );

    let name = header.task.map_or(logged.mission.as_str(), str::trim);
    let name = if name.trim().is_empty() {
        "recommended"
    } else {
        name
    };
    let _ = writeln!(out, "\n[mission]\nname = {}", string(name));
    let _ = writeln!(out, "\n[defaults]\non_unknown = \"deny\"");
    if !plan.capabilities.is_empty() {
        let used: Vec<String> = plan
            .capabilities
            .iter()
            .map(|(cap, times)| format!("{} {times}", caps::name(*cap).unwrap_or("?")))
            .collect();
        let _ = writeln!(out, "# beyond the default set; checks: {}", used.join(", "));
        let names: Vec<String> = plan
            .capabilities
            .keys()
            .filter_map(|cap| caps::name(*cap))
            .map(string)
            .collect();
        let _ = writeln!(out, "capabilities = [{}]", names.join(", "));
    }

    for grant in &plan.grants {
        out.push('\n');
        write_grant(&mut out, grant);
    }

    if !plan.not_trees.is_empty() {
        let _ = writeln!(out, "\n# No tree on:");
        for (dir, why) in &plan.not_trees {
            let _ = writeln!(out, "#   {}: {why}", for_terminal(&dir.to_string_lossy()));
        }
    }
    if !plan.not_granted.is_empty() {
        out.push('\n');
        for refused in &plan.not_granted {
            let times = if refused.times > 1 {
                format!(", {} times", refused.times)
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "# not granted: {}{} ({}{times})",
                op_words(refused.ops),
                refused.what,
                refused.why
            );
        }
    }
    if plan.by_defaults + plan.run_own > 0 {
        let _ = writeln!(
            out,
            "\n# Left out: {} access(es) the runtime baseline or the default capabilities \
             give, {} of the run's own (its private temporary directory, terminal, /proc \
             entries).",
            plan.by_defaults, plan.run_own
        );
    }
    out
}

/// One `[[grant]]` with its comment.
fn write_grant(out: &mut String, grant: &Grant) {
    let usage = &grant.usage;
    let counts: Vec<String> = ops::NAMES
        .iter()
        .zip(usage.counts)
        .filter(|(_, count)| *count > 0)
        .map(|((_, name), count)| format!("{name} {count}"))
        .collect();
    let mut comment = if grant.tree {
        let shown: Vec<String> = usage
            .objects
            .iter()
            .take(EXAMPLES)
            .map(|path| {
                let below = path.strip_prefix(&grant.path).unwrap_or(path);
                if below.as_os_str().is_empty() {
                    ".".to_owned()
                } else {
                    for_terminal(&below.to_string_lossy())
                }
            })
            .collect();
        let more = usage.objects.len().saturating_sub(EXAMPLES);
        let more = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        format!(
            "# {} object(s) in this tree ({}): {}{more}",
            usage.objects.len(),
            counts.join(", "),
            shown.join(", ")
        )
    } else {
        format!("# {}", counts.join(", "))
    };
    if !usage.comms.is_empty() {
        let comms: Vec<&str> = usage.comms.iter().map(String::as_str).collect();
        let _ = write!(comment, "; by {}", comms.join(", "));
    }
    let _ = writeln!(out, "{comment}");
    let added = usage.added();
    if added & ops::WRITE != 0 {
        let _ = writeln!(
            out,
            "# + write: the run made {} of these names, which the next run opens again",
            usage.opened_new
        );
    }
    if added & ops::DELETE != 0 {
        let _ = writeln!(
            out,
            "# + delete: a rename made {} of these names, which the next run's replaces",
            usage.renamed_new
        );
    }
    if grant.make {
        let _ = writeln!(
            out,
            "# make: the run made this directory and it is gone now; pincer run makes it"
        );
    }
    let _ = writeln!(out, "[[grant]]");
    let _ = writeln!(out, "path = {}", string(&grant.path.to_string_lossy()));
    let names: Vec<String> = format_ops(grant.ops).split(", ").map(string).collect();
    let _ = writeln!(out, "ops = [{}]", names.join(", "));
    if grant.tree {
        let _ = writeln!(out, "extent = \"tree\"");
    }
    if grant.make {
        let _ = writeln!(out, "make = true");
    }
}

/// Operation names joined with `+`, then a space (nothing for none).
fn op_words(bits: u32) -> String {
    if bits == 0 {
        return String::new();
    }
    format!("{} ", format_ops(bits).replace(", ", "+"))
}

/// A TOML string.
fn string(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}
