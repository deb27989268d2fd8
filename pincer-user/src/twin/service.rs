//! The twin as a running service: what `pincer run` and `pincer daemon`
//! share from start-up to teardown.
//!
//! 1. [`Service::prepare`], before any thread exists: sends a first
//!    heartbeat, forks the watchdog (which must start from a
//!    single-threaded process), takes the ring buffer out of the loaded (or
//!    reopened) programs and guards pincer's own processes.
//! 2. [`Service::new`], inside the runtime: the twin over those programs.
//!    The shell confines its agents through [`Service::twin`].
//! 3. [`Service::step`], in the shell's own `select!`: waits for the next
//!    ring-buffer records, vote result, heartbeat or TTL expiry and handles
//!    it. It is cancel-safe: a shell's other branch winning loses nothing.
//! 4. [`Service::stop`] then [`Service::finish`]: no heartbeat (nothing parks
//!    any more), every waiting request denied, then the watchdog told that
//!    all is clean.

use aya::maps::{MapData, RingBuf};
use pincer_model::audit::AuditLog;
use tokio::{io::unix::AsyncFd, sync::mpsc, time::Interval};

use super::{HEARTBEAT_EVERY, Handled, Twin, TwinError, VoteResult};
use crate::{
    loader::{Enforcer, Kernel},
    watchdog::{Watchdog, Watched},
};

/// Programs ready to serve: what [`Service::prepare`] made before the
/// runtime.
pub struct Prepared {
    enforcer: Enforcer,
    events: RingBuf<MapData>,
    watchdog: Watchdog,
}

impl Prepared {
    /// The watchdog's pid.
    pub fn watchdog_pid(&self) -> u32 {
        self.watchdog.pid().as_raw() as u32
    }
}

/// What one [`Service::step`] handled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Records from the ring buffer (decisions audited, requests parked),
    /// none of them answered yet.
    Records,
    /// A vote's verdict was written: a vote that was waited for, or
    /// records from the ring buffer of which at least one was answered at
    /// once.
    Verdict,
    /// The heartbeat was sent.
    Heartbeat,
    /// Time-limited grants ended.
    Expired,
}

/// The twin, its ring buffer, its vote results and its clocks.
pub struct Service {
    twin: Twin<Enforcer>,
    events: AsyncFd<RingBuf<MapData>>,
    outcomes: mpsc::UnboundedReceiver<VoteResult>,
    heartbeat: Interval,
    watchdog: Watchdog,
}

impl Service {
    /// Prepares loaded or reopened programs for a twin: sends a first
    /// heartbeat, forks the watchdog (watching `watched`), takes their ring
    /// buffer and guards this process and the watchdog from every agent
    /// on the host (forgetting guarded processes that are gone).
    ///
    /// # Safety
    ///
    /// The process must have a single thread: the watchdog continues in a
    /// forked copy of it.
    pub unsafe fn prepare(mut enforcer: Enforcer, watched: Watched) -> Result<Prepared, TwinError> {
        enforcer.heartbeat(
            super::boottime_ns(),
            super::HEARTBEAT_TIMEOUT.as_nanos() as u64,
        )?;
        // SAFETY: single-threaded, by this function's own contract.
        let watchdog =
            unsafe { Watchdog::spawn(&mut enforcer, watched) }.map_err(TwinError::Watchdog)?;
        // Mapped after the fork: a mapping is a reference the watchdog's
        // closed descriptors would not let go of, and it would keep the
        // ring buffer of idle programs alive until it exits.
        let events = enforcer.take_events()?;
        enforcer.forget_dead_guarded()?;
        enforcer.guard(std::process::id())?;
        enforcer.guard(watchdog.pid().as_raw() as u32)?;
        Ok(Prepared {
            enforcer,
            events,
            watchdog,
        })
    }

