//! `pincer-bench`: the open+close loop `cargo xtask bench` times in the guest.
//!
//! ```text
//! pincer-bench open-close PATH ITERATIONS   mean ns per openat+close
//! pincer-bench round-trip PATH ITERATIONS [--no-floor]
//!                                           p50 and p99 µs of single openat+close, then
//!                                           of a pipe round trip, interleaved, then of a
//!                                           child's stop and continue (not with
//!                                           --no-floor: a run for the programs'
//!                                           statistics, whose signals it would add to)
//! pincer-bench open-each DIR COUNT          mean ns per first open of DIR/0 .. DIR/COUNT-1
//! pincer-bench program-stats                each hook's invocations and total ns, from the
//!                                           kernel's statistics of its loaded programs
//! ```
//!
//! `open-close` lets the guest script time the same loop with no program
//! attached, with the programs attached but outside every agent cgroup, and
//! inside one. `round-trip` on a file that parks measures a parked
//! request's round trip (event, vote, verdict, task running again) next to
//! its baseline, a pipe ping-pong: one byte to a second process and back
//! through two pipes. The two alternate one by one (which goes first
//! alternates too), so the emulated machine's drift, which moves a
//! ping-pong's time twofold from one second to the next, weighs on both
//! alike: the ratio of their medians is what is compared. `open-each`
//! opens distinct files once each, so inside an agent cgroup every open
//! misses the grant cache and walks the file's ancestors up to the tree
//! grant: timed at several depths, it is the cost of the walk.

use std::{
    ffi::CString,
    io::{self, Read, Write},
    os::{
        fd::{AsRawFd, RawFd},
        unix::ffi::OsStrExt,
    },
    process::ExitCode,
    time::Instant,
};

use nix::{
    sys::{
        signal::{Signal, kill, raise},
        wait::{WaitPidFlag, WaitStatus, waitpid},
    },
    unistd::{ForkResult, Pid, fork},
};

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let number = |i: usize| {
        args.get(i)
            .and_then(|a| a.to_string_lossy().parse::<u64>().ok())
    };
    match (args.first().and_then(|a| a.to_str()), args.len()) {
        (Some("open-close"), 3) => {}
        (Some("round-trip"), 3 | 4) => {
            let path = CString::new(args[1].as_bytes()).expect("no NUL in the path");
            let floor = match args.get(3).and_then(|a| a.to_str()) {
                None => true,
                Some("--no-floor") => false,
                Some(_) => return usage(),
            };
            return match number(2) {
                Some(n) => round_trip(&path, n, floor),
                None => usage(),
            };
        }
        (Some("program-stats"), 1) => {
            for (name, runs, time) in pincer_tests::program_stats() {
                println!("{name} {runs} {}", time.as_nanos());
            }
            return ExitCode::SUCCESS;
        }
        (Some("open-each"), 3) => {
            return match number(2) {
                Some(n) => open_each(std::path::Path::new(&args[1]), n),
                None => usage(),
            };
        }
        _ => return usage(),
    }
    let path = CString::new(args[1].as_bytes()).expect("no NUL in the path");
    let Some(iterations) = number(2) else {
        return usage();
    };
    let start = Instant::now();
    for _ in 0..iterations {
        if let Err(error) = open_close(&path) {
            eprintln!("pincer-bench: open failed: {error}");
            return ExitCode::FAILURE;
        }
    }
    let elapsed = start.elapsed();
    println!(
        "{:.1}",
        elapsed.as_nanos() as f64 / iterations.max(1) as f64
    );
    ExitCode::SUCCESS
}

/// One `openat` for reading and its `close`.
fn open_close(path: &CString) -> std::io::Result<()> {
    // SAFETY: a valid NUL-terminated path; the descriptor is closed at once.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd is ours and closed once.
    unsafe { libc::close(fd) };
    Ok(())
}

