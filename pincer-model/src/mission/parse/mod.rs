//! Reading a mission from TOML: strict, and every error names the file, the
//! line and column, and the field.

use std::{
    path::{Component, Path, PathBuf},
    time::Duration,
};

use pincer_common::{authority, caps, ops};
use serde::Deserialize;
use toml::Spanned;

mod assets;
mod grants;
mod labels;
#[cfg(test)]
mod tests;
mod voting;

pub use assets::asset_glob;
use assets::parse_assets;
use grants::{parse_capabilities, parse_extent, parse_grants, parse_ops};
pub use labels::SOURCE_AUTHORITIES;
use labels::parse_action;
pub(crate) use labels::{parse_policy, parse_sources};
use voting::parse_vote;

use super::model::{
    ActionSpec, AssetKind, AssetSpec, Baseline, Constraints, GrantSpec, MAX_VOTE_TIMEOUT, Mission,
    MissionError, Mode, Profile, SourceSpec, Tmp,
};
use crate::{
    duration::POSITIVE,
    labels::PolicyPattern,
    toml_file::{
        self, Document, Named, TomlError,
        fields::{self, Fields, Home, PathRules, Table, raw_tables},
        or_list,
    },
    vote::{
        self, DefaultVerdict, Extent, Lifetime, VoterKind, Voting,
        rules::{Rule, RuleVerdict},
        webhook::{DEFAULT_CLOCK_SKEW, MAX_CLOCK_SKEW, WebhookConfig},
    },
};

// The file as written. Every value is optional and spanned so that pincer,
// not serde, reports a missing or invalid value, with its position and field
// (`raw_tables!` makes the tables' values so). serde still reports unknown
// keys and wrong types; the document names the field from the error's
// position. A new key is a new field here plus its check in `parse` below.
// The top-level tables are `Table`s, not spanned: dotted keys
// (`mission.name = "m"`) and `[vote.webhook]` without `[vote]` make tables
// with no span, which `Spanned` refuses.

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
struct RawFile {
    mission: Option<Table<RawMission>>,
    #[serde(default)]
    grant: Vec<Spanned<RawGrant>>,
    defaults: Option<Table<RawDefaults>>,
    vote: Option<Table<RawVote>>,
    labels: Option<Table<RawLabels>>,
    #[serde(default)]
    source: Vec<Spanned<RawSource>>,
    #[serde(default)]
    action: Vec<Spanned<RawAction>>,
    #[serde(default)]
    asset: Vec<Spanned<RawAsset>>,
}

/// A profile file: `[profile]`, its grants and its environment.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
struct RawProfileFile {
    profile: Option<Table<RawProfile>>,
    #[serde(default)]
    grant: Vec<Spanned<RawGrant>>,
    #[serde(default)]
    env: std::collections::BTreeMap<String, Spanned<String>>,
}