    /// The twin over prepared programs, auditing to `audit`. Call it inside
    /// the runtime (it registers the ring buffer and starts the clocks).
    pub fn new(prepared: Prepared, audit: AuditLog) -> Result<Service, TwinError> {
        let Prepared {
            enforcer,
            events,
            watchdog,
        } = prepared;
        let (twin, outcomes) = Twin::new(enforcer, audit)?;
        // SAFETY: the ring buffer owns its descriptor and keeps it open for
        // as long as it is registered.
        let events = unsafe { AsyncFd::register(events) }.map_err(|e| TwinError::Ring(e.into()))?;
        Ok(Service {
            twin,
            events,
            outcomes,
            heartbeat: tokio::time::interval(HEARTBEAT_EVERY),
            watchdog,
        })
    }

    /// The twin: confinement, grants, waiting requests.
    pub fn twin(&mut self) -> &mut Twin<Enforcer> {
        &mut self.twin
    }

    /// The watchdog's pid.
    pub fn watchdog_pid(&self) -> u32 {
        self.watchdog.pid().as_raw() as u32
    }

    /// Waits for the next thing to handle and handles it. Cancel-safe: every
    /// wait is a `select!` branch, and handling does not wait.
    pub async fn step(&mut self) -> Result<Step, TwinError> {
        let expiry = self.twin.next_expiry();
        tokio::select! {
            ready = self.events.readable_mut() => {
                let mut guard = ready.map_err(TwinError::Ring)?;
                let drained = drain(&mut self.twin, guard.get_inner_mut());
                guard.clear_ready();
                Ok(if drained? { Step::Verdict } else { Step::Records })
            }
            Some((key, outcome)) = self.outcomes.recv() => {
                self.twin.on_outcome(key, outcome)?;
                Ok(Step::Verdict)
            }
            _ = self.heartbeat.tick() => {
                self.twin.heartbeat()?;
                Ok(Step::Heartbeat)
            }
            () = sleep_until(expiry) => {
                self.twin.expire()?;
                Ok(Step::Expired)
            }
        }
    }

    /// Handles every record waiting in the ring buffer now, without waiting
    /// (the last decisions of an agent that just exited).
    pub fn drain(&mut self) -> Result<(), TwinError> {
        drain(&mut self.twin, self.events.get_mut()).map(|_| ())
    }

    /// Stops serving: no heartbeat from now on (an ungranted access is
    /// refused at once instead of parking), and every waiting request is
    /// denied and its task continued. The agents stay confined.
    pub fn stop(&mut self) -> Result<(), TwinError> {
        let stopped = self.twin.stop_heartbeat();
        self.twin.deny_all()?;
        stopped
    }

    /// Ends the service: the programs are let go (pinned ones stay
    /// attached) and the watchdog is told everything is clean, so it exits
    /// without touching anything — or, when the programs were left idle for
    /// the next run until `idle_until` (Unix seconds), removes them then.
    pub fn finish(self, idle_until: Option<u64>) {
        let Service {
            mut twin, watchdog, ..
        } = self;
        // The guard map outlives this process (every pincer shares it).
        let _ = twin.unguard(std::process::id());
        let _ = twin.unguard(watchdog.pid().as_raw() as u32);
        drop(twin);
        match idle_until {
            Some(expiry) => watchdog.linger_until(expiry),
            None => watchdog.done(),
        }
    }
}

/// Handles every record in the ring buffer; returns whether one was
/// answered. A record that fails does not keep the others from being
/// handled (each parked task behind it waits for its answer): the first
/// error is returned at the end.
fn drain(twin: &mut Twin<Enforcer>, ring: &mut RingBuf<MapData>) -> Result<bool, TwinError> {
    let mut answered = false;
    let mut result = Ok(());
    while let Some(item) = ring.next() {
        match twin.handle_record(&item) {
            Ok(handled) => answered |= handled == Handled::Answered,
            Err(error) => result = result.and(Err(error)),
        }
    }
    result.map(|()| answered)
}

/// Sleeps until `at`, or forever.
async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
