//! The pins of `pincer run`: its programs and maps while it runs, and idle
//! sets of programs kept attached for the next run.
//!
//! ```text
//! /sys/fs/bpf/pincer-runs/<pid>/             a running `pincer run`'s programs and maps
//!   object-<hash>, links/<hook>, maps/<MAP>  (the layout of `Enforcer::pin`)
//! /sys/fs/bpf/pincer-idle/<expiry>-<pid>/    an idle set, kept until <expiry>
//!                                            (Unix seconds) by the watchdog <pid>
//! /sys/fs/bpf/pincer-idle/reclaim-<pid>/     an idle set being removed (bpffs
//!                                            refuses names with a dot)
//! ```
//!
//! A run's pins keep its agent confined whatever happens to its processes
//! (with no twin, every ungranted access is refused at once).
//!
//! Loading verifies every program (a second or so on real hardware, half a
//! minute under emulation), and detaching the last program from a hook
//! waits for RCU-tasks grace periods, about a tenth of a second per hook: a
//! run's start and end would each take seconds. So a run that ends (unless
//! its agent could not be released from the maps) leaves its programs
//! attached and idle — no agent in their map, so every task pays the one
//! lookup it pays while any run is active — for its linger time, and the
//! next run of the same build takes them over instead of loading, with
//! every map cleared to what a fresh load has
//! ([`Enforcer::clear_for_new_run`]). The watchdog of the run that left
//! them removes them when the linger time is up, unless a run took them.
//!
//! Who owns a set moves by `rename(2)`, which is atomic: of two runs
//! starting at once, one takes an idle set and the other loads its own, and
//! a run taking a set and the watchdog removing it never both succeed.

use std::{
    fs,
    path::{Path, PathBuf},
    time::{Duration, SystemTime},
};

use pincer_model::paths;

use super::{Enforcer, LoadError, on_bpffs, unpin};

/// Programs for a run, and where they are pinned.
pub struct RunPrograms {
    /// The programs and maps.
    pub enforcer: Enforcer,
    /// The run's pin directory, `None` (with a warning) where no BPF file
    /// system is mounted: then the agent is confined while pincer or its
    /// watchdog lives.
    pub pins: Option<PathBuf>,
    /// Whether they were an idle set taken over rather than loaded.
    pub taken_over: bool,
}

/// The two directories: running runs' pins and idle sets.
pub struct Pool {
    runs: PathBuf,
    idle: PathBuf,
}

impl Pool {
    /// The host's: [`paths::RUN_PINS`] and [`paths::IDLE_PINS`].
    pub fn host() -> Pool {
        Pool::new(Path::new(paths::RUN_PINS), Path::new(paths::IDLE_PINS))
    }

    fn new(runs: &Path, idle: &Path) -> Pool {
        Pool {
            runs: runs.to_owned(),
            idle: idle.to_owned(),
        }
    }

    /// Where the running `pincer run` of process `pid` pins its programs.
    pub fn run_dir(&self, pid: u32) -> PathBuf {
        self.runs.join(pid.to_string())
    }

    /// The idle set that watchdog `pid` keeps until `expiry`.
    pub fn idle_dir(&self, expiry: u64, pid: u32) -> PathBuf {
        self.idle.join(format!("{expiry}-{pid}"))
    }

    /// Where process `pid` moves a set it removes, so that nobody takes it
    /// meanwhile (bpffs refuses names with a dot).
    fn reclaim_dir(&self, pid: u32) -> PathBuf {
        self.idle.join(format!("reclaim-{pid}"))
    }

    /// Takes over an idle set of this build with a ring buffer of
    /// `ring_bytes`, or loads the programs and pins them as this run's.
    pub fn acquire(&self, ring_bytes: u32) -> Result<RunPrograms, LoadError> {
        let own = self.run_dir(std::process::id());
        if let Some(enforcer) = self.take_idle(&own, ring_bytes) {
            return Ok(RunPrograms {
                enforcer,
                pins: Some(own),
                taken_over: true,
            });
        }
        let mut enforcer = Enforcer::load_with_ring(ring_bytes)?;
        let pins = self.pin_run(&mut enforcer, &own);
        Ok(RunPrograms {
            enforcer,
            pins,
            taken_over: false,
        })
    }

