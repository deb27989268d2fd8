//! Reading a mission from TOML: strict, and every error names the file, the
//! line and column, and the field.

use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use humantime::DurationError;
use pincer_common::{authority, caps, ops};
use serde::Deserialize;
use toml::Spanned;

use super::model::{
    ActionSpec, AssetKind, AssetSpec, Baseline, Constraints, GrantSpec, MAX_VOTE_TIMEOUT, Mission,
    MissionError, Mode, Profile, SourceSpec, Tmp,
};
use crate::labels::PolicyPattern;
use crate::toml_file::{self, Document, Named, TomlError, or_list};
use crate::vote::{self, DefaultVerdict, Extent, Lifetime};
use crate::voters::{
    VoterKind, Voting,
    mission::{Rule, RuleVerdict},
    webhook::{DEFAULT_CLOCK_SKEW, MAX_CLOCK_SKEW, WebhookConfig},
};

// The file as written. Every value is optional and spanned so that pincer,
// not serde, reports a missing or invalid value, with its position and field.
// serde still reports unknown keys and wrong types; the document names the
// field from the error's position. A new key is a new field here plus its
// check in `parse` below.

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
struct RawFile {
    mission: Option<Spanned<RawMission>>,
    #[serde(default)]
    grant: Vec<Spanned<RawGrant>>,
    defaults: Option<Spanned<RawDefaults>>,
    // Not spanned: `[[vote.rule]]` or `[vote.webhook]` without `[vote]`
    // makes a table without a span, which `Spanned` refuses.
    vote: Option<RawVote>,
    labels: Option<Spanned<RawLabels>>,
    #[serde(default)]
    source: Vec<Spanned<RawSource>>,
    #[serde(default)]
    action: Vec<Spanned<RawAction>>,
    #[serde(default)]
    asset: Vec<Spanned<RawAsset>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
struct RawAsset {
    id: Option<Spanned<String>>,
    description: Option<Spanned<String>>,
    path: Option<Spanned<String>>,
    found_in: Option<Spanned<String>>,
    ops: Option<Spanned<Vec<Spanned<String>>>>,
    extent: Option<Spanned<String>>,
    constraints: Option<Spanned<RawConstraints>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
struct RawConstraints {
    under: Option<Spanned<Vec<Spanned<String>>>>,
    glob: Option<Spanned<String>>,
    kind: Option<Spanned<String>>,
    max_count: Option<Spanned<i64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
struct RawSource {
    path: Option<Spanned<String>>,
    authority: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
struct RawAction {
    path: Option<Spanned<String>>,
    ops: Option<Spanned<Vec<Spanned<String>>>>,
    authority: Option<Spanned<String>>,
}

/// `[labels]`: what the mission adds to the policy set.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(crate) struct RawLabels {
    pub(crate) policy: Option<Spanned<Vec<Spanned<String>>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
struct RawMission {
    name: Option<Spanned<String>>,
    profiles: Option<Spanned<Vec<Spanned<String>>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
struct RawGrant {
    path: Option<Spanned<String>>,
    ops: Option<Spanned<Vec<Spanned<String>>>>,
    extent: Option<Spanned<String>>,
    make: Option<Spanned<bool>>,
    optional: Option<Spanned<bool>>,
    own: Option<Spanned<bool>>,
}

/// A profile file: `[profile]`, its grants and its environment.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
struct RawProfileFile {
    profile: Option<Spanned<RawProfile>>,
    #[serde(default)]
    grant: Vec<Spanned<RawGrant>>,
    #[serde(default)]
    env: std::collections::BTreeMap<String, Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
struct RawProfile {
    name: Option<Spanned<String>>,
    description: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
struct RawDefaults {
    baseline: Option<Spanned<String>>,
    on_unknown: Option<Spanned<String>>,
    tmp: Option<Spanned<String>>,
    capabilities: Option<Spanned<Vec<Spanned<String>>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
struct RawVote {
    voters: Option<Spanned<Vec<Spanned<String>>>>,
    timeout: Option<Spanned<String>>,
    default: Option<Spanned<String>>,
    max_lifetime: Option<Spanned<String>>,
    max_ttl: Option<Spanned<String>>,
    max_extent: Option<Spanned<String>>,
    webhook: Option<Spanned<RawWebhook>>,
    #[serde(default)]
    rule: Vec<Spanned<RawRule>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
struct RawWebhook {
    url: Option<Spanned<String>>,
    secret_file: Option<Spanned<String>>,
    clock_skew: Option<Spanned<String>>,
    owner: Option<Spanned<bool>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
struct RawRule {
    path: Option<Spanned<String>>,
    extent: Option<Spanned<String>>,
    ops: Option<Spanned<Vec<Spanned<String>>>>,
    verdict: Option<Spanned<String>>,
    lifetime: Option<Spanned<String>>,
    ttl: Option<Spanned<String>>,
    reason: Option<Spanned<String>>,
}

/// Whose paths a mission names: a leading `~` is `home`, and `{uid}` is
/// `uid`, written in decimal. `pincer run` and the daemon both parse for
/// the user they run as ([`User::current`]): under `sudo` that is root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// `$HOME`; `None` makes a `~` an error.
    pub home: Option<PathBuf>,
    /// The numeric user id.
    pub uid: u32,
}

impl User {
    /// The user this process runs as: `$HOME` and the real user id.
    pub fn current() -> User {
        User {
            home: std::env::var_os("HOME").map(PathBuf::from),
            uid: nix::unistd::getuid().as_raw(),
        }
    }
}

impl Mission {
    /// Reads and parses a mission file for [`User::current`].
    pub fn from_file(path: &Path) -> Result<Mission, MissionError> {
        toml_file::read_file(path, "mission file", |text| Self::parse(text, path))
    }

    /// Parses a mission for [`User::current`]; `source` names the file in
    /// messages.
    pub fn parse(text: &str, source: &Path) -> Result<Mission, MissionError> {
        Self::parse_for(text, source, &User::current())
    }

    /// Parses a mission, expanding `~` to `home` and `{uid}` to the current
    /// user id: the caller decides whose home that is (under `sudo`,
    /// `$HOME` may be root's). A `~` with no home is an error.
    pub fn parse_with_home(
        text: &str,
        source: &Path,
        home: Option<&Path>,
    ) -> Result<Mission, MissionError> {
        let user = User {
            home: home.map(Path::to_owned),
            ..User::current()
        };
        Self::parse_for(text, source, &user)
    }

