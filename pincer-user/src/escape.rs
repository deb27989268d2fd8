//! Escaping bytes the kernel or an agent chose (names, paths, `comm`) before
//! anyone sees them: nothing downstream gets control characters, invalid
//! UTF-8 or a backslash that could be read as an escape.

/// Escapes bytes for display: printable ASCII and valid non-control UTF-8
/// pass, `\` doubles, everything else becomes `\xNN`.
pub fn escape(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                c if c.is_control() => {
                    let mut buf = [0; 4];
                    for b in c.encode_utf8(&mut buf).bytes() {
                        out.push_str(&format!("\\x{b:02x}"));
                    }
                }
                c => out.push(c),
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
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
    }
}
