//! The prompt voter: a person decides.
//!
//! Every request it votes on is put on a [`PromptBoard`] until answered or
//! withdrawn (when the vote's deadline passes). People answer through the
//! control socket (`pincer pending`, `pincer approve`, `pincer deny`; the
//! socket refuses callers inside agent cgroups) or, when `pincer run` has a
//! terminal, at the prompt it prints there.
//!
//! The terminal is the agent's too, so an answer typed there must name its
//! request by a code drawn at random for it and shown only by the prompt:
//! not in the request the socket lists, the audit log or anything else an
//! agent can read. Keystrokes an agent pushes into the terminal are refused
//! by the kernel (`TIOCSTI`), and a terminal that answers what a program
//! writes to it (a title or status report) sends back only what the agent
//! already knew; without the code neither answers anything. A prompt an
//! agent prints to imitate pincer's shows a code no request has, so the
//! answer a person types to it is refused and says so.

use std::{
    collections::BTreeMap,
    io::{BufRead, BufReader, Write},
    sync::{Arc, Mutex, PoisonError},
};

use pincer_model::{
    control::HumanAnswer,
    request::Request,
    vote::{Extent, Lifetime, Vote},
};
use tokio::sync::oneshot;

use crate::vote::{VoteFuture, Voter};

/// Characters of a request's code: lower-case letters and digits, less those
/// easily read as another (`0 o 1 l i`).
const CODE_ALPHABET: &[u8] = b"abcdefghjkmnpqrstuvwxyz23456789";
/// Characters in a request's code (about 25 bits).
const CODE_LEN: usize = 5;

/// The requests waiting for a person, by id.
#[derive(Default)]
pub struct PromptBoard {
    waiting: Mutex<BTreeMap<u64, Waiting>>,
    terminal: Mutex<Option<std::fs::File>>,
}

struct Waiting {
    request: Arc<Request>,
    answer: oneshot::Sender<HumanAnswer>,
    /// What a typed answer must name; `None` when no code could be drawn
    /// (then only the socket answers).
    code: Option<String>,
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
        let prompt = {
            let mut waiting = self.lock();
            let code = loop {
                match new_code() {
                    Some(code) if waiting.values().any(|w| w.code.as_ref() == Some(&code)) => {}
                    code => break code,
                }
            };
            let prompt = render(&request, code.as_deref());
            waiting.insert(
                request.id,
                Waiting {
                    request,
                    answer,
                    code,
                },
            );
            prompt
        };
        if let Some(terminal) = self.lock_terminal().as_mut() {
            // Best effort: an unwritable terminal leaves the socket.
            let _ = write!(terminal, "{prompt}");
        }
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
    /// (session) or `d` (deny), then the code the prompt showed with the
    /// request (`o k7qmx`). A line without a code, or with a code no waiting
    /// request has, answers nothing, and the terminal says so. Run it on a
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
            let Some(reply) = self.typed(&line) else {
                continue;
            };
            if let Some(terminal) = self.lock_terminal().as_mut() {
                let _ = writeln!(terminal, "pincer: {reply}");
            }
        }
    }

    /// Carries out one line typed at the terminal; what to tell the person,
    /// or `None` for a line that is no answer.
    fn typed(&self, line: &str) -> Option<String> {
        let mut words = line.split_whitespace();
        let (answer, done) = match words.next() {
            Some("o" | "once") => (HumanAnswer::Allow(Lifetime::Once), "allowed once"),
            Some("s" | "session") => (
                HumanAnswer::Allow(Lifetime::Session),
                "allowed for the session",
            ),
            Some("d" | "deny") => (HumanAnswer::Deny(None), "denied"),
            _ => return None,
        };
        let Some(code) = words.next() else {
            return Some(
                "nothing answered: type the answer and the code shown with the request".to_owned(),
            );
        };
        let code = code.to_ascii_lowercase();
        let id = self
            .lock()
            .iter()
            .find(|(_, w)| w.code.as_deref() == Some(code.as_str()))
            .map(|(&id, _)| id);
        let Some(id) = id else {
            return Some("nothing answered: no waiting request has that code".to_owned());
        };
        Some(match self.answer(id, answer) {
            Ok(()) => format!("request {id} {done}"),
            Err(message) => message,
        })
    }
}

