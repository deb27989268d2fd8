//! The README's generated tables: each is rendered from its source list, and
//! a test compares it with the README (or, with `PINCER_WRITE_README` set,
//! as `cargo xtask readme-tables` sets it, writes it there).

use std::{path::Path, sync::Mutex};

/// Tests run on threads: one rewrite of the README at a time, or one
/// table's rewrite loses another's.
static README: Mutex<()> = Mutex::new(());

/// Checks that the README holds `table` between `<!-- NAME: start -->` and
/// `<!-- NAME: end -->`, or writes it there when asked to.
#[track_caller]
pub fn check_table(name: &str, table: &str) {
    let begin = format!("<!-- {name}: start -->\n");
    let end = format!("<!-- {name}: end -->");
    let _only = README
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md");
    let readme = std::fs::read_to_string(&path).unwrap();
    let (Some(at), Some(until)) = (readme.find(&begin), readme.find(&end)) else {
        panic!("README.md has no `{begin}` ... `{end}`");
    };
    let start = at + begin.len();
    if std::env::var_os("PINCER_WRITE_README").is_some() {
        let mut updated = readme.clone();
        updated.replace_range(start..until, table);
        std::fs::write(&path, updated).unwrap();
        return;
    }
    assert!(
        readme[start..until] == *table,
        "README.md's {name} differs from its source: run `cargo xtask readme-tables`"
    );
}
