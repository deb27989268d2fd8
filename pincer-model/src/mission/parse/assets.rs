//! `[[asset]]`: the nodes of what the task needs, some identified from
//! the start, others found in the content of another.

use super::*;

/// Longest `[[asset]]` id.
const MAX_ASSET_ID: usize = 64;

/// Most objects one `[[asset]]` may become.
pub const MAX_ASSET_COUNT: u32 = 1024;

/// The `[[asset]]` entries (numbered from 1): each id unique, each
/// `found_in` naming another node that is read, no node found (through
/// others) in itself.
pub(super) fn parse_assets(
    doc: &Document<'_>,
    raw: &[Spanned<RawAsset>],
    user: &User,
) -> Result<Vec<AssetSpec>, TomlError> {
    let mut assets = Vec::with_capacity(raw.len());
    let mut ids: Vec<&str> = Vec::with_capacity(raw.len());
    for asset in Fields::each(doc, "asset", raw) {
        let written = asset.required(&asset.raw().id, "id")?;
        let id = written.get_ref();
        let well_formed = !id.is_empty()
            && id.len() <= MAX_ASSET_ID
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !well_formed {
            return Err(doc.field_error(
                written.span().start,
                &asset.field("id"),
                format!("{id:?} is not an id: 1 to {MAX_ASSET_ID} letters, digits, `-` or `_`"),
            ));
        }
        if let Some(first) = ids.iter().position(|known| known == id) {
            return Err(doc.field_error(
                written.span().start,
                &asset.field("id"),
                format!("{id:?} is already the id of asset[{}]", first + 1),
            ));
        }
        ids.push(id);
        assets.push(parse_asset(&asset, user)?);
    }
    // `found_in` names a node by id; resolved once every id is known.
    for (index, asset) in Fields::each(doc, "asset", raw).enumerate() {
        let Some(found_in) = &asset.raw().found_in else {
            continue;
        };
        let field = asset.field("found_in");
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
    for (index, asset) in Fields::each(doc, "asset", raw).enumerate() {
        let mut seen = vec![index];
        let mut at = index;
        while let Some(next) = assets[at].found_in {
            if seen.contains(&next) {
                let chain: Vec<&str> = seen.iter().chain([&next]).map(|&i| ids[i]).collect();
                let found_in = asset.raw().found_in.as_ref().expect("it has a source");
                return Err(doc.field_error(
                    found_in.span().start,
                    &asset.field("found_in"),
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

/// One `[[asset]]`, its `found_in` left for [`parse_assets`].
fn parse_asset(asset: &Fields<'_, RawAsset>, user: &User) -> Result<AssetSpec, TomlError> {
    let (doc, raw) = (asset.doc, asset.raw());
    let field = |key: &str| asset.field(key);
    let id = asset.required(&raw.id, "id")?;
    let path = match (&raw.path, &raw.found_in) {
        (Some(path), None) => {
            no_star(doc, path, &field("path"))?;
            Some(doc.absolute_path(path, &field("path"), &user.paths())?)
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
                asset.at(),
                &field("path"),
                "missing field: an asset has a `path`, or is `found_in` another asset",
            ));
        }
    };
    let ops_list = asset.required(&raw.ops, "ops")?;
    let ops = parse_ops(doc, ops_list, &field("ops"))?;
    let extent = parse_extent(doc, raw.extent.as_ref(), &field("extent"))?;
    let constraints = match &raw.constraints {
        Some(constraints) => parse_constraints(&asset.inner("constraints", constraints), user)?,
        None => Constraints::default(),
    };
    if raw.found_in.is_some() && constraints.under.is_empty() {
        let at = raw
            .constraints
            .as_ref()
            .map_or(asset.at(), |c| c.start_or(|| asset.at()));
        return Err(doc.field_error(
            at,
            &field("constraints.under"),
            "an asset found in evidence needs `under`: the directories it may be in \
             (a name in a page is never enough to reach anywhere)",
        ));
    }
    if let (Some(kind), Some(written)) = (
        constraints.kind,
        raw.constraints.as_ref().and_then(|c| c.value.kind.as_ref()),
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
            written.start_or(|| asset.at()),
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

/// `constraints = { under, glob, kind, max_count }` of an asset.
fn parse_constraints(
    written: &Fields<'_, RawConstraints>,
    user: &User,
) -> Result<Constraints, TomlError> {
    let (doc, raw) = (written.doc, written.raw());
    let field = |key: &str| written.field(key);
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
            let path = doc.absolute_path(dir, &name, &user.paths())?;
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
        constraints.kind = Some(doc.choice(kind, &field("kind"), "kind", AssetKind::NAMES)?);
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