/// A fresh code for a request, or `None` when the system has no randomness
/// to give.
fn new_code() -> Option<String> {
    let mut code = String::with_capacity(CODE_LEN);
    // Bytes from 248 up are skipped: 248 is the largest multiple of the
    // alphabet's 31 characters that fits, so every character is as likely.
    let limit = 256 - 256 % CODE_ALPHABET.len();
    while code.len() < CODE_LEN {
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes).ok()?;
        for &byte in &bytes {
            if usize::from(byte) < limit && code.len() < CODE_LEN {
                code.push(char::from(
                    CODE_ALPHABET[usize::from(byte) % CODE_ALPHABET.len()],
                ));
            }
        }
    }
    Some(code)
}

/// The prompt shown on the terminal.
fn render(request: &Request, code: Option<&str>) -> String {
    let answer = match code {
        Some(code) => {
            format!("[o]nce / [s]ession / [d]eny, with the code {code} (for example: o {code})? ")
        }
        None => format!(
            "no code could be drawn: answer with `pincer approve {id}` or `pincer deny {id}`",
            id = request.id
        ),
    };
    let owner = match &request.owner_only {
        Some(why) => format!("\n        {why}"),
        None => String::new(),
    };
    let taint = if request.taint.is_empty() {
        String::new()
    } else {
        format!("\n        this agent {}", request.taint.join(", then "))
    };
    let discovery = match &request.discovery {
        Some(why) => format!("\n        not discovered: {why}"),
        None => String::new(),
    };
    format!(
        "\npincer: request {id}: {comm} (pid {pid}) wants to {ops} {path}\n        {why}{owner}{taint}{discovery}\n        {answer}",
        id = request.id,
        comm = request.comm,
        pid = request.pid,
        ops = request.operation.join("+"),
        path = request.path,
        why = request.why,
    )
}

/// What the control socket's handlers (`pincer run`'s, the daemon's) ask
/// of the board.
impl PromptBoard {
    /// The parked requests waiting for a person.
    pub fn pending(&self) -> Vec<Request> {
        self.lock()
            .values()
            .map(|w| Request::clone(&w.request))
            .collect()
    }

    /// Delivers a person's answer to request `id`; the error (no such
    /// pending request, or one decided meanwhile) is shown to them as is.
    pub fn answer(&self, id: u64, answer: HumanAnswer) -> Result<(), String> {
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
    /// Asks only about what is the owner's alone: a mission that does not
    /// list the prompt still has its owner answer those.
    owner_only: bool,
}

impl PromptVoter {
    /// A voter posting on `board`.
    pub fn new(board: Arc<PromptBoard>) -> Self {
        Self {
            board,
            owner_only: false,
        }
    }

