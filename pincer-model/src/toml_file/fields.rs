//! Checks of the values a file holds, shared by every file pincer reads (a
//! mission, a profile, the daemon's and the approval service's
//! configurations): each reads a value serde deserialized with its span
//! (`toml::Spanned`) and reports a bad one at its place, with its field.
//! One check, one message, whichever file the value is in.

use std::{
    borrow::Cow,
    fmt,
    marker::PhantomData,
    ops::{Range, RangeInclusive},
    path::{Path, PathBuf},
    time::Duration,
};

use serde::{
    Deserialize, Deserializer,
    de::{DeserializeSeed, IntoDeserializer, MapAccess, Visitor, value::MapAccessDeserializer},
};
use toml::Spanned;

use super::{Document, Named, TomlError, or_list, toml_string, tree};

/// How the paths of a file are written: what a leading `~` and `{uid}`
/// stand for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PathRules<'a> {
    /// What `~` and `~/...` start from.
    pub(crate) home: Home<'a>,
    /// The user id `{uid}` stands for; `None`: `{uid}` is written as is.
    pub(crate) uid: Option<u32>,
}

/// What a leading `~` is.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Home<'a> {
    /// The home directory of the user the file is read for; `None` (no
    /// `$HOME`) makes a `~` an error.
    Of(Option<&'a Path>),
    /// Not expanded, and refused: a host-wide file is nobody's, so whose
    /// home would it be?
    Nobody,
}

impl PathRules<'_> {
    /// Paths written in full: no `~`, and `{uid}` as written.
    pub(crate) const IN_FULL: PathRules<'static> = PathRules {
        home: Home::Nobody,
        uid: None,
    };

    /// The home `~` stands for, as [`crate::labels::PolicyPattern::parse`]
    /// takes it.
    pub(crate) fn home(&self) -> Option<&Path> {
        match self.home {
            Home::Of(home) => home,
            Home::Nobody => None,
        }
    }
}

/// A table of the file read as `T`: serde's derive would also read an
/// array as a struct (`[[daemon]]` as `[daemon]`, by position), which a
/// file must not mean; this refuses it ("expected a table"). It has no
/// span: a top-level table made by dotted keys (`daemon.socket = ...`) has
/// none, and the document finds where it starts
/// ([`Document::table_offset`]).
pub(crate) struct Table<T>(pub(crate) T);

/// A table inside a table, read as `T`, with where it was written when the
/// TOML deserializer knows: written with a header or inline it has a span,
/// made by dotted keys (`webhook.url = "..."` inside `[vote]`) it has none,
/// which `Spanned` would refuse with a message about its own protocol. An
/// array is refused, as [`Table`] refuses it.
pub(crate) struct Located<T> {
    /// The table's values.
    pub(crate) value: T,
    /// Where it was written, when the deserializer knows.
    pub(crate) span: Option<Range<usize>>,
}

impl<T> Located<T> {
    /// Where the table starts, or `otherwise()` (where the table it is in
    /// starts) when that is not known.
    pub(crate) fn start_or(&self, otherwise: impl FnOnce() -> usize) -> usize {
        self.span.as_ref().map_or_else(otherwise, |span| span.start)
    }
}

/// Reads a [`Table`] as a plain map, or a [`Located`] through the
/// deserializer's span protocol.
struct TableVisitor<T> {
    spanned: bool,
    value: PhantomData<T>,
}

impl<T> TableVisitor<T> {
    fn new(spanned: bool) -> Self {
        Self {
            spanned,
            value: PhantomData,
        }
    }
}

impl<'de, T: Deserialize<'de>> Visitor<'de> for TableVisitor<T> {
    type Value = Located<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a table")
    }

    // Asked for a span, the deserializer answers with a map of the span and
    // the value when it has one, and with the table itself when it has none:
    // the first key tells which. (A first key read here has no span left
    // for an error about it: an unknown one is reported at the table.)
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Located<T>, A::Error> {
        let mut first = None;
        if self.spanned {
            match map.next_key::<String>()? {
                Some(key) if key == tree::SPANNED_START => {
                    let (span, table) = tree::rest_of_span_seed(map, TableVisitor::new(false))?;
                    return Ok(Located {
                        value: table.value,
                        span: Some(span),
                    });
                }
                key => first = key,
            }
        }
        let value = T::deserialize(MapAccessDeserializer::new(Prefixed { first, map }))?;
        Ok(Located { value, span: None })
    }
}