fn usage() -> ExitCode {
    eprintln!(
        "usage: pincer-bench open-close PATH N | round-trip PATH N [--no-floor] \
         | open-each DIR N | program-stats"
    );
    ExitCode::from(2)
}

/// Prints "p50 p99" of the samples, in microseconds.
fn report(mut samples: Vec<f64>) {
    samples.sort_by(f64::total_cmp);
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    println!("{:.1} {:.1}", at(0.50), at(0.99));
}

fn open_each(dir: &std::path::Path, count: u64) -> ExitCode {
    // The names are built before the clock starts: only the opens are timed.
    let paths: Vec<CString> = (0..count)
        .map(|i| CString::new(dir.join(i.to_string()).as_os_str().as_bytes()).expect("no NUL"))
        .collect();
    let start = Instant::now();
    for path in &paths {
        if let Err(error) = open_close(path) {
            eprintln!("pincer-bench: open of {path:?} failed: {error}");
            return ExitCode::FAILURE;
        }
    }
    println!(
        "{:.1}",
        start.elapsed().as_nanos() as f64 / count.max(1) as f64
    );
    ExitCode::SUCCESS
}

/// Times `iterations` opens of `path`, as many pipe round trips with a
/// forked partner, alternating, and (with `floor`) as many stops and
/// continues of a second child, and prints "p50 p99" of each, opens first.
///
/// The third is the parking mechanism with nothing of pincer in it: the
/// child stops itself (`SIGSTOP`), the parent, woken by the stop
/// (`waitpid`), sends `SIGCONT`, and the child times the stop until it runs
/// again. A parked open is that (with a ring buffer's wake-up in place of
/// the parent's), plus the programs' two calls, the twin's vote and the
/// restarted syscall.
fn round_trip(path: &CString, iterations: u64, floor: bool) -> ExitCode {
    match measure_round_trips(path, iterations, floor) {
        Ok((opens, pings, stops)) => {
            report(opens);
            report(pings);
            if let Some(stops) = stops {
                report(stops);
            }
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("pincer-bench: round trip failed: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Samples in µs: the opens, the ping-pongs and, with `floor`, the stops.
type RoundTrips = (Vec<f64>, Vec<f64>, Option<Vec<f64>>);

fn measure_round_trips(path: &CString, iterations: u64, floor: bool) -> io::Result<RoundTrips> {
    let (there_out, mut there_in) = io::pipe()?;
    let (mut back_out, back_in) = io::pipe()?;
    // SAFETY: this program is single-threaded; the child only reads,
    // writes and exits.
    let partner = match unsafe { fork() }? {
        ForkResult::Child => {
            drop((there_in, back_out));
            answer(there_out, back_in)
        }
        ForkResult::Parent { child } => child,
    };
    drop((there_out, back_in));
    let mut stopper = if floor {
        Some(Stopper::fork(&[
            there_in.as_raw_fd(),
            back_out.as_raw_fd(),
        ])?)
    } else {
        None
    };

    let mut opens = Vec::with_capacity(iterations as usize);
    let mut pings = Vec::with_capacity(iterations as usize);
    let mut byte = [0u8; 1];
    let mut measured = || -> io::Result<()> {
        for i in 0..iterations {
            for open_first in [i % 2 == 0, i % 2 != 0] {
                let start = Instant::now();
                if open_first {
                    open_close(path)?;
                    opens.push(start.elapsed().as_secs_f64() * 1e6);
                } else {
                    there_in.write_all(&byte)?;
                    back_out.read_exact(&mut byte)?;
                    pings.push(start.elapsed().as_secs_f64() * 1e6);
                }
            }
            if let Some(stopper) = &mut stopper {
                stopper.continue_once()?;
            }
        }
        Ok(())
    };
    let outcome = measured();
    // Closing our end ends the partner's loop (and the stopper's, below).
    drop(there_in);
    waitpid(partner, None)?;
    let stops = stopper.map(Stopper::finish).transpose()?;
    outcome?;
    if let Some(stops) = &stops
        && stops.len() != opens.len()
    {
        return Err(io::Error::other(format!(
            "the stopping child timed {} of {} stops",
            stops.len(),
            opens.len()
        )));
    }
    Ok((opens, pings, stops))
}

/// The ping-pong's partner: answers every byte until the parent closes
/// its end.
fn answer(mut from: io::PipeReader, mut to: io::PipeWriter) -> ! {
    let mut byte = [0u8; 1];
    while from.read_exact(&mut byte).is_ok() && to.write_all(&byte).is_ok() {}
    // SAFETY: leaves the child at once, as a forked child should.
    unsafe { libc::_exit(0) }
}

/// The child that stops itself, and the parent's ends of its pipes.
struct Stopper {
    child: Pid,
    /// A byte asks for one stop.
    go: io::PipeWriter,
    /// A byte says the stop was timed.
    ack: io::PipeReader,
    /// The child's samples, at its end.
    samples: io::PipeReader,
}

impl Stopper {
    /// Forks the stopping child. It closes its copies of the parent's
    /// other pipe ends (`others`, by number: the parent keeps the values),
    /// so that closing them in the parent ends the partner.
    fn fork(others: &[RawFd]) -> io::Result<Stopper> {
        let (go_out, go) = io::pipe()?;
        let (ack, ack_in) = io::pipe()?;
        let (samples, samples_in) = io::pipe()?;
        // SAFETY: single-threaded, as above; the child stops itself, times
        // it and writes.
        match unsafe { fork() }? {
            ForkResult::Child => {
                for &fd in others {
                    let _ = nix::unistd::close(fd);
                }
                drop((go, ack, samples));
                stop_and_time(go_out, ack_in, samples_in)
            }
            ForkResult::Parent { child } => Ok(Stopper {
                child,
                go,
                ack,
                samples,
            }),
        }
    }

    /// One untimed turn: tells the child to stop, waits until it has,
    /// continues it and waits for it to have timed that.
    fn continue_once(&mut self) -> io::Result<()> {
        self.go.write_all(&[0])?;
        match waitpid(self.child, Some(WaitPidFlag::WUNTRACED))? {
            WaitStatus::Stopped(..) => {}
            other => return Err(io::Error::other(format!("the stopper: {other:?}"))),
        }
        kill(self.child, Signal::SIGCONT)?;
        self.ack.read_exact(&mut [0])
    }

    /// Ends the child and returns its samples.
    fn finish(self) -> io::Result<Vec<f64>> {
        let Stopper {
            child,
            go,
            ack,
            mut samples,
        } = self;
        drop((go, ack));
        let mut bytes = Vec::new();
        let read = samples.read_to_end(&mut bytes);
        waitpid(child, None)?;
        read?;
        Ok(bytes
            .chunks_exact(8)
            .map(|c| f64::from_ne_bytes(c.try_into().expect("eight bytes")))
            .collect())
    }
}

/// The stopping child: for each byte on `go`, stops itself and times how
/// long until it runs again, then answers on `ack`; at the end of `go`,
/// writes its samples (native-endian `f64` µs) to `out` and exits.
fn stop_and_time(mut go: io::PipeReader, mut ack: io::PipeWriter, mut out: io::PipeWriter) -> ! {
    let mut byte = [0u8; 1];
    let mut samples = Vec::new();
    while go.read_exact(&mut byte).is_ok() {
        let start = Instant::now();
        // Stops this process until the parent continues it.
        if raise(Signal::SIGSTOP).is_err() {
            break;
        }
        samples.push(start.elapsed().as_secs_f64() * 1e6);
        if ack.write_all(&byte).is_err() {
            break;
        }
    }
    let bytes: Vec<u8> = samples.iter().flat_map(|s| s.to_ne_bytes()).collect();
    let _ = out.write_all(&bytes);
    // SAFETY: leaves the child at once.
    unsafe { libc::_exit(0) }
}
