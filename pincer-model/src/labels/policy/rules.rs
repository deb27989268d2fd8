//! The policy set as the programs read it, and the same reading in
//! userspace.
//!
//! The programs look names up in two longest-prefix-match tries
//! ([`pincer_common::names::POLICY_NAMES`] by a name's first bytes,
//! [`pincer_common::names::POLICY_SUFFIXES`] by its last ones), and walk
//! from a changed object up through its directories (`pincer-ebpf`'s
//! `policy` module). [`PolicySet::kernel_rules`] writes the tries: each key
//! carries what its shorter prefixes say too, so the longest match is the
//! whole answer. [`PolicySet::place`] walks a path the way the programs
//! do, on the same tables, for people (`pincer label show`, the audit
//! log's reasons, recommendations, discovery).

use std::{collections::BTreeMap, os::unix::ffi::OsStrExt, path::Path};

use pincer_common::{
    POLICY_NAME_LEN, POLICY_PAIRS, POLICY_SUFFIX_LEN, PolicyNameKey, PolicyPair, PolicyRules,
    PolicySuffixKey, policy_name_hash_of, policy_rule,
};

use super::{NameMatch, Place, PolicyEntry, PolicySet};

/// The tries' entries: (bits compared, key, value).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KernelRules {
    /// By a name's first bytes.
    pub names: Vec<(u32, PolicyNameKey, PolicyRules)>,
    /// By a name's last bytes (last first).
    pub suffixes: Vec<(u32, PolicySuffixKey, PolicyRules)>,
}

/// Why a set cannot be written for the programs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RulesError {
    /// More directories have rules for names with one start than a trie
    /// value holds.
    #[error(
        "names starting with {start:?} have rules in {count} directories of given names; the programs hold {POLICY_PAIRS}"
    )]
    TooManyDirectories {
        /// The bytes.
        start: String,
        /// How many.
        count: usize,
    },
}

/// One rule as the tries key it.
struct Keyed {
    /// The key's bytes (a name's start, with its NUL for a whole name; an
    /// end, last byte first).
    bytes: Vec<u8>,
    /// The directory's name hash, or zero.
    parent: u64,
    bits: u32,
    entry: u32,
}

/// What rules with one key and directory say together: a rule that
/// protects wins over a work rule; bits of protecting rules add up; the
/// first entry names them.
fn merge(rules: &[&Keyed]) -> (u32, u32) {
    let protecting: Vec<&&Keyed> = rules
        .iter()
        .filter(|r| r.bits & policy_rule::WORK == 0)
        .collect();
    match protecting.first() {
        Some(first) => (
            protecting.iter().fold(0, |bits, r| bits | r.bits),
            first.entry,
        ),
        None => rules.first().map_or((0, 0), |r| (r.bits, r.entry)),
    }
}

/// The trie values: each key gets, for the name alone and for each
/// directory, the rule of the longest key that is a prefix of it.
fn values(keyed: &[Keyed]) -> Result<Vec<(Vec<u8>, PolicyRules)>, RulesError> {
    let mut by_key: BTreeMap<&[u8], ()> = BTreeMap::new();
    for rule in keyed {
        by_key.insert(&rule.bytes, ());
    }
    let mut out = Vec::new();
    for key in by_key.keys() {
        // For each directory (zero: alone), the longest rule prefix.
        let mut best: BTreeMap<u64, (usize, Vec<&Keyed>)> = BTreeMap::new();
        for rule in keyed.iter().filter(|r| key.starts_with(&r.bytes)) {
            let len = rule.bytes.len();
            let slot = best.entry(rule.parent).or_insert((len, Vec::new()));
            if len > slot.0 {
                *slot = (len, Vec::new());
            }
            if len == slot.0 {
                slot.1.push(rule);
            }
        }
        let mut value = PolicyRules::default();
        let mut pairs = Vec::new();
        for (parent, (len, rules)) in &best {
            let (bits, entry) = merge(rules);
            if *parent == 0 {
                value.bits = bits;
                value.entry = entry;
                value.len = *len as u32;
            } else {
                pairs.push(PolicyPair {
                    parent: *parent,
                    bits,
                    entry,
                });
            }
        }
        if pairs.len() > POLICY_PAIRS {
            return Err(RulesError::TooManyDirectories {
                start: String::from_utf8_lossy(key).into_owned(),
                count: pairs.len(),
            });
        }
        for (slot, pair) in value.pairs.iter_mut().zip(pairs) {
            *slot = pair;
        }
        out.push((key.to_vec(), value));
    }
    Ok(out)
}

