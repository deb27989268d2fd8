//! pincer's TOML files (a mission, the daemon's configuration), read so that
//! every error points into the file: `file:line:column: field: message`.
//!
//! - `Document` is the text of one file. It finds the start of every line
//!   once, so that the line and column of a position is a binary search
//!   however many positions a file asks for (a line per grant, say); it
//!   turns positions into [`TomlError`]s, and the errors of the TOML parser
//!   too, naming the field at their position.
//! - every file is read by serde into raw structs whose values keep their
//!   spans (`toml::Spanned`), then checked value by value with the checks
//!   of `fields`, which all files share (a choice among names, a path, a
//!   duration, ...): one check, one message.
//! - `tree` reads the file into values that keep their spans only to name
//!   the field at the position of an error, and to find where a table
//!   starts.
//! - `Named` settings (`"deny"`, `"tree"`, `"keep"`, ...) list their names
//!   once, for parsing, messages and `Display`.

pub(crate) mod fields;
mod tree;

use std::{
    fmt, io,
    path::{Path, PathBuf},
};

use serde::de::DeserializeOwned;

use crate::files;

/// An error at a place in a TOML file pincer reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}:{line}:{column}: {}{message}", .path.display(), FieldPrefix(.field.as_deref()))]
pub struct TomlError {
    /// The file.
    pub path: PathBuf,
    /// 1-based line of the offending text.
    pub line: usize,
    /// 1-based column (in characters) of the offending text.
    pub column: usize,
    /// The field, such as `grant[2].ops` or `agent[1].cgroup`, when the
    /// error is about one.
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
}

/// Writes `field: ` before a message when the error names a field.
struct FieldPrefix<'a>(Option<&'a str>);

impl fmt::Display for FieldPrefix<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(field) => write!(f, "{field}: "),
            None => Ok(()),
        }
    }
}

/// A TOML file pincer reads (a mission, the daemon's configuration) that
/// could not be read or is not valid.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The file could not be read.
    #[error("cannot read {kind} {}", .path.display())]
    Io {
        /// What the file is, such as `mission file`.
        kind: &'static str,
        /// The file.
        path: PathBuf,
        /// Why it could not be read.
        #[source]
        source: io::Error,
    },
    /// The file is not valid: bad TOML, an unknown key, a wrong type or a
    /// value out of range.
    #[error(transparent)]
    Invalid(#[from] TomlError),
}

/// Reads the file at `path` (a `kind`, such as `mission file`, in
/// messages) and hands its text to `parse`; text that is not UTF-8 is an
/// error at its first bad byte. Only a regular file of at most
/// [`files::MAX_TOML_BYTES`] is read.
pub(crate) fn read_file<T, E: From<FileError>>(
    path: &Path,
    kind: &'static str,
    parse: impl FnOnce(&str) -> Result<T, E>,
) -> Result<T, E> {
    let bytes =
        files::read_regular(path, files::MAX_TOML_BYTES).map_err(|source| FileError::Io {
            kind,
            path: path.to_owned(),
            source,
        })?;
    let text = Document::text_of(&bytes, path).map_err(FileError::from)?;
    parse(text)
}

/// The text of a TOML file, and where each of its lines starts.
pub(crate) struct Document<'a> {
    text: &'a str,
    path: &'a Path,
    /// Byte offset of the start of each line: the first is 0.
    line_starts: Vec<usize>,
}

