//! The client side of the control socket: one request, one answer.

use std::{
    fs,
    io::{self, BufRead, BufReader, Read, Write},
    os::unix::{
        fs::{FileTypeExt, MetadataExt},
        net::UnixStream,
    },
    path::Path,
    sync::mpsc,
    thread,
    time::Duration,
};

use pincer_model::{
    control::{ControlRequest, ControlResponse},
    vote,
};

use super::{CALL_TIMEOUT, ControlError};

/// Longest response line the client reads: a long pending list is legitimate,
/// an endless line is not.
const MAX_RESPONSE_LINE: usize = 16 * 1024 * 1024;

/// Sends one request to the server at `path` and waits for its response.
/// The server must be trusted (`check_path` and `check_peer`): an answer from anyone
/// else (a socket of another user given by `PINCER_SOCKET`, a stale path
/// taken over) could make `pincer run` believe it is confined by a daemon.
///
/// Blocking: connecting, writing and each read wait at most
/// [`CALL_TIMEOUT`].
pub fn call(path: &Path, request: &ControlRequest) -> Result<ControlResponse, ControlError> {
    let io_error = |source: io::Error| match source.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => ControlError::Timeout {
            path: path.to_owned(),
            timeout: CALL_TIMEOUT,
        },
        _ => ControlError::Io {
            path: path.to_owned(),
            source,
        },
    };
    check_path(path, &trusted_uids())?;
    let mut stream = connect(path, CALL_TIMEOUT)?;
    check_peer(path, &stream, &trusted_uids())?;
    stream
        .set_read_timeout(Some(CALL_TIMEOUT))
        .and_then(|()| stream.set_write_timeout(Some(CALL_TIMEOUT)))
        .map_err(io_error)?;

    let mut line = serde_json::to_vec(request).expect("a control request always serializes");
    line.push(b'\n');
    // A server that refuses the caller answers and closes as it connects:
    // the request may then meet a closed socket, and the answer is still
    // there to read.
    let written = stream.write_all(&line);

    let mut response = Vec::new();
    let read = BufReader::new(&stream)
        .take(MAX_RESPONSE_LINE as u64 + 1)
        .read_until(b'\n', &mut response);
    if response.is_empty() {
        written.and(read).map_err(io_error)?;
        return Err(ControlError::Closed {
            path: path.to_owned(),
        });
    }
    if response.len() > MAX_RESPONSE_LINE && response.last() != Some(&b'\n') {
        return Err(ControlError::ResponseTooLong {
            path: path.to_owned(),
            limit: MAX_RESPONSE_LINE,
        });
    }
    serde_json::from_slice(&response).map_err(|source| ControlError::Malformed {
        path: path.to_owned(),
        source,
    })
}

/// The users pincer takes answers from: root, and the user pincer runs as
/// (who could do whatever such a server does anyway).
fn trusted_uids() -> [u32; 2] {
    [0, nix::unistd::geteuid().as_raw()]
}

/// Checks the socket file and its directory: a socket owned by a trusted
/// user, in a directory owned by one that nobody else can write to (or whose
/// sticky bit keeps others from replacing the socket).
fn check_path(path: &Path, trusted: &[u32]) -> Result<(), ControlError> {
    let untrusted = |why: String| ControlError::Untrusted {
        path: path.to_owned(),
        why,
    };
    let socket = match fs::symlink_metadata(path) {
        Ok(socket) => socket,
        // Nothing there: connecting says so.
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(ControlError::Connect {
                path: path.to_owned(),
                source,
            });
        }
    };
    if !socket.file_type().is_socket() {
        return Err(untrusted("it is not a socket".to_owned()));
    }
    if !trusted.contains(&socket.uid()) {
        return Err(untrusted(format!(
            "the socket belongs to uid {}, not root or uid {}",
            socket.uid(),
            trusted[1]
        )));
    }
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let dir_meta = fs::metadata(dir).map_err(|source| ControlError::Connect {
        path: path.to_owned(),
        source,
    })?;
    if !trusted.contains(&dir_meta.uid()) {
        return Err(untrusted(format!(
            "its directory {} belongs to uid {}, who can replace the socket",
            dir.display(),
            dir_meta.uid()
        )));
    }
    let mode = dir_meta.mode();
    if mode & 0o022 != 0 && mode & 0o1000 == 0 {
        return Err(untrusted(format!(
            "its directory {} can be written by others (mode {:o}), who can replace the socket",
            dir.display(),
            mode & 0o7777
        )));
    }
    Ok(())
}