    /// Parses a mission whose paths are `user`'s.
    pub fn parse_for(text: &str, source: &Path, user: &User) -> Result<Mission, MissionError> {
        Ok(parse(&Document::new(text, source), user)?)
    }
}

fn parse(doc: &Document<'_>, user: &User) -> Result<Mission, TomlError> {
    let raw: RawFile = doc.deserialize().map_err(with_hint)?;

    let mission = doc.required(raw.mission.as_ref(), 0, "mission", "missing section")?;
    let name = required(doc, &mission.get_ref().name, mission, "mission.name")?;
    if name.get_ref().trim().is_empty() {
        return Err(doc.field_error(name.span().start, "mission.name", "must not be empty"));
    }

    let grants = parse_grants(doc, &raw.grant, user)?;

    let mut baseline = Baseline::default();
    let mut on_unknown = Mode::default();
    let mut tmp = Tmp::default();
    let mut capabilities = caps::DEFAULT;
    if let Some(defaults) = &raw.defaults {
        if let Some(value) = &defaults.get_ref().baseline {
            baseline = choice(doc, value, "defaults.baseline", "baseline", Baseline::NAMES)?;
        }
        if let Some(value) = &defaults.get_ref().on_unknown {
            on_unknown = choice(doc, value, "defaults.on_unknown", "value", Mode::ON_UNKNOWN)?;
        }
        if let Some(value) = &defaults.get_ref().tmp {
            tmp = choice(doc, value, "defaults.tmp", "value", Tmp::NAMES)?;
        }
        if let Some(list) = &defaults.get_ref().capabilities {
            capabilities |= parse_capabilities(doc, list)?;
        }
    }

    let vote = match &raw.vote {
        Some(vote) => parse_vote(doc, vote, user)?,
        None => Voting::default(),
    };

    let policy = match &raw.labels {
        Some(labels) => parse_policy(doc, labels.get_ref(), "labels", user)?,
        None => Vec::new(),
    };

    let sources = raw
        .source
        .iter()
        .enumerate()
        .map(|(index, source)| parse_source(doc, index + 1, source, user))
        .collect::<Result<Vec<_>, _>>()?;
    let actions = raw
        .action
        .iter()
        .enumerate()
        .map(|(index, action)| parse_action(doc, index + 1, action, user))
        .collect::<Result<Vec<_>, _>>()?;

    let assets = parse_assets(doc, &raw.asset, user)?;
    // An asset identified from the start is a grant, unless others are
    // found in it: its first read then parks, so that what it holds is
    // observed as the agent reads it ([`crate::assets`]).
    let mut grants = grants;
    for (index, asset) in assets.iter().enumerate() {
        let Some(path) = &asset.path else { continue };
        if assets.iter().any(|other| other.found_in == Some(index)) {
            continue;
        }
        grants.push(GrantSpec {
            path: path.clone(),
            ops: asset.ops,
            extent: asset.extent,
            line: asset.line,
            make: false,
            optional: false,
            own: false,
        });
    }

    let mut profiles = Vec::new();
    if let Some(list) = &mission.get_ref().profiles {
        for (index, name) in list.get_ref().iter().enumerate() {
            let profile = super::profile::built_in(name.get_ref(), user).map_err(|error| {
                doc.field_error(
                    name.span().start,
                    &format!("mission.profiles[{}]", index + 1),
                    error.to_string(),
                )
            })?;
            profiles.push(profile);
        }
    }

    Ok(Mission {
        name: name.get_ref().clone(),
        source: doc.path().to_owned(),
        grants,
        baseline,
        on_unknown,
        tmp,
        capabilities,
        vote,
        profiles,
        policy,
        sources,
        actions,
        assets,
    })
}

/// The authorities a source may have: a source of policy authority would
/// lower nobody, so it is not one.
pub(crate) const SOURCE_AUTHORITIES: [(&str, u32); 2] =
    [("evidence", authority::EVIDENCE), ("user", authority::USER)];

/// The levels an action may require: an action open to evidence would be
/// open to every agent, so it is not one.
const ACTION_AUTHORITIES: [(&str, u32); 2] =
    [("user", authority::USER), ("policy", authority::POLICY)];

/// One `[[source]]` (numbered from 1): a path and its authority
/// (`evidence` when not written).
fn parse_source(
    doc: &Document<'_>,
    number: usize,
    source: &Spanned<RawSource>,
    user: &User,
) -> Result<SourceSpec, TomlError> {
    let field = |name: &str| format!("source[{number}].{name}");
    let raw = source.get_ref();
    let (path, expanded) = required_path(doc, &raw.path, source, &field("path"), user)?;
    no_star(doc, path, &field("path"))?;
    let authority = match &raw.authority {
        Some(value) => choice(
            doc,
            value,
            &field("authority"),
            "authority",
            &SOURCE_AUTHORITIES,
        )?,
        None => authority::EVIDENCE,
    };
    Ok(SourceSpec {
        path: expanded,
        authority,
        line: doc.line(path.span().start),
        file: None,
    })
}

/// One `[[action]]` (numbered from 1): a path, its operations (`exec`
/// when not written) and the level it needs (`user` when not written).
fn parse_action(
    doc: &Document<'_>,
    number: usize,
    action: &Spanned<RawAction>,
    user: &User,
) -> Result<ActionSpec, TomlError> {
    let field = |name: &str| format!("action[{number}].{name}");
    let raw = action.get_ref();
    let (path, expanded) = required_path(doc, &raw.path, action, &field("path"), user)?;
    no_star(doc, path, &field("path"))?;
    let ops = match &raw.ops {
        Some(list) => parse_ops(doc, list, &field("ops"))?,
        None => ops::EXEC,
    };
    let authority = match &raw.authority {
        Some(value) => choice(
            doc,
            value,
            &field("authority"),
            "authority",
            &ACTION_AUTHORITIES,
        )?,
        None => authority::USER,
    };
    Ok(ActionSpec {
        path: expanded,
        ops,
        authority,
        line: doc.line(path.span().start),
    })
}

/// Longest `[[asset]]` id.
const MAX_ASSET_ID: usize = 64;

/// Most objects one `[[asset]]` may become.
pub const MAX_ASSET_COUNT: u32 = 1024;

/// The `[[asset]]` entries (numbered from 1): each id unique, each
/// `found_in` naming another node that is read, no node found (through
/// others) in itself.
fn parse_assets(
    doc: &Document<'_>,
    raw: &[Spanned<RawAsset>],
    user: &User,
) -> Result<Vec<AssetSpec>, TomlError> {
    let mut assets = Vec::with_capacity(raw.len());
    let mut ids: Vec<&str> = Vec::with_capacity(raw.len());
    for (index, asset) in raw.iter().enumerate() {
        let number = index + 1;
        let field = |name: &str| format!("asset[{number}].{name}");
        let written = required(doc, &asset.get_ref().id, asset, &field("id"))?;
        let id = written.get_ref();
        let well_formed = !id.is_empty()
            && id.len() <= MAX_ASSET_ID
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !well_formed {
            return Err(doc.field_error(
                written.span().start,
                &field("id"),
                format!("{id:?} is not an id: 1 to {MAX_ASSET_ID} letters, digits, `-` or `_`"),
            ));
        }
        if let Some(first) = ids.iter().position(|known| known == id) {
            return Err(doc.field_error(
                written.span().start,
                &field("id"),
                format!("{id:?} is already the id of asset[{}]", first + 1),
            ));
        }
        ids.push(id);
        assets.push(parse_asset(doc, number, asset, user)?);
    }
    // `found_in` names a node by id; resolved once every id is known.
    for (index, asset) in raw.iter().enumerate() {
        let Some(found_in) = &asset.get_ref().found_in else {
            continue;
        };
        let field = format!("asset[{}].found_in", index + 1);
        let error = |message: String| doc.field_error(found_in.span().start, &field, message);
        let Some(source) = ids.iter().position(|id| id == found_in.get_ref()) else {
            return Err(error(format!(
                "no asset has the id {:?} (ids: {})",
                found_in.get_ref(),
                or_list(&ids)
            )));
        };
        if source == index {
            return Err(error("an asset cannot be found in itself".to_owned()));
        }
        if assets[source].extent != Extent::File {
            return Err(error(format!(
                "{:?} is a tree: evidence is the content of one file",
                found_in.get_ref()
            )));
        }
        if assets[source].ops & ops::READ == 0 {
            return Err(error(format!(
                "{:?} is not read (its ops lack \"read\"), so nothing can be found in it",
                found_in.get_ref()
            )));
        }
        assets[index].found_in = Some(source);
    }
    // Following `found_in` from any node ends at a node identified from
    // the start: a cycle would have no evidence to begin with.
    for (index, asset) in raw.iter().enumerate() {
        let mut seen = vec![index];
        let mut at = index;
        while let Some(next) = assets[at].found_in {
            if seen.contains(&next) {
                let chain: Vec<&str> = seen.iter().chain([&next]).map(|&i| ids[i]).collect();
                let found_in = asset.get_ref().found_in.as_ref().expect("it has a source");
                return Err(doc.field_error(
                    found_in.span().start,
                    &format!("asset[{}].found_in", index + 1),
                    format!(
                        "the assets are found in each other in a cycle ({}): one of them needs a path",
                        chain.join(" <- ")
                    ),
                ));
            }
            seen.push(next);
            at = next;
        }
    }
    Ok(assets)
}

/// One `[[asset]]` (numbered from 1), its `found_in` left for
/// [`parse_assets`].
fn parse_asset(
    doc: &Document<'_>,
    number: usize,
    asset: &Spanned<RawAsset>,
    user: &User,
) -> Result<AssetSpec, TomlError> {
    let field = |name: &str| format!("asset[{number}].{name}");
    let raw = asset.get_ref();
    let id = required(doc, &raw.id, asset, &field("id"))?;
    let path = match (&raw.path, &raw.found_in) {
        (Some(path), None) => {
            no_star(doc, path, &field("path"))?;
            Some(absolute_path(doc, path, &field("path"), user)?)
        }
        (None, Some(_)) => None,
        (Some(_), Some(found_in)) => {
            return Err(doc.field_error(
                found_in.span().start,
                &field("found_in"),
                "an asset with a path is identified already: write `path` or `found_in`, not both",
            ));
        }
        (None, None) => {
            return Err(doc.field_error(
                asset.span().start,
                &field("path"),
                "missing field: an asset has a `path`, or is `found_in` another asset",
            ));
        }
    };
    let ops_list = required(doc, &raw.ops, asset, &field("ops"))?;
    let ops = parse_ops(doc, ops_list, &field("ops"))?;
    let extent = parse_extent(doc, raw.extent.as_ref(), &field("extent"))?;
    let constraints = match &raw.constraints {
        Some(constraints) => parse_constraints(doc, number, constraints, user)?,
        None => Constraints::default(),
    };
    if raw.found_in.is_some() && constraints.under.is_empty() {
        let at = raw
            .constraints
            .as_ref()
            .map_or(asset.span().start, |c| c.span().start);
        return Err(doc.field_error(
            at,
            &field("constraints.under"),
            "an asset found in evidence needs `under`: the directories it may be in \
             (a name in a page is never enough to reach anywhere)",
        ));
    }
    if let (Some(kind), Some(written)) = (
        constraints.kind,
        raw.constraints
            .as_ref()
            .and_then(|c| c.get_ref().kind.as_ref()),
    ) && extent == Extent::Tree
        && kind != AssetKind::Directory
    {
        return Err(doc.field_error(
            written.span().start,
            &field("constraints.kind"),
            "a tree is a directory: extent = \"tree\" needs kind = \"directory\"",
        ));
    }
    if path.is_some()
        && let Some(written) = &raw.constraints
    {
        return Err(doc.field_error(
            written.span().start,
            &field("constraints"),
            "constraints say what a discovered object must be: an asset with a path has none",
        ));
    }
    Ok(AssetSpec {
        id: id.get_ref().clone(),
        description: raw
            .description
            .as_ref()
            .map(|d| d.get_ref().clone())
            .unwrap_or_default(),
        path,
        found_in: None,
        ops,
        extent,
        constraints,
        line: doc.line(id.span().start),
    })
}

/// `constraints = { under, glob, kind, max_count }` of `asset[number]`.
fn parse_constraints(
    doc: &Document<'_>,
    number: usize,
    written: &Spanned<RawConstraints>,
    user: &User,
) -> Result<Constraints, TomlError> {
    let field = |name: &str| format!("asset[{number}].constraints.{name}");
    let raw = written.get_ref();
    let mut constraints = Constraints::default();
    if let Some(list) = &raw.under {
        if list.get_ref().is_empty() {
            return Err(doc.field_error(
                list.span().start,
                &field("under"),
                "must list at least one directory",
            ));
        }
        for (index, dir) in list.get_ref().iter().enumerate() {
            let name = field(&format!("under[{}]", index + 1));
            no_star(doc, dir, &name)?;
            let path = absolute_path(doc, dir, &name, user)?;
            if path.parent().is_none() {
                return Err(doc.field_error(
                    dir.span().start,
                    &name,
                    "\"/\" would let evidence name anything: name the directories the asset may be in",
                ));
            }
            constraints.under.push(path);
        }
    }
    if let Some(glob) = &raw.glob {
        let pattern = glob.get_ref();
        if pattern.contains('/') {
            return Err(doc.field_error(
                glob.span().start,
                &field("glob"),
                "matches a file name: it cannot contain `/` (put the place in `under`)",
            ));
        }
        if let Err(error) = asset_glob(pattern) {
            return Err(doc.field_error(
                glob.span().start,
                &field("glob"),
                format!("invalid pattern {pattern:?}: {}", error.kind()),
            ));
        }
        constraints.glob = Some(pattern.clone());
    }
    if let Some(kind) = &raw.kind {
        constraints.kind = Some(choice(doc, kind, &field("kind"), "kind", AssetKind::NAMES)?);
    }
    if let Some(count) = &raw.max_count {
        let value = *count.get_ref();
        if value < 1 || value > i64::from(MAX_ASSET_COUNT) {
            return Err(doc.field_error(
                count.span().start,
                &field("max_count"),
                format!("must be from 1 to {MAX_ASSET_COUNT} (not {value})"),
            ));
        }
        constraints.max_count = value as u32;
    }
    Ok(constraints)
}

/// The matcher of an asset's `glob`: `*`, `?`, `[...]` and `{a,b}` over a
/// file name.
pub fn asset_glob(pattern: &str) -> Result<globset::GlobMatcher, globset::Error> {
    Ok(globset::GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()?
        .compile_matcher())
}

/// A path that names one object: no `*`.
fn no_star(doc: &Document<'_>, path: &Spanned<String>, field: &str) -> Result<(), TomlError> {
    if path.get_ref().contains('*') {
        return Err(doc.field_error(
            path.span().start,
            field,
            "names one file or directory: a `*` is not allowed here",
        ));
    }
    Ok(())
}

/// `[labels] policy`: patterns added to the policy set, each checked as
/// [`PolicyPattern::parse`] reads it.
pub(crate) fn parse_policy(
    doc: &Document<'_>,
    labels: &RawLabels,
    table: &str,
    user: &User,
) -> Result<Vec<PolicyPattern>, TomlError> {
    let Some(list) = &labels.policy else {
        return Ok(Vec::new());
    };
    list.get_ref()
        .iter()
        .enumerate()
        .map(|(index, text)| {
            expand_uid(text.get_ref(), user.uid)
                .and_then(|text| PolicyPattern::parse(&text, user.home.as_deref()))
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

impl Profile {
    /// Parses a profile for `user`; `source` names it in messages.
    pub fn parse(text: &str, source: &Path, user: &User) -> Result<Profile, MissionError> {
        Ok(parse_profile(&Document::new(text, source), user)?)
    }
}

fn parse_profile(doc: &Document<'_>, user: &User) -> Result<Profile, TomlError> {
    let raw: RawProfileFile = doc.deserialize().map_err(with_hint)?;
    let profile = doc.required(raw.profile.as_ref(), 0, "profile", "missing section")?;
    let name = required(doc, &profile.get_ref().name, profile, "profile.name")?;
    let description = required(
        doc,
        &profile.get_ref().description,
        profile,
        "profile.description",
    )?;
    let grants = parse_grants(doc, &raw.grant, user)?;
    let mut env = Vec::new();
    for (key, value) in &raw.env {
        let field = format!("env.{key}");
        let written = value.get_ref();
        let expanded = if written.starts_with('~') {
            absolute_path(doc, value, &field, user)?
                .to_string_lossy()
                .into_owned()
        } else {
            written.clone()
        };
        env.push((key.clone(), expanded));
    }
    Ok(Profile {
        name: name.get_ref().clone(),
        description: description.get_ref().clone(),
        source: doc.path().to_owned(),
        grants,
        env,
    })
}

/// Says how to write an array of tables when a single table was written.
fn with_hint(mut error: TomlError) -> TomlError {
    if error.message.ends_with("expected a sequence") {
        match error.field.as_deref() {
            Some("grant") => error
                .message
                .push_str(" (write each grant as a [[grant]] table)"),
            Some("vote.rule") => error
                .message
                .push_str(" (write each rule as a [[vote.rule]] table)"),
            _ => {}
        }
    }
    error
}

/// A key of `table` that must be there: "missing field" points at the
/// table otherwise.
fn required<'a, T, U>(
    doc: &Document<'_>,
    value: &'a Option<Spanned<T>>,
    table: &Spanned<U>,
    field: &str,
) -> Result<&'a Spanned<T>, TomlError> {
    doc.required(value.as_ref(), table.span().start, field, "missing field")
}

/// A duration longer than zero and at most `max`.
fn duration(
    doc: &Document<'_>,
    value: &Spanned<String>,
    field: &str,
    max: Option<Duration>,
) -> Result<Duration, TomlError> {
    let error = |message: String| doc.field_error(value.span().start, field, message);
    let duration = humantime::parse_duration(value.get_ref()).map_err(|cause| {
        error(match cause {
            DurationError::NumberOverflow => format!("duration {:?} is too large", value.get_ref()),
            _ => format!(
                "invalid duration {:?} (write it like \"30s\", \"10m\" or \"1h30m\")",
                value.get_ref()
            ),
        })
    })?;
    if duration.is_zero() {
        return Err(error("must be longer than zero".to_owned()));
    }
    if let Some(max) = max.filter(|max| duration > *max) {
        return Err(error(format!(
            "must be at most {} (not {})",
            humantime::format_duration(max),
            humantime::format_duration(duration)
        )));
    }
    Ok(duration)
}

/// The duration of a `ttl` lifetime, as [`vote::check_ttl`] allows.
fn ttl(doc: &Document<'_>, value: &Spanned<String>, field: &str) -> Result<Duration, TomlError> {
    let duration = duration(doc, value, field, None)?;
    vote::check_ttl(duration).map_err(|message| doc.field_error(value.span().start, field, message))
}

/// Looks `value` up in `choices`, the accepted spellings of a setting.
fn choice<T: Copy>(
    doc: &Document<'_>,
    value: &Spanned<String>,
    field: &str,
    what: &str,
    choices: &[(&str, T)],
) -> Result<T, TomlError> {
    choices
        .iter()
        .find(|(name, _)| *name == value.get_ref())
        .map(|(_, choice)| *choice)
        .ok_or_else(|| {
            let expected: Vec<&str> = choices.iter().map(|(name, _)| *name).collect();
            doc.field_error(
                value.span().start,
                field,
                format!(
                    "unknown {what} {:?} (expected {})",
                    value.get_ref(),
                    or_list(&expected)
                ),
            )
        })
}

/// The `[[grant]]` entries of a mission or a profile, numbered from 1.
fn parse_grants(
    doc: &Document<'_>,
    grants: &[Spanned<RawGrant>],
    user: &User,
) -> Result<Vec<GrantSpec>, TomlError> {
    grants
        .iter()
        .enumerate()
        .map(|(index, grant)| parse_grant(doc, index + 1, grant, user))
        .collect()
}

fn parse_grant(
    doc: &Document<'_>,
    number: usize,
    grant: &Spanned<RawGrant>,
    user: &User,
) -> Result<GrantSpec, TomlError> {
    let field = |name: &str| format!("grant[{number}].{name}");
    let raw = grant.get_ref();

    let (path, expanded) = required_path(doc, &raw.path, grant, &field("path"), user)?;
    let ops_list = required(doc, &raw.ops, grant, &field("ops"))?;
    let bits = parse_ops(doc, ops_list, &field("ops"))?;
    let extent = parse_extent(doc, raw.extent.as_ref(), &field("extent"))?;
    let make = raw.make.as_ref().is_some_and(|make| *make.get_ref());
    if let Some(written) = &raw.make
        && *written.get_ref()
        && extent != Extent::Tree
    {
        return Err(doc.field_error(
            written.span().start,
            &field("make"),
            "make = true makes a directory: it needs extent = \"tree\"",
        ));
    }
    let optional = raw.optional.as_ref().is_some_and(|o| *o.get_ref());
    if let Some(written) = &raw.optional
        && optional
        && make
    {
        return Err(doc.field_error(
            written.span().start,
            &field("optional"),
            "optional = true with make = true: a directory pincer makes is never missing",
        ));
    }
    let own = raw.own.as_ref().is_some_and(|own| *own.get_ref());
    if let Some(written) = &raw.own
        && own
        && (extent != Extent::Tree || bits & pincer_common::CHANGE_OPS == 0)
    {
        return Err(doc.field_error(
            written.span().start,
            &field("own"),
            "own = true makes a directory the agent's own place: it needs extent = \"tree\" and an operation that changes something",
        ));
    }
    let spec = GrantSpec {
        path: expanded,
        ops: bits,
        extent,
        line: doc.line(path.span().start),
        make,
        optional,
        own,
    };
    check_pattern(doc, path, &spec, &field("path"))?;
    Ok(spec)
}

/// A `*` may only end a grant's path, making a prefix grant of one file
/// name's start: at most [`pincer_common::MAX_PREFIX_LEN`] bytes, not
/// empty, for files (`extent = "file"`), not made.
fn check_pattern(
    doc: &Document<'_>,
    path: &Spanned<String>,
    spec: &GrantSpec,
    field: &str,
) -> Result<(), TomlError> {
    let error = |message: &str| Err(doc.field_error(path.span().start, field, message));
    let written = path.get_ref();
    let stars = written.matches('*').count();
    if stars == 0 {
        return Ok(());
    }
    let Some(prefix) = spec.prefix() else {
        return error("a `*` may only end the path (a prefix of file names)");
    };
    if stars > 1 || prefix.contains(&b'/') {
        return error("a `*` may only end the path (a prefix of file names)");
    }
    if prefix.is_empty() {
        return error(
            "a prefix grant needs a prefix before its `*` (grant the directory as a tree instead)",
        );
    }
    if prefix.len() > pincer_common::MAX_PREFIX_LEN {
        return error(&format!(
            "a prefix is at most {} bytes",
            pincer_common::MAX_PREFIX_LEN
        ));
    }
    if spec.extent == Extent::Tree {
        return error("a prefix grant names files: it cannot be extent = \"tree\"");
    }
    Ok(())
}

/// A required path of `table` (its `field`), absolute or starting with `~`
/// (`home`): where it is written, and what it names.
fn required_path<'a, U>(
    doc: &Document<'_>,
    value: &'a Option<Spanned<String>>,
    table: &Spanned<U>,
    field: &str,
    user: &User,
) -> Result<(&'a Spanned<String>, PathBuf), TomlError> {
    let written = required(doc, value, table, field)?;
    Ok((written, absolute_path(doc, written, field, user)?))
}

/// A path written in the mission: absolute, or starting with `~`
/// (`user.home`), with each `{uid}` the user's id.
fn absolute_path(
    doc: &Document<'_>,
    path: &Spanned<String>,
    field: &str,
    user: &User,
) -> Result<PathBuf, TomlError> {
    let path_error = |message: String| doc.field_error(path.span().start, field, message);
    let written = path.get_ref();
    if written.contains('\0') {
        return Err(path_error("must not contain a NUL byte".to_owned()));
    }
    let with_uid = expand_uid(written, user.uid).map_err(path_error)?;
    let expanded = match with_uid.strip_prefix('~') {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => {
            let home = user
                .home
                .as_deref()
                .ok_or_else(|| path_error("cannot expand ~: HOME is not set".into()))?;
            if !home.is_absolute() {
                return Err(path_error(format!(
                    "cannot expand ~: HOME is not absolute ({:?})",
                    home.display().to_string()
                )));
            }
            home.join(rest.trim_start_matches('/'))
        }
        _ => PathBuf::from(with_uid.as_ref()),
    };
    if !expanded.is_absolute() {
        // `~user` reads like a home directory, but only `~` is expanded.
        let hint = if written.starts_with('~') {
            ": only \"~\" and \"~/...\" are expanded, not \"~user\""
        } else {
            ""
        };
        return Err(path_error(format!("must be absolute ({written:?}{hint})")));
    }
    Ok(expanded)
}

/// `text` with each `{uid}` replaced by `uid`. Other braces are kept as
/// written, except a `{word}` of lowercase letters, digits and `_`: that
/// reads like another variable (`{user}`, `{home}`), which would otherwise
/// name a directory nobody has.
fn expand_uid(text: &str, uid: u32) -> Result<std::borrow::Cow<'_, str>, String> {
    if !text.contains('{') {
        return Ok(text.into());
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let word_end = after
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(after.len());
        let (word, tail) = after.split_at(word_end);
        match tail.strip_prefix('}') {
            Some(tail) if word == "uid" => {
                out.push_str(&uid.to_string());
                rest = tail;
            }
            Some(_) if !word.is_empty() => {
                return Err(format!(
                    "unknown variable \"{{{word}}}\": only \"{{uid}}\" is expanded"
                ));
            }
            _ => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    Ok(out.into())
}

/// A non-empty list of operation names, as bits of [`ops`].
fn parse_ops(
    doc: &Document<'_>,
    list: &Spanned<Vec<Spanned<String>>>,
    field: &str,
) -> Result<u32, TomlError> {
    if list.get_ref().is_empty() {
        return Err(doc.field_error(list.span().start, field, "must list at least one operation"));
    }
    let mut bits = 0;
    for op in list.get_ref() {
        bits |= choice(
            doc,
            op,
            field,
            "operation",
            &ops::NAMES.map(|(bit, name)| (name, bit)),
        )?;
    }
    Ok(bits)
}

/// `defaults.capabilities`: capability names (`net_admin`, as the kernel
/// names them, lower case and without `CAP_`), each once, none of those no
/// agent is given.
fn parse_capabilities(
    doc: &Document<'_>,
    list: &Spanned<Vec<Spanned<String>>>,
) -> Result<u64, TomlError> {
    let mut set = 0;
    for (index, value) in list.get_ref().iter().enumerate() {
        let field = format!("defaults.capabilities[{}]", index + 1);
        let error = |message: String| doc.field_error(value.span().start, &field, message);
        let written = value.get_ref();
        let Some(&(cap, name)) = caps::NAMES.iter().find(|(_, name)| *name == written) else {
            // `CAP_NET_ADMIN` and `cap_net_admin` mean `net_admin`.
            let lower = written.to_ascii_lowercase();
            let plain = lower.strip_prefix("cap_").unwrap_or(&lower);
            let hint = caps::NAMES
                .iter()
                .find(|(_, known)| *known == plain)
                .map_or(String::new(), |(_, known)| format!(" (write it {known:?})"));
            return Err(error(format!("unknown capability {written:?}{hint}")));
        };
        if caps::NEVER & caps::bit(cap) != 0 {
            return Err(error(format!(
                "{name} is never given to an agent: it reaches the kernel or pincer itself"
            )));
        }
        if set & caps::bit(cap) != 0 {
            return Err(error(format!("duplicate capability {written:?}")));
        }
        set |= caps::bit(cap);
    }
    Ok(set)
}

fn parse_extent(
    doc: &Document<'_>,
    value: Option<&Spanned<String>>,
    field: &str,
) -> Result<Extent, TomlError> {
    match value {
        Some(value) => choice(doc, value, field, "extent", Extent::NAMES),
        None => Ok(Extent::default()),
    }
}

/// A lifetime as written, before a `ttl` gets its duration.
#[derive(Clone, Copy, PartialEq, Eq)]
enum LifetimeKind {
    Once,
    Ttl,
    Session,
}

const LIFETIMES: [(&str, LifetimeKind); 3] = [
    ("once", LifetimeKind::Once),
    ("ttl", LifetimeKind::Ttl),
    ("session", LifetimeKind::Session),
];

fn parse_vote(doc: &Document<'_>, raw: &RawVote, user: &User) -> Result<Voting, TomlError> {
    let mut voting = Voting::default();

    if let Some(list) = &raw.voters {
        if list.get_ref().is_empty() {
            return Err(doc.field_error(
                list.span().start,
                "vote.voters",
                "must list at least one voter",
            ));
        }
        let mut voters = Vec::new();
        for (index, value) in list.get_ref().iter().enumerate() {
            let field = format!("vote.voters[{}]", index + 1);
            let voter = choice(doc, value, &field, "voter", VoterKind::NAMES)?;
            if voters.contains(&voter) {
                return Err(doc.field_error(
                    value.span().start,
                    &field,
                    format!("duplicate voter {:?}", value.get_ref()),
                ));
            }
            voters.push(voter);
        }
        voting.voters = voters;
    }

    if let Some(value) = &raw.timeout {
        voting.policy.timeout = duration(doc, value, "vote.timeout", Some(MAX_VOTE_TIMEOUT))?;
    }

    if let Some(value) = &raw.default {
        voting.policy.default = choice(
            doc,
            value,
            "vote.default",
            "default verdict",
            DefaultVerdict::NAMES,
        )?;
    }

    // A max_ttl beside another cap would look like a limit yet limit nothing.
    let cap = match &raw.max_lifetime {
        Some(value) => Some((
            value,
            choice(doc, value, "vote.max_lifetime", "lifetime", &LIFETIMES)?,
        )),
        None => None,
    };
    voting.policy.max_lifetime = match (cap, &raw.max_ttl) {
        (Some((_, LifetimeKind::Ttl)), Some(value)) => {
            Lifetime::Ttl(ttl(doc, value, "vote.max_ttl")?)
        }
        (Some((cap, LifetimeKind::Ttl)), None) => {
            return Err(doc.field_error(
                cap.span().start,
                "vote.max_ttl",
                "missing field (max_lifetime = \"ttl\" needs it)",
            ));
        }
        (_, Some(value)) => {
            return Err(doc.field_error(
                value.span().start,
                "vote.max_ttl",
                "only allowed with max_lifetime = \"ttl\"",
            ));
        }
        (Some((_, LifetimeKind::Once)), None) => Lifetime::Once,
        (Some((_, LifetimeKind::Session)) | None, None) => Lifetime::Session,
    };

    if let Some(value) = &raw.max_extent {
        voting.policy.max_extent = choice(doc, value, "vote.max_extent", "extent", Extent::NAMES)?;
    }

    voting.webhook = raw
        .webhook
        .as_ref()
        .map(|webhook| parse_webhook(doc, webhook, user))
        .transpose()?;
    if voting.webhook.is_none() {
        let webhook_voter = raw
            .voters
            .iter()
            .flat_map(toml::Spanned::get_ref)
            .find(|value| value.get_ref() == VoterKind::Webhook.name());
        if let Some(value) = webhook_voter {
            return Err(doc.field_error(
                value.span().start,
                "vote.voters",
                "the webhook voter needs a [vote.webhook] table",
            ));
        }
    }

    voting.rules = raw
        .rule
        .iter()
        .enumerate()
        .map(|(index, rule)| parse_rule(doc, index + 1, rule, user))
        .collect::<Result<Vec<_>, _>>()?;

    Ok(voting)
}

fn parse_webhook(
    doc: &Document<'_>,
    webhook: &Spanned<RawWebhook>,
    user: &User,
) -> Result<WebhookConfig, TomlError> {
    let raw = webhook.get_ref();

    let url = required(doc, &raw.url, webhook, "vote.webhook.url")?;
    // The URL may carry a token: messages describe it without repeating it.
    let url_error =
        |message: String| doc.field_error(url.span().start, "vote.webhook.url", message);
    let parsed = reqwest::Url::parse(url.get_ref())
        .map_err(|error| url_error(format!("not a valid URL ({error})")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(url_error(format!(
            "must use http or https, not {:?}",
            parsed.scheme()
        )));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(url_error("must name a host".to_owned()));
    }

    let (secret_written, secret_file) = required_path(
        doc,
        &raw.secret_file,
        webhook,
        "vote.webhook.secret_file",
        user,
    )?;

    let clock_skew = match &raw.clock_skew {
        Some(value) => duration(doc, value, "vote.webhook.clock_skew", Some(MAX_CLOCK_SKEW))?,
        None => DEFAULT_CLOCK_SKEW,
    };

    Ok(WebhookConfig {
        url: url.get_ref().clone(),
        secret_file,
        clock_skew,
        line: doc.line(webhook.span().start),
        secret_line: doc.line(secret_written.span().start),
        owner: raw.owner.as_ref().is_some_and(|owner| *owner.get_ref()),
        node: None,
    })
}

fn parse_rule(
    doc: &Document<'_>,
    number: usize,
    rule: &Spanned<RawRule>,
    user: &User,
) -> Result<Rule, TomlError> {
    let field = |name: &str| format!("vote.rule[{number}].{name}");
    let raw = rule.get_ref();

    let (path, expanded) = required_path(doc, &raw.path, rule, &field("path"), user)?;
    // Rules compare paths without resolving them, so `..` would never match
    // the path of a request: a deny rule with it would protect nothing.
    if expanded
        .components()
        .any(|part| part == Component::ParentDir)
    {
        return Err(doc.field_error(
            path.span().start,
            &field("path"),
            format!("must not contain \"..\" ({:?})", path.get_ref()),
        ));
    }

    let extent = parse_extent(doc, raw.extent.as_ref(), &field("extent"))?;
    let bits = match &raw.ops {
        Some(list) => parse_ops(doc, list, &field("ops"))?,
        None => ops::ALL,
    };

    let verdict = required(doc, &raw.verdict, rule, &field("verdict"))?;
    let allow = choice(
        doc,
        verdict,
        &field("verdict"),
        "verdict",
        &[("deny", false), ("allow", true)],
    )?;
    let lifetime = match &raw.lifetime {
        Some(value) if !allow => {
            return Err(doc.field_error(
                value.span().start,
                &field("lifetime"),
                "only allowed with verdict = \"allow\"",
            ));
        }
        Some(value) => choice(doc, value, &field("lifetime"), "lifetime", &LIFETIMES)?,
        None => LifetimeKind::Once,
    };
    let verdict = match (lifetime, &raw.ttl) {
        (LifetimeKind::Ttl, Some(value)) => {
            RuleVerdict::Allow(Lifetime::Ttl(ttl(doc, value, &field("ttl"))?))
        }
        (LifetimeKind::Ttl, None) => {
            return Err(doc.field_error(
                rule.span().start,
                &field("ttl"),
                "missing field (lifetime = \"ttl\" needs it)",
            ));
        }
        (_, Some(value)) => {
            return Err(doc.field_error(
                value.span().start,
                &field("ttl"),
                "only allowed with lifetime = \"ttl\"",
            ));
        }
        (_, None) if !allow => RuleVerdict::Deny,
        (LifetimeKind::Once, None) => RuleVerdict::Allow(Lifetime::Once),
        (LifetimeKind::Session, None) => RuleVerdict::Allow(Lifetime::Session),
    };

    let reason = match &raw.reason {
        Some(value) if value.get_ref().trim().is_empty() => {
            return Err(doc.field_error(value.span().start, &field("reason"), "must not be empty"));
        }
        Some(value) => Some(value.get_ref().clone()),
        None => None,
    };

    Ok(Rule {
        path: expanded,
        extent,
        ops: bits,
        verdict,
        reason,
        line: doc.line(path.span().start),
    })
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;
    use crate::toml_file::FileError;
    use crate::toml_file::test_support::{Parts, field, parts as error};
    use crate::vote::Policy;

    fn parse(text: &str) -> Result<Mission, MissionError> {
        Mission::parse_with_home(text, Path::new("m.toml"), Some(Path::new("/home/me")))
    }

    /// The position, field and message of an `Invalid` error.
    fn invalid(text: &str) -> Parts {
        match parse(text) {
            Err(MissionError::File(FileError::Invalid(error))) => error.parts(),
            other => panic!("expected an invalid mission, got {other:?}"),
        }
    }

    /// The running example's nodes, then `more`.
    fn with_assets(more: &str) -> String {
        format!(
            r#"[mission]
name = "upload"
[[asset]]
id = "email"
path = "~/mail/alice.eml"
ops = ["read"]
[[asset]]
id = "image"
found_in = "email"
ops = ["read"]
constraints = {{ under = ["~", "/tmp"], glob = "*.{{png,jpg}}", max_count = 2 }}
{more}"#
        )
    }

    #[test]
    fn assets_are_nodes_and_what_nothing_is_found_in_is_a_grant() {
        let mission = parse(&with_assets(
            "[[asset]]\nid = \"notes\"\npath = \"~/notes\"\nops = [\"read\"]\nextent = \"tree\"\n",
        ))
        .unwrap();
        let ids: Vec<&str> = mission.assets.iter().map(|a| a.id.as_str()).collect();
        assert_eq!(ids, ["email", "image", "notes"]);
        let image = &mission.assets[1];
        assert_eq!(image.found_in, Some(0));
        assert_eq!(image.path, None);
        assert_eq!(
            image.constraints,
            Constraints {
                under: vec![PathBuf::from("/home/me"), PathBuf::from("/tmp")],
                glob: Some("*.{png,jpg}".to_owned()),
                kind: None,
                max_count: 2,
            }
        );
        assert!(asset_glob("*.{png,jpg}").unwrap().is_match("data.png"));
        // The email is a source: not granted, its first read is observed.
        // The notes are found in nothing: a grant like any other.
        let granted: Vec<(&Path, Extent, usize)> = mission
            .grants
            .iter()
            .map(|g| (g.path.as_path(), g.extent, g.line))
            .collect();
        assert_eq!(granted, [(Path::new("/home/me/notes"), Extent::Tree, 13)]);
    }

    #[test]
    fn bad_assets_are_refused_with_their_field() {
        let one = |more: &str| invalid(&with_assets(more));
        assert_eq!(
            one(
                "[[asset]]\nid = \"repo\"\nfound_in = \"mail\"\nops = [\"read\"]\nconstraints = { under = [\"~\"] }\n"
            ),
            error(
                14,
                12,
                "asset[3].found_in",
                "no asset has the id \"mail\" (ids: email, image or repo)"
            )
        );
        assert_eq!(
            one("[[asset]]\nid = \"image\"\npath = \"/x\"\nops = [\"read\"]\n"),
            error(
                13,
                6,
                "asset[3].id",
                "\"image\" is already the id of asset[2]"
            )
        );
        assert_eq!(
            one("[[asset]]\nid = \"a b\"\npath = \"/x\"\nops = [\"read\"]\n").3,
            "\"a b\" is not an id: 1 to 64 letters, digits, `-` or `_`"
        );
        assert_eq!(
            one("[[asset]]\nid = \"x\"\nops = [\"read\"]\n"),
            error(
                12,
                1,
                "asset[3].path",
                "missing field: an asset has a `path`, or is `found_in` another asset"
            )
        );
        assert_eq!(
            one("[[asset]]\nid = \"x\"\npath = \"/x\"\nfound_in = \"email\"\nops = [\"read\"]\n").2,
            field("asset[3].found_in")
        );
        assert_eq!(
            one("[[asset]]\nid = \"x\"\nfound_in = \"email\"\nops = [\"read\"]\n").3,
            "an asset found in evidence needs `under`: the directories it may be in \
             (a name in a page is never enough to reach anywhere)"
        );
        assert_eq!(
            one("[[asset]]\nid = \"x\"\nfound_in = \"email\"\nops = [\"read\"]\nconstraints = { under = [\"/\"] }\n").2,
            field("asset[3].constraints.under[1]")
        );
        assert_eq!(
            one("[[asset]]\nid = \"x\"\nfound_in = \"email\"\nops = [\"read\"]\nconstraints = { under = [\"~\"], glob = \"*.{png\" }\n").2,
            field("asset[3].constraints.glob")
        );
        assert_eq!(
            one("[[asset]]\nid = \"x\"\nfound_in = \"email\"\nops = [\"read\"]\nconstraints = { under = [\"~\"], max_count = 0 }\n").3,
            "must be from 1 to 1024 (not 0)"
        );
        assert_eq!(
            one("[[asset]]\nid = \"x\"\nfound_in = \"email\"\nops = [\"read\"]\nextent = \"tree\"\nconstraints = { under = [\"~\"], kind = \"file\" }\n").2,
            field("asset[3].constraints.kind")
        );
        assert_eq!(
            one("[[asset]]\nid = \"x\"\nfound_in = \"email\"\nops = [\"read\"]\nconstraints = { under = [\"~\"], color = \"red\" }\n").2,
            field("asset[3].constraints.color")
        );
        // Found in each other, with no evidence to begin with.
        let cycle = invalid(
            r#"[mission]
name = "m"
[[asset]]
id = "a"
found_in = "b"
ops = ["read"]
constraints = { under = ["/srv"] }
[[asset]]
id = "b"
found_in = "a"
ops = ["read"]
constraints = { under = ["/srv"] }
"#,
        );
        assert_eq!(
            cycle,
            error(
                5,
                12,
                "asset[1].found_in",
                "the assets are found in each other in a cycle (a <- b <- a): one of them needs a path"
            )
        );
        // Found in something that is not read.
        let unread = invalid(
            r#"[mission]
name = "m"
[[asset]]
id = "a"
path = "/srv/a"
ops = ["write"]
[[asset]]
id = "b"
found_in = "a"
ops = ["read"]
constraints = { under = ["/srv"] }
"#,
        );
        assert_eq!(unread.2, field("asset[2].found_in"));
    }

    /// A seed of the fuzz corpus too, so the fuzzer starts from what these
    /// tests check.
    const GOOD: &str = include_str!("../../../fuzz/corpus/mission/tests_good.toml");

    #[test]
    fn parses_a_good_file() {
        let mission = parse(GOOD).unwrap();
        assert_eq!(
            mission,
            Mission {
                name: "fix the failing test".to_owned(),
                source: PathBuf::from("m.toml"),
                grants: vec![
                    GrantSpec {
                        path: PathBuf::from("/home/me/project"),
                        ops: ops::READ | ops::WRITE | ops::CREATE,
                        extent: Extent::Tree,
                        line: 6,
                        make: false,
                        own: false,
                        optional: false,
                    },
                    GrantSpec {
                        path: PathBuf::from("/home/me/notes.txt"),
                        ops: ops::READ,
                        extent: Extent::File,
                        line: 11,
                        make: false,
                        own: false,
                        optional: false,
                    },
                    GrantSpec {
                        path: PathBuf::from("/usr/bin/cargo"),
                        ops: ops::READ | ops::EXEC,
                        extent: Extent::File,
                        line: 15,
                        make: false,
                        own: false,
                        optional: false,
                    },
                ],
                baseline: Baseline::None,
                on_unknown: Mode::Enforce,
                tmp: Tmp::Private,
                capabilities: caps::DEFAULT,
                vote: Voting::default(),
                profiles: Vec::new(),
                policy: Vec::new(),
                sources: Vec::new(),
                actions: Vec::new(),
                assets: Vec::new(),
            }
        );
    }

    #[test]
    fn a_trailing_star_grants_the_names_that_start_so() {
        let text =
            "[mission]\nname = \"m\"\n[[grant]]\npath = \"~/.claude.json*\"\nops = [\"read\"]\n";
        let mission = parse(text).unwrap();
        assert_eq!(mission.grants[0].prefix(), Some(&b".claude.json"[..]));
        assert_eq!(parse(GOOD).unwrap().grants[0].prefix(), None);
        let grant = |path: &str, more: &str| {
            invalid(&format!(
                "[mission]\nname = \"m\"\n[[grant]]\npath = \"{path}\"\nops = [\"read\"]\n{more}"
            ))
        };
        let only_at_the_end = "a `*` may only end the path (a prefix of file names)";
        assert_eq!(grant("/a*/b", "").3, only_at_the_end);
        assert_eq!(grant("/a/b**", "").3, only_at_the_end);
        assert_eq!(
            grant("/a/*", ""),
            (
                4,
                8,
                field("grant[1].path"),
                "a prefix grant needs a prefix before its `*` (grant the directory as a tree instead)"
                    .to_owned()
            )
        );
        assert_eq!(
            grant("/a/b*", "extent = \"tree\"\n").3,
            "a prefix grant names files: it cannot be extent = \"tree\""
        );
        let long = format!("/a/{}*", "x".repeat(64));
        assert_eq!(grant(&long, "").3, "a prefix is at most 63 bytes");
    }

    #[test]
    fn make_is_for_trees_and_profiles_are_named() {
        let text =
            "[mission]\nname = \"m\"\n[[grant]]\npath = \"/a\"\nops = [\"read\"]\nmake = true\n";
        assert_eq!(
            invalid(text),
            (
                6,
                8,
                field("grant[1].make"),
                "make = true makes a directory: it needs extent = \"tree\"".to_owned()
            )
        );
        let text = "[mission]\nname = \"m\"\nprofiles = [\"codex\", \"emacs\"]\n";
        assert_eq!(
            invalid(text),
            (
                3,
                22,
                field("mission.profiles[2]"),
                "unknown profile \"emacs\" (known: aider, claude-code, codex)".to_owned()
            )
        );
        let text = "[mission]\nname = \"m\"\nprofiles = [\"codex\"]\n";
        let mission = parse(text).unwrap();
        assert_eq!(mission.profiles[0].name, "codex");
        assert!(
            mission.profiles[0].grants[0]
                .path
                .starts_with("/home/me/.codex")
        );
    }

    #[test]
    fn optional_is_read_and_never_with_make() {
        let text = "[mission]\nname = \"m\"\n[[grant]]\npath = \"/a\"\nops = [\"read\"]\noptional = true\n";
        let mission = Mission::parse(text, Path::new("m.toml")).unwrap();
        assert!(mission.grants[0].optional && !mission.grants[0].make);
        let both = "[mission]\nname = \"m\"\n[[grant]]\npath = \"/a\"\nops = [\"read\"]\nextent = \"tree\"\nmake = true\noptional = true\n";
        let error = Mission::parse(both, Path::new("m.toml")).unwrap_err();
        assert_eq!(
            error.to_string(),
            "m.toml:8:12: grant[1].optional: optional = true with make = true: a directory pincer makes is never missing"
        );
    }

    #[test]
    fn defaults_and_no_grants() {
        let mission = parse("[mission]\nname = \"idle\"\n").unwrap();
        assert_eq!(mission.name, "idle");
        assert!(mission.grants.is_empty());
        assert_eq!(mission.baseline, Baseline::Runtime);
        assert_eq!(mission.capabilities, caps::DEFAULT);
        let mission = parse("[mission]\nname = \"x\"\n[defaults]\n").unwrap();
        assert_eq!(mission.baseline, Baseline::Runtime);
    }

    #[test]
    fn capabilities_add_to_the_default_set() {
        let text =
            "[mission]\nname = \"m\"\n[defaults]\ncapabilities = [\"net_admin\", \"net_raw\"]\n";
        assert_eq!(
            parse(text).unwrap().capabilities,
            caps::DEFAULT | caps::bit(caps::NET_ADMIN) | caps::bit(caps::NET_RAW)
        );
        let text = "[mission]\nname = \"m\"\n[defaults]\ncapabilities = []\n";
        assert_eq!(parse(text).unwrap().capabilities, caps::DEFAULT);
        // Naming one of the default set again is harmless.
        let text = "[mission]\nname = \"m\"\n[defaults]\ncapabilities = [\"chown\"]\n";
        assert_eq!(parse(text).unwrap().capabilities, caps::DEFAULT);
    }

    #[test]
    fn bad_capabilities_name_their_entry() {
        let capabilities = |list: &str| {
            invalid(&format!(
                "[mission]\nname = \"m\"\n[defaults]\ncapabilities = [{list}]\n"
            ))
        };
        assert_eq!(
            capabilities("\"net_admin\", \"sys_admin\""),
            (
                4,
                30,
                field("defaults.capabilities[2]"),
                "sys_admin is never given to an agent: it reaches the kernel or pincer itself"
                    .to_owned()
            )
        );
        assert_eq!(
            capabilities("\"CAP_NET_RAW\""),
            (
                4,
                17,
                field("defaults.capabilities[1]"),
                "unknown capability \"CAP_NET_RAW\" (write it \"net_raw\")".to_owned()
            )
        );
        assert_eq!(
            capabilities("\"superpower\""),
            (
                4,
                17,
                field("defaults.capabilities[1]"),
                "unknown capability \"superpower\"".to_owned()
            )
        );
        assert_eq!(
            capabilities("\"kill\", \"kill\""),
            (
                4,
                25,
                field("defaults.capabilities[2]"),
                "duplicate capability \"kill\"".to_owned()
            )
        );
        assert_eq!(
            capabilities("7").2,
            field("defaults.capabilities[1]"),
            "a number is not a name"
        );
    }

    #[test]
    fn accepts_inline_tables() {
        let text = "mission = { name = \"x\" }\ngrant = [{ path = \"/a\", ops = [\"read\"] }]\n";
        let mission = parse(text).unwrap();
        assert_eq!(mission.grants[0].path, Path::new("/a"));
        assert_eq!(mission.grants[0].line, 2);
    }

    #[test]
    fn expands_the_home_directory() {
        let grant = |path: &str| {
            let text =
                format!("[mission]\nname = \"x\"\n[[grant]]\npath = {path:?}\nops = [\"read\"]\n");
            parse(&text).map(|mission| mission.grants[0].path.clone())
        };
        assert_eq!(grant("~").unwrap(), Path::new("/home/me"));
        assert_eq!(grant("~/").unwrap(), Path::new("/home/me"));
        assert_eq!(grant("~/a/b").unwrap(), Path::new("/home/me/a/b"));
        // Only a leading `~` is special.
        assert_eq!(grant("/x/~/y").unwrap(), Path::new("/x/~/y"));
        // Lexically as written: no normalisation.
        assert_eq!(grant("/a/../b").unwrap(), Path::new("/a/../b"));
    }

    #[test]
    fn expands_the_user_id() {
        let user = User {
            home: Some(PathBuf::from("/home/me")),
            uid: 1000,
        };
        let at = |path: &str, table: &str| {
            let text = format!(
                "[mission]\nname = \"x\"\n[[{table}]]\npath = {path:?}\nops = [\"read\"]\n"
            );
            Mission::parse_for(&text, Path::new("m.toml"), &user)
        };
        let grant = |path: &str| at(path, "grant").map(|m| m.grants[0].path.clone());
        assert_eq!(
            grant("/tmp/cc-daemon-{uid}").unwrap(),
            Path::new("/tmp/cc-daemon-1000")
        );
        assert_eq!(
            grant("/run/user/{uid}/x-{uid}").unwrap(),
            Path::new("/run/user/1000/x-1000")
        );
        assert_eq!(grant("~/{uid}").unwrap(), Path::new("/home/me/1000"));
        // Braces that are not a variable are names like any other.
        assert_eq!(grant("/srv/{a,b}").unwrap(), Path::new("/srv/{a,b}"));
        assert_eq!(grant("/srv/{").unwrap(), Path::new("/srv/{"));
        assert_eq!(grant("/srv/{}").unwrap(), Path::new("/srv/{}"));
        assert_eq!(grant("/srv/{UID}").unwrap(), Path::new("/srv/{UID}"));
        // The mission voter's rules and the policy set read it too.
        let rule = "[mission]\nname = \"x\"\n[defaults]\non_unknown = \"ask\"\n[[vote.rule]]\npath = \"/tmp/a-{uid}\"\nverdict = \"deny\"\n";
        let mission = Mission::parse_for(rule, Path::new("m.toml"), &user).unwrap();
        assert_eq!(mission.vote.rules[0].path, Path::new("/tmp/a-1000"));
        let labels = "[mission]\nname = \"x\"\n[labels]\npolicy = [\"/run/user/{uid}/k\"]\n";
        let mission = Mission::parse_for(labels, Path::new("m.toml"), &user).unwrap();
        assert_eq!(mission.policy[0].text(), "/run/user/1000/k");
    }

    #[test]
    fn other_variables_are_errors() {
        let text =
            "[mission]\nname = \"x\"\n[[grant]]\npath = \"/tmp/x-{user}\"\nops = [\"read\"]\n";
        assert_eq!(
            invalid(text),
            (
                4,
                8,
                field("grant[1].path"),
                "unknown variable \"{user}\": only \"{uid}\" is expanded".to_owned()
            )
        );
        let text = "[mission]\nname = \"x\"\n[labels]\npolicy = [\"/home/{home}/k\"]\n";
        assert_eq!(
            invalid(text).3,
            "unknown variable \"{home}\": only \"{uid}\" is expanded"
        );
    }

    #[test]
    fn other_users_homes_are_not_expanded() {
        let text = "[mission]\nname = \"x\"\n[[grant]]\npath = \"~bob/x\"\nops = [\"read\"]\n";
        assert_eq!(
            invalid(text),
            (
                4,
                8,
                field("grant[1].path"),
                "must be absolute (\"~bob/x\": only \"~\" and \"~/...\" are expanded, not \"~user\")"
                    .to_owned()
            )
        );
    }

    #[test]
    fn tilde_without_a_home_is_an_error() {
        let text = "[mission]\nname = \"x\"\n[[grant]]\npath = \"~/x\"\nops = [\"read\"]\n";
        let error = Mission::parse_with_home(text, Path::new("m.toml"), None).unwrap_err();
        assert_eq!(
            error.to_string(),
            "m.toml:4:8: grant[1].path: cannot expand ~: HOME is not set"
        );
        let error = Mission::parse_with_home(text, Path::new("m.toml"), Some(Path::new("rel")))
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "m.toml:4:8: grant[1].path: cannot expand ~: HOME is not absolute (\"rel\")"
        );
    }

    #[test]
    fn unknown_operation() {
        let text = r#"[mission]
name = "m"

[[grant]]
path = "/a"
ops = ["read"]

[[grant]]
path = "/b"
ops = ["write", "raed"]
"#;
        assert_eq!(
            invalid(text),
            (
                10,
                17,
                field("grant[2].ops"),
                "unknown operation \"raed\" (expected read, write, create, exec, delete, rename, link, setattr or mkdir)".to_owned()
            )
        );
        assert_eq!(
            parse(text).unwrap_err().to_string(),
            "m.toml:10:17: grant[2].ops: unknown operation \"raed\" \
             (expected read, write, create, exec, delete, rename, link, setattr or mkdir)"
        );
    }

    #[test]
    fn missing_mission_name() {
        let text = "# no name\n\n[mission]\n\n[[grant]]\npath = \"/a\"\nops = [\"read\"]\n";
        assert_eq!(
            invalid(text),
            (3, 1, field("mission.name"), "missing field".to_owned())
        );
        assert_eq!(
            parse(text).unwrap_err().to_string(),
            "m.toml:3:1: mission.name: missing field"
        );
    }

    #[test]
    fn missing_mission_section() {
        let text = "[[grant]]\npath = \"/a\"\nops = [\"read\"]\n";
        assert_eq!(
            invalid(text),
            (1, 1, field("mission"), "missing section".to_owned())
        );
    }

    #[test]
    fn empty_mission_name() {
        assert_eq!(
            invalid("[mission]\nname = \"  \"\n"),
            (2, 8, field("mission.name"), "must not be empty".to_owned())
        );
    }

    #[test]
    fn relative_path() {
        let text = "[mission]\nname = \"m\"\n[[grant]]\nops = [\"read\"]\npath = \"src/x\"\n";
        assert_eq!(
            invalid(text),
            (
                5,
                8,
                field("grant[1].path"),
                "must be absolute (\"src/x\")".to_owned()
            )
        );
        let empty = "[mission]\nname = \"m\"\n[[grant]]\npath = \"\"\nops = [\"read\"]\n";
        assert_eq!(
            invalid(empty),
            (
                4,
                8,
                field("grant[1].path"),
                "must be absolute (\"\")".to_owned()
            )
        );
    }

    #[test]
    fn nul_in_path() {
        let text = "[mission]\nname = \"m\"\n[[grant]]\npath = \"/a\\u0000b\"\nops = [\"read\"]\n";
        assert_eq!(
            invalid(text),
            (
                4,
                8,
                field("grant[1].path"),
                "must not contain a NUL byte".to_owned()
            )
        );
    }

    #[test]
    fn syntax_error() {
        let text = "[mission]\nname = \"m\n";
        let (line, column, field, message) = invalid(text);
        assert_eq!((line, column, field), (2, 10, None));
        assert_eq!(message, "invalid basic string");
        assert_eq!(
            parse(text).unwrap_err().to_string(),
            "m.toml:2:10: invalid basic string"
        );
    }

    #[test]
    fn duplicate_key() {
        let text = "[mission]\nname = \"a\"\nname = \"b\"\n";
        assert_eq!(
            invalid(text),
            (
                3,
                1,
                None,
                "duplicate key `name` in table `mission`".to_owned()
            )
        );
    }

    #[test]
    fn duplicate_section() {
        let (line, column, field, message) = invalid("[mission]\nname = \"a\"\n[mission]\n");
        assert_eq!((line, column, field), (3, 1, None));
        assert_eq!(
            message,
            "invalid table header: duplicate key `mission` in document root"
        );
    }

    #[test]
    fn wrong_type_of_a_value() {
        assert_eq!(
            invalid("[mission]\nname = 3\n"),
            (
                2,
                8,
                field("mission.name"),
                "invalid type: integer `3`, expected a string".to_owned()
            )
        );
    }

    #[test]
    fn wrong_type_of_a_section() {
        assert_eq!(
            invalid("mission = \"x\"\n"),
            (
                1,
                11,
                field("mission"),
                "invalid type: string \"x\", expected a table".to_owned()
            )
        );
    }

    #[test]
    fn wrong_type_in_the_ops_list() {
        let text = "[mission]\nname = \"m\"\n[[grant]]\npath = \"/a\"\nops = [\"read\", 3]\n";
        assert_eq!(
            invalid(text),
            (
                5,
                16,
                field("grant[1].ops[2]"),
                "invalid type: integer `3`, expected a string".to_owned()
            )
        );
    }

    #[test]
    fn ops_must_be_a_list() {
        let text = "[mission]\nname = \"m\"\n[[grant]]\npath = \"/a\"\nops = \"read\"\n";
        assert_eq!(
            invalid(text),
            (
                5,
                7,
                field("grant[1].ops"),
                "invalid type: string \"read\", expected a sequence".to_owned()
            )
        );
    }

    #[test]
    fn empty_ops_list() {
        let text = "[mission]\nname = \"m\"\n[[grant]]\npath = \"/a\"\nops = []\n";
        assert_eq!(
            invalid(text),
            (
                5,
                7,
                field("grant[1].ops"),
                "must list at least one operation".to_owned()
            )
        );
    }

    #[test]
    fn missing_path_and_ops() {
        let no_path = "[mission]\nname = \"m\"\n\n[[grant]]\nops = [\"read\"]\n";
        assert_eq!(
            invalid(no_path),
            (4, 1, field("grant[1].path"), "missing field".to_owned())
        );
        let no_ops = "[mission]\nname = \"m\"\n\n[[grant]]\npath = \"/a\"\n";
        assert_eq!(
            invalid(no_ops),
            (4, 1, field("grant[1].ops"), "missing field".to_owned())
        );
    }

    #[test]
    fn unknown_extent() {
        let text = "[mission]\nname = \"m\"\n[[grant]]\npath = \"/a\"\nops = [\"read\"]\n\
                    extent = \"subtree\"\n";
        assert_eq!(
            invalid(text),
            (
                6,
                10,
                field("grant[1].extent"),
                "unknown extent \"subtree\" (expected file or tree)".to_owned()
            )
        );
    }

    #[test]
    fn unknown_baseline() {
        let text = "[mission]\nname = \"m\"\n[defaults]\nbaseline = \"all\"\n";
        assert_eq!(
            invalid(text),
            (
                4,
                12,
                field("defaults.baseline"),
                "unknown baseline \"all\" (expected runtime or none)".to_owned()
            )
        );
    }

    #[test]
    fn unknown_key_in_a_grant() {
        let text = "[mission]\nname = \"m\"\n[[grant]]\npath = \"/a\"\n[[grant]]\npath = \"/b\"\n\
                    opz = [\"read\"]\n";
        assert_eq!(
            invalid(text),
            (
                7,
                1,
                field("grant[2].opz"),
                "unknown field `opz`, expected one of `path`, `ops`, `extent`, `make`, `optional`, `own`"
                    .to_owned()
            )
        );
    }

    #[test]
    fn unknown_keys_elsewhere() {
        let (line, column, field_name, message) =
            invalid("[mission]\nname = \"m\"\ngoal = \"x\"\n");
        assert_eq!((line, column, field_name), (3, 1, field("mission.goal")));
        assert!(message.starts_with("unknown field `goal`"), "{message}");

        let (line, column, field_name, _) =
            invalid("[mission]\nname = \"m\"\n[policy]\nquorum = 2\n");
        assert_eq!((line, column, field_name), (3, 2, field("policy")));

        let (line, column, field_name, _) =
            invalid("[mission]\nname = \"m\"\n[vote]\nquorum = 2\n");
        assert_eq!((line, column, field_name), (4, 1, field("vote.quorum")));

        let (line, column, field_name, _) =
            invalid("[mission]\nname = \"m\"\n[defaults]\non_unknwon = \"deny\"\n");
        assert_eq!(
            (line, column, field_name),
            (4, 1, field("defaults.on_unknwon"))
        );

        let (line, _, field_name, _) = invalid("name = \"m\"\n[mission]\nname = \"m\"\n");
        assert_eq!((line, field_name), (1, field("name")));
    }

    #[test]
    fn a_single_grant_table_gets_a_hint() {
        let text = "[mission]\nname = \"m\"\n[grant]\npath = \"/a\"\nops = [\"read\"]\n";
        let (line, column, field_name, message) = invalid(text);
        assert_eq!((line, column, field_name), (3, 1, field("grant")));
        assert_eq!(
            message,
            "invalid type: map, expected a sequence (write each grant as a [[grant]] table)"
        );
    }

    #[test]
    fn datetimes_are_named_as_such() {
        let (line, column, _, message) = invalid("[mission]\nname = 1979-05-27\n");
        assert_eq!((line, column), (2, 8));
        assert_eq!(message, "invalid type: datetime, expected a string");
    }

    #[test]
    fn columns_count_characters() {
        // "ü" is two bytes and one column: "bad" starts at column 32.
        let text = "grant = [{ path = \"/ü\", ops = [\"bad\"] }]\n[mission]\nname = \"m\"\n";
        let (line, column, field_name, _) = invalid(text);
        assert_eq!((line, column, field_name), (1, 32, field("grant[1].ops")));
    }

    #[test]
    fn forty_thousand_grants() {
        // Each grant's line is looked up in the line index: a scan of the
        // text per grant made this quadratic.
        let mut text = String::from("[mission]\nname = \"many\"\n");
        for index in 0..40_000 {
            text.push_str(&format!(
                "[[grant]]\npath = \"/g/{index}\"\nops = [\"read\"]\n"
            ));
        }
        let mission = parse(&text).unwrap();
        assert_eq!(mission.grants.len(), 40_000);
        let last = &mission.grants[39_999];
        assert_eq!(last.path, Path::new("/g/39999"));
        // `[mission]` and its name, then three lines a grant.
        assert_eq!(last.line, 2 + 3 * 39_999 + 2);
    }

    #[test]
    fn integers_too_large_for_toml_name_their_field() {
        assert_eq!(
            invalid("[mission]\nname = 99999999999999999999\n"),
            error(
                2,
                8,
                "mission.name",
                "integer 99999999999999999999 does not fit in 64 bits"
            )
        );
        let text = "[mission]\nname = \"m\"\n[[grant]]\npath = \"/a\"\n\
                    ops = [\"read\", -9_223_372_036_854_775_809]\n";
        assert_eq!(
            invalid(text),
            error(
                5,
                16,
                "grant[1].ops[2]",
                "integer -9_223_372_036_854_775_809 does not fit in 64 bits"
            )
        );
    }

    #[test]
    fn reads_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.toml");
        fs::write(&path, "[mission]\nname = \"from a file\"\n").unwrap();
        let mission = Mission::from_file(&path).unwrap();
        assert_eq!(mission.name, "from a file");
        assert_eq!(mission.source, path);

        let missing = dir.path().join("missing.toml");
        let error = Mission::from_file(&missing).unwrap_err();
        assert!(
            matches!(error, MissionError::File(FileError::Io { ref path, .. }) if *path == missing)
        );
        assert_eq!(
            error.to_string(),
            format!("cannot read mission file {}", missing.display())
        );
    }

    #[test]
    fn error_messages_name_the_file() {
        let error = Mission::parse_with_home("[mission]\n", Path::new("/etc/pincer/m.toml"), None)
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "/etc/pincer/m.toml:1:1: mission.name: missing field"
        );
    }

