//! What the command inherits: its standard input, output and error, and
//! only the descriptors `--pass-fd` names. Every other descriptor `pincer
//! run` was started with is closed on exec: a descriptor opened before the
//! agent existed (`pincer run … 7<>/secret`) reaches the file with no open
//! for the hooks to decide, so it must be the person's explicit choice, and
//! the audit log says what was passed.
//!
//! Descriptors 0–2 and passed ones are not decided again on each read or
//! write (`file_permission`, `mmap_file`): they are what the person running
//! `pincer run` handed the agent, like a shell redirection, and every other
//! descriptor an agent holds came from an open (`file_open`) or a receipt
//! (`file_receive`) that was decided.

use std::{fs, io, os::fd::RawFd};

use pincer_model::{audit::Descriptor, escape::escape};

/// The first descriptor a command does not inherit unless it is passed.
const FIRST_CLOSED: RawFd = 3;

/// An error about `--pass-fd`.
#[derive(Debug, thiserror::Error)]
pub enum PassError {
    /// A standard descriptor was named: those are always passed.
    #[error("--pass-fd {fd}: descriptors 0, 1 and 2 are always passed")]
    Standard {
        /// The descriptor.
        fd: RawFd,
    },
    /// A negative number was named: no descriptor has one.
    #[error("--pass-fd {fd}: not a descriptor (descriptors are numbered from 0)")]
    Negative {
        /// The number.
        fd: RawFd,
    },
    /// The descriptor is not open in `pincer run`.
    #[error("--pass-fd {fd}: descriptor {fd} is not open")]
    NotOpen {
        /// The descriptor.
        fd: RawFd,
    },
    /// The descriptor could not be looked at.
    #[error("--pass-fd {fd}: cannot look at the descriptor")]
    Unreadable {
        /// The descriptor.
        fd: RawFd,
        /// Why.
        #[source]
        source: io::Error,
    },
}

/// The descriptors the command starts with, for the audit log: 0–2 when
/// open, and `passed`.
pub fn inherited(passed: &[RawFd]) -> Result<Vec<Descriptor>, PassError> {
    let mut fds = Vec::new();
    for fd in 0..FIRST_CLOSED {
        if let Ok(target) = target(fd) {
            fds.push(Descriptor { fd, target });
        }
    }
    for &fd in passed {
        if fd < 0 {
            return Err(PassError::Negative { fd });
        }
        if fd < FIRST_CLOSED {
            return Err(PassError::Standard { fd });
        }
        // The link of a descriptor that is not open is missing: the
        // file-not-found of the lookup would only confuse.
        let target = target(fd).map_err(|source| match source.kind() {
            io::ErrorKind::NotFound => PassError::NotOpen { fd },
            _ => PassError::Unreadable { fd, source },
        })?;
        fds.push(Descriptor { fd, target });
    }
    fds.sort_by_key(|d| d.fd);
    fds.dedup_by_key(|d| d.fd);
    Ok(fds)
}

/// What a descriptor of this process refers to, escaped.
fn target(fd: RawFd) -> io::Result<String> {
    let link = fs::read_link(format!("/proc/self/fd/{fd}"))?;
    Ok(escape(link.as_os_str().as_encoded_bytes()))
}

/// The ranges of descriptors to close on exec: everything from 3 up, but
/// the passed ones. Computed before `fork`, so the child only makes system
/// calls.
pub fn closed_ranges(passed: &[RawFd]) -> Vec<(u32, u32)> {
    let mut keep: Vec<u32> = passed
        .iter()
        .filter(|&&fd| fd >= FIRST_CLOSED)
        .map(|&fd| fd as u32)
        .collect();
    keep.sort_unstable();
    keep.dedup();
    let mut ranges = Vec::new();
    let mut first = FIRST_CLOSED as u32;
    for fd in keep {
        if fd > first {
            ranges.push((first, fd - 1));
        }
        first = fd + 1;
    }
    ranges.push((first, u32::MAX));
    ranges
}

/// Marks the descriptors in `ranges` close-on-exec. Async-signal-safe: only
/// `close_range(2)` (Linux 5.11 and later).
pub fn close_on_exec(ranges: &[(u32, u32)]) -> io::Result<()> {
    const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;
    for &(first, last) in ranges {
        // SAFETY: close_range takes two descriptor numbers and flags; with
        // CLOSE_RANGE_CLOEXEC it only sets a flag on open descriptors.
        let rc = unsafe { libc::syscall(libc::SYS_close_range, first, last, CLOSE_RANGE_CLOEXEC) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsRawFd;

    use super::*;

    #[test]
    fn everything_from_three_is_closed_but_what_is_passed() {
        assert_eq!(closed_ranges(&[]), [(3, u32::MAX)]);
        assert_eq!(closed_ranges(&[7]), [(3, 6), (8, u32::MAX)]);
        assert_eq!(closed_ranges(&[3, 9, 4, 9]), [(5, 8), (10, u32::MAX)]);
        // The standard ones are never in a range: they are always passed.
        assert_eq!(closed_ranges(&[1]), [(3, u32::MAX)]);
    }

    #[test]
    fn passed_descriptors_are_named_by_what_they_open() {
        let file = tempfile::NamedTempFile::new().unwrap();
        let fd = file.as_file().as_raw_fd();
        let fds = inherited(&[fd]).unwrap();
        let passed = fds.iter().find(|d| d.fd == fd).unwrap();
        assert_eq!(passed.target, file.path().display().to_string());
        assert!(matches!(
            inherited(&[2]),
            Err(PassError::Standard { fd: 2 })
        ));
        assert!(matches!(
            inherited(&[9999]),
            Err(PassError::NotOpen { fd: 9999 })
        ));
        assert!(matches!(
            inherited(&[-1]),
            Err(PassError::Negative { fd: -1 })
        ));
    }
}
