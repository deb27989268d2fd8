//! What the fuzz targets share: checks of properties several of them assert.

use std::path::Path;

use pincer_model::toml_file::{FileError, TomlError};

/// Asserts that text pincer shows (an escaped name, a path, a reason) holds
/// no control character: escaping must have turned every one into `\xNN`.
pub fn assert_escaped(what: &str, text: &str) {
    assert!(
        !text.chars().any(char::is_control),
        "{what} holds a control character: {text:?}"
    );
}

/// Asserts that an error about a TOML file names `path` and points at a
/// place inside `text`: a line it has, a column of that line (or just past
/// its end).
pub fn assert_points_into(text: &str, path: &Path, error: &FileError) {
    let FileError::Invalid(TomlError {
        path: named,
        line,
        column,
        ..
    }) = error
    else {
        panic!("parsing text gave an I/O error: {error}");
    };
    assert_eq!(named, path, "the error names another file: {error}");
    let lines: Vec<&str> = text.split('\n').collect();
    assert!(
        (1..=lines.len()).contains(line),
        "line {line} of a text of {} lines: {error}",
        lines.len()
    );
    let width = lines[line - 1].chars().count();
    assert!(
        (1..=width + 1).contains(column),
        "column {column} of a line of {width} characters: {error}"
    );
    assert!(
        error.to_string().starts_with(&path.display().to_string()),
        "the message does not start with the file: {error}"
    );
}