    // Parked requests and votes.

    /// The error of a mission whose text after `[mission]` starts on line 3.
    fn vote_invalid(rest: &str) -> Parts {
        invalid(&format!("[mission]\nname = \"m\"\n{rest}"))
    }

    /// A webhook section whose `url` is on line 6 and `secret_file` on 7.
    fn webhook(url: &str, secret_file: &str) -> String {
        format!(
            "[vote]\nvoters = [\"webhook\"]\n[vote.webhook]\nurl = {url:?}\n\
             secret_file = {secret_file:?}\n"
        )
    }

    #[test]
    fn vote_defaults_when_absent() {
        let mission = parse("[mission]\nname = \"m\"\n").unwrap();
        assert_eq!(mission.on_unknown, Mode::Enforce);
        assert_eq!(mission.vote, Voting::default());
        assert_eq!(
            mission.vote,
            Voting {
                voters: vec![VoterKind::Mission, VoterKind::Prompt],
                policy: Policy {
                    timeout: Duration::from_secs(60),
                    default: DefaultVerdict::Deny,
                    max_lifetime: Lifetime::Session,
                    max_extent: Extent::File,
                },
                webhook: None,
                rules: Vec::new(),
            }
        );
        let mission = parse("[mission]\nname = \"m\"\n[defaults]\n[vote]\n").unwrap();
        assert_eq!(mission.on_unknown, Mode::Enforce);
        assert_eq!(mission.vote, Voting::default());
    }

