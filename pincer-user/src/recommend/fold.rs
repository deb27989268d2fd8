//! From the accesses to grants: the folding rule.
//!
//! Every object the run used gets its operations (what it asked for, in
//! every decision on it). A name the run made is made again by the next
//! run, which finds it there: a file an open made also gets `write` (the
//! next run opens it again), a name a rename made also gets `delete` (the
//! next run's rename replaces it).
//!
//! A directory becomes one `tree` grant, with the union of the operations
//! of everything below it, when the run made names in it (`create`,
//! `mkdir`, the new end of a rename or link), or used at least [`FOLD_AT`]
//! distinct objects directly in it (a subdirectory counts as one when
//! anything below it was used), unless:
//!
//! - it is too broad: `/` and every directory directly in it (`/home`,
//!   `/etc`, `/usr`, `/tmp`, ...), one directly in `/usr` or `/var`, a home
//!   directory (`$HOME`, `/root`, each directory in `/home`), a user's
//!   `/run/user/<uid>`, anything in `/proc`, `/sys` or `/dev`;
//! - it holds, now or in the log, a secret or pincer's own files (the
//!   audit log, its key, the mission written): a tree would give the agent
//!   what is never granted (a policy object it may hold does not keep a
//!   directory from being a tree: the programs give no change to one from
//!   a tree above it) (looked for among at most
//!   [`super::MAX_SCAN`] objects below it, links not followed; a directory
//!   with more, or one that cannot be read whole, is not folded);
//! - it does not exist now (unless the run made it: then the grant has
//!   `make = true`, and `pincer run` makes it again).
//!
//! The widest directory that qualifies wins: nothing below it gets a grant
//! of its own. What no tree covers gets a `file` grant, if its path or its
//! directory exists (a grant on neither would keep the mission from
//! starting: it is listed as not granted instead).

use std::{
    collections::{BTreeMap, BTreeSet, HashMap, HashSet},
    ffi::OsString,
    fs, io,
    path::{Component, Path, PathBuf},
};

use pincer_common::{NAME_LEN, hook, ops};
use pincer_model::escape::for_terminal;

use super::{
    Context,
    classify::{Class, Omitted, classify},
    log::Decision,
};

/// The distinct objects directly in a directory (a subdirectory counting
/// as one) that make it one tree grant.
pub const FOLD_AT: usize = 3;

/// What the run did with some objects, for a grant's comment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Usage {
    /// Accesses per operation, in [`ops::NAMES`]' order.
    pub counts: [usize; ops::NAMES.len()],
    /// The objects, in order.
    pub objects: Vec<PathBuf>,
    /// The `comm`s of the tasks that used them.
    pub comms: BTreeSet<String>,
    /// Names the run made that an open made (they get `write`).
    pub opened_new: usize,
    /// Names the run made that a rename made (they get `delete`).
    pub renamed_new: usize,
}

impl Usage {
    fn add(&mut self, other: &Usage) {
        for (count, more) in self.counts.iter_mut().zip(other.counts) {
            *count += more;
        }
        self.objects.extend(other.objects.iter().cloned());
        self.comms.extend(other.comms.iter().cloned());
        self.opened_new += other.opened_new;
        self.renamed_new += other.renamed_new;
    }

    /// The operations it used.
    pub fn used(&self) -> u32 {
        ops::NAMES
            .iter()
            .zip(self.counts)
            .filter(|(_, count)| *count > 0)
            .fold(0, |bits, ((bit, _), _)| bits | bit)
    }

    /// What the next run needs beyond what this one used.
    pub fn added(&self) -> u32 {
        let mut added = 0;
        if self.opened_new > 0 {
            added |= ops::WRITE;
        }
        if self.renamed_new > 0 {
            added |= ops::DELETE;
        }
        added & !self.used()
    }
}

/// One recommended grant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Grant {
    /// Its path (absolute).
    pub path: PathBuf,
    /// Its operations: what was used and what [`Usage::added`] adds.
    pub ops: u32,
    /// `extent = "tree"`.
    pub tree: bool,
    /// `make = true`: the run made the directory and it is gone now.
    pub make: bool,
    /// What it covers.
    pub usage: Usage,
}

