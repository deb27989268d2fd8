//! Telling the agent why it was refused, where it can read it and nowhere
//! it could change anything.
//!
//! An agent that meets `EACCES` with no reason widens the wrong thing or
//! asks the person to turn protections off. For each refusal (a kernel
//! denial, or a parked request denied) of an agent whose confinement asks
//! for it ([`Tell`]), the twin:
//!
//! - prints one line on standard error (`pincer run`'s, which is the
//!   command's: the run hands its own to the agent), at most once a minute
//!   per object and operation and at most [`LINES_PER_WINDOW`] lines per
//!   [`WINDOW`], the rest counted and said in the next line shown:
//!   `pincer: refused write /src/.git/config: <reason>`;
//! - keeps the last [`RECENT`] refusals, every one and not rate-limited, in
//!   [`FILE_NAME`] in the run's private temporary directory (`$TMPDIR`,
//!   which the agent reads as its own), one per line: time, operations,
//!   path, hook and the reason, which names the rule (the policy class and
//!   pattern of a policy object, the grant that is missing, the guard).
//!
//! Nothing is read back: the file is written, never parsed, so an agent
//! that rewrites it changes only what it reads itself. The directory is
//! the agent's, so the file is written through a descriptor of the
//! directory opened once, as a new file (`O_EXCL`, `O_NOFOLLOW`) renamed
//! over the old name: a link the agent plants there is replaced, never
//! followed by pincer's privileges. A daemon, whose standard error is its
//! journal, writes only the file.

use std::{
    collections::{HashMap, VecDeque},
    io::Write,
    os::fd::{AsRawFd, FromRawFd, OwnedFd},
    path::{Path, PathBuf},
    time::{Duration, Instant, SystemTime},
};

use nix::{
    fcntl::{OFlag, openat, renameat},
    sys::stat::Mode,
    unistd::unlinkat,
};

/// What a confinement tells its agent of its refusals.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tell {
    /// Print a line on standard error per refused object.
    pub stderr: bool,
    /// The directory (the run's private one) that gets [`FILE_NAME`].
    pub dir: Option<PathBuf>,
}

impl Tell {
    /// Whether this tells anything at all.
    pub fn any(&self) -> bool {
        self.stderr || self.dir.is_some()
    }
}

/// The name of the list of recent refusals in the run's private directory.
pub const FILE_NAME: &str = "pincer-refusals";
/// How many refusals the list keeps.
pub const RECENT: usize = 100;
/// How long a refused object and operation stays quiet on standard error
/// after its line.
pub const QUIET: Duration = Duration::from_secs(60);
/// The window of the rate limit of standard error's lines.
pub const WINDOW: Duration = Duration::from_secs(10);
/// Lines on standard error per [`WINDOW`].
pub const LINES_PER_WINDOW: u32 = 10;

/// One refusal, as the audit record says it.
pub struct Refusal<'a> {
    /// The operations refused, by name.
    pub operation: &'a [&'a str],
    /// The object's escaped path.
    pub path: &'a str,
    /// The hook that decided.
    pub hook: &'a str,
    /// Why, as the audit line says it.
    pub reason: &'a str,
}

/// What one agent has been told.
pub struct Refusals {
    stderr: Option<Box<dyn Write + Send>>,
    dir: Option<(OwnedFd, PathBuf)>,
    shown: HashMap<String, Instant>,
    window: Option<(Instant, u32)>,
    hidden: u64,
    recent: VecDeque<String>,
    writes: u64,
}

impl Refusals {
    /// What `tell` asks for, printing on this process's standard error.
    /// A directory that cannot be opened is warned of and left out.
    pub fn new(tell: &Tell) -> Option<Refusals> {
        let stderr: Option<Box<dyn Write + Send>> = if tell.stderr {
            Some(Box::new(std::io::stderr()))
        } else {
            None
        };
        Self::with(stderr, tell.dir.as_deref())
    }

    /// Like [`Refusals::new`], printing to `stderr`.
    pub fn with(stderr: Option<Box<dyn Write + Send>>, dir: Option<&Path>) -> Option<Refusals> {
        let dir = dir.and_then(|dir| match open_dir(dir) {
            Ok(fd) => Some((fd, dir.join(FILE_NAME))),
            Err(error) => {
                tracing::warn!(dir = %dir.display(), %error, "cannot keep the list of refusals there");
                None
            }
        });
        if stderr.is_none() && dir.is_none() {
            return None;
        }
        Some(Refusals {
            stderr,
            dir,
            shown: HashMap::new(),
            window: None,
            hidden: 0,
            recent: VecDeque::new(),
            writes: 0,
        })
    }