    /// A seed of the fuzz corpus too, so the fuzzer starts from what these
    /// tests check.
    const GOOD_VOTE: &str = include_str!("../../../fuzz/corpus/mission/tests_good_vote.toml");

    #[test]
    fn parses_a_full_vote_policy() {
        let mission = parse(GOOD_VOTE).unwrap();
        assert_eq!(mission.on_unknown, Mode::Ask);
        assert_eq!(
            mission.vote,
            Voting {
                voters: vec![VoterKind::Webhook, VoterKind::Mission, VoterKind::Prompt],
                policy: Policy {
                    timeout: Duration::from_secs(90),
                    default: DefaultVerdict::AllowOnce,
                    max_lifetime: Lifetime::Ttl(Duration::from_secs(3600)),
                    max_extent: Extent::Tree,
                },
                webhook: Some(WebhookConfig {
                    url: "https://approvals.example/pincer".to_owned(),
                    secret_file: PathBuf::from("/home/me/.config/pincer/webhook.key"),
                    clock_skew: Duration::from_secs(10),
                    line: 13,
                    secret_line: 15,
                    owner: false,
                    node: None,
                }),
                rules: vec![
                    Rule {
                        path: PathBuf::from("/home/me/.ssh"),
                        extent: Extent::Tree,
                        ops: ops::READ,
                        verdict: RuleVerdict::Deny,
                        reason: Some("credentials are never part of this task".to_owned()),
                        line: 19,
                    },
                    Rule {
                        path: PathBuf::from("/home/me/project/Cargo.lock"),
                        extent: Extent::File,
                        ops: ops::WRITE | ops::CREATE,
                        verdict: RuleVerdict::Allow(Lifetime::Ttl(Duration::from_secs(600))),
                        reason: None,
                        line: 26,
                    },
                    Rule {
                        path: PathBuf::from("/tmp/scratch"),
                        extent: Extent::File,
                        ops: ops::ALL,
                        verdict: RuleVerdict::Allow(Lifetime::Session),
                        reason: None,
                        line: 34,
                    },
                    Rule {
                        path: PathBuf::from("/tmp/log"),
                        extent: Extent::File,
                        ops: ops::ALL,
                        verdict: RuleVerdict::Allow(Lifetime::Once),
                        reason: None,
                        line: 39,
                    },
                ],
            }
        );
    }