/// Checks the process that listens: its user, as the kernel recorded it
/// when it started listening (`SO_PEERCRED`), must be trusted.
fn check_peer(path: &Path, stream: &UnixStream, trusted: &[u32]) -> Result<(), ControlError> {
    let peer = nix::sys::socket::getsockopt(stream, nix::sys::socket::sockopt::PeerCredentials)
        .map_err(|errno| ControlError::Io {
            path: path.to_owned(),
            source: errno.into(),
        })?;
    if trusted.contains(&peer.uid()) {
        return Ok(());
    }
    Err(ControlError::Untrusted {
        path: path.to_owned(),
        why: format!(
            "it is served by process {} of uid {}, not root or uid {}",
            peer.pid(),
            peer.uid(),
            trusted[1]
        ),
    })
}

/// Connects to `path` within `timeout`.
fn connect(path: &Path, timeout: Duration) -> Result<UnixStream, ControlError> {
    // A Unix connect waits only while the listener's backlog is full (a hung
    // server), but then without end, and std has no timeout for it: it runs
    // on its own thread, left behind if it hangs.
    let (sender, receiver) = mpsc::channel();
    let target = path.to_owned();
    thread::spawn(move || {
        // The receiver is gone only once the caller has given up.
        let _ = sender.send(UnixStream::connect(target));
    });
    match receiver.recv_timeout(timeout) {
        Ok(Ok(stream)) => Ok(stream),
        Ok(Err(error))
            if matches!(
                error.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused
            ) =>
        {
            Err(ControlError::NotListening {
                path: path.to_owned(),
            })
        }
        Ok(Err(source)) => Err(ControlError::Connect {
            path: path.to_owned(),
            source,
        }),
        Err(_) => Err(ControlError::Timeout {
            path: path.to_owned(),
            timeout,
        }),
    }
}

/// Parses the `--ttl` of `pincer approve`: a duration such as `90s`, `10m`
/// or `1h30m`, as [`vote::check_ttl`] allows, read as every duration pincer
/// reads is ([`pincer_model::duration::parse`]).
pub fn parse_ttl(text: &str) -> Result<Duration, String> {
    vote::check_ttl(pincer_model::duration::parse(
        text,
        Duration::ZERO..=Duration::MAX,
    )?)
}

#[cfg(test)]
mod tests {
    use std::os::{
        fd::AsRawFd,
        unix::{fs::PermissionsExt, net::UnixListener},
    };

    use super::*;

