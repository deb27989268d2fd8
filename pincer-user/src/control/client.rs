//! The client side of the control socket: one request, one answer.

use std::{
    io::{self, BufRead, BufReader, Read, Write},
    os::unix::net::UnixStream,
    path::Path,
    sync::mpsc,
    thread,
    time::Duration,
};

use super::{CALL_TIMEOUT, ControlError, ControlRequest, ControlResponse};
use crate::vote;

/// Longest response line the client reads: a long pending list is legitimate,
/// an endless line is not.
const MAX_RESPONSE_LINE: usize = 16 * 1024 * 1024;

/// Sends one request to the server at `path` and waits for its response.
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
    let mut stream = connect(path, CALL_TIMEOUT)?;
    stream
        .set_read_timeout(Some(CALL_TIMEOUT))
        .and_then(|()| stream.set_write_timeout(Some(CALL_TIMEOUT)))
        .map_err(io_error)?;

    let mut line = serde_json::to_vec(request).expect("a control request always serializes");
    line.push(b'\n');
    stream.write_all(&line).map_err(io_error)?;

    let mut response = Vec::new();
    BufReader::new(&stream)
        .take(MAX_RESPONSE_LINE as u64 + 1)
        .read_until(b'\n', &mut response)
        .map_err(io_error)?;
    if response.is_empty() {
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
/// or `1h30m`, as [`vote::check_ttl`] allows.
pub fn parse_ttl(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text)
        .map_err(|error| error.to_string())
        .and_then(vote::check_ttl)
        .map_err(|error| format!("invalid ttl {text:?}: {error}"))
}

#[cfg(test)]
mod tests {
    use std::os::unix::net::UnixListener;

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
        assert_eq!(
            parse_ttl("366d").unwrap_err(),
            "invalid ttl \"366d\": must be at most 365 days"
        );
        assert!(
            parse_ttl("292000000000y")
                .unwrap_err()
                .starts_with("invalid ttl")
        );
    }
}
