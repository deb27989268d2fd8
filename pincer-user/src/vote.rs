//! How the votes on a parked request are gathered and combine into a
//! verdict.
//!
//! Every voter answers `Allow { lifetime, extent }`, `Deny { reason }` or
//! `Abstain` within the mission's deadline. A deny overrides any allow; a
//! voter that does not answer in time abstains; when nobody allows, the
//! mission's default applies (deny unless configured). An allow is clamped to
//! the mission's caps: no voter can grant more than the request asked for and
//! the mission permits.
//!
//! Voters that know their answer at once (the mission's rules) are asked
//! first, synchronously ([`begin`]): when their answers decide the request (a
//! deny, or nobody else to ask) the verdict needs no task, timer or channel.
//! The others are waited for ([`PendingVote::finish`]) under the same rules.

use std::{future::Future, pin::Pin, sync::Arc};

use pincer_model::{
    request::Request,
    vote::{Ballot, DefaultVerdict, Extent, Lifetime, Outcome, Policy, Vote},
};

/// A future that yields a vote.
pub type VoteFuture = Pin<Box<dyn Future<Output = Vote> + Send + 'static>>;

/// Something that votes on parked requests.
pub trait Voter: Send + Sync {
    /// The voter's name in missions and audit lines (`mission`, `prompt`,
    /// `webhook`).
    fn name(&self) -> &'static str;

    /// The vote on a request when the voter has it at once, without waiting
    /// for anything (rules it holds); `None` when it must be waited for
    /// through [`Voter::vote`]. A voter that answers here answers the same
    /// through [`Voter::vote`].
    fn vote_now(&self, request: &Request) -> Option<Vote> {
        let _ = request;
        None
    }

    /// Votes on a request. The caller enforces the deadline; a voter may also
    /// give up earlier by abstaining.
    fn vote(&self, request: Arc<Request>) -> VoteFuture;

    /// Whether the voter speaks for the owner (a person at the prompt or
    /// the control socket, a webhook the configuration marks as the
    /// owner's): only such a voter allows a request that is the owner's
    /// alone ([`Request::owner_only`]).
    fn owner(&self) -> bool {
        false
    }
}

/// Runs every voter on a request and combines the votes.
///
/// The verdict is reached when every voter has answered, or at the deadline.
/// A deny decides at once and overrides any allow. A voter still silent at
/// the deadline counts as the mission's default. Allows combine to the
/// narrowest of them, then are capped by the policy. When nobody allowed or
/// denied (all abstained), the mission's default applies.
///
/// A request that is the owner's alone ([`Request::owner_only`]) counts
/// only the owner's voters' allows (the others' become abstentions, their
/// denials still deny), is denied when nobody allows in time whatever the
/// mission's default, and an allow covers the object itself; with no
/// owner's voter at all it is denied at once.
pub async fn collect(voters: &[Arc<dyn Voter>], request: Arc<Request>, policy: &Policy) -> Outcome {
    match begin(voters, &request, policy) {
        Ok(outcome) => outcome,
        Err(pending) => pending.finish(request, policy).await,
    }
}

/// The policy a request is decided under: a request that is the owner's
/// alone is denied when nobody allows in time, whatever the mission's
/// default, and its allow covers the object itself.
fn policy_for(request: &Request, policy: &Policy) -> Policy {
    if request.owner_only.is_some() {
        Policy {
            default: DefaultVerdict::Deny,
            max_extent: Extent::File,
            ..policy.clone()
        }
    } else {
        policy.clone()
    }
}

/// A voter's vote as counted: on a request that is the owner's alone, an
/// allow from a voter that does not speak for the owner is an abstention
/// (its denial still denies).
fn counted(owner_only: bool, owner: bool, vote: Vote) -> Vote {
    match vote {
        Vote::Allow { .. } if owner_only && !owner => Vote::Abstain {
            reason: "only the owner may allow this".to_owned(),
        },
        vote => vote,
    }
}

