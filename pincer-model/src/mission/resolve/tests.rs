//! The resolution's tests (and helpers other mission tests share), apart so
//! the resolution itself reads without them.

use std::os::unix::fs::symlink;

use super::*;
use crate::test_support::temp_file;

#[test]
fn formats_ops() {
    assert_eq!(format_ops(0), "none");
    assert_eq!(format_ops(ops::READ | ops::EXEC), "read, exec");
    assert_eq!(
        format_ops(ops::ALL),
        "read, write, create, exec, delete, rename, link, setattr, mkdir"
    );
    assert_eq!(format_ops(ops::WRITE | 0x4000), "write, 0x4000");
}

// Resolution.

/// A mission without baseline whose grants start on line 5.
/// The grants one `[[grant]]` resolves to, for slot 1.
pub(crate) fn resolve_one(
    path: &Path,
    ops: &str,
    extent: &str,
) -> Result<ResolvedGrants, MissionError> {
    mission(&grant(path, ops, extent)).resolve(1)
}

pub(crate) fn mission(grants: &str) -> Mission {
    let text = format!("[mission]\nname = \"t\"\n[defaults]\nbaseline = \"none\"\n{grants}");
    Mission::parse_with_home(&text, Path::new("m.toml"), None).unwrap()
}

pub(crate) fn grant(path: &Path, ops: &str, extent: &str) -> String {
    format!(
        "[[grant]]\npath = {:?}\nops = [{ops}]\nextent = \"{extent}\"\n",
        path.display().to_string()
    )
}

pub(crate) fn key_of(slot: u32, path: &Path) -> GrantKey {
    let metadata = fs::metadata(path).unwrap();
    GrantKey {
        slot,
        _pad: 0,
        dev: kernel_dev(metadata.dev()),
        ino: metadata.ino(),
    }
}

pub(crate) fn file_ops(bits: u32) -> GrantValue {
    GrantValue {
        file_ops: bits,
        tree_ops: 0,
    }
}

pub(crate) fn tree_ops(bits: u32) -> GrantValue {
    GrantValue {
        file_ops: 0,
        tree_ops: bits,
    }
}

/// A temporary directory holding the file `a.txt`, and the file's path.
fn dir_with_a_file() -> (tempfile::TempDir, PathBuf) {
    temp_file("a.txt", "a")
}

/// A temporary directory holding the directory `real` and `link`, a
/// symbolic link to it; the paths of both.
fn dir_with_a_linked_dir() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real");
    fs::create_dir(&real).unwrap();
    let link = dir.path().join("link");
    symlink(&real, &link).unwrap();
    (dir, real, link)
}

#[test]
fn resolves_a_file() {
    let (_dir, file) = dir_with_a_file();
    let resolved = mission(&grant(&file, "\"read\", \"write\"", "file"))
        .resolve(3)
        .unwrap();
    assert_eq!(
        resolved.inode,
        vec![(
            key_of(3, &file),
            file_ops(ops::READ | ops::WRITE),
            Reason(format!(
                "mission line 6: {} (file: read, write)",
                file.display()
            ))
        )]
    );
    assert!(resolved.names.is_empty());
}

#[test]
fn resolves_a_tree() {
    let dir = tempfile::tempdir().unwrap();
    let resolved = resolve_one(dir.path(), "\"read\"", "tree").unwrap();
    assert_eq!(
        resolved.inode,
        vec![(
            key_of(1, dir.path()),
            tree_ops(ops::READ),
            Reason(format!(
                "mission line 6: {} (tree: read)",
                dir.path().display()
            ))
        )]
    );
}

#[test]
fn a_directory_as_a_file_grants_only_the_directory() {
    let dir = tempfile::tempdir().unwrap();
    let resolved = resolve_one(dir.path(), "\"read\"", "file").unwrap();
    assert_eq!(resolved.inode[0].1, file_ops(ops::READ));
}

