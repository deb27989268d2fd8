//! Reading the files pincer is given (missions, the daemon's configuration,
//! webhook secrets, audit logs): regular files only, and never more than a
//! limit. A named pipe in place of a mission would hang the reader forever
//! (in the daemon, a path a `register` request names, or a file re-read on
//! `SIGHUP`), and `/dev/zero` or a huge file would be read until memory runs
//! out; both are refused with a message that says why.

use std::{
    fs::{File, OpenOptions},
    io::{self, Read},
    os::unix::fs::{FileTypeExt, OpenOptionsExt},
    path::Path,
};

/// Largest mission or daemon configuration read: a mission of 40 000 grants
/// takes about 4 MiB.
pub const MAX_TOML_BYTES: u64 = 32 << 20;

/// Largest webhook secret read.
pub const MAX_SECRET_BYTES: u64 = 64 << 10;

/// Opens `path` for reading if it is a regular file. The open does not wait
/// for a writer when `path` is a named pipe, so the check below is reached.
pub fn open_regular(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    check_regular(&file)?;
    Ok(file)
}

/// Refuses an open file that is not a regular file, saying what it is.
pub fn check_regular(file: &File) -> io::Result<()> {
    let kind = file.metadata()?.file_type();
    if kind.is_file() {
        return Ok(());
    }
    let what = if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a named pipe"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    };
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{what}: only regular files are read"),
    ))
}

/// Reads the regular file at `path` whole, refusing one larger than `limit`
/// bytes (checked while reading, so a file that grows meanwhile is refused
/// too).
pub fn read_regular(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    let file = open_regular(path)?;
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(io::Error::new(
            io::ErrorKind::FileTooLarge,
            format!("larger than {}", human_bytes(limit)),
        ));
    }
    Ok(bytes)
}

/// `limit` in the largest whole unit.
fn human_bytes(limit: u64) -> String {
    match limit {
        l if l >= 1 << 20 && l % (1 << 20) == 0 => format!("{} MiB", l >> 20),
        l if l >= 1 << 10 && l % (1 << 10) == 0 => format!("{} KiB", l >> 10),
        l => format!("{l} bytes"),
    }
}

#[cfg(test)]
mod tests {
    use std::{fs, os::unix::net::UnixListener};

    use super::*;

    fn message(result: io::Result<Vec<u8>>) -> String {
        result.unwrap_err().to_string()
    }

    #[test]
    fn regular_files_are_read_whole_up_to_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        fs::write(&path, b"12345678").unwrap();
        assert_eq!(read_regular(&path, 8).unwrap(), b"12345678");
        assert_eq!(message(read_regular(&path, 7)), "larger than 7 bytes");
        assert_eq!(
            read_regular(&path, 7).unwrap_err().kind(),
            io::ErrorKind::FileTooLarge
        );
    }

    #[test]
    fn pipes_devices_directories_and_sockets_are_refused_without_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let socket = dir.path().join("socket");
        let _listener = UnixListener::bind(&socket).unwrap();
        // No writer ever opens the pipe: a blocking open would hang here.
        assert_eq!(
            message(read_regular(&fifo, 1024)),
            "a named pipe: only regular files are read"
        );
        assert_eq!(
            message(read_regular(Path::new("/dev/zero"), MAX_TOML_BYTES)),
            "a character device: only regular files are read"
        );
        assert_eq!(
            message(read_regular(dir.path(), 1024)),
            "a directory: only regular files are read"
        );
        // A socket cannot be opened at all: the kernel says so.
        assert_eq!(
            read_regular(&socket, 1024).unwrap_err().raw_os_error(),
            Some(libc::ENXIO)
        );
    }

    /// What refusing the mission at `path` says, causes and all.
    fn mission_refused(path: &Path) -> String {
        let error = crate::mission::Mission::from_file(path).unwrap_err();
        format!("{:#}", anyhow::Error::new(error))
    }

    /// What refusing the daemon configuration at `path` says, causes and
    /// all.
    fn config_refused(path: &Path) -> String {
        let error = crate::config::daemon::Config::from_file(path).unwrap_err();
        format!("{:#}", anyhow::Error::new(error))
    }

    #[test]
    fn a_mission_or_configuration_that_is_a_pipe_or_too_large_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("m.toml");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let pipe = "a named pipe: only regular files are read";
        assert_eq!(
            mission_refused(&fifo),
            format!("cannot read mission file {}: {pipe}", fifo.display())
        );
        assert_eq!(
            config_refused(&fifo),
            format!(
                "cannot read daemon configuration {}: {pipe}",
                fifo.display()
            )
        );
        // One byte over the limit, made sparse so the test writes nothing.
        let big = dir.path().join("big.toml");
        File::create(&big)
            .unwrap()
            .set_len(MAX_TOML_BYTES + 1)
            .unwrap();
        assert_eq!(
            mission_refused(&big),
            format!(
                "cannot read mission file {}: larger than 32 MiB",
                big.display()
            )
        );
    }

    #[test]
    fn limits_are_named_in_whole_units() {
        assert_eq!(human_bytes(MAX_TOML_BYTES), "32 MiB");
        assert_eq!(human_bytes(MAX_SECRET_BYTES), "64 KiB");
        assert_eq!(human_bytes(1000), "1000 bytes");
    }
}
