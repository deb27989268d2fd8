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

use std::{ffi::CString, os::unix::ffi::OsStrExt, process::ExitCode, time::Instant};

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
/// forked partner, alternating, and as many stops and continues of a second
/// child, and prints "p50 p99" of each, opens first.
///
/// The third is the parking mechanism with nothing of pincer in it: the
/// child stops itself (`SIGSTOP`), the parent, woken by the stop
/// (`waitpid`), sends `SIGCONT`, and the child times the stop until it runs
/// again. A parked open is that (with a ring buffer's wake-up in place of
/// the parent's), plus the programs' two calls, the twin's vote and the
/// restarted syscall.
fn round_trip(path: &CString, iterations: u64, floor: bool) -> ExitCode {
    let (Some(there), Some(back), Some(go), Some(ack), Some(samples)) =
        (pipe(), pipe(), pipe(), pipe(), pipe())
    else {
        return ExitCode::FAILURE;
    };
    let mut byte = [0u8; 1];
    // SAFETY: the child only reads, writes and exits.
    let partner = unsafe { libc::fork() };
    if partner == 0 {
        close_all_but(&[there[0], back[1]], &[there, back, go, ack, samples]);
        // Answers every byte until the parent closes its end.
        // SAFETY: valid descriptors and a one-byte buffer.
        while unsafe { libc::read(there[0], byte.as_mut_ptr().cast(), 1) } == 1 {
            unsafe { libc::write(back[1], byte.as_ptr().cast(), 1) };
        }
        // SAFETY: leaves the child at once.
        unsafe { libc::_exit(0) }
    }
    // SAFETY: as above; the child stops itself, times it and writes.
    let stopper = unsafe { libc::fork() };
    if stopper == 0 {
        close_all_but(
            &[go[0], ack[1], samples[1]],
            &[there, back, go, ack, samples],
        );
        stop_and_time(go[0], ack[1], samples[1]);
    }
    if partner < 0 || stopper < 0 {
        return ExitCode::FAILURE;
    }
    close_all_but(
        &[there[1], back[0], go[1], ack[0], samples[0]],
        &[there, back, go, ack, samples],
    );
    let mut opens = Vec::with_capacity(iterations as usize);
    let mut pings = Vec::with_capacity(iterations as usize);
    let mut failed = None;
    for i in 0..iterations {
        for open_first in [i % 2 == 0, i % 2 != 0] {
            let start = Instant::now();
            if open_first {
                if let Err(error) = open_close(path) {
                    failed = Some(error);
                    break;
                }
                opens.push(start.elapsed().as_secs_f64() * 1e6);
            } else {
                // SAFETY: valid descriptors and a one-byte buffer.
                let done = unsafe {
                    libc::write(there[1], byte.as_ptr().cast(), 1) == 1
                        && libc::read(back[0], byte.as_mut_ptr().cast(), 1) == 1
                };
                if !done {
                    failed = Some(std::io::Error::last_os_error());
                    break;
                }
                pings.push(start.elapsed().as_secs_f64() * 1e6);
            }
        }
        if failed.is_some() {
            break;
        }
        if floor && let Err(error) = continue_stopped(stopper, go[1], ack[0]) {
            failed = Some(error);
            break;
        }
    }
    // SAFETY: closing our ends ends both children's loops; reaping our own
    // children.
    unsafe {
        libc::close(there[1]);
        libc::waitpid(partner, std::ptr::null_mut(), 0);
        libc::close(go[1]);
    }
    let stops = read_samples(samples[0]);
    // SAFETY: as above.
    unsafe { libc::waitpid(stopper, std::ptr::null_mut(), 0) };
    if let Some(error) = failed {
        eprintln!("pincer-bench: round trip failed: {error}");
        return ExitCode::FAILURE;
    }
    if floor && stops.len() != opens.len() {
        eprintln!(
            "pincer-bench: the stopping child timed {} of {} stops",
            stops.len(),
            opens.len()
        );
        return ExitCode::FAILURE;
    }
    report(opens);
    report(pings);
    if floor {
        report(stops);
    }
    ExitCode::SUCCESS
}

/// A pipe's two ends.
fn pipe() -> Option<[i32; 2]> {
    let mut ends = [0i32; 2];
    // SAFETY: an array of two descriptors.
    (unsafe { libc::pipe(ends.as_mut_ptr()) } == 0).then_some(ends)
}

/// Closes every end of `pipes` not in `keep`.
fn close_all_but(keep: &[i32], pipes: &[[i32; 2]]) {
    for &fd in pipes.iter().flatten() {
        if !keep.contains(&fd) {
            // SAFETY: our own descriptor, closed once.
            unsafe { libc::close(fd) };
        }
    }
}

/// The stopping child: for each byte on `go`, stops itself and times how
/// long until it runs again, then answers on `ack`; at the end of `go`,
/// writes its samples (native-endian `f64` µs) to `out` and exits.
fn stop_and_time(go: i32, ack: i32, out: i32) -> ! {
    let mut byte = [0u8; 1];
    let mut samples = Vec::new();
    // SAFETY: valid descriptors and a one-byte buffer; `raise` stops this
    // thread until the parent continues it.
    while unsafe { libc::read(go, byte.as_mut_ptr().cast(), 1) } == 1 {
        let start = Instant::now();
        unsafe { libc::raise(libc::SIGSTOP) };
        samples.push(start.elapsed().as_secs_f64() * 1e6);
        unsafe { libc::write(ack, byte.as_ptr().cast(), 1) };
    }
    let bytes: Vec<u8> = samples.iter().flat_map(|s| s.to_ne_bytes()).collect();
    let mut written = 0;
    while written < bytes.len() {
        // SAFETY: the rest of a live buffer.
        let n =
            unsafe { libc::write(out, bytes[written..].as_ptr().cast(), bytes.len() - written) };
        if n <= 0 {
            break;
        }
        written += n as usize;
    }
    // SAFETY: leaves the child at once.
    unsafe { libc::_exit(0) }
}

/// One untimed turn of the stopping child: tells it to stop, waits until it
/// has, continues it and waits for it to have timed that.
fn continue_stopped(child: i32, go: i32, ack: i32) -> std::io::Result<()> {
    let mut byte = [0u8; 1];
    let mut status = 0;
    // SAFETY: valid descriptors, a one-byte buffer, our own child.
    let done = unsafe {
        libc::write(go, byte.as_ptr().cast(), 1) == 1
            && libc::waitpid(child, &mut status, libc::WUNTRACED) == child
            && libc::WIFSTOPPED(status)
            && libc::kill(child, libc::SIGCONT) == 0
            && libc::read(ack, byte.as_mut_ptr().cast(), 1) == 1
    };
    if done {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Every sample the stopping child wrote, until it closed its end.
fn read_samples(fd: i32) -> Vec<f64> {
    let mut bytes = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        // SAFETY: a valid descriptor and buffer.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n <= 0 {
            break;
        }
        bytes.extend_from_slice(&buf[..n as usize]);
    }
    bytes
        .chunks_exact(8)
        .map(|c| f64::from_ne_bytes(c.try_into().expect("eight bytes")))
        .collect()
}