#[test]
fn a_missing_file_becomes_a_name_grant() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("report.md");
    let resolved = mission(&grant(&output, "\"write\", \"create\"", "file"))
        .resolve(2)
        .unwrap();
    assert!(resolved.inode.is_empty());
    let parent = key_of(2, dir.path());
    let mut name = [0u8; NAME_LEN];
    name[..9].copy_from_slice(b"report.md");
    assert_eq!(
        resolved.names,
        vec![(
            NameGrantKey {
                slot: 2,
                name_len: 9,
                parent_dev: parent.dev,
                parent_ino: parent.ino,
                name,
            },
            file_ops(ops::WRITE | ops::CREATE),
            Reason(format!(
                "mission line 6: {} (file, not yet created: write, create)",
                output.display()
            ))
        )]
    );
}

#[test]
fn a_prefix_grant_carries_the_ops_of_the_shorter_ones_it_starts_with() {
    let dir = tempfile::tempdir().unwrap();
    let grants = [
        grant(&dir.path().join(".tmp*"), "\"read\"", "file"),
        grant(&dir.path().join(".tmp.x*"), "\"write\"", "file"),
        grant(&dir.path().join("other*"), "\"create\"", "file"),
    ]
    .concat();
    let resolved = mission(&grants).resolve(3).unwrap();
    assert!(resolved.inode.is_empty() && resolved.names.is_empty());
    let directory = key_of(3, dir.path());
    let found: Vec<(&[u8], u32, u32)> = resolved
        .prefixes
        .iter()
        .map(|(key, value, _)| {
            assert_eq!(key.slot(), 3);
            assert_eq!(u64::from_ne_bytes(key.name.ino), directory.ino);
            assert_eq!(key.bits, PrefixName::bits(key.prefix_len()));
            assert!(key.name.name[key.prefix_len()..].iter().all(|b| *b == 0));
            (&key.name.name[..key.prefix_len()], key.bits, value.file_ops)
        })
        .collect();
    assert_eq!(
        found,
        vec![
            (&b".tmp"[..], 160 + 32, ops::READ),
            (&b".tmp.x"[..], 160 + 48, ops::READ | ops::WRITE),
            (&b"other"[..], 160 + 40, ops::CREATE),
        ]
    );
}

#[test]
fn a_name_grant_uses_the_real_parent() {
    let (_dir, real, link) = dir_with_a_linked_dir();
    let resolved = resolve_one(&link.join("new"), "\"create\"", "file").unwrap();
    let parent = key_of(1, &real);
    let (key, _, _) = &resolved.names[0];
    assert_eq!((key.parent_dev, key.parent_ino), (parent.dev, parent.ino));
    assert_eq!(&key.name[..4], b"new\0");
}

#[test]
fn grants_on_the_same_object_merge() {
    let (dir, file) = dir_with_a_file();
    let link = dir.path().join("link");
    symlink(&file, &link).unwrap();
    let out = dir.path().join("out");
    let grants = [
        grant(&file, "\"read\"", "file"),
        grant(&link, "\"write\"", "file"),
        grant(dir.path(), "\"read\"", "tree"),
        grant(dir.path(), "\"exec\"", "file"),
        grant(&out, "\"create\"", "file"),
        grant(&out, "\"write\"", "file"),
    ]
    .concat();
    let resolved = mission(&grants).resolve(1).unwrap();
    // The file, the directory, and the link itself (for reading it).
    assert_eq!(resolved.inode.len(), 3);
    let (key, value, reason) = &resolved.inode[0];
    assert_eq!(*key, key_of(1, &file));
    assert_eq!(*value, file_ops(ops::READ | ops::WRITE));
    assert_eq!(
        reason.0,
        format!(
            "mission line 6: {} (file: read); mission line 10: {} (file: write)",
            file.display(),
            link.display()
        )
    );
    let (key, value, _) = &resolved.inode[1];
    assert_eq!(*key, grant_key(1, &fs::symlink_metadata(&link).unwrap()));
    assert_eq!(*value, file_ops(ops::READ));
    let (key, value, _) = &resolved.inode[2];
    assert_eq!(*key, key_of(1, dir.path()));
    assert_eq!(
        *value,
        GrantValue {
            file_ops: ops::EXEC,
            tree_ops: ops::READ
        }
    );
    assert_eq!(resolved.names.len(), 1);
    assert_eq!(resolved.names[0].1, file_ops(ops::CREATE | ops::WRITE));
    assert!(resolved.names[0].2.0.contains("; "));
}

