//! Escaping bytes the kernel or an agent chose (names, paths, `comm`) before
//! anyone sees them: nothing downstream gets control characters, invalid
//! UTF-8 or a backslash that could be read as an escape, and a person is
//! never shown a name that displays as another one.

use std::{ffi::OsString, os::unix::ffi::OsStringExt, path::PathBuf};

use unicode_properties::{GeneralCategoryGroup, UnicodeGeneralCategory};

/// What pincer itself writes where it shortened a name or a path: an
/// ellipsis in a name is always escaped, so one that is shown is pincer's.
pub const CUT: char = '\u{2026}';

/// Escapes bytes for display: printable ASCII and valid UTF-8 that shows as
/// itself pass, `\\` doubles, everything else becomes `\\xNN` per byte.
pub fn escape(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    escape_into(&mut out, bytes);
    out
}

/// [`escape`], appended to `out`: a path is built from its names without a
/// string per name.
pub fn escape_into(out: &mut String, bytes: &[u8]) {
    escape_with(out, bytes, true);
}

/// Escapes text read back from an audit log for a terminal: like
/// [`escape`], but a backslash stays one (the log's text was escaped when it
/// was written; this only keeps what an edited log holds off the terminal).
pub fn for_terminal(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    escape_with(&mut out, text.as_bytes(), false);
    out
}

fn escape_with(out: &mut String, bytes: &[u8], double_backslash: bool) {
    // Most names are printable ASCII with no backslash, which shows as
    // itself: that part is copied whole, and only the rest is decoded
    // character by character (a parked request escapes every name of its
    // path while its task waits).
    let plain = bytes
        .iter()
        .position(|&b| !(b' '..=b'~').contains(&b) || b == b'\\')
        .unwrap_or(bytes.len());
    let (head, rest) = bytes.split_at(plain);
    out.push_str(std::str::from_utf8(head).expect("printable ASCII is UTF-8"));
    for chunk in rest.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' if double_backslash => out.push_str("\\\\"),
                ' '..='~' => out.push(c),
                c if hides(c) => {
                    let mut buf = [0; 4];
                    for &b in c.encode_utf8(&mut buf).as_bytes() {
                        push_hex(out, b);
                    }
                }
                c => out.push(c),
            }
        }
        for &b in chunk.invalid() {
            push_hex(out, b);
        }
    }
}

/// Appends `\\xNN` for one byte.
fn push_hex(out: &mut String, b: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push_str("\\x");
    out.push(char::from(HEX[usize::from(b >> 4)]));
    out.push(char::from(HEX[usize::from(b & 0xf)]));
}

/// Whether `c` could make a name display as something it is not: controls,
/// format characters (bidirectional overrides and isolates such as U+202E
/// and U+2066, zero-width characters such as U+200B), separators other than
/// the plain space (U+2028, no-break and wide spaces), private-use and
/// unassigned code points, the other default-ignorable characters (variation
/// selectors, fillers) and [`CUT`].
fn hides(c: char) -> bool {
    if c == ' ' {
        return false;
    }
    match c.general_category_group() {
        GeneralCategoryGroup::Other | GeneralCategoryGroup::Separator => return true,
        _ => {}
    }
    // Default_Ignorable_Code_Point outside the format category: they render
    // as nothing.
    matches!(
        c,
        CUT | '\u{034f}'
            | '\u{115f}'
            | '\u{1160}'
            | '\u{17b4}'
            | '\u{17b5}'
            | '\u{180b}'..='\u{180f}'
            | '\u{3164}'
            | '\u{fe00}'..='\u{fe0f}'
            | '\u{ffa0}'
            | '\u{e0000}'..='\u{e0fff}'
    )
}

