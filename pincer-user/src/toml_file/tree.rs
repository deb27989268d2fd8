//! A TOML document as a tree of values that keep their spans, read through
//! the TOML deserializer's span protocol so that a value without a span (a
//! table that exists only through a dotted key or header) is not an error.
//!
//! The daemon's configuration is checked by walking this tree ([`Field`]);
//! a mission is read by serde's derive, and the tree only names the field at
//! the position of an error serde reports ([`field_at`]).

use std::fmt;
use std::ops::Range;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};

use super::{Document, TomlError, one_of, toml_string};

/// A TOML value and where it was written. Tables that exist only through a
/// dotted key or header (`daemon.socket = …`, `[[vote.rule]]` without
/// `[vote]`) have no span.
pub(crate) struct Node {
    pub(crate) span: Option<Range<usize>>,
    pub(crate) value: Value,
}

/// The values of the TOML data model.
pub(crate) enum Value {
    String(String),
    Integer(i64),
    Float(f64),
    Boolean(bool),
    Datetime(String),
    Array(Vec<Node>),
    Table(Vec<(Key, Node)>),
}

/// A key of a table and where it was written.
pub(crate) struct Key {
    pub(crate) span: Option<Range<usize>>,
    pub(crate) name: String,
}

impl Value {
    /// What the value is, for messages.
    pub(crate) fn describe(&self) -> String {
        match self {
            Value::String(text) => format!("string {}", toml_string(text)),
            Value::Integer(n) => format!("integer {n}"),
            Value::Float(x) => format!("float {x}"),
            Value::Boolean(b) => format!("boolean {b}"),
            Value::Datetime(text) => format!("datetime {text}"),
            Value::Array(_) => "array".to_owned(),
            Value::Table(_) => "table".to_owned(),
        }
    }
}

impl Node {
    /// Whether the value covers `offset`. A table's span may leave out parts
    /// of it (`[vote]` ends where `[vote.webhook]` begins) or be missing, so
    /// its entries are asked too.
    fn contains(&self, offset: usize) -> bool {
        covers(self.span.as_ref(), offset)
            || match &self.value {
                Value::Array(items) => items.iter().any(|item| item.contains(offset)),
                Value::Table(entries) => entries.iter().any(|(key, value)| {
                    covers(key.span.as_ref(), offset) || value.contains(offset)
                }),
                _ => false,
            }
    }
}

fn covers(span: Option<&Range<usize>>, offset: usize) -> bool {
    span.is_some_and(|span| span.contains(&offset))
}

/// The dotted name (`grant[2].ops`) of the key or value at `offset`, if
/// `text` is valid TOML. Array elements are counted from 1.
pub(super) fn field_at(text: &str, offset: usize) -> Option<String> {
    let root: Node = toml::from_str(text).ok()?;
    let mut path = String::new();
    let mut node = &root;
    loop {
        match &node.value {
            Value::Array(items) => {
                let Some((index, item)) = items
                    .iter()
                    .enumerate()
                    .find(|(_, item)| item.contains(offset))
                else {
                    break;
                };
                path.push_str(&format!("[{}]", index + 1));
                node = item;
            }
            Value::Table(entries) => {
                let Some((key, value)) = entries.iter().find(|(key, value)| {
                    covers(key.span.as_ref(), offset) || value.contains(offset)
                }) else {
                    break;
                };
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(&key.name);
                if covers(key.span.as_ref(), offset) {
                    break;
                }
                node = value;
            }
            _ => break,
        }
    }
    (!path.is_empty()).then_some(path)
}

/// A value found in the file, with its dotted name (`agent[2].cgroup`) and
/// where to point at it: the value, or its key when the value has no span.
pub(crate) struct Field<'a> {
    pub(crate) name: String,
    pub(crate) offset: usize,
    pub(crate) node: &'a Node,
}

impl<'a> Field<'a> {
    /// The document's root table.
    pub(crate) fn root(node: &'a Node) -> Self {
        Field {
            name: String::new(),
            offset: 0,
            node,
        }
    }

