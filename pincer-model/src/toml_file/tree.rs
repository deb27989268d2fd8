//! A TOML document as a tree of values that keep their spans, read through
//! the TOML deserializer's span protocol so that a value without a span (a
//! table that exists only through a dotted key or header) is not an error.
//!
//! Every file is read by serde's derive; the tree only names the field at
//! the position of an error serde reports ([`field_at`]) and finds where a
//! table starts ([`offset_of`]).

use std::{fmt, marker::PhantomData, ops::Range};

use serde::{
    Deserialize,
    de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor},
};

/// A TOML value and where it was written. Tables that exist only through a
/// dotted key or header (`daemon.socket = …`, `[[vote.rule]]` without
/// `[vote]`) have no span.
pub(crate) struct Node {
    pub(crate) span: Option<Range<usize>>,
    pub(crate) value: Value,
}

/// The values of the TOML data model, as far as naming a position needs:
/// what a scalar holds does not matter.
pub(crate) enum Value {
    Scalar,
    Array(Vec<Node>),
    Table(Vec<(Key, Node)>),
}

/// A key of a table and where it was written.
pub(crate) struct Key {
    pub(crate) span: Option<Range<usize>>,
    pub(crate) name: String,
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
                Value::Scalar => false,
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
            Value::Scalar => break,
        }
    }
    (!path.is_empty()).then_some(path)
}

/// Where the value of the top-level key `key` starts, or the key itself
/// when the value has no span (a table made by dotted keys), if `text` is
/// valid TOML and has it.
pub(super) fn offset_of(text: &str, key: &str) -> Option<usize> {
    let root: Node = toml::from_str(text).ok()?;
    let Value::Table(entries) = &root.value else {
        return None;
    };
    let (written, value) = entries.iter().find(|(written, _)| written.name == key)?;
    value
        .span
        .as_ref()
        .or(written.span.as_ref())
        .map(|span| span.start)
}

// How `toml::Spanned` asks the TOML deserializer for a span (serde_spanned's
// protocol): a struct with these names, answered with a map of these three
// fields when the value has a span and with the plain value when it has
// none. `Node` and `Key` speak it so that a missing span is not an error.
pub(super) const SPANNED_NAME: &str = "$__serde_spanned_private_Spanned";
pub(super) const SPANNED_START: &str = "$__serde_spanned_private_start";
const SPANNED_END: &str = "$__serde_spanned_private_end";
const SPANNED_VALUE: &str = "$__serde_spanned_private_value";
pub(super) const SPANNED_FIELDS: &[&str] = &[SPANNED_START, SPANNED_END, SPANNED_VALUE];
// How the TOML deserializer hands over a datetime: a map of this one key.
const DATETIME_FIELD: &str = "$__toml_private_datetime";

/// Reads the rest of a span map whose start key has been read.
fn rest_of_span<'de, T: Deserialize<'de>, A: MapAccess<'de>>(
    map: A,
) -> Result<(Range<usize>, T), A::Error> {
    rest_of_span_seed(map, PhantomData)
}

/// [`rest_of_span`], the value read by `seed`.
pub(super) fn rest_of_span_seed<'de, S: DeserializeSeed<'de>, A: MapAccess<'de>>(
    mut map: A,
    seed: S,
) -> Result<(Range<usize>, S::Value), A::Error> {
    let start: usize = map.next_value()?;
    let end = match map.next_key::<String>()? {
        Some(key) if key == SPANNED_END => map.next_value::<usize>()?,
        _ => return Err(de::Error::custom("span without an end")),
    };
    match map.next_key::<String>()? {
        Some(key) if key == SPANNED_VALUE => Ok((start..end, map.next_value_seed(seed)?)),
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

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Value, E> {
        Ok(Value::Scalar)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Value, E> {
        Ok(Value::Scalar)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Value, E> {
        Ok(Value::Scalar)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Value, E> {
        Ok(Value::Scalar)
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Value, E> {
        Ok(Value::Scalar)
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
            map.next_value::<de::IgnoredAny>()?;
            return Ok(Value::Scalar);
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
    fn offsets_of_top_level_keys() {
        let text = "a = 1\n[t]\nb = 2\n";
        assert_eq!(offset_of(text, "t"), Some(6));
        assert_eq!(offset_of("t.b = 2\n", "t"), Some(0));
        assert_eq!(offset_of(text, "c"), None);
    }
}
