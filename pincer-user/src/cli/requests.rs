//! `pincer pending`, `approve` and `deny`: a person answers parked requests.

use std::path::Path;

use pincer_model::{
    control::{ControlRequest, ControlResponse},
    vote::Lifetime,
};

use super::{ask, print_list, unexpected};

/// Lists the parked requests waiting for a person.
pub(super) fn pending(socket: &Path, json: bool) -> anyhow::Result<()> {
    print_list(
        socket,
        &ControlRequest::Pending,
        json,
        "no request is waiting",
        pick!(Pending { requests }),
        |request| println!("{request}"),
    )
}

/// Allows a parked request for `lifetime`.
pub(super) fn approve(socket: &Path, id: u64, lifetime: Lifetime) -> anyhow::Result<()> {
    done(socket, &ControlRequest::Approve { id, lifetime })
}

/// Refuses a parked request.
pub(super) fn deny(socket: &Path, id: u64, reason: Option<String>) -> anyhow::Result<()> {
    done(socket, &ControlRequest::Deny { id, reason })
}

/// Sends a request answered by `ok` and prints what was done.
pub(super) fn done(socket: &Path, request: &ControlRequest) -> anyhow::Result<()> {
    match ask(socket, request)? {
        ControlResponse::Ok { message } => {
            println!("{message}");
            Ok(())
        }
        other => Err(unexpected(socket, &other)),
    }
}