    /// The elements of an array (`agent[1]`, `agent[2]`, ...), or `None`
    /// when the value is not one.
    pub(crate) fn items(&self) -> Option<impl Iterator<Item = Field<'a>> + '_> {
        let Value::Array(items) = &self.node.value else {
            return None;
        };
        Some(items.iter().enumerate().map(|(index, item)| Field {
            name: format!("{}[{}]", self.name, index + 1),
            offset: item.span.as_ref().map_or(self.offset, |span| span.start),
            node: item,
        }))
    }
}

impl Document<'_> {
    /// An error about a field.
    pub(crate) fn error(&self, field: &Field<'_>, message: impl Into<String>) -> TomlError {
        self.error_at(field.offset, Some(field.name.clone()), message)
    }

    /// "invalid type: string "x", expected `expected`".
    pub(crate) fn wrong_type(&self, field: &Field<'_>, expected: &str) -> TomlError {
        self.error(
            field,
            format!(
                "invalid type: {}, expected {expected}",
                field.node.value.describe()
            ),
        )
    }

    /// The entries of `known`, in that order, of a table: any other key is
    /// an error.
    pub(crate) fn fields<'a, const N: usize>(
        &self,
        table: &Field<'a>,
        known: [&str; N],
    ) -> Result<[Option<Field<'a>>; N], TomlError> {
        let Value::Table(entries) = &table.node.value else {
            return Err(self.wrong_type(table, "a table"));
        };
        let mut found = [const { None }; N];
        for (key, node) in entries {
            let name = if table.name.is_empty() {
                key.name.clone()
            } else {
                format!("{}.{}", table.name, key.name)
            };
            let key_offset = key.span.as_ref().map_or(table.offset, |span| span.start);
            let Some(index) = known.iter().position(|known| *known == key.name) else {
                return Err(self.error_at(
                    key_offset,
                    Some(name),
                    format!("unknown field `{}`, expected {}", key.name, one_of(&known)),
                ));
            };
            found[index] = Some(Field {
                name,
                offset: node.span.as_ref().map_or(key_offset, |span| span.start),
                node,
            });
        }
        Ok(found)
    }

    /// A key of `table` that must be there: "missing field" points at the
    /// table otherwise.
    pub(crate) fn required_in<'a>(
        &self,
        table: &Field<'_>,
        key: &str,
        field: Option<Field<'a>>,
    ) -> Result<Field<'a>, TomlError> {
        let name = format!("{}.{key}", table.name);
        self.required(field, table.offset, &name, "missing field")
    }

    /// The text of a string.
    pub(crate) fn string<'a>(&self, field: &Field<'a>) -> Result<&'a str, TomlError> {
        match &field.node.value {
            Value::String(text) => Ok(text),
            _ => Err(self.wrong_type(field, "a string")),
        }
    }

    /// The value of an integer.
    pub(crate) fn integer(&self, field: &Field<'_>) -> Result<i64, TomlError> {
        match field.node.value {
            Value::Integer(n) => Ok(n),
            _ => Err(self.wrong_type(field, "an integer")),
        }
    }
}

// How `toml::Spanned` asks the TOML deserializer for a span (serde_spanned's
// protocol): a struct with these names, answered with a map of these three
// fields when the value has a span and with the plain value when it has
// none. `Node` and `Key` speak it so that a missing span is not an error.
const SPANNED_NAME: &str = "$__serde_spanned_private_Spanned";
const SPANNED_START: &str = "$__serde_spanned_private_start";
const SPANNED_END: &str = "$__serde_spanned_private_end";
const SPANNED_VALUE: &str = "$__serde_spanned_private_value";
const SPANNED_FIELDS: &[&str] = &[SPANNED_START, SPANNED_END, SPANNED_VALUE];
// How the TOML deserializer hands over a datetime: a map of this one key.
const DATETIME_FIELD: &str = "$__toml_private_datetime";