impl<'a> Document<'a> {
    /// The document `text`, read from `path` (which names it in messages).
    pub(crate) fn new(text: &'a str, path: &'a Path) -> Self {
        let line_starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(index, _)| index + 1))
            .collect();
        Self {
            text,
            path,
            line_starts,
        }
    }

    /// The text of a file read as bytes: an error at the first byte that is
    /// not UTF-8 otherwise.
    fn text_of(bytes: &'a [u8], path: &Path) -> Result<&'a str, TomlError> {
        std::str::from_utf8(bytes).map_err(|error| {
            let valid = error.valid_up_to();
            // The bytes before the bad one are text, and locate it.
            let before = std::str::from_utf8(&bytes[..valid]).unwrap_or_default();
            let message = match error.error_len() {
                Some(_) => format!("invalid UTF-8 (byte {:#04x})", bytes[valid]),
                None => "invalid UTF-8 (the file ends inside a character)".to_owned(),
            };
            Document::new(before, path).error_at(valid, None, message)
        })
    }

    /// The file the text was read from.
    pub(crate) fn path(&self) -> &'a Path {
        self.path
    }

    /// 1-based line and column (in characters) of a byte offset; an offset
    /// past the end is the end.
    pub(crate) fn position(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        // The last line starting at or before the offset.
        let index = self.line_starts.partition_point(|start| *start <= offset) - 1;
        let start = self.line_starts[index];
        let column = self.text[start..]
            .char_indices()
            .take_while(|(at, _)| start + at < offset)
            .count();
        (index + 1, column + 1)
    }

    /// 1-based line of a byte offset.
    pub(crate) fn line(&self, offset: usize) -> usize {
        self.position(offset).0
    }

    /// An error at a byte offset, about `field` when it is given.
    pub(crate) fn error_at(
        &self,
        offset: usize,
        field: Option<String>,
        message: impl Into<String>,
    ) -> TomlError {
        let (line, column) = self.position(offset);
        TomlError {
            path: self.path.to_owned(),
            line,
            column,
            field,
            message: message.into(),
        }
    }

    /// An error about `field`, at a byte offset.
    pub(crate) fn field_error(
        &self,
        offset: usize,
        field: &str,
        message: impl Into<String>,
    ) -> TomlError {
        self.error_at(offset, Some(field.to_owned()), message)
    }

    /// `value`, or the error `missing` about `field` at `offset`, where what
    /// lacks it starts.
    pub(crate) fn required<T>(
        &self,
        value: Option<T>,
        offset: usize,
        field: &str,
        missing: &str,
    ) -> Result<T, TomlError> {
        value.ok_or_else(|| self.field_error(offset, field, missing))
    }

    /// Where the top-level table `key` starts (its header, or its first
    /// dotted key): where an error about a missing key of it points.
    pub(crate) fn table_offset(&self, key: &str) -> usize {
        tree::offset_of(self.text, key).unwrap_or(0)
    }

    /// The document as `T`, or the error of the TOML parser or of `T`'s
    /// deserializer, positioned and naming its field.
    pub(crate) fn deserialize<T: DeserializeOwned>(&self) -> Result<T, TomlError> {
        toml::from_str(self.text).map_err(|error| self.toml_error(&error))
    }

    fn toml_error(&self, error: &toml::de::Error) -> TomlError {
        let offset = error.span().map_or(0, |span| span.start);
        // Errors such as "invalid basic string" carry only the first line.
        let mut message = error.message().trim_end().replace('\n', ": ");
        // Datetimes reach serde as maps; say what the user wrote.
        if message.starts_with("invalid type: map")
            && self
                .text
                .get(offset..)
                .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
        {
            message = message.replacen("invalid type: map", "invalid type: datetime", 1);
        }
        let mut message = in_toml_words(&message);
        let field = match integer_out_of_range(self.text, offset) {
            Some(literal) => {
                message = format!("integer {literal} does not fit in 64 bits");
                // The parser gave up on the whole file: the field is found in
                // the file with a zero in the integer's place.
                let mut patched = self.text.to_owned();
                patched.replace_range(
                    offset..offset + literal.len(),
                    &format!("{:<1$}", "0", literal.len()),
                );
                tree::field_at(&patched, offset)
            }
            None => tree::field_at(self.text, offset),
        };
        self.error_at(offset, field, message)
    }
}

/// serde's message of a value of the wrong type, in TOML's words: serde
/// names values by its own data model (a `map`, a `sequence`, an `i64`),
/// which is not what the person wrote.
fn in_toml_words(message: &str) -> String {
    let Some((found, expected)) = message
        .strip_prefix("invalid type: ")
        .and_then(|rest| rest.split_once(", expected "))
    else {
        return message.to_owned();
    };
    let found = match found {
        "map" => "table",
        "sequence" => "array",
        found => found,
    };
    let expected = match expected {
        "a map" => "a table",
        "a sequence" => "an array",
        "i8" | "i16" | "i32" | "i64" | "u8" | "u16" | "u32" | "u64" | "usize" => "an integer",
        expected => expected,
    };
    format!("invalid type: {found}, expected {expected}")
}

/// The integer written at `offset`, when it is one TOML cannot hold (its
/// integers are 64-bit).
fn integer_out_of_range(text: &str, offset: usize) -> Option<&str> {
    let rest = text.get(offset..)?;
    let end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '+' | '-')))
        .unwrap_or(rest.len());
    let literal = &rest[..end];
    if rest[end..].starts_with('.') {
        // A float.
        return None;
    }
    let (negative, unsigned) = match literal.strip_prefix('-') {
        Some(unsigned) => (true, unsigned),
        None => (false, literal.strip_prefix('+').unwrap_or(literal)),
    };
    // Only decimal integers have a sign.
    let signed = unsigned.len() < literal.len();
    let (radix, digits) = match unsigned.get(..2) {
        Some("0x") if !signed => (16, &unsigned[2..]),
        Some("0o") if !signed => (8, &unsigned[2..]),
        Some("0b") if !signed => (2, &unsigned[2..]),
        _ => (10, unsigned),
    };
    let digits = digits.replace('_', "");
    if digits.starts_with(['+', '-']) {
        return None;
    }
    let limit = u128::from(i64::MAX.unsigned_abs()) + u128::from(negative);
    let out_of_range = match u128::from_str_radix(&digits, radix) {
        Ok(value) => value > limit,
        Err(error) => *error.kind() == std::num::IntErrorKind::PosOverflow,
    };
    out_of_range.then_some(literal)
}

