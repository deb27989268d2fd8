//! The control socket of `pincer run`: people answer parked requests on
//! it, and the owner reads and reconsiders the mission's asset nodes
//! (`pincer mission status|admit|drop`), which the run's loop carries out
//! on its twin.

use std::sync::Arc;

use pincer_model::{
    control::{ControlRequest, ControlResponse, HumanAnswer},
    request::Request,
};
use tokio::sync::{mpsc, oneshot};

use crate::{
    control::{
        ControlHandler,
        server::{Submitted, hand_over},
    },
    voters::prompt::PromptBoard,
};

/// The socket's side of `pincer run`.
pub(super) struct RunControl {
    pub(super) board: Arc<PromptBoard>,
    pub(super) commands: mpsc::UnboundedSender<Submitted>,
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
        hand_over(&self.commands, request, caller, || ControlResponse::Error {
            message: "the run is ending".into(),
        })
    }
}