    /// A voter posting on `board` only the requests that are the owner's
    /// alone ([`Request::owner_only`]), and abstaining on the rest.
    pub fn owner_only(board: Arc<PromptBoard>) -> Self {
        Self {
            board,
            owner_only: true,
        }
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

/// The abstention of the prompt a mission did not list, on a request that
/// is not the owner's alone.
fn not_the_owners() -> Vote {
    Vote::Abstain {
        reason: "asks the owner only what is the owner's alone".to_owned(),
    }
}

impl Voter for PromptVoter {
    fn name(&self) -> &'static str {
        "prompt"
    }

    fn owner(&self) -> bool {
        true
    }

    /// The prompt the mission did not list abstains at once on what is not
    /// the owner's alone: the mission's own voters then decide it while the
    /// parked record is handled, as they would without it.
    fn vote_now(&self, request: &Request) -> Option<Vote> {
        (self.owner_only && request.owner_only.is_none()).then(not_the_owners)
    }

    fn vote(&self, request: Arc<Request>) -> VoteFuture {
        if self.owner_only && request.owner_only.is_none() {
            return Box::pin(async { not_the_owners() });
        }
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

    #[test]
    fn the_owners_prompt_abstains_at_once_on_what_is_not_the_owners() {
        let board = PromptBoard::new(None);
        let owners = PromptVoter::owner_only(Arc::clone(&board));
        assert!(matches!(
            owners.vote_now(&request(1)),
            Some(Vote::Abstain { .. })
        ));
        let mut theirs = Request::example(2, "/p/CLAUDE.md");
        theirs.owner_only = Some(pincer_model::request::OWNER_ONLY_POLICY.into());
        assert!(owners.vote_now(&theirs).is_none(), "the owner is asked");
        // A prompt the mission lists asks about everything.
        assert!(PromptVoter::new(board).vote_now(&request(3)).is_none());
    }

    /// A prompt vote on request `id`, once it is on the board.
    async fn posted(board: &Arc<PromptBoard>, id: u64) -> tokio::task::JoinHandle<Vote> {
        let voter = PromptVoter::new(Arc::clone(board));
        let vote = tokio::spawn(voter.vote(request(id)));
        while !board.pending().iter().any(|r| r.id == id) {
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
    fn the_prompt_names_who_what_and_why_and_the_code() {
        let text = render(&request(5), Some("k7qmx"));
        assert!(
            text.contains("request 5: cat (pid 100) wants to read /home/a/.ssh/id"),
            "{text}"
        );
        assert!(text.contains("no grant covers it"));
        assert!(text.contains("with the code k7qmx (for example: o k7qmx)"));
        let text = render(&request(5), None);
        assert!(text.contains("answer with `pincer approve 5` or `pincer deny 5`"));
    }

    /// The code the board drew for request `id`.
    fn code_of(board: &PromptBoard, id: u64) -> String {
        board.lock()[&id].code.clone().expect("a code was drawn")
    }

    #[tokio::test]
    async fn a_typed_answer_needs_the_code_of_its_request() {
        let board = PromptBoard::new(None);
        let first = posted(&board, 7).await;
        let second = posted(&board, 8).await;
        assert_eq!(board.pending().len(), 2);
        let (code7, code8) = (code_of(&board, 7), code_of(&board, 8));
        assert_ne!(code7, code8);
        // What an agent could type, or make the terminal type: an answer
        // alone, a request id, a guess.
        for line in ["o\n", "s 7\n", "o 8\n", "d zzzzz\n"] {
            let reply = board.typed(line).expect("an answer");
            assert!(reply.starts_with("nothing answered"), "{line:?}: {reply}");
        }
        assert_eq!(board.typed("hello\n"), None, "not an answer");
        assert_eq!(board.pending().len(), 2, "nothing was answered");
        let upper = code8.to_ascii_uppercase();
        assert_eq!(
            board.typed(&format!("s {upper}\n")).as_deref(),
            Some("request 8 allowed for the session")
        );
        assert_eq!(
            board.typed(&format!("d {code7}\n")).as_deref(),
            Some("request 7 denied")
        );
        assert_eq!(
            second.await.unwrap(),
            Vote::Allow {
                lifetime: Lifetime::Session,
                extent: Extent::File
            }
        );
        assert!(matches!(first.await.unwrap(), Vote::Deny { .. }));
        assert!(board.pending().is_empty());
    }

    #[test]
    fn codes_are_drawn_from_the_alphabet_and_differ() {
        let codes: Vec<String> = (0..64).map(|_| new_code().unwrap()).collect();
        for code in &codes {
            assert_eq!(code.len(), CODE_LEN);
            assert!(code.bytes().all(|b| CODE_ALPHABET.contains(&b)), "{code}");
        }
        let mut distinct = codes.clone();
        distinct.sort();
        distinct.dedup();
        // 64 draws from 31^5 codes: a repeat is about one chance in 14,000.
        assert!(distinct.len() >= 63, "{codes:?}");
    }

    #[test]
    fn codes_never_reach_the_listed_requests() {
        let board = PromptBoard::new(None);
        let _receiver = board.post(request(4));
        let code = code_of(&board, 4);
        let listed = serde_json::to_string(&board.pending()).unwrap();
        assert!(!listed.contains(&code), "{listed}");
    }
}