#[test]
fn a_symlink_grant_resolves_to_its_target() {
    let (_dir, target, link) = dir_with_a_linked_dir();
    let resolved = resolve_one(&link, "\"read\"", "tree").unwrap();
    let link_key = grant_key(1, &fs::symlink_metadata(&link).unwrap());
    assert_eq!(
        resolved.inode,
        vec![
            (
                link_key,
                file_ops(ops::READ),
                Reason(format!(
                    "mission line 6: {} (the symbolic link {} on its way)",
                    link.display(),
                    link.display()
                ))
            ),
            (
                key_of(1, &target),
                tree_ops(ops::READ),
                Reason(format!("mission line 6: {} (tree: read)", link.display()))
            ),
        ]
    );
}

#[test]
fn another_users_link_in_a_shared_directory_is_not_followed() {
    use std::os::unix::fs::PermissionsExt;
    assert!(nix::unistd::geteuid().is_root(), "this test needs root");
    let (dir, _target, link) = dir_with_a_linked_dir();
    // The test's directory made shared like /tmp; the link another
    // user's (nobody), who could have made it there first.
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o1777)).unwrap();
    std::os::unix::fs::lchown(&link, Some(65534), Some(65534)).unwrap();
    let error = resolve_one(&link, "\"read\"", "tree").unwrap_err();
    assert_eq!(
        error.to_string(),
        format!("m.toml:6: grant[1].path: cannot resolve {}", link.display())
    );
    assert_eq!(
        std::error::Error::source(&error).unwrap().to_string(),
        format!(
            "{} is a symbolic link of user 65534 in the shared directory {}: not followed",
            link.display(),
            dir.path().display()
        )
    );
    // Below the link, through it, the same.
    assert!(resolve_one(&link.join("x"), "\"read\"", "file").is_err());
    // The directory owner's link, or the loader's own, is followed.
    std::os::unix::fs::lchown(&link, Some(0), Some(0)).unwrap();
    resolve_one(&link, "\"read\"", "tree").unwrap();
    // And in a directory that is not shared, anyone's link is.
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::lchown(&link, Some(65534), Some(65534)).unwrap();
    resolve_one(&link, "\"read\"", "tree").unwrap();
}

#[test]
fn every_link_on_the_way_is_found_once_and_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    fs::create_dir_all(root.join("real/sub")).unwrap();
    fs::write(root.join("real/sub/file"), "x").unwrap();
    // `a` -> `real` (absolute), `real/up` -> `..` (relative),
    // `b` -> `a/up/real/sub` (through both).
    symlink(root.join("real"), root.join("a")).unwrap();
    symlink("..", root.join("real/up")).unwrap();
    symlink("a/up/real/sub", root.join("b")).unwrap();
    let links: Vec<PathBuf> = links_on_path(&root.join("b/file"))
        .unwrap()
        .into_iter()
        .map(|(path, metadata)| {
            assert!(metadata.file_type().is_symlink());
            path
        })
        .collect();
    let canonical = fs::canonicalize(root).unwrap();
    assert_eq!(
        links,
        [
            canonical.join("b"),
            canonical.join("a"),
            canonical.join("real/up")
        ]
    );
    // A path that stops existing ends the walk; a loop is an error.
    assert_eq!(links_on_path(&root.join("a/missing/x")).unwrap().len(), 1);
    symlink(root.join("loop"), root.join("loop")).unwrap();
    assert_eq!(
        links_on_path(&root.join("loop"))
            .unwrap_err()
            .raw_os_error(),
        Some(libc::ELOOP)
    );
}

