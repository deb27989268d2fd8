//! What the approval service remembers, in memory only: the requests the
//! nodes asked about, the operators' decisions, and the nonces already
//! used. Every part is bounded; nothing survives the service's restart (a
//! node still parking a request asks again).
//!
//! Times are passed in, so that expiry is tested without waiting.

use std::{
    collections::{HashMap, VecDeque},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use pincer_model::request::Request;
use tokio::sync::oneshot;

use super::{Decision, PendingRequest};

/// Connections that may wait on one request at once: a node asks once, and
/// again after a restart; more than a few are old connections nobody reads.
const MAX_WAITERS: usize = 4;

/// What makes two asks the same request: the node, its request id and the
/// object and access. Ids restart when a node loads its programs anew, so
/// the id alone could meet another request.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key {
    node: String,
    id: u64,
    cgroup: u64,
    path: String,
    operation: Vec<String>,
    hook: String,
}

impl Key {
    fn of(node: &str, request: &Request) -> Self {
        Self {
            node: node.to_owned(),
            id: request.id,
            cgroup: request.cgroup,
            path: request.path.clone(),
            operation: request.operation.iter().map(ToString::to_string).collect(),
            hook: request.hook.to_string(),
        }
    }
}

struct Entry {
    key: Key,
    request: Request,
    /// Unix seconds of the first ask, for the operators' "age".
    first_asked: u64,
    /// The connections waiting, each with its own number.
    waiters: VecDeque<(u64, oneshot::Sender<Decision>)>,
    decision: Option<Decision>,
    /// When the entry goes, once nobody waits on it.
    expires: Instant,
}

/// The outcome of an ask.
pub(crate) enum Asked {
    /// Decided already: answer at once.
    Decided(Decision),
    /// Wait for the decision on `receiver`; call [`Board::leave`] with
    /// `entry` and `waiter` when done.
    Wait {
        entry: u64,
        waiter: u64,
        receiver: oneshot::Receiver<Decision>,
    },
    /// The table is full.
    Full,
}

/// Why a decision was not taken.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecideError {
    /// No such request (or it expired).
    #[error("no request {id} is pending")]
    Unknown {
        /// The id asked for.
        id: u64,
    },
    /// Decided before.
    #[error("request {id} was decided already")]
    Decided {
        /// The id asked for.
        id: u64,
    },
}

/// The pending requests, decisions and used nonces.
pub(crate) struct Board {
    entries: HashMap<u64, Entry>,
    by_key: HashMap<Key, u64>,
    next_id: u64,
    next_waiter: u64,
    nonces: HashMap<String, u64>,
    keep: Duration,
    max_pending: usize,
    max_nonces: usize,
}

impl Board {
    pub(crate) fn new(keep: Duration, max_pending: usize) -> Self {
        Self {
            entries: HashMap::new(),
            by_key: HashMap::new(),
            next_id: 1,
            next_waiter: 0,
            nonces: HashMap::new(),
            keep,
            max_pending,
            // Every held request, and a few asks per request and minute.
            max_nonces: max_pending.saturating_mul(64).max(4096),
        }
    }

    /// Records a verified request's nonce, valid until unix second
    /// `until`; false when it was used before (a replay) or when the
    /// memory of nonces is full (refusing is the safe side: forgetting one
    /// would let it be replayed).
    pub(crate) fn use_nonce(&mut self, nonce: &str, now_unix: u64, until: u64) -> NonceUse {
        if self.nonces.contains_key(nonce) {
            return NonceUse::Replayed;
        }
        if self.nonces.len() >= self.max_nonces {
            // A nonce past its window is refused by its timestamp anyway.
            self.nonces.retain(|_, valid| *valid >= now_unix);
            if self.nonces.len() >= self.max_nonces {
                return NonceUse::Full;
            }
        }
        self.nonces.insert(nonce.to_owned(), until);
        NonceUse::Fresh
    }

    /// A node asks about `request`: a new entry, or the one it asked about
    /// before (after a restart, with a new nonce).
    pub(crate) fn ask(&mut self, node: &str, request: Request, now: Instant) -> Asked {
        self.prune(now);
        let key = Key::of(node, &request);
        let id = match self.by_key.get(&key) {
            Some(&id) => id,
            None => {
                if self.pending_count() >= self.max_pending {
                    return Asked::Full;
                }
                let id = self.next_id;
                self.next_id += 1;
                self.by_key.insert(key.clone(), id);
                self.entries.insert(
                    id,
                    Entry {
                        key,
                        request,
                        first_asked: unix_now(),
                        waiters: VecDeque::new(),
                        decision: None,
                        expires: now + self.keep,
                    },
                );
                id
            }
        };
        let entry = self.entries.get_mut(&id).expect("indexed entries exist");
        if let Some(decision) = &entry.decision {
            return Asked::Decided(decision.clone());
        }
        if entry.waiters.len() >= MAX_WAITERS {
            // Dropping its sender tells the oldest to give up.
            entry.waiters.pop_front();
        }
        let (sender, receiver) = oneshot::channel();
        let waiter = self.next_waiter;
        self.next_waiter += 1;
        entry.waiters.push_back((waiter, sender));
        Asked::Wait {
            entry: id,
            waiter,
            receiver,
        }
    }

