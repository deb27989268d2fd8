//! The prompt voter: a person decides.
//!
//! Every request it votes on is put on a [`PromptBoard`] until answered or
//! withdrawn (when the vote's deadline passes). People answer through the
//! control socket (`pincer pending`, `pincer approve`, `pincer deny`; the
//! socket refuses callers inside agent cgroups) or, when `pincer run` has a
//! terminal, at the prompt it prints there.

use std::{
    collections::BTreeMap,
    io::{BufRead, BufReader, Write},
    sync::{Arc, Mutex, PoisonError},
};

use tokio::sync::oneshot;

use crate::{
    control::{ControlHandler, HumanAnswer},
    request::Request,
    vote::{Extent, Lifetime, Vote, VoteFuture, Voter},
};

/// The requests waiting for a person, by id.
#[derive(Default)]
pub struct PromptBoard {
    waiting: Mutex<BTreeMap<u64, Waiting>>,
    terminal: Mutex<Option<std::fs::File>>,
}

struct Waiting {
    request: Arc<Request>,
    answer: oneshot::Sender<HumanAnswer>,
}

impl PromptBoard {
    /// A board; with `terminal`, requests are also shown there and answered
    /// by typing (see [`PromptBoard::read_terminal`]).
    pub fn new(terminal: Option<std::fs::File>) -> Arc<Self> {
        Arc::new(Self {
            waiting: Mutex::default(),
            terminal: Mutex::new(terminal),
        })
    }

    fn post(&self, request: Arc<Request>) -> oneshot::Receiver<HumanAnswer> {
        let (answer, receiver) = oneshot::channel();
        if let Some(terminal) = self.lock_terminal().as_mut() {
            // Best effort: an unwritable terminal leaves the socket.
            let _ = write!(terminal, "{}", render(&request));
        }
        self.lock().insert(request.id, Waiting { request, answer });
        receiver
    }

    fn withdraw(&self, id: u64) {
        self.lock().remove(&id);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Waiting>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lock_terminal(&self) -> std::sync::MutexGuard<'_, Option<std::fs::File>> {
        self.terminal.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Reads answers typed on the terminal, forever: `o` (once), `s`
    /// (session) or `d` (deny), optionally followed by a request id; without
    /// an id the answer goes to the oldest waiting request. Run it on a
    /// thread of its own: it blocks.
    ///
    /// The terminal is the agent's too: it is read only while a request is
    /// waiting, so the agent's own keystrokes are not taken from it.
    pub fn read_terminal(self: Arc<Self>, input: std::fs::File) {
        use std::os::fd::AsFd;
        let mut lines = BufReader::new(input);
        loop {
            if self.lock().is_empty() {
                std::thread::sleep(std::time::Duration::from_millis(100));
                continue;
            }
            let mut poll = [nix::poll::PollFd::new(
                lines.get_ref().as_fd(),
                nix::poll::PollFlags::POLLIN,
            )];
            match nix::poll::poll(&mut poll, nix::poll::PollTimeout::from(100u16)) {
                Ok(0) => continue,
                Ok(_) => {}
                Err(_) => return,
            }
            let mut line = String::new();
            match lines.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            let mut words = line.split_whitespace();
            let answer = match words.next() {
                Some("o" | "once") => HumanAnswer::Allow(Lifetime::Once),
                Some("s" | "session") => HumanAnswer::Allow(Lifetime::Session),
                Some("d" | "deny") => HumanAnswer::Deny(None),
                _ => continue,
            };
            let id = words
                .next()
                .and_then(|w| w.parse().ok())
                .or_else(|| self.lock().keys().next().copied());
            let reply = match id {
                Some(id) => self.answer(id, answer),
                None => Err("no request is waiting".to_owned()),
            };
            if let (Err(message), Some(terminal)) = (reply, self.lock_terminal().as_mut()) {
                let _ = writeln!(terminal, "pincer: {message}");
            }
        }
    }
}

/// The prompt shown on the terminal.
fn render(request: &Request) -> String {
    format!(
        "\npincer: request {id}: {comm} (pid {pid}) wants to {ops} {path}\n        {why}\n        [o]nce / [s]ession / [d]eny ({id})? ",
        id = request.id,
        comm = request.comm,
        pid = request.pid,
        ops = request.operation.join("+"),
        path = request.path,
        why = request.why,
    )
}

impl ControlHandler for PromptBoard {
    fn pending(&self) -> Vec<Request> {
        self.lock()
            .values()
            .map(|w| Request::clone(&w.request))
            .collect()
    }