impl<'de, T: Deserialize<'de>> DeserializeSeed<'de> for TableVisitor<T> {
    type Value = Located<T>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Located<T>, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Table<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let table = TableVisitor::new(false).deserialize(deserializer)?;
        Ok(Table(table.value))
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Located<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let visitor = TableVisitor::new(true);
        deserializer.deserialize_struct(tree::SPANNED_NAME, tree::SPANNED_FIELDS, visitor)
    }
}

/// A table's entries with its first key, already read, put back in front.
struct Prefixed<A> {
    first: Option<String>,
    map: A,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for Prefixed<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        match self.first.take() {
            Some(key) => seed.deserialize(key.into_deserializer()).map(Some),
            None => self.map.next_key_seed(seed),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        self.map.next_value_seed(seed)
    }
}

/// Tables of a file as serde reads them, each value optional and spanned,
/// so that the file's checks, not serde, report a missing or invalid value
/// at its place. Each table refuses unknown keys, and serde's messages call
/// it "a table". A field written `key: T` is the value `Option<Spanned<T>>`;
/// one written `key: [T]` is an array of tables, `Vec<Spanned<T>>`, empty
/// when the file has none; one written `key: {T}` is a table, which dotted
/// keys may make, `Option<Located<T>>`. Doc comments and visibility are
/// kept.
macro_rules! raw_tables {
    () => {};
    ($(#[$meta:meta])* $vis:vis struct $name:ident { $($body:tt)* } $($rest:tt)*) => {
        $crate::toml_file::fields::raw_tables!(@fields [$(#[$meta])* $vis struct $name] [] $($body)*);
        $crate::toml_file::fields::raw_tables!($($rest)*);
    };
    (@fields [$($head:tt)*] [$($done:tt)*]) => {
        #[derive(::serde::Deserialize)]
        #[serde(deny_unknown_fields, expecting = "a table")]
        $($head)* { $($done)* }
    };
    (@fields $head:tt [$($done:tt)*] $(#[$meta:meta])* $vis:vis $key:ident: [$table:ty] $(, $($rest:tt)*)?) => {
        $crate::toml_file::fields::raw_tables!(@fields $head [
            $($done)* $(#[$meta])* #[serde(default)] $vis $key: Vec<::toml::Spanned<$table>>,
        ] $($($rest)*)?);
    };
    (@fields $head:tt [$($done:tt)*] $(#[$meta:meta])* $vis:vis $key:ident: {$table:ty} $(, $($rest:tt)*)?) => {
        $crate::toml_file::fields::raw_tables!(@fields $head [
            $($done)* $(#[$meta])* $vis $key: Option<$crate::toml_file::fields::Located<$table>>,
        ] $($($rest)*)?);
    };
    (@fields $head:tt [$($done:tt)*] $(#[$meta:meta])* $vis:vis $key:ident: $value:ty $(, $($rest:tt)*)?) => {
        $crate::toml_file::fields::raw_tables!(@fields $head [
            $($done)* $(#[$meta])* $vis $key: Option<::toml::Spanned<$value>>,
        ] $($($rest)*)?);
    };
}
pub(crate) use raw_tables;

/// A table of a document as its values are checked: the table as serde
/// read it, and what its keys are called in messages. The tables of an
/// array are numbered from 1, as a reader counts them: `grant[2].path`.
pub(crate) struct Fields<'a, R> {
    /// The document the table is in.
    pub(crate) doc: &'a Document<'a>,
    /// The table's values, as serde read them.
    raw: &'a R,
    /// Where the table starts: where "missing field" points. `None` for a
    /// top-level table, which has no span: where it starts is found in the
    /// document (read again) only when a message needs it.
    at: Option<usize>,
    /// What the names of its keys start with: `grant[2]`.
    name: String,
}

impl<'a, R> Fields<'a, R> {
    /// The table `name` (`grant[2]`), with its span.
    pub(crate) fn new(doc: &'a Document<'a>, name: String, table: &'a Spanned<R>) -> Self {
        Self {
            doc,
            raw: table.get_ref(),
            at: Some(table.span().start),
            name,
        }
    }

    /// The top-level table `name` (`[kubernetes]`). Written with a header
    /// or with dotted keys (`kubernetes.node = "n"`), which make a table
    /// with no span: it starts where its first key does.
    pub(crate) fn table(doc: &'a Document<'a>, name: &str, table: &'a Table<R>) -> Self {
        Self {
            doc,
            raw: &table.0,
            at: None,
            name: name.to_owned(),
        }
    }

    /// The top-level table `name` (`[mission]`), which the document must
    /// have: "missing section" at the document's start otherwise.
    pub(crate) fn section(
        doc: &'a Document<'a>,
        name: &str,
        table: &'a Option<Table<R>>,
    ) -> Result<Self, TomlError> {
        let table = doc.required(table.as_ref(), 0, name, "missing section")?;
        Ok(Self::table(doc, name, table))
    }

    /// The tables of the array `name` (`grant`, `vote.rule`), numbered
    /// from 1.
    pub(crate) fn each(
        doc: &'a Document<'a>,
        name: &'a str,
        tables: &'a [Spanned<R>],
    ) -> impl Iterator<Item = Self> {
        tables
            .iter()
            .enumerate()
            .map(move |(index, table)| Self::new(doc, format!("{name}[{}]", index + 1), table))
    }

    /// The table `key` of this one (`asset[1].constraints`): where it
    /// starts when that is known, else where this one does.
    pub(crate) fn inner<S>(&self, key: &str, table: &'a Located<S>) -> Fields<'a, S> {
        Fields::located(self.doc, self.field(key), table, || self.at())
    }

    /// The table `name`, which starts at `otherwise()` when its own start
    /// is not known (dotted keys made it).
    pub(crate) fn located(
        doc: &'a Document<'a>,
        name: String,
        table: &'a Located<R>,
        otherwise: impl FnOnce() -> usize,
    ) -> Self {
        Self {
            doc,
            raw: &table.value,
            at: Some(table.start_or(otherwise)),
            name,
        }
    }

    /// The table's values, as serde read them.
    pub(crate) fn raw(&self) -> &'a R {
        self.raw
    }

    /// Where the table starts.
    pub(crate) fn at(&self) -> usize {
        self.at.unwrap_or_else(|| self.doc.table_offset(&self.name))
    }

    /// What its key `key` is called in messages: `grant[2].path`.
    pub(crate) fn field(&self, key: &str) -> String {
        format!("{}.{key}", self.name)
    }

    /// Its key `key`, which it must have: "missing field" at the table
    /// otherwise.
    pub(crate) fn required<T>(
        &self,
        value: &'a Option<Spanned<T>>,
        key: &str,
    ) -> Result<&'a Spanned<T>, TomlError> {
        value.as_ref().ok_or_else(|| {
            self.doc
                .field_error(self.at(), &self.field(key), "missing field")
        })
    }
}

/// Why a path starting with `~` is refused where nobody's home applies.
pub(crate) const TILDE_NOT_EXPANDED: &str =
    "\"~\" is not expanded (whose home would it be?): write the path in full";

/// Says how to write an array of tables when a single table (or another
/// value) was written: `tables` are the dotted names of the file's arrays
/// of tables with what each holds (`("agent", "agent")`).
pub(crate) fn with_hint(mut error: TomlError, tables: &[(&str, &str)]) -> TomlError {
    if error.message.ends_with("expected an array")
        && let Some((name, what)) = tables
            .iter()
            .find(|(name, _)| error.field.as_deref() == Some(*name))
    {
        error
            .message
            .push_str(&format!(" (write each {what} as a [[{name}]] table)"));
    }
    error
}

impl Document<'_> {
    /// `value`'s check: its result, or the check's message about `field` at
    /// the value.
    pub(crate) fn check<T, V>(
        &self,
        value: &Spanned<V>,
        field: &str,
        check: impl FnOnce(&V) -> Result<T, String>,
    ) -> Result<T, TomlError> {
        check(value.get_ref())
            .map_err(|message| self.field_error(value.span().start, field, message))
    }

    /// Looks `value` up in `choices`, the accepted spellings of a setting
    /// (`what` in the message: `unknown value "x" (expected a or b)`).
    pub(crate) fn choice<T: Copy>(
        &self,
        value: &Spanned<String>,
        field: &str,
        what: &str,
        choices: &[(&str, T)],
    ) -> Result<T, TomlError> {
        self.check(value, field, |written| {
            choices
                .iter()
                .find(|(name, _)| name == written)
                .map(|(_, choice)| *choice)
                .ok_or_else(|| {
                    let expected: Vec<&str> = choices.iter().map(|(name, _)| *name).collect();
                    format!(
                        "unknown {what} {} (expected {})",
                        toml_string(written),
                        or_list(&expected)
                    )
                })
        })
    }

    /// A [`Named`] setting: `unknown value "x" (expected a or b)` otherwise.
    pub(crate) fn named<T: Named>(
        &self,
        value: &Spanned<String>,
        field: &str,
    ) -> Result<T, TomlError> {
        self.choice(value, field, "value", T::NAMES)
    }

    /// A duration within `bounds`, as [`crate::duration::parse`] reads it.
    pub(crate) fn duration(
        &self,
        value: &Spanned<String>,
        field: &str,
        bounds: RangeInclusive<Duration>,
    ) -> Result<Duration, TomlError> {
        self.check(value, field, |text| crate::duration::parse(text, bounds))
    }

    /// A path, absolute once `rules` expand `{uid}` and a leading `~`.
    pub(crate) fn absolute_path(
        &self,
        value: &Spanned<String>,
        field: &str,
        rules: &PathRules<'_>,
    ) -> Result<PathBuf, TomlError> {
        self.check(value, field, |written| absolute_path(written, rules))
    }

    /// A path, absolute or relative to `directory` (the directory of the
    /// file that names it, so that it means the same whatever directory
    /// pincer starts in); `~` is refused.
    pub(crate) fn path_from(
        &self,
        value: &Spanned<String>,
        field: &str,
        directory: &Path,
    ) -> Result<PathBuf, TomlError> {
        self.check(value, field, |written| {
            let path = plain_path(written)?;
            if path.starts_with("~") {
                return Err(TILDE_NOT_EXPANDED.to_owned());
            }
            std::path::absolute(directory.join(&path))
                .map_err(|error| format!("cannot make {} absolute: {error}", path.display()))
        })
    }
}

/// Text that names files (a path, a pattern of paths or names): not
/// empty, and without NUL bytes, which no name can hold.
pub(crate) fn check_names_files(text: &str) -> Result<(), String> {
    if text.is_empty() {
        return Err("must not be empty".to_owned());
    }
    if text.contains('\0') {
        return Err("must not contain a NUL byte".to_owned());
    }
    Ok(())
}

/// A path: not empty and without NUL bytes.
fn plain_path(written: &str) -> Result<PathBuf, String> {
    check_names_files(written)?;
    Ok(PathBuf::from(written))
}

/// A path as `rules` write it: absolute, or starting with `~` when a home
/// applies, with each `{uid}` the user's id when one does.
fn absolute_path(written: &str, rules: &PathRules<'_>) -> Result<PathBuf, String> {
    plain_path(written)?;
    let with_uid = match rules.uid {
        Some(uid) => expand_uid(written, uid)?,
        None => Cow::Borrowed(written),
    };
    let expanded = match (with_uid.strip_prefix('~'), rules.home) {
        (Some(rest), Home::Of(home)) if rest.is_empty() || rest.starts_with('/') => {
            let home = home.ok_or("cannot expand ~: HOME is not set")?;
            if !home.is_absolute() {
                return Err(format!(
                    "cannot expand ~: HOME is not absolute ({})",
                    toml_string(&home.display().to_string())
                ));
            }
            home.join(rest.trim_start_matches('/'))
        }
        (Some(rest), Home::Nobody) if rest.is_empty() || rest.starts_with('/') => {
            return Err(TILDE_NOT_EXPANDED.to_owned());
        }
        _ => PathBuf::from(with_uid.as_ref()),
    };
    if !expanded.is_absolute() {
        // `~user` reads like a home directory, but only `~` is expanded.
        let hint = if written.starts_with('~') {
            ": only \"~\" and \"~/...\" are expanded, not \"~user\""
        } else {
            ""
        };
        return Err(format!("must be absolute ({}{hint})", toml_string(written)));
    }
    Ok(expanded)
}

/// `text` with each `{uid}` replaced by `uid`. Other braces are kept as
/// written, except a `{word}` of lowercase letters, digits and `_`: that
/// reads like another variable (`{user}`, `{home}`), which would otherwise
/// name a directory nobody has.
pub(crate) fn expand_uid(text: &str, uid: u32) -> Result<Cow<'_, str>, String> {
    if !text.contains('{') {
        return Ok(text.into());
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let word_end = after
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(after.len());
        let (word, tail) = after.split_at(word_end);
        match tail.strip_prefix('}') {
            Some(tail) if word == "uid" => {
                out.push_str(&uid.to_string());
                rest = tail;
            }
            Some(_) if !word.is_empty() => {
                return Err(format!(
                    "unknown variable \"{{{word}}}\": only \"{{uid}}\" is expanded"
                ));
            }
            _ => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    Ok(out.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(home: Option<&Path>) -> PathRules<'_> {
        PathRules {
            home: Home::Of(home),
            uid: Some(1000),
        }
    }

    #[test]
    fn paths_as_each_file_writes_them() {
        let home = Path::new("/home/me");
        assert_eq!(
            absolute_path("~/a/{uid}", &rules(Some(home))),
            Ok(PathBuf::from("/home/me/a/1000"))
        );
        assert_eq!(
            absolute_path("~/a", &rules(None)).unwrap_err(),
            "cannot expand ~: HOME is not set"
        );
        assert_eq!(
            absolute_path("~/a", &PathRules::IN_FULL).unwrap_err(),
            TILDE_NOT_EXPANDED
        );
        assert_eq!(
            absolute_path("/a/{uid}", &PathRules::IN_FULL),
            Ok(PathBuf::from("/a/{uid}"))
        );
        assert_eq!(
            absolute_path("a", &PathRules::IN_FULL).unwrap_err(),
            "must be absolute (\"a\")"
        );
        assert_eq!(
            absolute_path("", &PathRules::IN_FULL).unwrap_err(),
            "must not be empty"
        );
        assert_eq!(
            absolute_path("/a\0", &PathRules::IN_FULL).unwrap_err(),
            "must not contain a NUL byte"
        );
    }

    #[test]
    fn checks_point_at_the_value() {
        let text = "a = \"x\"\n";
        let doc = Document::new(text, Path::new("f.toml"));
        #[derive(serde::Deserialize)]
        struct Raw {
            a: Spanned<String>,
        }
        let raw: Raw = doc.deserialize().unwrap();
        assert_eq!(
            doc.choice(&raw.a, "a", "value", &[("y", 1), ("z", 2)])
                .unwrap_err()
                .to_string(),
            "f.toml:1:5: a: unknown value \"x\" (expected y or z)"
        );
        assert_eq!(
            doc.duration(&raw.a, "a", crate::duration::POSITIVE..=Duration::MAX)
                .unwrap_err()
                .message,
            "invalid duration \"x\" (write it like \"30s\", \"10m\" or \"1h30m\")"
        );
    }
}