    /// Pins freshly loaded programs under `own`.
    fn pin_run(&self, enforcer: &mut Enforcer, own: &Path) -> Option<PathBuf> {
        let pinned = self
            .runs
            .parent()
            .filter(|bpffs| on_bpffs(bpffs))
            .ok_or_else(|| format!("{} is not on a BPF file system", self.runs.display()))
            .and_then(|_| fs::create_dir_all(&self.runs).map_err(|e| e.to_string()))
            .and_then(|()| enforcer.pin(own).map_err(|e| e.to_string()));
        match pinned {
            Ok(()) => Some(own.to_owned()),
            Err(error) => {
                tracing::warn!(%error, "the run's programs are not pinned: its agent is confined while pincer or its watchdog lives");
                None
            }
        }
    }

    /// Every set of programs pinned here: the running runs' and the idle
    /// ones (unexpired, newest first), for whoever wants to know what is
    /// attached without taking it.
    pub fn sets(&self) -> Vec<PathBuf> {
        let mut sets: Vec<PathBuf> = self
            .entries(&self.runs)
            .into_iter()
            .map(|(_, path)| path)
            .collect();
        sets.sort();
        sets.extend(self.idle_sets(unix_now()));
        sets
    }

    /// The idle sets that expire after `now`, newest first.
    fn idle_sets(&self, now: u64) -> Vec<PathBuf> {
        let mut sets: Vec<(u64, PathBuf)> = self
            .entries(&self.idle)
            .into_iter()
            .filter_map(|(name, path)| {
                let (expiry, _) = parse_idle(&name)?;
                (expiry > now).then_some((expiry, path))
            })
            .collect();
        sets.sort_by_key(|set| std::cmp::Reverse(set.0));
        sets.into_iter().map(|(_, path)| path).collect()
    }

    /// Takes the newest idle set with a ring buffer of `ring_bytes`:
    /// renamed to `own` (whose parent is made if missing), opened and
    /// cleared, ready for a new twin. A set of another build is removed;
    /// one with another ring size is put back for the run it fits.
    pub fn take_idle(&self, own: &Path, ring_bytes: u32) -> Option<Enforcer> {
        self.take_idle_with(own, |own| {
            let mut enforcer = match Enforcer::open_pinned(own) {
                Ok(enforcer) => enforcer,
                Err(error) => {
                    tracing::info!(%error, "removing an idle set that cannot be reused");
                    return Taken::Unusable;
                }
            };
            if enforcer.ring_bytes() != Some(ring_bytes) {
                return Taken::Misfit;
            }
            match enforcer.clear_for_new_run() {
                Ok(()) => Taken::Fits(enforcer),
                Err(error) => {
                    tracing::warn!(%error, "cannot clear idle programs; loading instead");
                    Taken::Unusable
                }
            }
        })
    }

    /// The moves of [`Pool::take_idle`], around `open` (which says what the
    /// set moved to `own` is good for).
    fn take_idle_with<T>(&self, own: &Path, open: impl Fn(&Path) -> Taken<T>) -> Option<T> {
        let sets = self.idle_sets(unix_now());
        if sets.is_empty()
            || own
                .parent()
                .is_some_and(|dir| fs::create_dir_all(dir).is_err())
        {
            return None;
        }
        for idle in sets {
            if fs::rename(&idle, own).is_err() {
                // Taken or removed a moment ago.
                continue;
            }
            match open(own) {
                Taken::Fits(taken) => {
                    tracing::debug!(set = %idle.display(), "took over idle programs");
                    return Some(taken);
                }
                Taken::Misfit => {
                    if fs::rename(own, &idle).is_err() {
                        let _ = unpin(own);
                    }
                }
                Taken::Unusable => {
                    let _ = unpin(own);
                }
            }
        }
        None
    }

    /// Leaves a cleanly finished run's programs (pinned at `pins`) idle,
    /// for the next run to take over, until `linger` from now; returns the
    /// expiry the watchdog (`watchdog`) removes them at, or `None` when
    /// they stay where they are (`linger` is zero, or they cannot be moved).
    pub fn shelve(&self, pins: &Path, linger: Duration, watchdog: u32) -> Option<u64> {
        if linger.is_zero() {
            return None;
        }
        let expiry = unix_now().saturating_add(linger.as_secs().max(1));
        let moved = fs::create_dir_all(&self.idle)
            .and_then(|()| fs::rename(pins, self.idle_dir(expiry, watchdog)));
        match moved {
            Ok(()) => Some(expiry),
            Err(error) => {
                tracing::warn!(%error, "cannot keep the programs for the next run");
                None
            }
        }
    }