/// A setting written as one of a few names (`"deny"`, `"tree"`, `"keep"`):
/// the names are listed once, and serve parsing, messages and `Display`
/// (the `named!` macro).
pub trait Named: Copy + PartialEq + 'static {
    /// Each name with what it stands for, in the order messages list them.
    const NAMES: &'static [(&'static str, Self)];

    /// The value written `name`.
    fn from_name(name: &str) -> Option<Self> {
        Self::NAMES
            .iter()
            .find(|(written, _)| *written == name)
            .map(|(_, value)| *value)
    }

    /// The name the value is written with.
    fn name(self) -> &'static str {
        Self::NAMES
            .iter()
            .find(|(_, value)| *value == self)
            .map_or("?", |(name, _)| name)
    }
}

/// [`Named`] and `Display` (the name) for an enum, from its names:
/// `named!(OnStop: "keep" => Keep, "remove" => Remove);`.
macro_rules! named {
    ($named:ident: $($name:literal => $variant:ident),+ $(,)?) => {
        impl $crate::toml_file::Named for $named {
            const NAMES: &'static [(&'static str, Self)] = &[$(($name, Self::$variant)),+];
        }

        impl std::fmt::Display for $named {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str($crate::toml_file::Named::name(*self))
            }
        }
    };
}
pub(crate) use named;

/// `a, b or c`.
pub(crate) fn or_list<S: AsRef<str>>(items: &[S]) -> String {
    match items {
        [] => String::new(),
        [one] => one.as_ref().to_owned(),
        [init @ .., last] => {
            let init: Vec<&str> = init.iter().map(AsRef::as_ref).collect();
            format!("{} or {}", init.join(", "), last.as_ref())
        }
    }
}