    /// The list's path, when there is one.
    pub fn file(&self) -> Option<&Path> {
        self.dir.as_ref().map(|(_, path)| path.as_path())
    }

    /// Tells of one refusal at `now` (`wall` for the list's time).
    pub fn refused(&mut self, refusal: &Refusal<'_>, now: Instant, wall: SystemTime) {
        let operation = refusal.operation.join(",");
        if self.dir.is_some() {
            if self.recent.len() == RECENT {
                self.recent.pop_front();
            }
            self.recent.push_back(format!(
                "{}\t{operation}\t{}\t{}\t{}",
                humantime::format_rfc3339_seconds(wall),
                refusal.path,
                refusal.hook,
                refusal.reason,
            ));
            if let Err(error) = self.write_list() {
                tracing::warn!(%error, "cannot write the list of refusals");
            }
        }
        if self.stderr.is_some() {
            self.print(refusal, &operation, now);
        }
    }

    fn print(&mut self, refusal: &Refusal<'_>, operation: &str, now: Instant) {
        let key = format!("{operation} {}", refusal.path);
        if self
            .shown
            .get(&key)
            .is_some_and(|at| now.duration_since(*at) < QUIET)
        {
            return;
        }
        let (start, lines) = match self.window {
            Some((start, lines)) if now.duration_since(start) < WINDOW => (start, lines),
            _ => (now, 0),
        };
        if lines >= LINES_PER_WINDOW {
            self.hidden += 1;
            self.window = Some((start, lines));
            return;
        }
        self.window = Some((start, lines + 1));
        self.shown.retain(|_, at| now.duration_since(*at) < QUIET);
        self.shown.insert(key, now);
        let mut line = format!(
            "pincer: refused {operation} {}: {}",
            refusal.path, refusal.reason
        );
        if self.hidden > 0 {
            line.push_str(&format!(" ({} more refusals not shown)", self.hidden));
            self.hidden = 0;
        }
        if let Some(file) = self.file() {
            line.push_str(&format!("; every recent refusal: {}", file.display()));
        }
        line.push('\n');
        if let Some(stderr) = &mut self.stderr {
            // Standard error gone (a closed pipe) is no reason to stop.
            let _ = stderr.write_all(line.as_bytes());
            let _ = stderr.flush();
        }
    }

    /// Writes the list as a new file renamed over the old one.
    fn write_list(&mut self) -> std::io::Result<()> {
        let Some((dir, _)) = &self.dir else {
            return Ok(());
        };
        self.writes += 1;
        let temporary = format!(".{FILE_NAME}.{}.{}", std::process::id(), self.writes);
        let fd = openat(
            Some(dir.as_raw_fd()),
            temporary.as_str(),
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o644),
        )?;
        // SAFETY: openat returned a new descriptor, owned here.
        let mut file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        let mut text = format!(
            "# pincer: the last {RECENT} refusals of this agent, newest last: time, operations, path, hook, why\n"
        );
        for line in &self.recent {
            text.push_str(line);
            text.push('\n');
        }
        let written = file.write_all(text.as_bytes()).and_then(|()| {
            renameat(
                Some(dir.as_raw_fd()),
                temporary.as_str(),
                Some(dir.as_raw_fd()),
                FILE_NAME,
            )
            .map_err(std::io::Error::from)
        });
        if written.is_err() {
            let _ = unlinkat(
                Some(dir.as_raw_fd()),
                temporary.as_str(),
                nix::unistd::UnlinkatFlags::NoRemoveDir,
            );
        }
        written
    }
}