/// A trie's entries: each key's bytes put into `K` (`bytes` names where),
/// with its bit count and value.
fn entries<K: Default>(
    keyed: &[Keyed],
    bytes: impl Fn(&mut K) -> &mut [u8],
) -> Result<Vec<(u32, K, PolicyRules)>, RulesError> {
    Ok(values(keyed)?
        .into_iter()
        .map(|(data, value)| {
            let mut key = K::default();
            bytes(&mut key)[..data.len()].copy_from_slice(&data);
            (data.len() as u32 * 8, key, value)
        })
        .collect())
}

impl PolicySet {
    /// The rules' keys, by trie.
    fn keyed(&self) -> (Vec<Keyed>, Vec<Keyed>) {
        let mut names = Vec::new();
        let mut suffixes = Vec::new();
        for (index, PolicyEntry { pattern, .. }) in self.entries.iter().enumerate() {
            let (parent, name) = match &pattern.place {
                Place::Name(name) => (0, name),
                Place::InDir { dir, name } => {
                    let Some(parent) = policy_name_hash_of(dir.as_bytes()) else {
                        continue;
                    };
                    (parent, name)
                }
                Place::Path(_) => continue,
            };
            let entry = index as u32 + 1;
            let bits = pattern.protects.0;
            match name {
                NameMatch::Exact(exact) => {
                    let mut bytes = exact.as_bytes().to_vec();
                    bytes.push(0);
                    names.push(Keyed {
                        bytes,
                        parent,
                        bits,
                        entry,
                    });
                }
                NameMatch::Prefix(start) => names.push(Keyed {
                    bytes: start.as_bytes().to_vec(),
                    parent,
                    bits,
                    entry,
                }),
                NameMatch::Suffix(end) => suffixes.push(Keyed {
                    bytes: end.bytes().rev().collect(),
                    parent,
                    bits,
                    entry,
                }),
            }
        }
        (names, suffixes)
    }

    /// The tries' entries for the programs.
    pub fn kernel_rules(&self) -> Result<KernelRules, RulesError> {
        let (names, suffixes) = self.keyed();
        Ok(KernelRules {
            names: entries(&names, |key: &mut PolicyNameKey| &mut key.name[..])?,
            suffixes: entries(&suffixes, |key: &mut PolicySuffixKey| &mut key.tail[..])?,
        })
    }

    /// The set read as the programs read it, for many paths.
    pub fn classifier(&self) -> Result<Classifier, RulesError> {
        Ok(Classifier {
            rules: self.kernel_rules()?,
            set: self.clone(),
        })
    }

    /// Where a change to `path` meets its policy place (see
    /// [`Classifier::place`]).
    pub fn place(&self, path: &Path, exists: bool, mkdir: bool) -> Option<Placed> {
        self.classifier().ok()?.place(path, exists, mkdir)
    }

    /// The rule that makes a change to the existing object at `path` the
    /// owner's, if one does (see [`Classifier::place`]).
    pub fn policy_of(&self, path: &Path) -> Option<PolicyEntry> {
        self.place(path, true, false).map(|placed| placed.entry)
    }
}

/// A set with its tables, to read many paths by.
#[derive(Debug, Clone)]
pub struct Classifier {
    set: PolicySet,
    rules: KernelRules,
}

impl Classifier {
    /// Where a change to `path` (absolute, links resolved) meets its
    /// policy place, as the programs find it when no directory on the way
    /// was made by an agent and none is labelled: the nearest component a
    /// rule protects, unless a work name above lifts it. `exists` says
    /// whether the object is there already (a new name is protected by
    /// `new`), `mkdir` whether a new one would be a directory.
    pub fn place(&self, path: &Path, exists: bool, mkdir: bool) -> Option<Placed> {
        let names = names_of(path);
        let found = walk(&self.rules, &names, exists, mkdir)?;
        let upto = names.len() - found.step as usize;
        Some(Placed {
            entry: self.set.entry(found.entry)?.clone(),
            number: found.entry,
            step: found.step,
            at: names[1..=upto]
                .iter()
                .fold(std::path::PathBuf::from("/"), |path, name| {
                    path.join(std::ffi::OsStr::from_bytes(name))
                }),
        })
    }

    /// The rule that makes a change to the existing object at `path` the
    /// owner's, if one does.
    pub fn policy_of(&self, path: &Path) -> Option<PolicyEntry> {
        self.place(path, true, false).map(|placed| placed.entry)
    }

    /// Whether the directory at `path` is work by its name (a cache, a
    /// dependency tree, git's objects).
    pub fn is_work_dir(&self, path: &Path) -> bool {
        let names = names_of(path);
        let [.., parent, name] = names.as_slice() else {
            return false;
        };
        let names_table = self.rules.names.iter().map(|(b, k, v)| (*b, &k.name, v));
        longest(names_table, &first_bytes(name)).is_some_and(|value| {
            value.resolve(policy_name_hash_of(parent).unwrap_or(0)).0 & policy_rule::WORK != 0
        })
    }
}