/// `text` as a TOML basic string.
pub(crate) fn toml_string(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for c in text.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            '\n' => quoted.push_str("\\n"),
            '\t' => quoted.push_str("\\t"),
            c if c.is_control() => quoted.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

/// What tests of the parsers compare errors with.
#[cfg(test)]
pub(crate) mod test_support {
    use super::TomlError;

    /// The line, column, field and message of an error, to compare in one
    /// assertion.
    pub(crate) type Parts = (usize, usize, Option<String>, String);

    impl TomlError {
        /// The error as [`Parts`].
        pub(crate) fn parts(self) -> Parts {
            (self.line, self.column, self.field, self.message)
        }
    }

    /// The field of an error, as [`Parts`] have it.
    pub(crate) fn field(name: &str) -> Option<String> {
        Some(name.to_owned())
    }

    /// [`Parts`] with a field.
    pub(crate) fn parts(line: usize, column: usize, name: &str, message: &str) -> Parts {
        (line, column, field(name), message.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn document(text: &str) -> Document<'_> {
        Document::new(text, Path::new("f.toml"))
    }

    #[test]
    fn line_and_column_of_offsets() {
        let doc = document("ab\nçd\n\nx");
        assert_eq!(doc.position(0), (1, 1));
        assert_eq!(doc.position(2), (1, 3));
        assert_eq!(doc.position(3), (2, 1));
        // Inside the two bytes of "ç", and after them: column 2.
        assert_eq!(doc.position(4), (2, 2));
        assert_eq!(doc.position(5), (2, 2));
        assert_eq!(doc.position(6), (2, 3));
        assert_eq!(doc.position(7), (3, 1));
        assert_eq!(doc.position(8), (4, 1));
        assert_eq!(doc.position(9), (4, 2));
        assert_eq!(doc.position(100), (4, 2));
        assert_eq!(doc.line(8), 4);
        assert_eq!(document("").position(0), (1, 1));
        assert_eq!(document("\n").position(1), (2, 1));
    }

    #[test]
    fn every_offset_agrees_with_counting() {
        let text = "a = 1\n\n# é\r\nb = \"ü\"\nc\n";
        let doc = document(text);
        for offset in 0..=text.len() + 2 {
            let before: String = text
                .char_indices()
                .take_while(|(index, _)| *index < offset)
                .map(|(_, c)| c)
                .collect();
            let line = before.matches('\n').count() + 1;
            let column = before.chars().rev().take_while(|c| *c != '\n').count() + 1;
            assert_eq!(doc.position(offset), (line, column), "{offset}");
        }
    }

    #[test]
    fn errors_name_the_file_the_position_and_the_field() {
        let doc = document("a = 1\nb = 2\n");
        let error = doc.field_error(10, "b", "too big");
        assert_eq!(error.to_string(), "f.toml:2:5: b: too big");
        let error = doc.error_at(6, None, "odd");
        assert_eq!(error.to_string(), "f.toml:2:1: odd");
        assert_eq!(
            doc.required(None::<u8>, 6, "c", "missing field")
                .unwrap_err()
                .to_string(),
            "f.toml:2:1: c: missing field"
        );
        assert_eq!(doc.required(Some(1), 6, "c", "missing field"), Ok(1));
    }

    #[test]
    fn text_that_is_not_utf8_is_an_error_at_its_first_bad_byte() {
        let path = Path::new("f.toml");
        assert_eq!(Document::text_of(b"a = 1\n", path), Ok("a = 1\n"));
        let error = Document::text_of(b"a = 1\nb = \"\xc3\xa9\xff\"\n", path).unwrap_err();
        assert_eq!(error.to_string(), "f.toml:2:7: invalid UTF-8 (byte 0xff)");
        let error = Document::text_of(b"\xe2\x82", path).unwrap_err();
        assert_eq!(
            error.to_string(),
            "f.toml:1:1: invalid UTF-8 (the file ends inside a character)"
        );
    }

    #[test]
    fn a_mission_or_configuration_that_is_not_utf8_is_refused_at_its_first_bad_byte() {
        let dir = tempfile::tempdir().unwrap();
        let mission = dir.path().join("m.toml");
        let config = dir.path().join("daemon.toml");
        // "café" in Latin-1.
        std::fs::write(&mission, b"[mission]\nname = \"caf\xe9\"\n").unwrap();
        std::fs::write(&config, b"[daemon]\nsocket = \"/s\xff\"\n").unwrap();
        let mission_error = crate::mission::Mission::from_file(&mission).unwrap_err();
        let config_error = crate::config::daemon::Config::from_file(&config).unwrap_err();
        // The line and column of the bad byte, and no field: none is read yet.
        assert_eq!(
            mission_error.to_string(),
            format!("{}:2:12: invalid UTF-8 (byte 0xe9)", mission.display())
        );
        assert_eq!(
            config_error.to_string(),
            format!("{}:2:13: invalid UTF-8 (byte 0xff)", config.display())
        );
        assert!(matches!(
            mission_error,
            crate::mission::MissionError::File(FileError::Invalid(_))
        ));
        assert!(matches!(
            config_error,
            crate::config::daemon::ConfigError::Invalid(_)
        ));
    }

    #[test]
    fn integers_out_of_range() {
        let out_of_range =
            |literal: &str| integer_out_of_range(&format!("a = {literal}\n"), 4).map(str::to_owned);
        for literal in [
            "99999999999999999999",
            "9223372036854775808",
            "+9223372036854775808",
            "-9223372036854775809",
            "9_223_372_036_854_775_808",
            "0x8000000000000000",
            "0o1000000000000000000000",
            "0b1000000000000000000000000000000000000000000000000000000000000000",
            "1000000000000000000000000000000000000000000",
        ] {
            assert_eq!(out_of_range(literal).as_deref(), Some(literal), "{literal}");
        }
        for literal in [
            "9223372036854775807",
            "-9223372036854775808",
            "0x7fffffffffffffff",
            "0123",
            "1_000",
            "-0x8000000000000000",
            "\"99999999999999999999\"",
            "99999999999999999999.5",
            "1e400",
            "abc",
            "",
        ] {
            assert_eq!(out_of_range(literal), None, "{literal}");
        }
        assert_eq!(integer_out_of_range("a", 9), None);
    }

    #[test]
    fn lists() {
        assert_eq!(or_list::<&str>(&[]), "");
        assert_eq!(or_list(&["a"]), "a");
        assert_eq!(or_list(&["a", "b"]), "a or b");
        assert_eq!(or_list(&["a", "b", "c"]), "a, b or c");
    }

    #[test]
    fn toml_strings() {
        assert_eq!(
            toml_string("a \"b\"\\c\td\n\u{7f}é"),
            "\"a \\\"b\\\"\\\\c\\td\\n\\u007Fé\""
        );
    }
}