    /// A connection stopped waiting (answered, timed out or closed): the
    /// entry stays for `keep`, for the node to ask again.
    pub(crate) fn leave(&mut self, entry: u64, waiter: u64, now: Instant) {
        if let Some(entry) = self.entries.get_mut(&entry) {
            entry.waiters.retain(|(number, _)| *number != waiter);
            if entry.waiters.is_empty() && entry.decision.is_none() {
                entry.expires = now + self.keep;
            }
        }
    }

    /// An operator's decision: every waiting connection gets it, and it is
    /// kept for `keep` for a node that asks again.
    pub(crate) fn decide(
        &mut self,
        id: u64,
        decision: Decision,
        now: Instant,
    ) -> Result<(String, u64), DecideError> {
        self.prune(now);
        let entry = self
            .entries
            .get_mut(&id)
            .ok_or(DecideError::Unknown { id })?;
        if entry.decision.is_some() {
            return Err(DecideError::Decided { id });
        }
        for (_, sender) in entry.waiters.drain(..) {
            // A connection that closed meanwhile is not waiting any more.
            let _ = sender.send(decision.clone());
        }
        entry.decision = Some(decision);
        entry.expires = now + self.keep;
        Ok((entry.key.node.clone(), entry.request.id))
    }

    /// The requests not decided yet, oldest first.
    pub(crate) fn pending(&mut self, now: Instant) -> Vec<PendingRequest> {
        self.prune(now);
        let unix = unix_now();
        let mut list: Vec<PendingRequest> = self
            .entries
            .iter()
            .filter(|(_, entry)| entry.decision.is_none())
            .map(|(&id, entry)| PendingRequest {
                id,
                node: entry.key.node.clone(),
                age_seconds: unix.saturating_sub(entry.first_asked),
                waiting: !entry.waiters.is_empty(),
                request: entry.request.clone(),
            })
            .collect();
        list.sort_by_key(|pending| pending.id);
        list
    }

    fn pending_count(&self) -> usize {
        self.entries
            .values()
            .filter(|entry| entry.decision.is_none())
            .count()
    }

    /// Forgets what expired and that nobody waits on.
    fn prune(&mut self, now: Instant) {
        let by_key = &mut self.by_key;
        self.entries.retain(|_, entry| {
            // A waiter whose connection is gone has dropped its receiver.
            entry.waiters.retain(|(_, sender)| !sender.is_closed());
            let keep = !entry.waiters.is_empty() || entry.expires > now;
            if !keep {
                by_key.remove(&entry.key);
            }
            keep
        });
    }
}

/// Whether a nonce may be used.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum NonceUse {
    /// Never seen: recorded now.
    Fresh,
    /// Seen before.
    Replayed,
    /// Too many nonces in their window to remember one more.
    Full,
}

pub(crate) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}

#[cfg(test)]
mod tests {
    use pincer_model::vote::{Extent, Lifetime};

    use super::*;

    fn allow() -> Decision {
        Decision::Allow {
            lifetime: Lifetime::Session,
            extent: Extent::File,
        }
    }

    #[test]
    fn a_re_ask_is_the_same_entry_and_gets_the_decision() {
        let now = Instant::now();
        let mut board = Board::new(Duration::from_secs(60), 8);
        let request = Request::example(7, "/x");
        let Asked::Wait {
            entry,
            mut receiver,
            ..
        } = board.ask("a", request.clone(), now)
        else {
            panic!("not waiting")
        };
        // The node restarted: its connection is gone, it asks again.
        drop(receiver);
        let Asked::Wait {
            entry: again,
            receiver: second,
            ..
        } = board.ask("a", request.clone(), now)
        else {
            panic!("not waiting")
        };
        assert_eq!(entry, again);
        assert_eq!(board.pending(now).len(), 1);
        // Another node's request 7 is another entry.
        assert!(matches!(
            board.ask("b", request.clone(), now),
            Asked::Wait { entry: 2, .. }
        ));
        board.decide(entry, allow(), now).unwrap();
        receiver = second;
        assert_eq!(receiver.try_recv().unwrap(), allow());
        // Asked again after the decision: answered at once, for `keep`.
        assert!(matches!(board.ask("a", request.clone(), now), Asked::Decided(d) if d == allow()));
        assert_eq!(
            board.decide(entry, allow(), now),
            Err(DecideError::Decided { id: entry })
        );
        let later = now + Duration::from_secs(61);
        assert!(matches!(
            board.ask("a", request, later),
            Asked::Wait { entry: 3, .. }
        ));
        assert_eq!(
            board.decide(1, allow(), later),
            Err(DecideError::Unknown { id: 1 })
        );
    }

    #[test]
    fn the_table_and_the_nonces_are_bounded() {
        let now = Instant::now();
        let mut board = Board::new(Duration::from_secs(60), 2);
        let mut held = Vec::new();
        for id in 0..2 {
            held.push(board.ask("a", Request::example(id, "/x"), now));
        }
        assert!(matches!(
            board.ask("a", Request::example(9, "/x"), now),
            Asked::Full
        ));
        assert_eq!(board.use_nonce("n", 100, 130), NonceUse::Fresh);
        assert_eq!(board.use_nonce("n", 100, 130), NonceUse::Replayed);
        for n in 0..board.max_nonces - 1 {
            assert_eq!(board.use_nonce(&n.to_string(), 100, 130), NonceUse::Fresh);
        }
        assert_eq!(board.use_nonce("x", 100, 130), NonceUse::Full);
        // Past their window they are forgotten (and refused by time).
        assert_eq!(board.use_nonce("x", 131, 160), NonceUse::Fresh);
    }
}