/// Accesses no grant of the mission gives, on one object, for one reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct NotGranted {
    /// The object (or what the refusal was about).
    pub what: String,
    /// The operations asked for.
    pub ops: u32,
    /// Why.
    pub why: String,
    /// How many accesses.
    pub times: usize,
}

/// The recommended mission, before it is written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Plan {
    /// The grants, by path.
    pub grants: Vec<Grant>,
    /// Capabilities beyond the default set, with how often each was used.
    pub capabilities: BTreeMap<u32, usize>,
    /// What is not granted, by object.
    pub not_granted: Vec<NotGranted>,
    /// Directories that qualified for a tree but are not one, and why.
    pub not_trees: Vec<(PathBuf, String)>,
    /// Accesses the defaults give (the runtime baseline, the default
    /// capabilities).
    pub by_defaults: usize,
    /// Accesses of the run's own.
    pub run_own: usize,
}

/// What no tree may hold, found by the directories above it: a lookup per
/// directory, however many there are.
#[derive(Debug, Default)]
struct Blocked {
    /// Each such object and every directory above it, to the first such
    /// object found below it and why it is one.
    below: HashMap<PathBuf, (PathBuf, String)>,
}

impl Blocked {
    fn add(&mut self, path: &Path, why: &str) {
        for at in path.ancestors() {
            if self.below.contains_key(at) {
                break;
            }
            self.below
                .insert(at.to_owned(), (path.to_owned(), why.to_owned()));
        }
    }

    /// What `dir` holds (or is) that no tree may hold, if anything.
    fn find(&self, dir: &Path) -> Option<&(PathBuf, String)> {
        self.below.get(dir)
    }
}

/// One object the run used.
#[derive(Debug, Default)]
struct Object {
    ops: u32,
    usage: Usage,
    /// The run made its name.
    made: bool,
}

/// Plans the mission for `decisions`.
pub(super) fn plan(decisions: &[Decision], context: &Context) -> Plan {
    let mut plan = Plan::default();
    let mut objects: BTreeMap<PathBuf, Object> = BTreeMap::new();
    let mut refused: BTreeMap<(String, String), (u32, usize)> = BTreeMap::new();
    let mut blocked = Blocked::default();
    for (path, what) in &context.own {
        blocked.add(path, &format!("{what}: out of every agent's reach"));
    }
    for decision in decisions {
        match classify(decision, context) {
            Class::Use(path) => {
                let object = objects.entry(path.clone()).or_default();
                use_object(object, decision, path);
            }
            Class::Capability(cap) => *plan.capabilities.entry(cap).or_default() += 1,
            Class::NotGranted { what, why, blocks } => {
                if let Some(path) = blocks {
                    blocked.add(&path, &why);
                }
                let entry = refused.entry((what, why)).or_default();
                entry.0 |= decision.ops;
                entry.1 += 1;
            }
            Class::Omitted(Omitted::Defaults) => plan.by_defaults += 1,
            Class::Omitted(Omitted::RunOwn) => plan.run_own += 1,
        }
    }
    let trees = choose_trees(&objects, &mut blocked, context, &mut plan.not_trees);
    let mut grants: BTreeMap<PathBuf, Grant> = trees
        .iter()
        .map(|(path, make)| {
            let grant = Grant {
                path: path.clone(),
                ops: 0,
                tree: true,
                make: *make,
                usage: Usage::default(),
            };
            (path.clone(), grant)
        })
        .collect();
    for (path, object) in &objects {
        let tree = path.ancestors().find(|at| trees.contains_key(*at));
        if let Some(tree) = tree {
            let grant = grants.get_mut(tree).expect("a grant per tree");
            grant.ops |= object.ops;
            grant.usage.add(&object.usage);
            continue;
        }
        if let Some(why) = cannot_name(path) {
            let entry = refused
                .entry((for_terminal(&path.to_string_lossy()), why))
                .or_default();
            entry.0 |= object.ops;
            entry.1 += object.usage.counts.iter().sum::<usize>();
            continue;
        }
        let grant = Grant {
            path: path.clone(),
            ops: object.ops,
            tree: false,
            make: false,
            usage: object.usage.clone(),
        };
        grants.insert(path.clone(), grant);
    }
    plan.grants = grants
        .into_values()
        .map(|mut grant| {
            grant.ops |= grant.usage.added();
            grant
        })
        .collect();
    plan.not_granted = refused
        .into_iter()
        .map(|((what, why), (ops, times))| NotGranted {
            what,
            ops,
            why,
            times,
        })
        .collect();
    plan
}