    #[test]
    fn vote_caps_and_single_settings() {
        let vote = |rest: &str| parse(&format!("[mission]\nname = \"m\"\n{rest}")).unwrap();
        let mission = vote("[vote]\nmax_lifetime = \"once\"\ntimeout = \"1h\"\n");
        assert_eq!(mission.vote.policy.max_lifetime, Lifetime::Once);
        assert_eq!(mission.vote.policy.timeout, MAX_VOTE_TIMEOUT);
        assert_eq!(
            vote("[vote]\nmax_lifetime = \"session\"\n")
                .vote
                .policy
                .max_lifetime,
            Lifetime::Session
        );
        assert_eq!(
            vote("[vote]\ntimeout = \"250ms\"\n").vote.policy.timeout,
            Duration::from_millis(250)
        );
        assert_eq!(
            vote("[defaults]\non_unknown = \"audit\"\n").on_unknown,
            Mode::Audit
        );
        // Webhook settings without the webhook voter are allowed, and unused.
        let mission = vote(
            &webhook("http://127.0.0.1:8080/vote", "/k")
                .replace("voters = [\"webhook\"]", "voters = [\"prompt\"]"),
        );
        assert_eq!(mission.vote.voters, [VoterKind::Prompt]);
        let spec = mission.vote.webhook.unwrap();
        assert_eq!(spec.clock_skew, Duration::from_secs(30));
        assert_eq!(spec.line, 5);
        // Inline tables work as well as sections.
        let mission = parse(
            "vote = { rule = [{ path = \"/a\", verdict = \"deny\" }], \
             webhook = { url = \"https://h\", secret_file = \"/k\" } }\n\
             [mission]\nname = \"m\"\n",
        )
        .unwrap();
        assert_eq!(mission.vote.rules[0].line, 1);
        assert_eq!(mission.vote.webhook.unwrap().line, 1);
    }