    /// Removes the idle set `idle` unless a run took it over already (the
    /// watchdog's last act once the linger time is up); says whether it
    /// did.
    pub fn reclaim(&self, idle: &Path) -> bool {
        let reclaiming = self.reclaim_dir(std::process::id());
        fs::rename(idle, &reclaiming).is_ok() && unpin(&reclaiming).is_ok()
    }

    /// Removes every idle set now (`pincer daemon --uninstall`); returns
    /// how many it removed. A run taking one over at this moment keeps it.
    pub fn drop_idle(&self) -> usize {
        self.idle_sets(0)
            .into_iter()
            .filter(|idle| self.reclaim(idle))
            .count()
    }

    /// Removes what finished runs left: the pins of runs whose `pincer run`
    /// is gone and whose agent cgroup (under `cgroup_root`) is gone too —
    /// while the agent lives, its pins keep it confined — and, once
    /// expired, idle sets whose watchdog died before removing them.
    pub fn sweep(&self, cgroup_root: &Path) {
        self.sweep_with(unix_now(), |pid| {
            alive(pid)
                || cgroup_root
                    .join(crate::cgroup::PINCER_DIR)
                    .join(crate::cgroup::run_cgroup_name(pid))
                    .exists()
        });
    }

    /// [`Pool::sweep`] at `now`, where `run_lives(pid)` says whether a run
    /// of that process id or its agent is still there.
    fn sweep_with(&self, now: u64, run_lives: impl Fn(u32) -> bool) {
        for (name, path) in self.entries(&self.runs) {
            if let Ok(pid) = name.parse()
                && !run_lives(pid)
            {
                remove(&path, "the pins of a run that is over");
            }
        }
        for (name, path) in self.entries(&self.idle) {
            let gone = match (name.strip_prefix("reclaim-"), parse_idle(&name)) {
                (Some(pid), _) => pid.parse().is_ok_and(|pid| !alive(pid)),
                (None, Some((expiry, pid))) => expiry <= now && !alive(pid),
                (None, None) => false,
            };
            if gone {
                remove(&path, "idle programs left by a watchdog that is gone");
            }
        }
    }

    /// The names and paths of the entries of `dir` (none when it is
    /// missing).
    fn entries(&self, dir: &Path) -> Vec<(String, PathBuf)> {
        let Ok(entries) = fs::read_dir(dir) else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|entry| Some((entry.file_name().into_string().ok()?, entry.path())))
            .collect()
    }
}

/// What an idle set moved to a run's directory turned out to be.
enum Taken<T> {
    /// Good for the run.
    Fits(T),
    /// Good, but for a run with another ring size: it goes back.
    Misfit,
    /// Of another build, or broken: it goes.
    Unusable,
}

/// `<expiry>-<pid>` of an idle set's name.
fn parse_idle(name: &str) -> Option<(u64, u32)> {
    let (expiry, pid) = name.split_once('-')?;
    Some((expiry.parse().ok()?, pid.parse().ok()?))
}