    #[test]
    fn calling_nobody_names_the_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("absent.sock");
        let error = call(&path, &ControlRequest::Pending).unwrap_err();
        assert_eq!(
            error.to_string(),
            format!("no pincer is listening on {}", path.display())
        );
        // A socket file whose server is gone reads the same.
        drop(UnixListener::bind(&path).unwrap());
        let error = call(&path, &ControlRequest::Pending).unwrap_err();
        assert!(matches!(error, ControlError::NotListening { .. }));
    }

    #[test]
    fn ttls() {
        assert_eq!(parse_ttl("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_ttl("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_ttl("90s"), Ok(Duration::from_secs(90)));
        assert!(parse_ttl("0s").unwrap_err().contains("longer than zero"));
        assert!(
            parse_ttl("1500ms")
                .unwrap_err()
                .contains("whole number of seconds")
        );
        assert!(parse_ttl("").is_err());
        assert!(parse_ttl("soon").is_err());
        assert!(parse_ttl("-5m").is_err());
        // A ttl near 2^63 seconds once overflowed the clock when granted.
        assert_eq!(parse_ttl("365d"), Ok(vote::MAX_TTL));
        assert_eq!(parse_ttl("366d").unwrap_err(), "must be at most 365 days");
        assert_eq!(
            parse_ttl("292000000000y").unwrap_err(),
            "must be at most 365 days"
        );
        assert_eq!(
            parse_ttl("soon").unwrap_err(),
            "invalid duration \"soon\" (write it like \"30s\", \"10m\" or \"1h30m\")"
        );
    }

    fn untrusted_why(result: Result<ControlResponse, ControlError>) -> String {
        match result {
            Err(ControlError::Untrusted { why, .. }) => why,
            other => panic!("expected an untrusted socket, got {other:?}"),
        }
    }

    #[test]
    fn a_socket_or_directory_another_user_owns_is_not_trusted() {
        assert!(
            nix::unistd::geteuid().is_root(),
            "this test needs root: it hands files to another user"
        );
        let nobody = nix::unistd::Uid::from_raw(65534);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pincer.sock");
        let listener = UnixListener::bind(&path).unwrap();
        std::os::unix::fs::chown(&path, Some(nobody.as_raw()), None).unwrap();
        assert_eq!(
            untrusted_why(call(&path, &ControlRequest::Pending)),
            "the socket belongs to uid 65534, not root or uid 0"
        );
        std::os::unix::fs::chown(&path, Some(0), None).unwrap();
        // Another user may not be able to replace the socket either.
        nix::unistd::chown(dir.path(), Some(nobody), None).unwrap();
        assert_eq!(
            untrusted_why(call(&path, &ControlRequest::Pending)),
            format!(
                "its directory {} belongs to uid 65534, who can replace the socket",
                dir.path().display()
            )
        );
        nix::unistd::chown(dir.path(), Some(nix::unistd::Uid::from_raw(0)), None).unwrap();
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o777)).unwrap();
        assert_eq!(
            untrusted_why(call(&path, &ControlRequest::Pending)),
            format!(
                "its directory {} can be written by others (mode 777), who can replace the socket",
                dir.path().display()
            )
        );
        // Sticky, like /tmp: others cannot replace what is not theirs.
        // The server is reached (it hangs up without an answer: the request
        // may meet the closed end, or no answer comes).
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o1777)).unwrap();
        let server = thread::spawn(move || drop(listener.accept().unwrap()));
        let reached = call(&path, &ControlRequest::Pending);
        assert!(
            matches!(
                reached,
                Err(ControlError::Closed { .. } | ControlError::Io { .. })
            ),
            "{reached:?}"
        );
        server.join().unwrap();
    }

    #[test]
    fn a_server_listening_as_another_user_is_not_trusted() {
        use nix::sys::socket::{
            AddressFamily, Backlog, SockFlag, SockType, UnixAddr, bind, listen, socket,
        };
        assert!(
            nix::unistd::geteuid().is_root(),
            "this test needs root: it serves a socket as another user"
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pincer.sock");
        // Bound as root (the file and its directory pass), listening as
        // nobody: the kernel records who listens.
        let fd = socket(
            AddressFamily::Unix,
            SockType::Stream,
            SockFlag::SOCK_CLOEXEC,
            None,
        )
        .unwrap();
        bind(fd.as_raw_fd(), &UnixAddr::new(&path).unwrap()).unwrap();
        let backlog = Backlog::new(4).unwrap();
        // SAFETY: the child makes only system calls (setuid, listen, pause)
        // and never returns.
        let child = match unsafe { nix::unistd::fork() }.unwrap() {
            nix::unistd::ForkResult::Child => {
                let _ = nix::unistd::setuid(nix::unistd::Uid::from_raw(65534));
                let _ = listen(&fd, backlog);
                loop {
                    nix::unistd::pause();
                }
            }
            nix::unistd::ForkResult::Parent { child } => child,
        };
        let result = (0..500)
            .map(|_| {
                std::thread::sleep(Duration::from_millis(10));
                call(&path, &ControlRequest::Pending)
            })
            .find(|r| !matches!(r, Err(ControlError::NotListening { .. })))
            .unwrap();
        nix::sys::signal::kill(child, nix::sys::signal::Signal::SIGKILL).unwrap();
        nix::sys::wait::waitpid(child, None).unwrap();
        assert_eq!(
            untrusted_why(result),
            format!("it is served by process {child} of uid 65534, not root or uid 0")
        );
    }
}