/// Reads the rest of a span map whose start key has been read.
fn rest_of_span<'de, T: Deserialize<'de>, A: MapAccess<'de>>(
    mut map: A,
) -> Result<(Range<usize>, T), A::Error> {
    let start: usize = map.next_value()?;
    let end = match map.next_key::<String>()? {
        Some(key) if key == SPANNED_END => map.next_value::<usize>()?,
        _ => return Err(de::Error::custom("span without an end")),
    };
    match map.next_key::<String>()? {
        Some(key) if key == SPANNED_VALUE => Ok((start..end, map.next_value()?)),
        _ => Err(de::Error::custom("span without a value")),
    }
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;

        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }

            fn visit_str<E: de::Error>(self, name: &str) -> Result<Key, E> {
                Ok(Key {
                    span: None,
                    name: name.to_owned(),
                })
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Key, A::Error> {
                match map.next_key::<String>()? {
                    Some(key) if key == SPANNED_START => {
                        let (span, name) = rest_of_span(map)?;
                        Ok(Key {
                            span: Some(span),
                            name,
                        })
                    }
                    _ => Err(de::Error::custom("expected a spanned key")),
                }
            }
        }

        deserializer.deserialize_struct(SPANNED_NAME, SPANNED_FIELDS, KeyVisitor)
    }
}

