//! The control socket's two ends: the [`server`] a `pincer run` or
//! `pincer daemon` listens with, and the [`client`] people (`pincer
//! pending`, `approve`, `deny`) and `pincer run` (`register`) call it with.
//! The protocol, every message of it, is [`pincer_model::control`].
//!
//! # Who may answer
//!
//! The server reads the peer's credentials from the socket. It refuses every
//! request (`pending` too: the list shows what the agent is trying to reach)
//! from a process that runs as a uid other than root or the server's own, or
//! inside any agent cgroup, so an agent cannot approve its own requests. A
//! refused connection gets one `error` response and is closed.

pub mod client;
pub mod server;

use std::{io, path::PathBuf, time::Duration};

pub use self::{
    client::call,
    server::{ControlHandler, ControlServer},
};

/// How long the client waits to connect, and then for each read or write.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// An error of the control socket, on either side.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// The socket's directory could not be created.
    #[error("cannot create directory {}", .path.display())]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// A live server already answers on the socket.
    #[error("another pincer is already listening on {}", .path.display())]
    InUse {
        /// The socket.
        path: PathBuf,
    },
    /// Something other than a socket sits where the socket should be.
    #[error("{} exists and is not a socket", .path.display())]
    NotASocket {
        /// The path.
        path: PathBuf,
    },
    /// Whether a server is listening could not be determined.
    #[error("cannot check whether a pincer listens on {}", .path.display())]
    Probe {
        /// The socket.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// A socket left by a server that is gone could not be removed.
    #[error("cannot remove stale socket {}", .path.display())]
    RemoveStale {
        /// The socket.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// The socket could not be created or set up.
    #[error("cannot listen on {}", .path.display())]
    Bind {
        /// The socket.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// The socket's permissions could not be restricted.
    #[error("cannot restrict the permissions of {}", .path.display())]
    Permissions {
        /// The socket.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// Nothing listens on the socket: no `pincer run` is active there.
    #[error("no pincer is listening on {}", .path.display())]
    NotListening {
        /// The socket.
        path: PathBuf,
    },
    /// Connecting failed for another reason (such as permissions).
    #[error("cannot connect to {}", .path.display())]
    Connect {
        /// The socket.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// The server did not answer in time.
    #[error("no answer from {} within {}", .path.display(), humantime::format_duration(*.timeout))]
    Timeout {
        /// The socket.
        path: PathBuf,
        /// How long the client waited.
        timeout: Duration,
    },
    /// Sending the request or reading the response failed.
    #[error("cannot talk to {}", .path.display())]
    Io {
        /// The socket.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// The socket, its directory or the process serving it belongs to
    /// someone pincer must not take answers from.
    #[error("{} is not to be trusted: {why}", .path.display())]
    Untrusted {
        /// The socket.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// The server closed the connection without a response.
    #[error("{} closed the connection without answering", .path.display())]
    Closed {
        /// The socket.
        path: PathBuf,
    },
    /// The response is longer than the client accepts.
    #[error("the answer from {} is longer than {limit} bytes", .path.display())]
    ResponseTooLong {
        /// The socket.
        path: PathBuf,
        /// The limit.
        limit: usize,
    },
    /// The response is not valid JSON of the protocol.
    #[error("malformed answer from {}", .path.display())]
    Malformed {
        /// The socket.
        path: PathBuf,
        /// The error.
        #[source]
        source: serde_json::Error,
    },
}
