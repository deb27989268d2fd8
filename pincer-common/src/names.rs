//! Names of the maps and globals in the BPF object: the one list. The
//! programs declare their maps through [`map_name!`](crate::map_name) and
//! their global through [`global_name!`](crate::global_name), so an object
//! map's name is never written a second time; the loader and the tests take
//! their names (and the lists below) from here, and `cargo xtask
//! build-ebpf` checks that the built object has exactly [`MAPS`] and
//! [`GLOBALS`]. Programs are named after their hooks
//! ([`crate::hook::Hook::name`]).
//!
//! A name never changes: a daemon finds the maps its predecessor pinned by
//! their names (`<pin dir>/maps/<NAME>`). Each is checked at compile time:
//! at most 15 bytes (the kernel's `BPF_OBJ_NAME_LEN` counts the NUL, and a
//! longer name is cut) of the characters the kernel takes in an object's
//! name, and no two alike.

use crate::text::distinct;

/// The kernel's room for an object's name, NUL included.
const BPF_OBJ_NAME_LEN: usize = 16;

/// Whether the kernel keeps `name` whole as an object's name: letters,
/// digits and `_` (it refuses other characters but `.`, which bpffs refuses
/// in a pin), and room for the NUL.
const fn kernel_name(name: &str) -> bool {
    let name = name.as_bytes();
    if name.is_empty() || name.len() >= BPF_OBJ_NAME_LEN {
        return false;
    }
    let mut i = 0;
    while i < name.len() {
        if !(name[i].is_ascii_alphanumeric() || name[i] == b'_') {
            return false;
        }
        i += 1;
    }
    true
}