    #[test]
    fn vote_tables_need_no_vote_header() {
        let text = "[mission]\nname = \"m\"\n[[vote.rule]]\npath = \"/a\"\nverdict = \"deny\"\n\
                    [vote.webhook]\nurl = \"https://h\"\nsecret_file = \"/k\"\n";
        let mission = parse(text).unwrap();
        assert_eq!(mission.vote.rules[0].line, 4);
        assert_eq!(mission.vote.webhook.unwrap().line, 6);
        assert_eq!(mission.vote.voters, Voting::default().voters);
    }

    #[test]
    fn fields_are_named_across_split_tables() {
        let text = "[mission]\nname = \"m\"\n[vote]\ntimeout = \"5s\"\n[[vote.rule]]\n\
                    path = \"/a\"\nverdict = \"deny\"\n[[vote.rule]]\npath = 3\n";
        assert_eq!(
            invalid(text),
            error(
                9,
                8,
                "vote.rule[2].path",
                "invalid type: integer `3`, expected a string"
            )
        );
        let text = "[mission]\nname = \"m\"\n[vote.webhook]\nurl = \"https://h\"\n\
                    secret_file = \"/k\"\n[vote]\nvoters = [\"prompt\", 1]\n";
        assert_eq!(
            invalid(text),
            error(
                7,
                21,
                "vote.voters[2]",
                "invalid type: integer `1`, expected a string"
            )
        );
    }