/// Reads the values of the TOML data model.
struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a TOML value")
    }

    fn visit_bool<E: de::Error>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Boolean(b))
    }

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<Value, E> {
        Ok(Value::Integer(n))
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<Value, E> {
        i64::try_from(n)
            .map(Value::Integer)
            .map_err(|_| E::custom(format!("integer {n} is too large")))
    }

    fn visit_f64<E: de::Error>(self, x: f64) -> Result<Value, E> {
        Ok(Value::Float(x))
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Value, E> {
        Ok(Value::String(text.to_owned()))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let Some(first) = map.next_key::<Key>()? else {
            return Ok(Value::Table(Vec::new()));
        };
        // A key of the document always has a span: this one is the
        // deserializer's.
        if first.span.is_none() && first.name == DATETIME_FIELD {
            return Ok(Value::Datetime(map.next_value()?));
        }
        let value = map.next_value()?;
        table_rest((first, value), map)
    }
}

/// A table's entries after its first one.
fn table_rest<'de, A: MapAccess<'de>>(first: (Key, Node), mut map: A) -> Result<Value, A::Error> {
    let mut entries = vec![first];
    while let Some(entry) = map.next_entry()? {
        entries.push(entry);
    }
    Ok(Value::Table(entries))
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ValueVisitor)
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        /// Reads a value with its span, or without one when it has none.
        struct NodeVisitor;

        fn unspanned<E>(value: Result<Value, E>) -> Result<Node, E> {
            value.map(|value| Node { span: None, value })
        }

        impl<'de> Visitor<'de> for NodeVisitor {
            type Value = Node;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a TOML value")
            }

            fn visit_bool<E: de::Error>(self, b: bool) -> Result<Node, E> {
                unspanned(ValueVisitor.visit_bool(b))
            }

            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Node, E> {
                unspanned(ValueVisitor.visit_i64(n))
            }

            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Node, E> {
                unspanned(ValueVisitor.visit_u64(n))
            }

            fn visit_f64<E: de::Error>(self, x: f64) -> Result<Node, E> {
                unspanned(ValueVisitor.visit_f64(x))
            }

            fn visit_str<E: de::Error>(self, text: &str) -> Result<Node, E> {
                unspanned(ValueVisitor.visit_str(text))
            }

            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Node, A::Error> {
                unspanned(ValueVisitor.visit_seq(seq))
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
                let Some(first) = map.next_key::<Key>()? else {
                    return unspanned(Ok(Value::Table(Vec::new())));
                };
                if first.span.is_none() && first.name == SPANNED_START {
                    let (span, value) = rest_of_span(map)?;
                    return Ok(Node {
                        span: Some(span),
                        value,
                    });
                }
                // A table without a span: `first` is its first key.
                let value = map.next_value()?;
                unspanned(table_rest((first, value), map))
            }
        }

        deserializer.deserialize_struct(SPANNED_NAME, SPANNED_FIELDS, NodeVisitor)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// The field at the first occurrence of `needle`.
    fn field_of(text: &str, needle: &str) -> Option<String> {
        field_at(text, text.find(needle).unwrap())
    }

    #[test]
    fn fields_at_offsets() {
        let text = "top = 1\n[a]\nb = [1, { c = 2 }]\n[[d]]\ne = \"x\"\n[[d]]\ne = 3\n";
        assert_eq!(field_of(text, "top"), Some("top".to_owned()));
        assert_eq!(field_of(text, "1\n"), Some("top".to_owned()));
        assert_eq!(field_of(text, "b ="), Some("a.b".to_owned()));
        assert_eq!(field_of(text, "c ="), Some("a.b[2].c".to_owned()));
        assert_eq!(field_of(text, "2 }"), Some("a.b[2].c".to_owned()));
        assert_eq!(field_of(text, "3"), Some("d[2].e".to_owned()));
        // Between values, and in text that is not TOML, there is no field.
        assert_eq!(field_at(text, text.len()), None);
        assert_eq!(field_at("a = ", 0), None);
    }

    #[test]
    fn tables_split_by_their_subtables_and_dotted_keys() {
        // `[v]` ends where `[v.w]` begins, and `x` has no span of its own.
        let text = "[v]\nt = 1\n[v.w]\nu = 2\n";
        assert_eq!(field_of(text, "u"), Some("v.w.u".to_owned()));
        let text = "[[x.y]]\nz = 1\nx.q = 2\n";
        assert_eq!(field_of(text, "z"), Some("x.y[1].z".to_owned()));
        let text = "p.q.r = 1\n";
        assert_eq!(field_of(text, "1"), Some("p.q.r".to_owned()));
        // Datetimes have no span, yet the key still names them.
        let text = "when = 1979-05-27\n";
        assert_eq!(field_of(text, "when"), Some("when".to_owned()));
    }

    #[test]
    fn checking_a_tree_by_hand() {
        let text = "[t]\nname = \"n\"\ncount = 2\nlist = [{ a = 1 }, 2]\nodd = 1\n";
        let doc = Document::new(text, Path::new("f.toml"));
        let root: Node = doc.deserialize().unwrap();
        let root = Field::root(&root);
        let [t] = doc.fields(&root, ["t"]).unwrap();
        let t = t.unwrap();
        let error = doc
            .fields(&t, ["name", "count", "list"])
            .map(|_| ())
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "f.toml:5:1: t.odd: unknown field `odd`, expected one of `name`, `count`, `list`"
        );
        let [name, count, list, missing, _] = doc
            .fields(&t, ["name", "count", "list", "missing", "odd"])
            .unwrap();
        assert_eq!(doc.string(name.as_ref().unwrap()), Ok("n"));
        assert_eq!(doc.integer(count.as_ref().unwrap()), Ok(2));
        assert_eq!(
            doc.string(count.as_ref().unwrap()).unwrap_err().to_string(),
            "f.toml:3:9: t.count: invalid type: integer 2, expected a string"
        );
        let items: Vec<Field<'_>> = list.unwrap().items().unwrap().collect();
        assert_eq!(items[1].name, "t.list[2]");
        assert_eq!(
            doc.wrong_type(&items[0], "a string").to_string(),
            "f.toml:4:9: t.list[1]: invalid type: table, expected a string"
        );
        assert!(name.unwrap().items().is_none());
        assert_eq!(
            doc.required_in(&t, "missing", missing)
                .map(|_| ())
                .unwrap_err()
                .to_string(),
            "f.toml:1:1: t.missing: missing field"
        );
    }
}
