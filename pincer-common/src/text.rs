//! Names in constant contexts, where `str` has no `==`: the hook table and
//! the list of map names check themselves with them when the crate is
//! built, and a value's name is looked up in its `NAMES`.

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

/// The name of `value` in a list of named values (`None` for a value the
/// list does not have).
pub(crate) const fn name_of(names: &[(u32, &'static str)], value: u32) -> Option<&'static str> {
    let mut i = 0;
    while i < names.len() {
        if names[i].0 == value {
            return Some(names[i].1);
        }
        i += 1;
    }
    None
}

/// Whether each value of a list of named values is its index.
pub(crate) const fn by_index(names: &[(u32, &str)]) -> bool {
    let mut i = 0;
    while i < names.len() {
        if names[i].0 as usize != i {
            return false;
        }
        i += 1;
    }
    true
}

/// Every bit of a list of named bits.
pub(crate) const fn union(names: &[(u32, &str)]) -> u32 {
    let mut all = 0;
    let mut i = 0;
    while i < names.len() {
        all |= names[i].0;
        i += 1;
    }
    all
}

/// Whether no two entries of a list of named values share a value or a
/// name.
pub(crate) const fn one_to_one(names: &[(u32, &str)]) -> bool {
    let mut i = 0;
    while i < names.len() {
        let mut j = i + 1;
        while j < names.len() {
            if names[i].0 == names[j].0 || same_prefix(names[i].1, names[j].1, usize::MAX) {
                return false;
            }
            j += 1;
        }
        i += 1;
    }
    true
}