/// Undoes the kernel's octal escaping of space, tab, newline and backslash
/// (`\040`, `\011`, `\012`, `\134`) in a mount table field.
pub fn unescape_mount_field(field: &str) -> PathBuf {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).filter(|digits| {
            bytes[i] == b'\\' && digits.iter().all(|digit| (b'0'..=b'7').contains(digit))
        });
        match octal {
            Some(digits) => {
                let value = digits
                    .iter()
                    .fold(0u32, |value, digit| value * 8 + u32::from(digit - b'0'));
                // Three octal digits can exceed a byte; such text is no escape.
                match u8::try_from(value) {
                    Ok(byte) => {
                        out.push(byte);
                        i += 4;
                    }
                    Err(_) => {
                        out.push(bytes[i]);
                        i += 1;
                    }
                }
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    PathBuf::from(OsString::from_vec(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_control_and_invalid_bytes() {
        assert_eq!(escape(b"plain name.txt"), "plain name.txt");
        assert_eq!(escape(b"a\nb\x1b[31m"), "a\\x0ab\\x1b[31m");
        assert_eq!(escape(b"back\\slash"), "back\\\\slash");
        assert_eq!(escape(b"bad\xff\xfeutf8"), "bad\\xff\\xfeutf8");
        assert_eq!(escape("caf\u{e9}".as_bytes()), "caf\u{e9}");
        assert_eq!(escape("\u{65e5}\u{672c}".as_bytes()), "\u{65e5}\u{672c}");
    }

    #[test]
    fn printable_ascii_shows_as_itself_and_nothing_else_in_ascii_does() {
        // The fast path agrees with the rule for every ASCII character.
        for c in '\0'..='\x7f' {
            let shown = escape(c.to_string().as_bytes());
            match c {
                '\\' => assert_eq!(shown, "\\\\"),
                ' '..='~' => {
                    assert!(!hides(c), "{c:?}");
                    assert_eq!(shown, c.to_string());
                }
                _ => {
                    assert!(hides(c), "{c:?}");
                    assert_eq!(shown, format!("\\x{:02x}", c as u32));
                }
            }
        }
    }

    #[test]
    fn nothing_that_displays_as_something_else_passes() {
        let cases = [
            // Right-to-left override: "txt.exe" would display reversed.
            ("a\u{202e}txt.exe", "a\\xe2\\x80\\xaetxt.exe"),
            // First strong isolate.
            ("a\u{2068}b", "a\\xe2\\x81\\xa8b"),
            // Zero-width space: "se\u{200b}cret" displays as "secret".
            ("se\u{200b}cret", "se\\xe2\\x80\\x8bcret"),
            // Line separator.
            ("a\u{2028}b", "a\\xe2\\x80\\xa8b"),
            // No-break space looks like a space.
            ("a\u{a0}b", "a\\xc2\\xa0b"),
            // Byte order mark, soft hyphen, variation selector, Hangul filler.
            (
                "\u{feff}a\u{ad}b\u{fe0f}\u{3164}",
                "\\xef\\xbb\\xbfa\\xc2\\xadb\\xef\\xb8\\x8f\\xe3\\x85\\xa4",
            ),
            // Private use and a tag character.
            ("\u{e000}\u{e0041}", "\\xee\\x80\\x80\\xf3\\xa0\\x81\\x81"),
            // An ellipsis is pincer's own mark of a cut.
            ("a\u{2026}", "a\\xe2\\x80\\xa6"),
        ];
        for (name, shown) in cases {
            assert_eq!(escape(name.as_bytes()), shown, "{name:?}");
        }
        assert_eq!(
            for_terminal("a\\x1b\u{1b}[2J\u{202e}"),
            "a\\x1b\\x1b[2J\\xe2\\x80\\xae"
        );
        // Escaping is one-to-one: different names never show the same.
        let names = ["a\u{200b}b", "ab", "a\\xe2\\x80\\x8bb"];
        let shown: std::collections::HashSet<_> =
            names.iter().map(|n| escape(n.as_bytes())).collect();
        assert_eq!(shown.len(), names.len());
    }

    #[test]
    fn leaves_what_is_not_an_octal_escape() {
        // A lone backslash, too few digits, a value above 0o377.
        assert_eq!(
            unescape_mount_field("a\\b\\04"),
            std::path::PathBuf::from("a\\b\\04")
        );
        assert_eq!(
            unescape_mount_field("\\777"),
            std::path::PathBuf::from("\\777")
        );
    }
}
