//! `[[source]]`, `[[action]]` and `[labels]`: what content may justify,
//! in a mission and, for `[[source]]` and `[labels]`, in the daemon's
//! configuration.

use super::*;
use crate::toml_file::fields::expand_uid;

/// The `[[source]]` entries of a mission or a configuration, numbered
/// from 1, their paths written as `rules` say.
pub(crate) fn parse_sources(
    doc: &Document<'_>,
    raw: &[Spanned<RawSource>],
    rules: &PathRules<'_>,
) -> Result<Vec<SourceSpec>, TomlError> {
    Fields::each(doc, "source", raw)
        .map(|source| parse_source(&source, rules))
        .collect()
}

/// The authorities a source may have: a source of policy authority would
/// lower nobody, so it is not one.
pub const SOURCE_AUTHORITIES: [(&str, u32); 2] =
    [("evidence", authority::EVIDENCE), ("user", authority::USER)];

/// The levels an action may require: an action open to evidence would be
/// open to every agent, so it is not one.
const ACTION_AUTHORITIES: [(&str, u32); 2] =
    [("user", authority::USER), ("policy", authority::POLICY)];

/// One `[[source]]`: a path and its authority (`evidence` when not
/// written).
fn parse_source(
    source: &Fields<'_, RawSource>,
    rules: &PathRules<'_>,
) -> Result<SourceSpec, TomlError> {
    let raw = source.raw();
    let (expanded, line) = one_object(source, &raw.path, rules)?;
    let authority = match &raw.authority {
        Some(value) => source.doc.choice(
            value,
            &source.field("authority"),
            "authority",
            &SOURCE_AUTHORITIES,
        )?,
        None => authority::EVIDENCE,
    };
    Ok(SourceSpec {
        path: expanded,
        authority,
        line,
        file: None,
    })
}

/// One `[[action]]`: a path, its operations (`exec` when not written) and
/// the level it needs (`user` when not written).
pub(super) fn parse_action(
    action: &Fields<'_, RawAction>,
    rules: &PathRules<'_>,
) -> Result<ActionSpec, TomlError> {
    let (doc, raw) = (action.doc, action.raw());
    let (expanded, line) = one_object(action, &raw.path, rules)?;
    let ops = match &raw.ops {
        Some(list) => parse_ops(doc, list, &action.field("ops"))?,
        None => ops::EXEC,
    };
    let authority = match &raw.authority {
        Some(value) => doc.choice(
            value,
            &action.field("authority"),
            "authority",
            &ACTION_AUTHORITIES,
        )?,
        None => authority::USER,
    };
    Ok(ActionSpec {
        path: expanded,
        ops,
        authority,
        line,
    })
}

/// The required `path` of a source or an action, which names one object:
/// what it names, and the line it is written on.
fn one_object<'a, R>(
    table: &Fields<'a, R>,
    value: &'a Option<Spanned<String>>,
    rules: &PathRules<'_>,
) -> Result<(PathBuf, usize), TomlError> {
    let (path, expanded) = required_path(table, value, "path", rules)?;
    no_star(table.doc, path, &table.field("path"))?;
    Ok((expanded, table.doc.line(path.span().start)))
}

/// `[labels] policy`: patterns added to the policy set, each checked as
/// [`PolicyPattern::parse`] reads it.
pub(crate) fn parse_policy(
    doc: &Document<'_>,
    labels: &RawLabels,
    table: &str,
    rules: &PathRules<'_>,
) -> Result<Vec<PolicyPattern>, TomlError> {
    let Some(list) = &labels.policy else {
        return Ok(Vec::new());
    };
    list.get_ref()
        .iter()
        .enumerate()
        .map(|(index, text)| {
            rules
                .uid
                .map_or(Ok(text.get_ref().into()), |uid| {
                    expand_uid(text.get_ref(), uid)
                })
                .and_then(|text| PolicyPattern::parse(&text, rules.home()))
                .map_err(|message| {
                    doc.field_error(
                        text.span().start,
                        &format!("{table}.policy[{}]", index + 1),
                        message,
                    )
                })
        })
        .collect()
}