raw_tables! {
    struct RawAsset {
        id: String,
        description: String,
        path: String,
        found_in: String,
        ops: Vec<Spanned<String>>,
        extent: String,
        constraints: {RawConstraints},
    }

    struct RawConstraints {
        under: Vec<Spanned<String>>,
        glob: String,
        kind: String,
        max_count: i64,
    }

    pub(crate) struct RawSource {
        pub(crate) path: String,
        authority: String,
    }

    struct RawAction {
        path: String,
        ops: Vec<Spanned<String>>,
        authority: String,
    }

    /// `[labels]`: what the mission adds to the policy set.
    pub(crate) struct RawLabels {
        pub(crate) policy: Vec<Spanned<String>>,
    }

    struct RawMission {
        name: String,
        profiles: Vec<Spanned<String>>,
    }

    struct RawGrant {
        path: String,
        ops: Vec<Spanned<String>>,
        extent: String,
        make: bool,
        optional: bool,
        own: bool,
    }

    struct RawProfile {
        name: String,
        description: String,
    }

    struct RawDefaults {
        baseline: String,
        on_unknown: String,
        tmp: String,
        capabilities: Vec<Spanned<String>>,
    }

    struct RawVote {
        voters: Vec<Spanned<String>>,
        timeout: String,
        default: String,
        max_lifetime: String,
        max_ttl: String,
        max_extent: String,
        webhook: {RawWebhook},
        rule: [RawRule],
    }

    struct RawWebhook {
        url: String,
        secret_file: String,
        clock_skew: String,
        owner: bool,
    }

    struct RawRule {
        path: String,
        extent: String,
        ops: Vec<Spanned<String>>,
        verdict: String,
        lifetime: String,
        ttl: String,
        reason: String,
    }
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
    /// How a file read for this user writes paths: `~` is the user's home
    /// and `{uid}` the user's id.
    pub(crate) fn paths(&self) -> PathRules<'_> {
        PathRules {
            home: Home::Of(self.home.as_deref()),
            uid: Some(self.uid),
        }
    }

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

    let mission = Fields::section(doc, "mission", &raw.mission)?;
    let name = mission.required(&mission.raw().name, "name")?;
    if name.get_ref().trim().is_empty() {
        return Err(doc.field_error(
            name.span().start,
            &mission.field("name"),
            "must not be empty",
        ));
    }

    let grants = parse_grants(doc, &raw.grant, user)?;

    let mut baseline = Baseline::default();
    let mut on_unknown = Mode::default();
    let mut tmp = Tmp::default();
    let mut capabilities = caps::DEFAULT;
    if let Some(Table(defaults)) = &raw.defaults {
        if let Some(value) = &defaults.baseline {
            baseline = doc.choice(value, "defaults.baseline", "baseline", Baseline::NAMES)?;
        }
        if let Some(value) = &defaults.on_unknown {
            on_unknown = doc.choice(value, "defaults.on_unknown", "value", Mode::ON_UNKNOWN)?;
        }
        if let Some(value) = &defaults.tmp {
            tmp = doc.choice(value, "defaults.tmp", "value", Tmp::NAMES)?;
        }
        if let Some(list) = &defaults.capabilities {
            capabilities |= parse_capabilities(doc, list)?;
        }
    }

    let vote = match &raw.vote {
        Some(Table(vote)) => parse_vote(doc, vote, user)?,
        None => Voting::default(),
    };

    let policy = match &raw.labels {
        Some(Table(labels)) => parse_policy(doc, labels, "labels", &user.paths())?,
        None => Vec::new(),
    };

    let sources = parse_sources(doc, &raw.source, &user.paths())?;
    let actions = Fields::each(doc, "action", &raw.action)
        .map(|action| parse_action(&action, &user.paths()))
        .collect::<Result<Vec<_>, _>>()?;

    let assets = parse_assets(doc, &raw.asset, user)?;
    // An asset identified from the start is a grant, unless others are
    // found in it: its first read then parks, so that what it holds is
    // observed as the agent reads it (the runtime's `pincer::assets`).
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
    if let Some(list) = &mission.raw().profiles {
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

impl Profile {
    /// Parses a profile for `user`; `source` names it in messages.
    pub fn parse(text: &str, source: &Path, user: &User) -> Result<Profile, MissionError> {
        Ok(parse_profile(&Document::new(text, source), user)?)
    }
}

fn parse_profile(doc: &Document<'_>, user: &User) -> Result<Profile, TomlError> {
    let raw: RawProfileFile = doc.deserialize().map_err(with_hint)?;
    let profile = Fields::section(doc, "profile", &raw.profile)?;
    let name = profile.required(&profile.raw().name, "name")?;
    let description = profile.required(&profile.raw().description, "description")?;
    let grants = parse_grants(doc, &raw.grant, user)?;
    let mut env = Vec::new();
    for (key, value) in &raw.env {
        let field = format!("env.{key}");
        let written = value.get_ref();
        let expanded = if written.starts_with('~') {
            doc.absolute_path(value, &field, &user.paths())?
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

/// The arrays of tables of a mission or a profile, for
/// [`fields::with_hint`].
const TABLES: &[(&str, &str)] = &[("grant", "grant"), ("vote.rule", "rule")];

fn with_hint(error: TomlError) -> TomlError {
    fields::with_hint(error, TABLES)
}

/// A required path of `table` (its `key`), absolute or starting with `~`
/// (`home`): where it is written, and what it names.
fn required_path<'a, R>(
    table: &Fields<'a, R>,
    value: &'a Option<Spanned<String>>,
    key: &str,
    rules: &PathRules<'_>,
) -> Result<(&'a Spanned<String>, PathBuf), TomlError> {
    let written = table.required(value, key)?;
    let path = table.doc.absolute_path(written, &table.field(key), rules)?;
    Ok((written, path))
}
