//! What a run gives its command of its own, beside the mission: a private
//! temporary directory, the terminal it was started on, and the
//! environment the mission's profiles set.

use std::{
    ffi::OsString,
    fs, io,
    os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt},
    path::{Path, PathBuf},
};

use pincer_model::{
    mission::{Mission, RunGrant, Tmp},
    paths::PRIVATE_TMP_PREFIX,
};

/// Where the private directory of run `pid` is made: `$TMPDIR` or `/tmp`.
fn temp_root() -> PathBuf {
    std::env::var_os("TMPDIR")
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute())
        .unwrap_or_else(|| PathBuf::from("/tmp"))
}

/// A run's own grants and the directory behind one of them, removed with
/// this value.
pub struct Own {
    tmp: Option<tempfile::TempDir>,
    terminal: Option<PathBuf>,
    /// What the mission's profiles set.
    profile_env: Vec<(String, String)>,
}

impl Own {
    /// Makes the private temporary directory the mission asks for (mode
    /// 0700, named after this process) and finds the terminal.
    pub fn prepare(mission: &Mission) -> io::Result<Own> {
        let tmp = match mission.tmp {
            Tmp::Private => Some(
                tempfile::Builder::new()
                    .prefix(&format!("{PRIVATE_TMP_PREFIX}{}-", std::process::id()))
                    .permissions(fs::Permissions::from_mode(0o700))
                    .tempdir_in(temp_root())?,
            ),
            Tmp::None => None,
        };
        Ok(Own {
            tmp,
            terminal: terminal(),
            profile_env: mission.environment(),
        })
    }

    /// The grants for the mission's resolution.
    pub fn grants(&self) -> Vec<RunGrant> {
        let tmp = self.tmp.iter().map(|dir| RunGrant::private_tmp(dir.path()));
        let terminal = self.terminal.iter().map(|tty| RunGrant::terminal(tty));
        tmp.chain(terminal).collect()
    }

    /// What the command's environment gets: `TMPDIR` pointing at the
    /// private directory, and what the mission's profiles set.
    pub fn environment(&self) -> Vec<(OsString, OsString)> {
        let tmp = self
            .tmp
            .iter()
            .map(|dir| ("TMPDIR".into(), dir.path().as_os_str().to_owned()));
        let profiles = self
            .profile_env
            .iter()
            .map(|(key, value)| (key.into(), value.into()));
        tmp.chain(profiles).collect()
    }

    /// The private directory, if any.
    pub fn tmp(&self) -> Option<&Path> {
        self.tmp.as_ref().map(tempfile::TempDir::path)
    }

    /// The terminal, if any.
    pub fn terminal(&self) -> Option<&Path> {
        self.terminal.as_deref()
    }
}

/// The terminal standard input, output or error is, by its device path
/// (`/dev/pts/3`), when one of them is a terminal.
fn terminal() -> Option<PathBuf> {
    (0..3).find_map(|fd| {
        // SAFETY: isatty only inspects the descriptor.
        if unsafe { libc::isatty(fd) } != 1 {
            return None;
        }
        let path = fs::read_link(format!("/proc/self/fd/{fd}")).ok()?;
        let is_device = fs::metadata(&path).is_ok_and(|m| m.file_type().is_char_device());
        (path.is_absolute() && is_device).then_some(path)
    })
}

/// Removes the private directories of runs that are gone (pincer killed
/// before it could), under `$TMPDIR` or `/tmp`. Only directories this
/// user owns; a link is removed, never followed.
pub fn sweep() {
    let root = temp_root();
    let Ok(entries) = fs::read_dir(&root) else {
        return;
    };
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PRIVATE_TMP_PREFIX))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(metadata) = entry.path().symlink_metadata() else {
            continue;
        };
        if metadata.is_dir()
            && metadata.uid() == me
            && !Path::new(&format!("/proc/{pid}")).exists()
            && fs::remove_dir_all(entry.path()).is_ok()
        {
            tracing::info!(dir = %entry.path().display(), "removed the private temporary directory of a run that is gone");
        }
    }
}
