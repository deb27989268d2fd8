//! `[[asset]]`.

use super::*;
use crate::examples::upload_mission;

/// The running example's email and images, then `more`: at most two
/// images, so that the count read is not the default one.
fn with_assets(more: &str) -> String {
    upload_mission("/tmp", 2, more)
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
            glob: Some("*.{png,jpg,jpeg}".to_owned()),
            kind: None,
            max_count: 2,
        }
    );
    assert!(asset_glob("*.{png,jpg,jpeg}").unwrap().is_match("data.png"));
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
    // An asset `x` found in the email, with what follows its ops.
    let found = |rest: &str| {
        one(&format!(
            "[[asset]]\nid = \"x\"\nfound_in = \"email\"\nops = [\"read\"]\n{rest}"
        ))
    };
    assert_eq!(
        found("").3,
        "an asset found in evidence needs `under`: the directories it may be in \
             (a name in a page is never enough to reach anywhere)"
    );
    assert_eq!(
        found("constraints = { under = [\"~\"], max_count = 0 }\n").3,
        "must be from 1 to 1024 (not 0)"
    );
    for (rest, name) in [
        (
            "constraints = { under = [\"/\"] }\n",
            "asset[3].constraints.under[1]",
        ),
        (
            "constraints = { under = [\"~\"], glob = \"*.{png\" }\n",
            "asset[3].constraints.glob",
        ),
        (
            "extent = \"tree\"\nconstraints = { under = [\"~\"], kind = \"file\" }\n",
            "asset[3].constraints.kind",
        ),
        (
            "constraints = { under = [\"~\"], color = \"red\" }\n",
            "asset[3].constraints.color",
        ),
    ] {
        assert_eq!(found(rest).2, field(name), "{rest}");
    }
    // Found in each other, with no evidence to begin with.
    let cycle = invalid(&b_found_in_a(
        "found_in = \"b\"\nops = [\"read\"]\nconstraints = { under = [\"/srv\"] }\n",
    ));
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
    let unread = invalid(&b_found_in_a("path = \"/srv/a\"\nops = [\"write\"]\n"));
    assert_eq!(unread.2, field("asset[2].found_in"));
}

/// A mission of asset `a`, with `a_fields` after its id (from line 5 on),
/// and asset `b`, found in `a`.
fn b_found_in_a(a_fields: &str) -> String {
    format!(
        r#"[mission]
name = "m"
[[asset]]
id = "a"
{a_fields}[[asset]]
id = "b"
found_in = "a"
ops = ["read"]
constraints = {{ under = ["/srv"] }}
"#
    )
}
