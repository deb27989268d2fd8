//! The control socket of `pincer run`: people answer parked requests on
//! it, and the owner reads and reconsiders the mission's asset nodes
//! (`pincer mission status|admit|drop`), which the run's loop carries out
//! on its twin.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use crate::{
    control::{ControlHandler, ControlRequest, ControlResponse, HumanAnswer},
    request::Request,
    voters::prompt::PromptBoard,
};

/// An asset request for the run's loop, with where to answer.
pub(super) struct Command {
    pub(super) request: ControlRequest,
    pub(super) caller: u32,
    pub(super) answer: oneshot::Sender<ControlResponse>,
}

/// The socket's side of `pincer run`.
pub(super) struct RunControl {
    pub(super) board: Arc<PromptBoard>,
    pub(super) commands: mpsc::UnboundedSender<Command>,
}

impl ControlHandler for RunControl {
    fn pending(&self) -> Vec<Request> {
        self.board.pending()
    }

    fn answer(&self, id: u64, answer: HumanAnswer) -> Result<(), String> {
        self.board.answer(id, answer)
    }

    fn submit(
        &self,
        request: ControlRequest,
        caller: u32,
    ) -> Result<oneshot::Receiver<ControlResponse>, ControlResponse> {
        if !matches!(
            request,
            ControlRequest::Assets { .. } | ControlRequest::Asset { .. }
        ) {
            return Err(ControlResponse::Error {
                message: "this socket belongs to a `pincer run`; register, unregister, revoke, \
                          map and derive need `pincer daemon`"
                    .into(),
            });
        }
        let (answer, receiver) = oneshot::channel();
        self.commands
            .send(Command {
                request,
                caller,
                answer,
            })
            .map_err(|_| ControlResponse::Error {
                message: "the run is ending".into(),
            })?;
        Ok(receiver)
    }
}
