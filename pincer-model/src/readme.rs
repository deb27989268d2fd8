//! The documentation's generated tables: each is rendered from its source
//! list, and a test compares it with the page that holds its marks,
//! README.md or one of docs/*.md (or, with `PINCER_WRITE_README` set, as
//! `cargo xtask readme-tables` sets it, writes it there).

use std::{
    path::{Path, PathBuf},
    sync::Mutex,
};

/// Tests run on threads: one rewrite of a page at a time, or one table's
/// rewrite of a page loses another's.
static README: Mutex<()> = Mutex::new(());

/// The pages a table may be on: README.md and every docs/*.md.
fn pages(root: &Path) -> Vec<PathBuf> {
    let docs = std::fs::read_dir(root.join("docs")).unwrap();
    let mut pages: Vec<PathBuf> = docs
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    pages.push(root.join("README.md"));
    pages.sort();
    pages
}

/// Checks that the one page holding `<!-- NAME: start -->` holds `table`
/// between it and `<!-- NAME: end -->`, or writes it there when asked to.
#[track_caller]
pub fn check_table(name: &str, table: &str) {
    let begin = format!("<!-- {name}: start -->\n");
    let end = format!("<!-- {name}: end -->");
    let _only = README
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let shown = |path: &Path| {
        path.strip_prefix(&root)
            .unwrap_or(path)
            .display()
            .to_string()
    };
    // Exactly one copy: a second would go stale with nothing to say so.
    let mut holders = Vec::new();
    for path in pages(&root) {
        let text = std::fs::read_to_string(&path).unwrap();
        let copies = text.matches(&begin).count();
        holders.extend(std::iter::repeat_n((path, text), copies));
    }
    let [(path, page)] = &holders[..] else {
        let found: Vec<_> = holders.iter().map(|(path, _)| shown(path)).collect();
        panic!(
            "`{}` must be in exactly one of README.md and docs/*.md, not in {found:?}",
            begin.trim_end()
        );
    };
    let shown = shown(path);
    let start = page.find(&begin).unwrap() + begin.len();
    let Some(until) = page[start..].find(&end).map(|at| start + at) else {
        panic!("{shown} has `{}` but no `{end}` after it", begin.trim_end());
    };
    if std::env::var_os("PINCER_WRITE_README").is_some() {
        let mut updated = page.clone();
        updated.replace_range(start..until, table);
        std::fs::write(path, updated).unwrap();
        return;
    }
    assert!(
        page[start..until] == *table,
        "{shown}'s {name} differs from its source: run `cargo xtask readme-tables`"
    );
}
