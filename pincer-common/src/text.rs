//! Comparisons of names in constant contexts, where `str` has no `==`: the
//! hook table and the list of map names check themselves with them when the
//! crate is built.

/// Whether two names agree in their first `len` bytes (or are equal when
/// both are shorter).
pub(crate) const fn same_prefix(a: &str, b: &str, len: usize) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let a_len = if a.len() < len { a.len() } else { len };
    let b_len = if b.len() < len { b.len() } else { len };
    if a_len != b_len {
        return false;
    }
    let mut i = 0;
    while i < a_len {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Whether no two of `names` agree in their first `len` bytes.
pub(crate) const fn distinct(names: &[&str], len: usize) -> bool {
    let mut i = 0;
    while i < names.len() {
        let mut j = i + 1;
        while j < names.len() {
            if same_prefix(names[i], names[j], len) {
                return false;
            }
            j += 1;
        }
        i += 1;
    }
    true
}