/// Adds one decision on `object` (at `path`).
fn use_object(object: &mut Object, decision: &Decision, path: PathBuf) {
    object.ops |= decision.ops;
    for ((bit, _), count) in ops::NAMES.iter().zip(object.usage.counts.iter_mut()) {
        if decision.ops & bit != 0 {
            *count += 1;
        }
    }
    if object.usage.objects.is_empty() {
        object.usage.objects.push(path);
    }
    if !decision.comm.is_empty() {
        object.usage.comms.insert(for_terminal(&decision.comm));
    }
    if decision.ops & (ops::CREATE | ops::MKDIR) != 0 {
        object.made = true;
    }
    // Counted once per object: the next run makes each name again once.
    if decision.ops & ops::CREATE != 0 {
        if decision.hook == hook::name(hook::INODE_RENAME) {
            object.usage.renamed_new = 1;
        } else if [hook::FILE_OPEN, hook::INODE_CREATE]
            .iter()
            .any(|&id| decision.hook == hook::name(id))
        {
            object.usage.opened_new = 1;
        }
    }
}

/// The directories that become tree grants (with `make`), none below
/// another; those that qualified but are not, with why, go to
/// `not_trees`.
fn choose_trees(
    objects: &BTreeMap<PathBuf, Object>,
    blocked: &mut Blocked,
    context: &Context,
    not_trees: &mut Vec<(PathBuf, String)>,
) -> BTreeMap<PathBuf, bool> {
    let mut children: BTreeMap<&Path, BTreeSet<OsString>> = BTreeMap::new();
    let mut made_in: BTreeSet<&Path> = BTreeSet::new();
    for (path, object) in objects {
        let mut child = path.as_path();
        while let Some(parent) = child.parent() {
            if parent.parent().is_none() {
                break;
            }
            let name = child.file_name().unwrap_or_default().to_owned();
            children.entry(parent).or_default().insert(name);
            child = parent;
        }
        if object.made
            && let Some(parent) = path.parent()
        {
            made_in.insert(parent);
        }
    }
    let mut candidates: Vec<&Path> = children
        .iter()
        .filter(|(dir, names)| made_in.contains(*dir) || names.len() >= FOLD_AT)
        .map(|(dir, _)| *dir)
        .collect();
    candidates.sort_by_key(|dir| (dir.components().count(), dir.to_path_buf()));
    let mut trees: BTreeMap<PathBuf, bool> = BTreeMap::new();
    let mut chosen: HashSet<&Path> = HashSet::new();
    for dir in candidates {
        if dir.ancestors().any(|at| chosen.contains(at)) {
            continue;
        }
        match foldable(dir, objects, blocked, context) {
            Ok(make) => {
                chosen.insert(dir);
                trees.insert(dir.to_owned(), make);
            }
            Err(why) => not_trees.push((dir.to_owned(), why)),
        }
    }
    trees
}

/// Whether `dir` may be a tree grant (`Ok(true)`: one that `pincer run`
/// makes), or why not.
fn foldable(
    dir: &Path,
    objects: &BTreeMap<PathBuf, Object>,
    blocked: &mut Blocked,
    context: &Context,
) -> Result<bool, String> {
    if let Some(why) = too_broad(dir, &context.homes) {
        return Err(format!("too broad: {why}"));
    }
    if let Some(why) = context.excluded(dir) {
        return Err(format!("it is {why}"));
    }
    let holds = |(path, why): &(PathBuf, String)| {
        format!("it holds {}, {why}", for_terminal(&path.to_string_lossy()))
    };
    if let Some(found) = blocked.find(dir) {
        return Err(holds(found));
    }
    match fs::metadata(dir) {
        Ok(metadata) if metadata.is_dir() => match scan(dir, context) {
            Ok(()) => Ok(false),
            // Found once: no directory above or below it looks again.
            Err(Scan::Holds(path, why)) => {
                blocked.add(&path, &why);
                Err(holds(&(path, why)))
            }
            Err(Scan::Unknown(why)) => Err(why),
        },
        Ok(_) => Err("it is not a directory now".to_owned()),
        Err(error)
            if error.kind() == io::ErrorKind::NotFound
                && fs::symlink_metadata(dir).is_err()
                && objects
                    .get(dir)
                    .is_some_and(|object| object.ops & ops::MKDIR != 0) =>
        {
            Ok(true)
        }
        Err(error) => Err(format!("it cannot be looked at now ({error})")),
    }
}