/// Opens a directory to write in, never through a link.
fn open_dir(dir: &Path) -> std::io::Result<OwnedFd> {
    let fd = nix::fcntl::open(
        dir,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
    // SAFETY: open returned a new descriptor, owned here.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Captured {
        fn lines(&self) -> Vec<String> {
            String::from_utf8(self.0.lock().unwrap().clone())
                .unwrap()
                .lines()
                .map(str::to_owned)
                .collect()
        }
    }

    /// Refusals told on a captured standard error and listed in a new
    /// directory.
    fn captured() -> (tempfile::TempDir, Captured, Refusals) {
        let dir = tempfile::tempdir().unwrap();
        let out = Captured::default();
        let told = Refusals::with(Some(Box::new(out.clone())), Some(dir.path())).unwrap();
        (dir, out, told)
    }

    fn refusal<'a>(path: &'a str, operation: &'a [&'a str]) -> Refusal<'a> {
        Refusal {
            operation,
            path,
            hook: "file_open",
            reason: "no grant covers read",
        }
    }

    #[test]
    fn one_line_per_object_a_minute_and_the_list_keeps_every_one() {
        let (dir, out, mut told) = captured();
        let start = Instant::now();
        let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        for i in 0..3 {
            let now = start + Duration::from_secs(i);
            told.refused(&refusal("/home/a/.ssh/id", &["read"]), now, wall);
        }
        // Another operation on the same object is another line.
        told.refused(&refusal("/home/a/.ssh/id", &["write"]), start, wall);
        let list = dir.path().join(FILE_NAME);
        assert_eq!(
            out.lines(),
            [
                format!(
                    "pincer: refused read /home/a/.ssh/id: no grant covers read; every recent refusal: {}",
                    list.display()
                ),
                format!(
                    "pincer: refused write /home/a/.ssh/id: no grant covers read; every recent refusal: {}",
                    list.display()
                ),
            ]
        );
        // After a quiet minute, the same object is told of again.
        told.refused(
            &refusal("/home/a/.ssh/id", &["read"]),
            start + QUIET + Duration::from_secs(1),
            wall,
        );
        assert_eq!(out.lines().len(), 3);
        let text = std::fs::read_to_string(&list).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1 + 5, "{text}");
        assert!(lines[0].starts_with("# pincer: the last 100 refusals"));
        assert_eq!(
            lines[1],
            "2027-01-15T08:00:00Z\tread\t/home/a/.ssh/id\tfile_open\tno grant covers read"
        );
        // No temporary file is left beside it.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, [FILE_NAME]);
    }

    #[test]
    fn a_flood_is_cut_to_the_window_and_counted_and_the_list_keeps_the_last() {
        let (dir, out, mut told) = captured();
        let start = Instant::now();
        let paths: Vec<String> = (0..150).map(|i| format!("/secret/{i}")).collect();
        for path in &paths {
            told.refused(&refusal(path, &["read"]), start, SystemTime::now());
        }
        assert_eq!(out.lines().len(), LINES_PER_WINDOW as usize);
        told.refused(
            &refusal("/secret/late", &["read"]),
            start + WINDOW,
            SystemTime::now(),
        );
        let lines = out.lines();
        let last = lines.last().unwrap();
        assert!(
            last.starts_with("pincer: refused read /secret/late: no grant covers read (140 more refusals not shown)"),
            "{last}"
        );
        let text = std::fs::read_to_string(dir.path().join(FILE_NAME)).unwrap();
        assert_eq!(text.lines().count(), 1 + RECENT);
        assert!(text.lines().nth(1).unwrap().contains("/secret/51\t"));
        assert!(text.ends_with("/secret/late\tfile_open\tno grant covers read\n"));
    }

    #[test]
    fn a_link_planted_at_the_list_is_replaced_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "the person's file\n").unwrap();
        let run = dir.path().join("run");
        std::fs::create_dir(&run).unwrap();
        std::os::unix::fs::symlink(&victim, run.join(FILE_NAME)).unwrap();
        let mut told = Refusals::with(None, Some(&run)).unwrap();
        told.refused(&refusal("/x", &["read"]), Instant::now(), SystemTime::now());
        assert_eq!(
            std::fs::read_to_string(&victim).unwrap(),
            "the person's file\n"
        );
        let list = run.join(FILE_NAME);
        assert!(!list.symlink_metadata().unwrap().is_symlink());
        assert!(
            std::fs::read_to_string(list)
                .unwrap()
                .contains("/x\tfile_open")
        );
    }

    #[test]
    fn nothing_asked_tells_nothing() {
        assert!(Refusals::new(&Tell::default()).is_none());
        assert!(!Tell::default().any());
    }
}