/// Starts the vote on a request with the voters that answer at once
/// ([`Voter::vote_now`]), in their order. Returns the verdict when their
/// answers decide it: one of them denied (a deny overrides whatever the
/// others would say), or every voter answered. Otherwise returns the vote
/// to finish with the voters that must be waited for.
///
/// An answer given at once is in before any deadline (a deadline is longer
/// than zero), so the verdict is the one waiting for it would reach.
pub fn begin(
    voters: &[Arc<dyn Voter>],
    request: &Request,
    policy: &Policy,
) -> Result<Outcome, PendingVote> {
    let owner_only = request.owner_only.is_some();
    let policy = &policy_for(request, policy);
    if owner_only && !voters.iter().any(|voter| voter.owner()) {
        return Ok(Outcome {
            allow: None,
            decided_by: "owner".to_owned(),
            reason: "only the owner may allow this, and no voter speaks for the owner".to_owned(),
            ballots: Vec::new(),
        });
    }
    let mut ballots = Vec::new();
    let mut waiting = Vec::new();
    for voter in voters {
        match voter.vote_now(request) {
            Some(vote) => {
                let vote = counted(owner_only, voter.owner(), vote);
                let deny = matches!(vote, Vote::Deny { .. });
                ballots.push(Ballot {
                    voter: voter.name(),
                    vote,
                });
                if deny {
                    return Ok(combine(ballots, &[], policy));
                }
            }
            None => waiting.push(Arc::clone(voter)),
        }
    }
    if waiting.is_empty() {
        return Ok(combine(ballots, &[], policy));
    }
    Err(PendingVote { ballots, waiting })
}

/// A vote [`begin`] could not decide: the ballots of the voters that
/// answered at once, and the voters still to hear from.
pub struct PendingVote {
    ballots: Vec<Ballot>,
    waiting: Vec<Arc<dyn Voter>>,
}

impl PendingVote {
    /// Waits for the remaining voters until every one has answered, one
    /// denies, or the deadline (the policy's timeout from now) passes; then
    /// combines their ballots with those given at once.
    pub async fn finish(self, request: Arc<Request>, policy: &Policy) -> Outcome {
        let PendingVote {
            mut ballots,
            waiting,
        } = self;
        let owner_only = request.owner_only.is_some();
        let policy = &policy_for(&request, policy);
        let deadline = tokio::time::Instant::now() + policy.timeout;
        let mut running = tokio::task::JoinSet::new();
        for voter in &waiting {
            let name = voter.name();
            let owner = voter.owner();
            let vote = voter.vote(Arc::clone(&request));
            running.spawn(async move { (name, counted(owner_only, owner, vote.await)) });
        }
        let mut timed_out = Vec::new();
        loop {
            tokio::select! {
                next = running.join_next() => match next {
                    Some(Ok((voter, vote))) => {
                        let deny = matches!(vote, Vote::Deny { .. });
                        ballots.push(Ballot { voter, vote });
                        if deny {
                            break;
                        }
                    }
                    Some(Err(join)) => ballots.push(Ballot {
                        voter: "unknown",
                        vote: Vote::Abstain { reason: format!("voter failed: {join}") },
                    }),
                    None => break,
                },
                () = tokio::time::sleep_until(deadline) => {
                    for voter in &waiting {
                        if !ballots.iter().any(|b| b.voter == voter.name()) {
                            timed_out.push(voter.name());
                        }
                    }
                    break;
                }
            }
        }
        running.abort_all();
        combine(ballots, &timed_out, policy)
    }
}

