//! `[[grant]]`, the operations and capabilities a mission or a profile
//! gives.

use super::*;

/// The `[[grant]]` entries of a mission or a profile, numbered from 1.
pub(super) fn parse_grants(
    doc: &Document<'_>,
    grants: &[Spanned<RawGrant>],
    user: &User,
) -> Result<Vec<GrantSpec>, TomlError> {
    Fields::each(doc, "grant", grants)
        .map(|grant| parse_grant(&grant, user))
        .collect()
}

fn parse_grant(grant: &Fields<'_, RawGrant>, user: &User) -> Result<GrantSpec, TomlError> {
    let (doc, raw) = (grant.doc, grant.raw());

    let (path, expanded) = required_path(grant, &raw.path, "path", &user.paths())?;
    let ops_list = grant.required(&raw.ops, "ops")?;
    let bits = parse_ops(doc, ops_list, &grant.field("ops"))?;
    let extent = parse_extent(doc, raw.extent.as_ref(), &grant.field("extent"))?;
    let make = flag(
        grant,
        &raw.make,
        "make",
        extent == Extent::Tree,
        "make = true makes a directory: it needs extent = \"tree\"",
    )?;
    let optional = flag(
        grant,
        &raw.optional,
        "optional",
        !make,
        "optional = true with make = true: a directory pincer makes is never missing",
    )?;
    let own = flag(
        grant,
        &raw.own,
        "own",
        extent == Extent::Tree && bits & pincer_common::CHANGE_OPS != 0,
        "own = true makes a directory the agent's own place: it needs extent = \"tree\" and an operation that changes something",
    )?;
    let spec = GrantSpec {
        path: expanded,
        ops: bits,
        extent,
        line: doc.line(path.span().start),
        make,
        optional,
        own,
    };
    check_pattern(doc, path, &spec, &grant.field("path"))?;
    Ok(spec)
}

/// A `true` or `false` of a grant, `false` when not written, that may be
/// `true` only where `allowed`: `refusal` at it otherwise.
fn flag(
    grant: &Fields<'_, RawGrant>,
    value: &Option<Spanned<bool>>,
    key: &str,
    allowed: bool,
    refusal: &str,
) -> Result<bool, TomlError> {
    match value {
        Some(written) if *written.get_ref() && !allowed => {
            let at = written.span().start;
            Err(grant.doc.field_error(at, &grant.field(key), refusal))
        }
        Some(written) => Ok(*written.get_ref()),
        None => Ok(false),
    }
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

/// A non-empty list of operation names, as bits of [`ops`].
pub(super) fn parse_ops(
    doc: &Document<'_>,
    list: &Spanned<Vec<Spanned<String>>>,
    field: &str,
) -> Result<u32, TomlError> {
    if list.get_ref().is_empty() {
        return Err(doc.field_error(list.span().start, field, "must list at least one operation"));
    }
    let mut bits = 0;
    for op in list.get_ref() {
        bits |= doc.choice(
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
pub(super) fn parse_capabilities(
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

pub(super) fn parse_extent(
    doc: &Document<'_>,
    value: Option<&Spanned<String>>,
    field: &str,
) -> Result<Extent, TomlError> {
    match value {
        Some(value) => doc.choice(value, field, "extent", Extent::NAMES),
        None => Ok(Extent::default()),
    }
}