    fn answer(&self, id: u64, answer: HumanAnswer) -> Result<(), String> {
        let waiting = self
            .lock()
            .remove(&id)
            .ok_or_else(|| format!("no pending request {id}"))?;
        waiting
            .answer
            .send(answer)
            .map_err(|_| format!("request {id} was decided meanwhile"))
    }
}

/// The voter that waits for a person's answer.
pub struct PromptVoter {
    board: Arc<PromptBoard>,
}

impl PromptVoter {
    /// A voter posting on `board`.
    pub fn new(board: Arc<PromptBoard>) -> Self {
        Self { board }
    }
}

/// Withdraws the request from the board when the vote ends either way
/// (answered, or dropped at the deadline).
struct Posted {
    board: Arc<PromptBoard>,
    id: u64,
}

impl Drop for Posted {
    fn drop(&mut self) {
        self.board.withdraw(self.id);
    }
}

impl Voter for PromptVoter {
    fn name(&self) -> &'static str {
        "prompt"
    }

    fn vote(&self, request: Arc<Request>) -> VoteFuture {
        let board = Arc::clone(&self.board);
        Box::pin(async move {
            let id = request.id;
            let answer = board.post(request);
            let _posted = Posted { board, id };
            match answer.await {
                Ok(HumanAnswer::Allow(lifetime)) => Vote::Allow {
                    lifetime,
                    extent: Extent::File,
                },
                Ok(HumanAnswer::Deny(reason)) => Vote::Deny {
                    reason: reason.unwrap_or_else(|| "denied by a person".to_owned()),
                },
                Err(_) => Vote::Abstain {
                    reason: "the prompt was withdrawn".to_owned(),
                },
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(id: u64) -> Arc<Request> {
        Arc::new(Request::example(id, "/home/a/.ssh/id"))
    }

    /// A prompt vote on request `id`, once it is on the board.
    async fn posted(board: &Arc<PromptBoard>, id: u64) -> tokio::task::JoinHandle<Vote> {
        let voter = PromptVoter::new(Arc::clone(board));
        let vote = tokio::spawn(voter.vote(request(id)));
        while board.pending().is_empty() {
            tokio::task::yield_now().await;
        }
        vote
    }

    #[tokio::test]
    async fn an_answer_becomes_the_vote_and_leaves_the_board() {
        let board = PromptBoard::new(None);
        let vote = posted(&board, 7).await;
        assert_eq!(board.pending()[0].id, 7);
        assert_eq!(
            board.answer(8, HumanAnswer::Deny(None)),
            Err("no pending request 8".into())
        );
        board
            .answer(7, HumanAnswer::Allow(Lifetime::Session))
            .unwrap();
        assert_eq!(
            vote.await.unwrap(),
            Vote::Allow {
                lifetime: Lifetime::Session,
                extent: Extent::File
            }
        );
        assert!(board.pending().is_empty());
    }

    #[tokio::test]
    async fn a_dropped_vote_withdraws_its_request() {
        let board = PromptBoard::new(None);
        let vote = posted(&board, 3).await;
        vote.abort();
        let _ = vote.await;
        assert!(board.pending().is_empty());
        assert!(board.answer(3, HumanAnswer::Deny(None)).is_err());
    }

    #[test]
    fn the_prompt_names_who_what_and_why() {
        let text = render(&request(5));
        assert!(
            text.contains("request 5: cat (pid 100) wants to read /home/a/.ssh/id"),
            "{text}"
        );
        assert!(text.contains("no grant covers it"));
    }
}