/// Declares the list: a constant per name, the lists by purpose, their
/// checks, and the macros that hand the programs a name as the string
/// literal aya's `#[map(name = ...)]` and `export_name` take (neither takes
/// a constant). `$d` is a `$`, for the macros' own variables.
macro_rules! list {
    (
        $d:tt
        userspace { $( $(#[$udoc:meta])* $user:ident = $uname:literal, )* }
        programs { $( $(#[$pdoc:meta])* $program:ident = $pname:literal, )* }
        globals { $( $(#[$gdoc:meta])* $global:ident = $gname:literal, )* }
    ) => {
        $( $(#[$udoc])* pub const $user: &str = $uname; )*
        $( $(#[$pdoc])* pub const $program: &str = $pname; )*
        $( $(#[$gdoc])* pub const $global: &str = $gname; )*

        /// Every map of the object: the daemon pins each one.
        pub const MAPS: &[&str] = &[$($user,)* $($program),*];

        /// The maps userspace reads or writes (the others are the programs'
        /// working room): a daemon that reopens its predecessor's pins needs
        /// every one.
        pub const USERSPACE: &[&str] = &[$($user),*];

        /// The object's globals, which the loader sets.
        pub const GLOBALS: &[&str] = &[$($global),*];

        /// Every name in the object: [`MAPS`] and [`GLOBALS`].
        pub const ALL: &[&str] = &[$($user,)* $($program,)* $($global),*];

        $(
            const _: () = assert!(
                kernel_name($uname),
                concat!("map name ", $uname, ": at most 15 bytes of letters, digits and _"),
            );
        )*
        $(
            const _: () = assert!(
                kernel_name($pname),
                concat!("map name ", $pname, ": at most 15 bytes of letters, digits and _"),
            );
        )*
        $(
            const _: () = assert!(
                kernel_name($gname),
                concat!("global name ", $gname, ": at most 15 bytes of letters, digits and _"),
            );
        )*

        /// Hands the name of a map in [`names`](crate::names) to a macro:
        /// `map_name!(AGENTS => (path::to::then) { tokens })` expands to
        /// `path::to::then! { "PINCER_AGENTS" tokens }`. The programs declare
        /// every map through it, under the name of its constant here; a
        /// name that is not a map of the list does not compile.
        #[macro_export]
        macro_rules! map_name {
            $(
                ($user => ($d ($d then:tt)*) { $d ($d tokens:tt)* }) => {
                    $d ($d then)*! { $uname $d ($d tokens)* }
                };
            )*
            $(
                ($program => ($d ($d then:tt)*) { $d ($d tokens:tt)* }) => {
                    $d ($d then)*! { $pname $d ($d tokens)* }
                };
            )*
        }

        /// The name of a global in [`names`](crate::names), as a string
        /// literal: `global_name!(OFFSETS)` is `"PINCER_OFFSETS"`, for
        /// `#[unsafe(export_name = ...)]`. A name that is not a global of
        /// the list does not compile.
        #[macro_export]
        macro_rules! global_name {
            $( ($global) => { $gname }; )*
        }
    };
}

list! {
    $
    userspace {
        /// Agent cgroup id → [`crate::Agent`].
        AGENTS = "PINCER_AGENTS",
        /// [`crate::GrantKey`] → [`crate::GrantValue`].
        GRANTS = "PINCER_GRANTS",
        /// [`crate::NameGrantKey`] → [`crate::GrantValue`]: grants for files that
        /// did not exist when the mission was loaded.
        NAME_GRANTS = "PINCER_NGRANTS",
        /// Longest-prefix-match trie of [`crate::PrefixName`] →
        /// [`crate::GrantValue`]: prefix grants, which cover every name in a
        /// directory that starts with given bytes.
        PREFIXES = "PINCER_PREFIXES",
        /// Ring buffer of [`crate::AccessEvent`].
        EVENTS = "PINCER_EVENTS",
        /// Per-CPU `u64` counters, indexed by [`crate::counter`].
        COUNTERS = "PINCER_COUNTERS",
        /// One `u64`: the generation that invalidates [`GRANT_CACHE`].
        EPOCH = "PINCER_EPOCH",
        /// Thread id → [`crate::Pending`]: the request a stopped task waits on.
        PENDING = "PINCER_PENDING",
        /// Thread id → [`crate::Verdict`]: a one-shot answer for that request.
        VERDICTS = "PINCER_VERDICT",
        /// One [`crate::Twin`]: the twin's heartbeat.
        TWIN = "PINCER_TWIN",
        /// Process id → non-zero: pincer's own processes (twin, watchdog),
        /// which agents cannot signal or trace. One map for every pincer on
        /// the host, pinned at a fixed path.
        GUARDED = "PINCER_GUARDED",
        /// Kernel address of an IPC object or a key → id of the agent cgroup
        /// whose task created it (objects created outside agents have no
        /// entry).
        OWNERS = "PINCER_OWNERS",
        /// [`crate::ObjectKey`] → [`crate::Label`]: what pincer knows of an
        /// object's content (who made it, its authority). One map for every
        /// pincer on the host, pinned at a fixed path.
        LABELS = "PINCER_LABELS",
        /// Longest-prefix-match trie of [`crate::PolicyNameKey`] →
        /// [`crate::PolicyRules`]: what a name's first bytes make of an object
        /// by that name, alone or in a directory of a given name.
        POLICY_NAMES = "PINCER_PNAMES",
        /// Longest-prefix-match trie of [`crate::PolicySuffixKey`] →
        /// [`crate::PolicyRules`]: the same by a name's last bytes (`*.pth`).
        POLICY_SUFFIXES = "PINCER_PSUFFIX",
        /// [`crate::VacatedKey`] → non-zero: names a person's directory was
        /// moved away from by an agent, where a directory the agent makes is
        /// the person's place again (least recently used go first).
        VACATED = "PINCER_VACATED",
        /// Thread id → [`crate::Making`]: the object a thread is creating, to
        /// be labelled when the kernel binds its name to it.
        MAKING = "PINCER_MAKING",
        /// Thread id → the dentry of a placeholder file it is making: a sandbox
        /// of the agent's own made an empty file at a policy name, and the open
        /// that made it is refused with `EEXIST` rather than given a descriptor
        /// that writes it. Not least recently used: an entry is never evicted
        /// before its open, and a placeholder that cannot be recorded is not
        /// made.
        PLACEHOLDERS = "PINCER_PLACEHLD",
        /// Agent cgroup id → [`crate::Taint`]: the level its reads brought it
        /// to, and the read that did.
        TAINTS = "PINCER_TAINTS",
        /// [`crate::GrantKey`] → [`crate::Action`]: what the mission reserves
        /// for agents at or above a level.
        ACTIONS = "PINCER_ACTIONS",
        /// Source id ([`crate::source_id`]) → its revocation counter, one map
        /// for every pincer on the host, pinned at a fixed path.
        REVOKED = "PINCER_REVOKED",
        /// Cgroup id → one of [`crate::watch`]: the cgroups below which new
        /// cgroups are held until the daemon decides what they are.
        WATCHED = "PINCER_WATCHED",
    }
    programs {
        /// [`crate::GrantKey`] → [`crate::CachedGrant`]: what earlier walks found.
        GRANT_CACHE = "PINCER_GCACHE",
        /// One `u64`: the last request id handed out. Apart from [`TWIN`], which
        /// userspace rewrites whole, so no write of its can undo an increment.
        REQUEST_IDS = "PINCER_REQIDS",
        /// Per-CPU scratch space for keys too large for the BPF stack.
        SCRATCH = "PINCER_SCRATCH",
        /// Per-CPU room for the key a prefix grant is looked up with.
        PREFIX_SCRATCH = "PINCER_PSCRATCH",
        /// Per-CPU room for the path components of one event.
        PATHS = "PINCER_PATHS",
        /// Per-CPU room for the checks of one program run.
        CHECKS = "PINCER_CHECKS",
        /// Per-CPU room for the grants' walk of one check.
        WALKS = "PINCER_WALKS",
        /// Per-CPU room for one search of the policy places.
        POLICY_WALK = "PINCER_PWALK",
    }
    globals {
        /// The [`crate::KernelOffsets`] global.
        OFFSETS = "PINCER_OFFSETS",
    }
}

/// The maps shared by every pincer on the host, each pinned at a fixed
/// path: they outlive runs by design.
pub const SHARED: [&str; 3] = [GUARDED, LABELS, REVOKED];

// No two names alike: the loader finds maps by name, and two statics of one
// name would not link.
const _: () = assert!(
    distinct(ALL, usize::MAX),
    "two names in the list are the same"
);

#[cfg(test)]
mod tests {
    use super::{ALL, GLOBALS, MAPS, SHARED, USERSPACE, kernel_name};

    #[test]
    fn the_lists_are_made_of_the_list() {
        assert_eq!(ALL.len(), MAPS.len() + GLOBALS.len());
        assert!(MAPS.iter().chain(GLOBALS).all(|name| ALL.contains(name)));
        assert!(USERSPACE.iter().all(|name| MAPS.contains(name)));
        assert!(SHARED.iter().all(|name| USERSPACE.contains(name)));
        assert!(GLOBALS.iter().all(|name| !MAPS.contains(name)));
    }

    #[test]
    fn kernel_names_fit_and_take_only_what_the_kernel_takes() {
        assert!(kernel_name("PINCER_PSCRATCH"));
        assert!(!kernel_name("PINCER_PSCRATCH1"));
        assert!(!kernel_name(""));
        assert!(!kernel_name(".rodata"));
        assert!(!kernel_name("PINCER-AGENTS"));
    }
}