/// Combines ballots (and the voters that timed out) into a verdict.
pub fn combine(mut ballots: Vec<Ballot>, timed_out: &[&'static str], policy: &Policy) -> Outcome {
    let default_vote = || {
        if policy.allows_by_default() {
            Vote::Allow {
                lifetime: Lifetime::Once,
                extent: Extent::File,
            }
        } else {
            Vote::Deny {
                reason: "no answer before the deadline".to_owned(),
            }
        }
    };
    for voter in timed_out {
        ballots.push(Ballot {
            voter,
            vote: default_vote(),
        });
    }
    if let Some(deny) = ballots.iter().find(|b| matches!(b.vote, Vote::Deny { .. })) {
        let Vote::Deny { reason } = &deny.vote else {
            unreachable!("matched a deny")
        };
        let decided_by = if timed_out.contains(&deny.voter) {
            "timeout".to_owned()
        } else {
            deny.voter.to_owned()
        };
        let reason = if decided_by == "timeout" {
            format!("{} did not answer before the deadline", deny.voter)
        } else {
            reason.clone()
        };
        return Outcome {
            allow: None,
            decided_by,
            reason,
            ballots,
        };
    }
    let allows: Vec<(&'static str, Lifetime, Extent)> = ballots
        .iter()
        .filter_map(|b| match b.vote {
            Vote::Allow { lifetime, extent } => Some((b.voter, lifetime, extent)),
            _ => None,
        })
        .collect();
    let Some(&(first, lifetime, extent)) = allows.first() else {
        return Outcome {
            allow: policy
                .allows_by_default()
                .then_some((Lifetime::Once, Extent::File)),
            decided_by: "default".to_owned(),
            reason: "every voter abstained: the mission's default applies".to_owned(),
            ballots,
        };
    };
    let (mut lifetime, mut extent) = (lifetime, extent);
    for &(_, l, e) in &allows[1..] {
        lifetime = lifetime.min(l);
        extent = extent.min(e);
    }
    let capped = (
        lifetime.min(policy.max_lifetime),
        extent.min(policy.max_extent),
    );
    let mut reason = format!(
        "allowed by {}",
        allows.iter().map(|a| a.0).collect::<Vec<_>>().join(", ")
    );
    if capped != (lifetime, extent) {
        reason.push_str(" (capped by the mission)");
    }
    Outcome {
        allow: Some(capped),
        decided_by: first.to_owned(),
        reason,
        ballots,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn policy() -> Policy {
        Policy {
            timeout: Duration::from_millis(200),
            default: DefaultVerdict::Deny,
            max_lifetime: Lifetime::Session,
            max_extent: Extent::File,
        }
    }

    fn ballot(voter: &'static str, vote: Vote) -> Ballot {
        Ballot { voter, vote }
    }

    fn allow(lifetime: Lifetime, extent: Extent) -> Vote {
        Vote::Allow { lifetime, extent }
    }

    fn deny(reason: &str) -> Vote {
        Vote::Deny {
            reason: reason.into(),
        }
    }

    fn abstain(reason: &str) -> Vote {
        Vote::Abstain {
            reason: reason.into(),
        }
    }

    #[test]
    fn deny_overrides_allow() {
        let out = combine(
            vec![
                ballot("webhook", allow(Lifetime::Session, Extent::File)),
                ballot("prompt", deny("no")),
            ],
            &[],
            &policy(),
        );
        assert_eq!(out.allow, None);
        assert_eq!(out.decided_by, "prompt");
        assert_eq!(out.reason, "no");
    }

    #[test]
    fn silence_counts_as_the_default() {
        let out = combine(
            vec![ballot("webhook", allow(Lifetime::Once, Extent::File))],
            &["prompt"],
            &policy(),
        );
        assert_eq!(out.allow, None);
        assert_eq!(out.decided_by, "timeout");
        let mut p = policy();
        p.default = DefaultVerdict::AllowOnce;
        let out = combine(vec![], &["prompt"], &p);
        assert_eq!(out.allow, Some((Lifetime::Once, Extent::File)));
    }

    #[test]
    fn all_abstain_is_the_default() {
        let out = combine(vec![ballot("mission", abstain("no rule"))], &[], &policy());
        assert_eq!((out.allow, out.decided_by.as_str()), (None, "default"));
    }

    #[test]
    fn allows_combine_narrowest_and_are_capped() {
        let out = combine(
            vec![
                ballot("mission", allow(Lifetime::Session, Extent::Tree)),
                ballot(
                    "webhook",
                    allow(Lifetime::Ttl(Duration::from_secs(60)), Extent::Tree),
                ),
            ],
            &[],
            &policy(),
        );
        // Narrowest lifetime of the two, extent capped to the mission's file.
        assert_eq!(
            out.allow,
            Some((Lifetime::Ttl(Duration::from_secs(60)), Extent::File))
        );
        assert!(out.reason.ends_with("(capped by the mission)"));
        let mut p = policy();
        p.max_lifetime = Lifetime::Once;
        let out = combine(
            vec![ballot("prompt", allow(Lifetime::Session, Extent::File))],
            &[],
            &p,
        );
        assert_eq!(out.allow, Some((Lifetime::Once, Extent::File)));
    }

    #[test]
    fn lifetime_order() {
        let hour = Lifetime::Ttl(Duration::from_secs(3600));
        assert_eq!(Lifetime::Session.min(hour), hour);
        assert_eq!(hour.min(Lifetime::Once), Lifetime::Once);
        assert_eq!(
            hour.min(Lifetime::Ttl(Duration::from_secs(5))),
            Lifetime::Ttl(Duration::from_secs(5))
        );
    }

    struct Fixed(&'static str, Option<Vote>);

    impl Voter for Fixed {
        fn name(&self) -> &'static str {
            self.0
        }

        fn owner(&self) -> bool {
            self.0 == "prompt"
        }

        fn vote(&self, _: Arc<Request>) -> VoteFuture {
            let vote = self.1.clone();
            Box::pin(async move {
                match vote {
                    Some(vote) => vote,
                    None => std::future::pending().await,
                }
            })
        }
    }

    fn request() -> Arc<Request> {
        Arc::new(Request::example(1, "/x"))
    }

    /// `mission` abstaining, then a voter that answers `second` (or never).
    fn two_voters(second: Option<Vote>) -> Vec<Arc<dyn Voter>> {
        vec![
            Arc::new(Fixed("mission", Some(abstain("no rule")))),
            Arc::new(Fixed("prompt", second)),
        ]
    }

    #[tokio::test(start_paused = true)]
    async fn collect_waits_for_all_then_times_out_the_silent() {
        let voters = two_voters(None);
        let out = collect(&voters, request(), &policy()).await;
        assert_eq!(out.allow, None);
        assert_eq!(out.decided_by, "timeout");
        assert_eq!(out.ballots.len(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn collect_stops_at_the_first_deny() {
        let voters: Vec<Arc<dyn Voter>> = vec![
            Arc::new(Fixed("mission", Some(deny("rule")))),
            Arc::new(Fixed("prompt", None)),
        ];
        let start = tokio::time::Instant::now();
        let out = collect(&voters, request(), &policy()).await;
        assert!(start.elapsed() < Duration::from_millis(200));
        assert_eq!(out.decided_by, "mission");
    }

    fn owners_request() -> Arc<Request> {
        let mut request = Request::example(2, "/p/CLAUDE.md");
        request.owner_only = Some(pincer_model::request::OWNER_ONLY_POLICY.into());
        Arc::new(request)
    }

    #[tokio::test(start_paused = true)]
    async fn only_the_owner_allows_what_is_the_owners_alone() {
        let session = allow(Lifetime::Session, Extent::Tree);
        // The mission's rule and a webhook that is not the owner's allow:
        // that counts for nothing, and silence denies.
        let mut lenient = policy();
        lenient.default = DefaultVerdict::AllowOnce;
        lenient.max_extent = Extent::Tree;
        let others: Vec<Arc<dyn Voter>> = vec![
            Arc::new(Fixed("mission", Some(session.clone()))),
            Arc::new(Fixed("webhook", Some(session.clone()))),
            Arc::new(Fixed("prompt", None)),
        ];
        let out = collect(&others, owners_request(), &lenient).await;
        assert_eq!(out.allow, None);
        assert_eq!(out.decided_by, "timeout");
        assert!(out.ballots.iter().any(|b| b.voter == "mission"
            && b.vote
                == Vote::Abstain {
                    reason: "only the owner may allow this".into()
                }));
        // The owner allows: for the object itself.
        let owner: Vec<Arc<dyn Voter>> = vec![
            Arc::new(Fixed("mission", Some(abstain("no rule")))),
            Arc::new(Fixed("prompt", Some(session.clone()))),
        ];
        let out = collect(&owner, owners_request(), &lenient).await;
        assert_eq!(out.allow, Some((Lifetime::Session, Extent::File)));
        // Another voter's deny still denies.
        let denied: Vec<Arc<dyn Voter>> = vec![
            Arc::new(Fixed("mission", Some(deny("never")))),
            Arc::new(Fixed("prompt", Some(session.clone()))),
        ];
        assert_eq!(
            collect(&denied, owners_request(), &lenient).await.allow,
            None
        );
        // Nobody speaks for the owner: denied at once.
        let start = tokio::time::Instant::now();
        let nobody: Vec<Arc<dyn Voter>> = vec![Arc::new(Fixed("mission", Some(session)))];
        let out = collect(&nobody, owners_request(), &lenient).await;
        assert_eq!((out.allow, out.decided_by.as_str()), (None, "owner"));
        assert_eq!(start.elapsed(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn collect_allows_when_every_voter_answered() {
        let voters = two_voters(Some(allow(Lifetime::Session, Extent::File)));
        let out = collect(&voters, request(), &policy()).await;
        assert_eq!(out.allow, Some((Lifetime::Session, Extent::File)));
        assert_eq!(out.decided_by, "prompt");
    }

    /// A voter that answers at once, and would answer the same when waited
    /// for; it counts how often it was waited for.
    struct Now(&'static str, Vote, std::sync::atomic::AtomicUsize);

    impl Now {
        fn new(name: &'static str, vote: Vote) -> Arc<Now> {
            Arc::new(Now(name, vote, std::sync::atomic::AtomicUsize::new(0)))
        }
    }

    impl Voter for Now {
        fn name(&self) -> &'static str {
            self.0
        }

        fn vote_now(&self, _: &Request) -> Option<Vote> {
            Some(self.1.clone())
        }

        fn vote(&self, _: Arc<Request>) -> VoteFuture {
            self.2.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let vote = self.1.clone();
            Box::pin(async move { vote })
        }
    }

    /// A voter that must be waited for and must never be: asking it fails
    /// the test.
    struct NeverAsked;

    impl Voter for NeverAsked {
        fn name(&self) -> &'static str {
            "prompt"
        }

        fn vote(&self, _: Arc<Request>) -> VoteFuture {
            panic!("a voter was asked about a request decided already")
        }
    }

    fn decided(voters: &[Arc<dyn Voter>], policy: &Policy) -> Outcome {
        match begin(voters, &request(), policy) {
            Ok(outcome) => outcome,
            Err(_) => panic!("the voters that answer at once should decide"),
        }
    }

    #[test]
    fn voters_that_answer_at_once_decide_without_waiting() {
        let voters: Vec<Arc<dyn Voter>> = vec![
            Now::new("mission", abstain("no rule")),
            Now::new("webhook", allow(Lifetime::Session, Extent::File)),
        ];
        let out = decided(&voters, &policy());
        assert_eq!(out.allow, Some((Lifetime::Session, Extent::File)));
        assert_eq!(out.decided_by, "webhook");
        assert_eq!(out.ballots.len(), 2);
        // Only abstentions: the default applies, as when waited for.
        let voters: Vec<Arc<dyn Voter>> = vec![Now::new("mission", abstain("no rule"))];
        let out = decided(&voters, &policy());
        assert_eq!((out.allow, out.decided_by.as_str()), (None, "default"));
        let mut p = policy();
        p.default = DefaultVerdict::AllowOnce;
        assert_eq!(
            decided(&voters, &p).allow,
            Some((Lifetime::Once, Extent::File))
        );
    }

    #[test]
    fn a_deny_at_once_overrides_every_allow_and_asks_nobody_else() {
        let voters: Vec<Arc<dyn Voter>> = vec![
            Now::new("webhook", allow(Lifetime::Session, Extent::Tree)),
            Arc::new(NeverAsked),
            Now::new("mission", deny("credentials")),
        ];
        let out = decided(&voters, &policy());
        assert_eq!(out.allow, None);
        assert_eq!(out.decided_by, "mission");
        assert_eq!(out.reason, "credentials");
        assert_eq!(out.ballots.len(), 2);
    }

    #[test]
    fn an_allow_at_once_is_capped_by_the_mission() {
        let voters: Vec<Arc<dyn Voter>> = vec![Now::new(
            "mission",
            allow(Lifetime::Ttl(Duration::from_secs(3600)), Extent::Tree),
        )];
        let mut p = policy();
        p.max_lifetime = Lifetime::Ttl(Duration::from_secs(60));
        let out = decided(&voters, &p);
        assert_eq!(
            out.allow,
            Some((Lifetime::Ttl(Duration::from_secs(60)), Extent::File))
        );
        assert!(out.reason.ends_with("(capped by the mission)"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_vote_begun_at_once_finishes_with_the_others_under_the_deadline() {
        let mission = Now::new("mission", allow(Lifetime::Session, Extent::File));
        let voters: Vec<Arc<dyn Voter>> = vec![mission.clone(), Arc::new(Fixed("prompt", None))];
        let Err(pending) = begin(&voters, &request(), &policy()) else {
            panic!("the prompt has not answered");
        };
        let start = tokio::time::Instant::now();
        let out = pending.finish(request(), &policy()).await;
        // The silent prompt counts as the default (deny) at the deadline,
        // which overrides the allow given at once; the voter that answered
        // at once was not asked again.
        assert_eq!(start.elapsed(), Duration::from_millis(200));
        assert_eq!(out.allow, None);
        assert_eq!(out.decided_by, "timeout");
        assert_eq!(out.reason, "prompt did not answer before the deadline");
        assert_eq!(out.ballots.len(), 2);
        assert_eq!(out.ballots[0].voter, "mission");
        assert_eq!(mission.2.load(std::sync::atomic::Ordering::Relaxed), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_vote_begun_at_once_takes_a_later_deny_over_its_allow() {
        let voters: Vec<Arc<dyn Voter>> = vec![
            Now::new("mission", allow(Lifetime::Session, Extent::File)),
            Arc::new(Fixed("webhook", Some(deny("no")))),
        ];
        let out = collect(&voters, request(), &policy()).await;
        assert_eq!(out.allow, None);
        assert_eq!(out.decided_by, "webhook");
        let voters: Vec<Arc<dyn Voter>> = vec![
            Now::new("mission", allow(Lifetime::Session, Extent::File)),
            Arc::new(Fixed("webhook", Some(allow(Lifetime::Once, Extent::File)))),
        ];
        let out = collect(&voters, request(), &policy()).await;
        assert_eq!(out.allow, Some((Lifetime::Once, Extent::File)));
        assert_eq!(out.ballots.len(), 2);
    }
}