#[test]
fn a_tree_on_a_file_is_an_error() {
    let (_dir, file) = dir_with_a_file();
    let error = resolve_one(&file, "\"read\"", "tree").unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "m.toml:6: grant[1].extent: extent = \"tree\" needs an existing directory \
             ({} is not one)",
            file.display()
        )
    );
}

#[test]
fn a_tree_on_a_missing_path_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let grants = [
        grant(dir.path(), "\"read\"", "tree"),
        grant(&missing, "\"read\"", "tree"),
    ]
    .concat();
    let error = mission(&grants).resolve(1).unwrap_err();
    assert!(
        matches!(
            error,
            MissionError::Rejected { line: 10, ref field, .. } if field == "grant[2].extent"
        ),
        "{error}"
    );
    assert!(error.to_string().ends_with("does not exist)"), "{error}");
}

#[test]
fn an_optional_grant_on_what_is_not_there_grants_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let present = dir.path().join("present");
    fs::create_dir(&present).unwrap();
    let dangling = dir.path().join("dangling");
    symlink(dir.path().join("nowhere"), &dangling).unwrap();
    let optional = |path: &Path, extent: &str| {
        format!(
            "{}optional = true\n",
            grant(path, "\"read\", \"exec\"", extent)
        )
    };
    let grants = [
        optional(&dir.path().join("missing"), "tree"),
        optional(&dir.path().join("no/such/file"), "file"),
        optional(&dir.path().join("no/such/prefix*"), "file"),
        optional(&dangling, "file"),
        optional(&present, "tree"),
    ]
    .concat();
    let resolved = mission(&grants).resolve(1).unwrap();
    // Only the directory that is there.
    assert_eq!(resolved.inode.len(), 1, "{:?}", resolved.inode);
    assert_eq!(resolved.inode[0].0, key_of(1, &present));
    assert_eq!(resolved.inode[0].1.tree_ops, ops::READ | ops::EXEC);
    assert!(resolved.names.is_empty() && resolved.prefixes.is_empty());
    // Without `optional`, the same missing tree fails the mission.
    let error = resolve_one(&dir.path().join("missing"), "\"read\"", "tree").unwrap_err();
    assert!(error.to_string().ends_with("does not exist)"), "{error}");
}

#[test]
fn a_missing_parent_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("no/such.txt");
    let error = resolve_one(&path, "\"create\"", "file").unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "m.toml:6: grant[1].path: neither {} nor its parent directory exists",
            path.display()
        )
    );
}

#[test]
fn a_file_as_parent_is_an_error() {
    let (_dir, file) = dir_with_a_file();
    let error = resolve_one(&file.join("b"), "\"create\"", "file").unwrap_err();
    // The lookup itself fails (ENOTDIR), not only the parent check.
    assert!(
        matches!(error, MissionError::Unresolvable { line: 6, ref path, .. } if *path == file.join("b")),
        "{error:?}"
    );
}

#[test]
fn a_dangling_symlink_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("link");
    symlink(dir.path().join("nowhere"), &link).unwrap();
    let error = resolve_one(&link, "\"write\"", "file").unwrap_err();
    assert!(
        matches!(error, MissionError::Rejected { ref field, .. } if field == "grant[1].path"),
        "{error}"
    );
    assert!(error.to_string().contains("symbolic link"), "{error}");
}

#[test]
fn a_name_longer_than_255_bytes_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let longest = dir.path().join("x".repeat(255));
    let resolved = resolve_one(&longest, "\"create\"", "file").unwrap();
    assert_eq!(resolved.names[0].0.name_len, 255);
    assert_eq!(resolved.names[0].0.name[255], 0);

    // The kernel refuses the name too, so canonicalize reports it.
    let too_long = dir.path().join("x".repeat(256));
    let error = resolve_one(&too_long, "\"create\"", "file").unwrap_err();
    assert!(
        matches!(
            error,
            MissionError::Rejected { .. } | MissionError::Unresolvable { .. }
        ),
        "{error:?}"
    );
}
