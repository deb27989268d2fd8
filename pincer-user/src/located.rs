//! Where an error is in a TOML file pincer reads (a mission, the daemon's
//! configuration), and the wording both parsers share: `file:line:column:
//! field: message`, and lists of accepted values.

use std::fmt;

/// Writes `field: ` before a message when the error names a field.
pub(crate) struct FieldPrefix<'a>(pub(crate) Option<&'a str>);

impl fmt::Display for FieldPrefix<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(field) => write!(f, "{field}: "),
            None => Ok(()),
        }
    }
}

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

/// 1-based line and column (in characters) of a byte offset.
pub(crate) fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut line = 1;
    let mut column = 1;
    for (index, c) in text.char_indices() {
        if index >= offset {
            break;
        }
        if c == '\n' {
            line += 1;
            column = 1;
        } else {
            column += 1;
        }
    }
    (line, column)
}