    #[test]
    fn unknown_on_unknown() {
        assert_eq!(
            vote_invalid("[defaults]\non_unknown = \"allow\"\n"),
            error(
                4,
                14,
                "defaults.on_unknown",
                "unknown value \"allow\" (expected deny, audit or ask)"
            )
        );
    }

    #[test]
    fn bad_voters() {
        assert_eq!(
            vote_invalid("[vote]\nvoters = []\n"),
            error(4, 10, "vote.voters", "must list at least one voter")
        );
        assert_eq!(
            vote_invalid("[vote]\nvoters = [\"prompt\", \"mission\", \"prompt\"]\n"),
            error(4, 32, "vote.voters[3]", "duplicate voter \"prompt\"")
        );
        assert_eq!(
            vote_invalid("[vote]\nvoters = [\"mission\", \"slack\"]\n"),
            error(
                4,
                22,
                "vote.voters[2]",
                "unknown voter \"slack\" (expected mission, prompt or webhook)"
            )
        );
        assert_eq!(
            vote_invalid("[vote]\nvoters = \"prompt\"\n"),
            error(
                4,
                10,
                "vote.voters",
                "invalid type: string \"prompt\", expected a sequence"
            )
        );
    }

    #[test]
    fn webhook_voter_without_its_section() {
        let expected = error(
            4,
            21,
            "vote.voters",
            "the webhook voter needs a [vote.webhook] table",
        );
        assert_eq!(
            vote_invalid("[vote]\nvoters = [\"prompt\", \"webhook\"]\n"),
            expected
        );
        assert_eq!(
            parse("[mission]\nname = \"m\"\n[vote]\nvoters = [\"prompt\", \"webhook\"]\n")
                .unwrap_err()
                .to_string(),
            "m.toml:4:21: vote.voters: the webhook voter needs a [vote.webhook] table"
        );
    }

    #[test]
    fn bad_timeouts() {
        let hint = "(write it like \"30s\", \"10m\" or \"1h30m\")";
        assert_eq!(
            vote_invalid("[vote]\ntimeout = \"soon\"\n"),
            error(
                4,
                11,
                "vote.timeout",
                &format!("invalid duration \"soon\" {hint}")
            )
        );
        // A number needs its unit.
        assert_eq!(
            vote_invalid("[vote]\ntimeout = \"30\"\n"),
            error(
                4,
                11,
                "vote.timeout",
                &format!("invalid duration \"30\" {hint}")
            )
        );
        assert_eq!(
            vote_invalid("[vote]\ntimeout = \"\"\n"),
            error(
                4,
                11,
                "vote.timeout",
                &format!("invalid duration \"\" {hint}")
            )
        );
        assert_eq!(
            vote_invalid("[vote]\ntimeout = \"0s\"\n"),
            error(4, 11, "vote.timeout", "must be longer than zero")
        );
        assert_eq!(
            vote_invalid("[vote]\ntimeout = \"61m\"\n"),
            error(4, 11, "vote.timeout", "must be at most 1h (not 1h 1m)")
        );
        assert_eq!(
            vote_invalid("[vote]\ntimeout = 30\n"),
            error(
                4,
                11,
                "vote.timeout",
                "invalid type: integer `30`, expected a string"
            )
        );
    }

