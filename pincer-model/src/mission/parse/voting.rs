//! `[vote]`: the voters of a parked request, their caps, the webhook and
//! the mission's rules.

use super::*;

/// The duration of a `ttl` lifetime, as [`vote::check_ttl`] allows.
fn ttl(doc: &Document<'_>, value: &Spanned<String>, field: &str) -> Result<Duration, TomlError> {
    let duration = doc.duration(value, field, POSITIVE..=Duration::MAX)?;
    vote::check_ttl(duration).map_err(|message| doc.field_error(value.span().start, field, message))
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

pub(super) fn parse_vote(
    doc: &Document<'_>,
    raw: &RawVote,
    user: &User,
) -> Result<Voting, TomlError> {
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
            let voter = doc.choice(value, &field, "voter", VoterKind::NAMES)?;
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
        voting.policy.timeout = doc.duration(value, "vote.timeout", POSITIVE..=MAX_VOTE_TIMEOUT)?;
    }

    if let Some(value) = &raw.default {
        voting.policy.default = doc.choice(
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
            doc.choice(value, "vote.max_lifetime", "lifetime", &LIFETIMES)?,
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
        voting.policy.max_extent = doc.choice(value, "vote.max_extent", "extent", Extent::NAMES)?;
    }

    voting.webhook = raw
        .webhook
        .as_ref()
        .map(|webhook| {
            let vote = || doc.table_offset("vote");
            parse_webhook(
                &Fields::located(doc, "vote.webhook".to_owned(), webhook, vote),
                user,
            )
        })
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

    voting.rules = Fields::each(doc, "vote.rule", &raw.rule)
        .map(|rule| parse_rule(&rule, user))
        .collect::<Result<Vec<_>, _>>()?;

    Ok(voting)
}

fn parse_webhook(
    webhook: &Fields<'_, RawWebhook>,
    user: &User,
) -> Result<WebhookConfig, TomlError> {
    let (doc, raw) = (webhook.doc, webhook.raw());

    let url = webhook.required(&raw.url, "url")?;
    // The URL may carry a token: messages describe it without repeating it.
    let url_field = webhook.field("url");
    let url_error = |message: String| doc.field_error(url.span().start, &url_field, message);
    let parsed = url::Url::parse(url.get_ref())
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

    let (secret_written, secret_file) =
        required_path(webhook, &raw.secret_file, "secret_file", &user.paths())?;

    let clock_skew = match &raw.clock_skew {
        Some(value) => doc.duration(
            value,
            &webhook.field("clock_skew"),
            POSITIVE..=MAX_CLOCK_SKEW,
        )?,
        None => DEFAULT_CLOCK_SKEW,
    };

    Ok(WebhookConfig {
        url: url.get_ref().clone(),
        secret_file,
        clock_skew,
        line: doc.line(webhook.at()),
        secret_line: doc.line(secret_written.span().start),
        owner: raw.owner.as_ref().is_some_and(|owner| *owner.get_ref()),
        node: None,
    })
}

fn parse_rule(rule: &Fields<'_, RawRule>, user: &User) -> Result<Rule, TomlError> {
    let (doc, raw) = (rule.doc, rule.raw());
    let field = |key: &str| rule.field(key);

    let (path, expanded) = required_path(rule, &raw.path, "path", &user.paths())?;
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

    let verdict = rule.required(&raw.verdict, "verdict")?;
    let allow = doc.choice(
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
        Some(value) => doc.choice(value, &field("lifetime"), "lifetime", &LIFETIMES)?,
        None => LifetimeKind::Once,
    };
    let verdict = match (lifetime, &raw.ttl) {
        (LifetimeKind::Ttl, Some(value)) => {
            RuleVerdict::Allow(Lifetime::Ttl(ttl(doc, value, &field("ttl"))?))
        }
        (LifetimeKind::Ttl, None) => {
            return Err(doc.field_error(
                rule.at(),
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