fn remove(path: &Path, what: &str) {
    match unpin(path) {
        Ok(()) => tracing::info!(pins = %path.display(), "removed {what}"),
        Err(error) => tracing::warn!(%error, "cannot remove {what}"),
    }
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Seconds since the Unix epoch (a clock set before 1970 reads as zero).
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Sleeps until the Unix second `expiry`.
pub fn sleep_until(expiry: u64) {
    loop {
        let now = unix_now();
        if now >= expiry {
            return;
        }
        std::thread::sleep(Duration::from_secs(expiry - now));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pool in a temporary directory, with plain directories for pins.
    fn pool() -> (tempfile::TempDir, Pool) {
        let root = tempfile::tempdir().unwrap();
        let pool = Pool::new(&root.path().join("runs"), &root.path().join("idle"));
        fs::create_dir_all(&pool.runs).unwrap();
        (root, pool)
    }

    /// A set of pins, marked with `mark` so it can be told from another.
    fn pinned(dir: &Path, mark: &str) {
        fs::create_dir_all(dir.join("links")).unwrap();
        fs::write(dir.join("mark"), mark).unwrap();
    }

    fn mark(dir: &Path) -> String {
        fs::read_to_string(dir.join("mark")).unwrap()
    }

    /// Run `pid`'s pins, marked `mark`, shelved for `secs` by watchdog
    /// `pid`; returns the expiry.
    fn shelved(pool: &Pool, pid: u32, mark: &str, secs: u64) -> u64 {
        let own = pool.run_dir(pid);
        pinned(&own, mark);
        let expiry = pool.shelve(&own, Duration::from_secs(secs), pid).unwrap();
        assert!(!own.exists());
        expiry
    }

    #[test]
    fn idle_names_carry_their_expiry_and_watchdog() {
        assert_eq!(parse_idle("1700000000-42"), Some((1_700_000_000, 42)));
        assert_eq!(parse_idle("reclaim-42"), None);
        assert_eq!(parse_idle("42"), None);
    }

    #[test]
    fn a_shelved_set_is_taken_over_once_and_the_newest_first() {
        let (_root, pool) = pool();
        shelved(&pool, 1, "older", 60);
        shelved(&pool, 2, "newer", 120);
        let marked = |dir: &Path| Taken::Fits(mark(dir));
        assert_eq!(
            pool.take_idle_with(&pool.run_dir(3), marked).as_deref(),
            Some("newer")
        );
        assert_eq!(mark(&pool.run_dir(3)), "newer");
        assert_eq!(
            pool.take_idle_with(&pool.run_dir(4), marked).as_deref(),
            Some("older")
        );
        assert_eq!(pool.take_idle_with(&pool.run_dir(5), marked), None);
    }

    #[test]
    fn a_misfit_goes_back_and_an_unusable_set_goes() {
        let (_root, pool) = pool();
        shelved(&pool, 1, "small ring", 60);
        shelved(&pool, 2, "other build", 120);
        let own = pool.run_dir(3);
        let took: Option<()> = pool.take_idle_with(&own, |dir| match mark(dir).as_str() {
            "small ring" => Taken::Misfit,
            _ => Taken::Unusable,
        });
        assert_eq!(took, None);
        assert!(!own.exists());
        let left = pool.idle_sets(0);
        assert_eq!(left.len(), 1, "{left:?}");
        assert_eq!(mark(&left[0]), "small ring");
    }

    #[test]
    fn no_linger_keeps_the_pins_where_they_are() {
        let (_root, pool) = pool();
        let own = pool.run_dir(1);
        pinned(&own, "run");
        assert_eq!(pool.shelve(&own, Duration::ZERO, 9), None);
        assert!(own.exists());
    }

    #[test]
    fn the_watchdog_reclaims_only_what_no_run_took() {
        let (_root, pool) = pool();
        let expiry = shelved(&pool, 7, "run", 60);
        let idle = pool.idle_dir(expiry, 7);
        assert!(idle.exists(), "named after its expiry and watchdog");
        // Taken over first: the watchdog finds nothing to remove.
        let taken = pool.take_idle_with(&pool.run_dir(2), |_| Taken::Fits(()));
        assert_eq!(taken, Some(()));
        assert!(!pool.reclaim(&idle));
        assert!(pool.run_dir(2).exists());
        // Not taken: removed.
        let expiry = pool
            .shelve(&pool.run_dir(2), Duration::from_secs(60), 8)
            .unwrap();
        assert!(pool.reclaim(&pool.idle_dir(expiry, 8)));
        assert_eq!(pool.idle_sets(0), Vec::<PathBuf>::new());
        assert_eq!(pool.entries(&pool.idle), Vec::new());
    }

    #[test]
    fn uninstall_drops_every_idle_set() {
        let (_root, pool) = pool();
        for pid in 1..=3 {
            shelved(&pool, pid, "run", 60);
        }
        assert_eq!(pool.drop_idle(), 3);
        assert_eq!(pool.entries(&pool.idle), Vec::new());
    }

    #[test]
    fn the_sweep_keeps_what_still_confines_or_waits() {
        let (_root, pool) = pool();
        let dead = u32::MAX - 1;
        let live = std::process::id();
        for pid in [dead, live] {
            pinned(&pool.run_dir(pid), "run");
        }
        fs::create_dir_all(&pool.idle).unwrap();
        let now = 1_000;
        for (expiry, pid) in [(now - 1, dead), (now + 60, dead), (now - 1, live)] {
            pinned(&pool.idle_dir(expiry, pid), "idle");
        }
        pinned(&pool.reclaim_dir(dead), "idle");
        pinned(&pool.reclaim_dir(live), "idle");
        pool.sweep_with(now, |pid| pid == live);
        let mut left: Vec<String> = pool
            .entries(&pool.runs)
            .into_iter()
            .chain(pool.entries(&pool.idle))
            .map(|(name, _)| name)
            .collect();
        left.sort();
        let mut expected = vec![
            live.to_string(),
            format!("{}-{dead}", now + 60),
            format!("{}-{live}", now - 1),
            format!("reclaim-{live}"),
        ];
        expected.sort();
        assert_eq!(left, expected);
    }
}