/// Why `dir` is too broad to be a tree grant, if it is.
fn too_broad(dir: &Path, homes: &[PathBuf]) -> Option<&'static str> {
    let names: Vec<&str> = dir
        .components()
        .filter_map(|part| match part {
            Component::Normal(name) => Some(name.to_str().unwrap_or_default()),
            _ => None,
        })
        .collect();
    match names.as_slice() {
        [] | [_] => Some("the root, or a directory directly in it"),
        ["proc" | "sys" | "dev", ..] => Some("a kernel file system"),
        ["usr" | "var", _] => Some("a system directory"),
        ["run", "user", _] => Some("a user's runtime directory"),
        ["home", _] => Some("a home directory"),
        _ if homes.iter().any(|home| home == dir) => Some("a home directory"),
        _ => None,
    }
}

/// Why a directory's content cannot go in a tree.
enum Scan {
    /// It holds this object, never granted, for this reason.
    Holds(PathBuf, String),
    /// What it holds cannot be known whole.
    Unknown(String),
}

/// Looks through what `dir` holds now for what a tree must not give.
fn scan(dir: &Path, context: &Context) -> Result<(), Scan> {
    for (seen, entry) in walkdir::WalkDir::new(dir)
        .follow_links(false)
        .into_iter()
        .enumerate()
    {
        if seen >= context.max_scan {
            return Err(Scan::Unknown(format!(
                "it holds more than {} objects, too many to look through",
                context.max_scan
            )));
        }
        let entry = entry
            .map_err(|error| Scan::Unknown(format!("it cannot be looked through ({error})")))?;
        if let Some(why) = context.excluded(entry.path()) {
            return Err(Scan::Holds(entry.into_path(), why));
        }
    }
    Ok(())
}

/// Why a `file` grant cannot name `path` on this machine now, if it
/// cannot: the mission would not start.
fn cannot_name(path: &Path) -> Option<String> {
    if fs::metadata(path).is_ok() {
        return None;
    }
    if fs::symlink_metadata(path).is_ok() {
        return Some("a symbolic link to a missing file now: grant the file it points to".into());
    }
    let name_fits = path.file_name().is_some_and(|name| name.len() < NAME_LEN);
    let parent_is_dir = path
        .parent()
        .and_then(|parent| fs::metadata(parent).ok())
        .is_some_and(|metadata| metadata.is_dir());
    if parent_is_dir && name_fits {
        return None;
    }
    Some(
        "neither it nor its directory exists now: a grant on it would keep the mission from \
         starting"
            .into(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broad_directories_are_never_trees() {
        let homes = [PathBuf::from("/srv/people/ann")];
        for dir in [
            "/",
            "/home",
            "/etc",
            "/usr",
            "/tmp",
            "/usr/local",
            "/var/tmp",
            "/home/bob",
            "/root",
            "/srv/people/ann",
            "/run/user/1000",
            "/proc/sys/kernel",
            "/dev/shm",
            "/sys/fs/cgroup",
        ] {
            assert!(too_broad(Path::new(dir), &homes).is_some(), "{dir}");
        }
        for dir in [
            "/home/bob/project",
            "/tmp/build",
            "/etc/nginx",
            "/usr/local/lib",
            "/srv/site",
            "/srv/people",
        ] {
            assert_eq!(too_broad(Path::new(dir), &homes), None, "{dir}");
        }
    }

    #[test]
    fn names_made_again_get_what_the_next_run_needs() {
        let mut usage = Usage::default();
        usage.counts[2] = 1;
        assert_eq!(usage.used(), ops::CREATE);
        assert_eq!(usage.added(), 0);
        usage.opened_new = 1;
        assert_eq!(usage.added(), ops::WRITE);
        usage.renamed_new = 1;
        assert_eq!(usage.added(), ops::WRITE | ops::DELETE);
        usage.counts[1] = 2;
        assert_eq!(usage.added(), ops::DELETE, "what was used is not added");
    }
}