    #[test]
    fn durations_too_large() {
        assert_eq!(
            vote_invalid("[vote]\ntimeout = \"99999999999999999999s\"\n"),
            error(
                4,
                11,
                "vote.timeout",
                "duration \"99999999999999999999s\" is too large"
            )
        );
        // More seconds than a duration holds.
        assert_eq!(
            vote_invalid("[vote]\nmax_lifetime = \"ttl\"\nmax_ttl = \"600000000000y\"\n"),
            error(
                5,
                11,
                "vote.max_ttl",
                "duration \"600000000000y\" is too large"
            )
        );
        // A duration, longer than any ttl may be.
        assert_eq!(
            rule_invalid(
                "path = \"/a\"\nverdict = \"allow\"\nlifetime = \"ttl\"\nttl = \"300000000000y\"\n"
            ),
            error(7, 7, "vote.rule[1].ttl", "must be at most 365 days")
        );
        assert_eq!(
            vote_invalid("[vote]\nmax_lifetime = \"ttl\"\nmax_ttl = \"366d\"\n"),
            error(5, 11, "vote.max_ttl", "must be at most 365 days")
        );
        // The longest one is fine.
        let mission =
            parse("[mission]\nname = \"m\"\n[vote]\nmax_lifetime = \"ttl\"\nmax_ttl = \"365d\"\n")
                .unwrap();
        assert_eq!(
            mission.vote.policy.max_lifetime,
            Lifetime::Ttl(vote::MAX_TTL)
        );
    }

    #[test]
    fn unknown_default_verdict() {
        assert_eq!(
            vote_invalid("[vote]\ndefault = \"allow\"\n"),
            error(
                4,
                11,
                "vote.default",
                "unknown default verdict \"allow\" (expected deny or allow-once)"
            )
        );
    }

    #[test]
    fn ttl_cap_needs_max_ttl() {
        assert_eq!(
            vote_invalid("[vote]\ntimeout = \"10s\"\nmax_lifetime = \"ttl\"\n"),
            error(
                5,
                16,
                "vote.max_ttl",
                "missing field (max_lifetime = \"ttl\" needs it)"
            )
        );
        assert_eq!(
            vote_invalid("[vote]\nmax_lifetime = \"forever\"\n"),
            error(
                4,
                16,
                "vote.max_lifetime",
                "unknown lifetime \"forever\" (expected once, ttl or session)"
            )
        );
        assert_eq!(
            vote_invalid("[vote]\nmax_lifetime = \"ttl\"\nmax_ttl = \"0s\"\n"),
            error(5, 11, "vote.max_ttl", "must be longer than zero")
        );
        // Lifetimes are recorded in seconds.
        assert_eq!(
            vote_invalid("[vote]\nmax_lifetime = \"ttl\"\nmax_ttl = \"1500ms\"\n"),
            error(5, 11, "vote.max_ttl", "must be a whole number of seconds")
        );
    }

    #[test]
    fn max_ttl_without_a_ttl_cap() {
        let expected = error(
            4,
            11,
            "vote.max_ttl",
            "only allowed with max_lifetime = \"ttl\"",
        );
        assert_eq!(vote_invalid("[vote]\nmax_ttl = \"1h\"\n"), expected);
        assert_eq!(
            vote_invalid("[vote]\nmax_ttl = \"1h\"\nmax_lifetime = \"once\"\n"),
            expected
        );
    }

    #[test]
    fn unknown_max_extent() {
        assert_eq!(
            vote_invalid("[vote]\nmax_extent = \"dir\"\n"),
            error(
                4,
                14,
                "vote.max_extent",
                "unknown extent \"dir\" (expected file or tree)"
            )
        );
    }

    #[test]
    fn bad_webhook_urls() {
        assert_eq!(
            vote_invalid(&webhook("ftp://approvals.example/x", "/k")),
            error(
                6,
                7,
                "vote.webhook.url",
                "must use http or https, not \"ftp\""
            )
        );
        assert_eq!(
            vote_invalid(&webhook("https://", "/k")),
            error(6, 7, "vote.webhook.url", "not a valid URL (empty host)")
        );
        assert_eq!(
            vote_invalid(&webhook("approvals.example", "/k")),
            error(
                6,
                7,
                "vote.webhook.url",
                "not a valid URL (relative URL without a base)"
            )
        );
        assert_eq!(
            vote_invalid(&webhook("", "/k")),
            error(
                6,
                7,
                "vote.webhook.url",
                "not a valid URL (relative URL without a base)"
            )
        );
        assert_eq!(
            vote_invalid(&webhook("mailto:ops@approvals.example", "/k")),
            error(
                6,
                7,
                "vote.webhook.url",
                "must use http or https, not \"mailto\""
            )
        );
    }

    #[test]
    fn bad_webhook_settings() {
        assert_eq!(
            vote_invalid(&webhook("https://h", "webhook.key")),
            error(
                7,
                15,
                "vote.webhook.secret_file",
                "must be absolute (\"webhook.key\")"
            )
        );
        assert_eq!(
            vote_invalid("[vote.webhook]\nsecret_file = \"/k\"\n"),
            error(3, 1, "vote.webhook.url", "missing field")
        );
        assert_eq!(
            vote_invalid("[vote.webhook]\nurl = \"https://h\"\n"),
            error(3, 1, "vote.webhook.secret_file", "missing field")
        );
        let skew = |value: &str| {
            vote_invalid(&format!(
                "{}clock_skew = {value:?}\n",
                webhook("https://h", "/k")
            ))
        };
        assert_eq!(
            skew("0s"),
            error(8, 14, "vote.webhook.clock_skew", "must be longer than zero")
        );
        assert_eq!(
            skew("2h"),
            error(
                8,
                14,
                "vote.webhook.clock_skew",
                "must be at most 1h (not 2h)"
            )
        );
        // The secret itself has no place in the mission.
        let (line, column, field_name, message) = vote_invalid(&format!(
            "{}secret = \"hunter2\"\n",
            webhook("https://h", "/k")
        ));
        assert_eq!(
            (line, column, field_name),
            (8, 1, field("vote.webhook.secret"))
        );
        assert!(message.starts_with("unknown field `secret`"), "{message}");
    }

    /// A mission whose only rule starts on line 3, its first key on line 4.
    fn rule_invalid(keys: &str) -> Parts {
        vote_invalid(&format!("[[vote.rule]]\n{keys}"))
    }

    #[test]
    fn rule_without_a_verdict() {
        assert_eq!(
            vote_invalid(
                "[[vote.rule]]\npath = \"/a\"\nverdict = \"deny\"\n\n[[vote.rule]]\npath = \"/b\"\n"
            ),
            error(7, 1, "vote.rule[2].verdict", "missing field")
        );
        assert_eq!(
            rule_invalid("path = \"/a\"\nverdict = \"ask\"\n"),
            error(
                5,
                11,
                "vote.rule[1].verdict",
                "unknown verdict \"ask\" (expected deny or allow)"
            )
        );
        assert_eq!(
            rule_invalid("verdict = \"deny\"\n"),
            error(3, 1, "vote.rule[1].path", "missing field")
        );
    }

    #[test]
    fn rule_ttl_lifetime_without_a_ttl() {
        assert_eq!(
            rule_invalid("path = \"/a\"\nverdict = \"allow\"\nlifetime = \"ttl\"\n"),
            error(
                3,
                1,
                "vote.rule[1].ttl",
                "missing field (lifetime = \"ttl\" needs it)"
            )
        );
        assert_eq!(
            rule_invalid(
                "path = \"/a\"\nverdict = \"allow\"\nlifetime = \"ttl\"\nttl = \"1.5s\"\n"
            ),
            error(
                7,
                7,
                "vote.rule[1].ttl",
                "must be a whole number of seconds"
            )
        );
    }

    #[test]
    fn rule_ttl_without_a_ttl_lifetime() {
        let expected = error(
            6,
            7,
            "vote.rule[1].ttl",
            "only allowed with lifetime = \"ttl\"",
        );
        assert_eq!(
            rule_invalid(
                "path = \"/a\"\nverdict = \"allow\"\nttl = \"1h\"\nlifetime = \"session\"\n"
            ),
            expected
        );
        // The default lifetime is "once".
        assert_eq!(
            rule_invalid("path = \"/a\"\nverdict = \"allow\"\nttl = \"1h\"\n"),
            expected
        );
        assert_eq!(
            rule_invalid("path = \"/a\"\nverdict = \"deny\"\nttl = \"1h\"\n"),
            expected
        );
    }

    #[test]
    fn rule_lifetime_needs_allow() {
        assert_eq!(
            rule_invalid("path = \"/a\"\nverdict = \"deny\"\nlifetime = \"once\"\n"),
            error(
                6,
                12,
                "vote.rule[1].lifetime",
                "only allowed with verdict = \"allow\""
            )
        );
        assert_eq!(
            rule_invalid("path = \"/a\"\nverdict = \"allow\"\nlifetime = \"always\"\n"),
            error(
                6,
                12,
                "vote.rule[1].lifetime",
                "unknown lifetime \"always\" (expected once, ttl or session)"
            )
        );
    }

    #[test]
    fn bad_rule_values() {
        assert_eq!(
            rule_invalid("path = \"~/../root\"\nverdict = \"deny\"\n"),
            error(
                4,
                8,
                "vote.rule[1].path",
                "must not contain \"..\" (\"~/../root\")"
            )
        );
        assert_eq!(
            rule_invalid("path = \".ssh\"\nverdict = \"deny\"\n"),
            error(4, 8, "vote.rule[1].path", "must be absolute (\".ssh\")")
        );
        assert_eq!(
            rule_invalid("path = \"/a\"\nverdict = \"deny\"\nops = []\n"),
            error(6, 7, "vote.rule[1].ops", "must list at least one operation")
        );
        assert_eq!(
            rule_invalid("path = \"/a\"\nverdict = \"deny\"\nextent = \"all\"\n"),
            error(
                6,
                10,
                "vote.rule[1].extent",
                "unknown extent \"all\" (expected file or tree)"
            )
        );
        assert_eq!(
            rule_invalid("path = \"/a\"\nverdict = \"deny\"\nreason = \" \"\n"),
            error(6, 10, "vote.rule[1].reason", "must not be empty")
        );
    }

    #[test]
    fn unknown_key_in_a_rule() {
        let (line, column, field_name, message) =
            rule_invalid("path = \"/a\"\naction = \"deny\"\n");
        assert_eq!(
            (line, column, field_name),
            (5, 1, field("vote.rule[1].action"))
        );
        assert_eq!(
            message,
            "unknown field `action`, expected one of `path`, `extent`, `ops`, `verdict`, \
             `lifetime`, `ttl`, `reason`"
        );
    }

    #[test]
    fn a_single_rule_table_gets_a_hint() {
        let (line, column, field_name, message) =
            vote_invalid("[vote.rule]\npath = \"/a\"\nverdict = \"deny\"\n");
        assert_eq!((line, column, field_name), (3, 1, field("vote.rule")));
        assert_eq!(
            message,
            "invalid type: map, expected a sequence (write each rule as a [[vote.rule]] table)"
        );
    }
}