/// The names of a path as the programs see them: the root's `/` first.
fn names_of(path: &Path) -> Vec<&[u8]> {
    std::iter::once(&b"/"[..])
        .chain(path.components().filter_map(|part| match part {
            std::path::Component::Normal(name) => Some(name.as_encoded_bytes()),
            _ => None,
        }))
        .collect()
}

/// Where a path met its policy place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placed {
    /// The rule.
    pub entry: PolicyEntry,
    /// Its number in the programs' tables (`1..`).
    pub number: u32,
    /// The component it met: 1 the object itself, 2 its directory, ...
    pub step: u32,
    /// The path up to that component.
    pub at: std::path::PathBuf,
}

/// What [`walk`] found.
struct Found {
    entry: u32,
    step: u32,
    mask_from: u32,
}

/// A name as the programs match it: its first bytes, its NUL after a short
/// name, zeros after that.
fn first_bytes(name: &[u8]) -> [u8; POLICY_NAME_LEN] {
    let mut padded = [0u8; POLICY_NAME_LEN];
    let len = name.len().min(POLICY_NAME_LEN);
    padded[..len].copy_from_slice(&name[..len]);
    padded
}

/// The longest key of `table` that the padded bytes start with.
fn longest<'t, const N: usize>(
    table: impl Iterator<Item = (u32, &'t [u8; N], &'t PolicyRules)>,
    padded: &[u8; N],
) -> Option<&'t PolicyRules> {
    table
        .filter(|(bits, key, _)| {
            let len = *bits as usize / 8;
            padded[..len] == key[..len]
        })
        .max_by_key(|(bits, _, _)| *bits)
        .map(|(_, _, rules)| rules)
}

/// The programs' walk over `names` (from the root, `/` first) for a change
/// to the last one; `None` when it meets no place.
fn walk(rules: &KernelRules, names: &[&[u8]], exists: bool, mkdir: bool) -> Option<Found> {
    let own = if exists {
        policy_rule::OBJECT
    } else {
        policy_rule::NEW
    };
    let mut near: Option<Found> = None;
    let mut firm: Option<Found> = None;
    let mut anywhere: Option<Found> = None;
    let mut skip_tree = false;
    let first = |slot: &mut Option<Found>, step: u32, entry: u32| {
        if slot.is_none() {
            *slot = Some(Found {
                entry,
                step,
                mask_from: step,
            });
        }
    };
    for step in 1..names.len() as u32 {
        let child = names[names.len() - step as usize];
        let parent = names[names.len() - step as usize - 1];
        let parent_hash = policy_name_hash_of(parent).unwrap_or(0);
        let padded = first_bytes(child);
        let names_table = rules.names.iter().map(|(b, k, v)| (*b, &k.name, v));
        let (mut bits, mut entry, pair, len) = match longest(names_table, &padded) {
            Some(value) => {
                let (bits, entry, pair) = value.resolve(parent_hash);
                (bits, entry, pair, value.len)
            }
            None => (0, 0, false, 0),
        };
        if step == 1 && !pair {
            let mut tail = [0u8; POLICY_SUFFIX_LEN];
            for (slot, byte) in tail.iter_mut().zip(child.iter().rev()) {
                *slot = *byte;
            }
            let suffixes = rules.suffixes.iter().map(|(b, k, v)| (*b, &k.tail, v));
            if let Some(value) = longest(suffixes, &tail) {
                let (by_end, of, in_dir) = value.resolve(parent_hash);
                if in_dir || (by_end != 0 && value.len > len) {
                    bits = by_end;
                    entry = of;
                }
            }
        }
        let want = if step == 1 { own } else { policy_rule::TREE };
        let mut matched = bits & want != 0 && (step == 1 || !skip_tree);
        if step == 1 && !exists && bits & policy_rule::REDIRECT != 0 && !mkdir {
            first(&mut anywhere, step, entry);
        }
        if matched && bits & policy_rule::ANYWHERE != 0 {
            first(&mut anywhere, step, entry);
            matched = false;
        }
        if matched && bits & policy_rule::UNLIFTED != 0 {
            first(&mut firm, step, entry);
            matched = false;
        }
        if bits & policy_rule::WORK != 0 {
            near = None;
            skip_tree = pair;
        } else {
            skip_tree = false;
            if matched {
                first(&mut near, step, entry);
            }
        }
    }
    [near, firm, anywhere]
        .into_iter()
        .flatten()
        .min_by_key(|found| found.mask_from)
}
