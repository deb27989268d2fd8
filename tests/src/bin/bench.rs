//! `pincer-bench`: the open+close loop `cargo xtask bench` times in the guest.
//!
//! ```text
//! pincer-bench open-close PATH ITERATIONS   mean ns per openat+close
//! pincer-bench round-trip PATH ITERATIONS   p50 and p99 µs of single openat+close, then
//!                                           of a pipe round trip, interleaved
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
        (Some("round-trip"), 3) => {
            let path = CString::new(args[1].as_bytes()).expect("no NUL in the path");
            return match number(2) {
                Some(n) => round_trip(&path, n),
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
        "usage: pincer-bench open-close PATH N | round-trip PATH N | open-each DIR N \
         | program-stats"
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

/// Times `iterations` opens of `path` and as many pipe round trips with a
/// forked partner, alternating, and prints "p50 p99" of each, opens first.
fn round_trip(path: &CString, iterations: u64) -> ExitCode {
    let mut there = [0i32; 2];
    let mut back = [0i32; 2];
    // SAFETY: two arrays of two descriptors.
    if unsafe { libc::pipe(there.as_mut_ptr()) } != 0
        || unsafe { libc::pipe(back.as_mut_ptr()) } != 0
    {
        return ExitCode::FAILURE;
    }
    let mut byte = [0u8; 1];
    // SAFETY: the child only reads, writes and exits.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: the child's copies of the ends it does not use.
        unsafe {
            libc::close(there[1]);
            libc::close(back[0]);
        }
        // Answers every byte until the parent closes its end.
        // SAFETY: valid descriptors and a one-byte buffer.
        while unsafe { libc::read(there[0], byte.as_mut_ptr().cast(), 1) } == 1 {
            unsafe { libc::write(back[1], byte.as_ptr().cast(), 1) };
        }
        // SAFETY: leaves the child at once.
        unsafe { libc::_exit(0) }
    }
    if pid < 0 {
        return ExitCode::FAILURE;
    }
    // SAFETY: the parent's copies of the child's ends.
    unsafe {
        libc::close(there[0]);
        libc::close(back[1]);
    }
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
    }
    // SAFETY: closing our end ends the child's loop; reaping our own child.
    unsafe {
        libc::close(there[1]);
        libc::waitpid(pid, std::ptr::null_mut(), 0);
    }
    if let Some(error) = failed {
        eprintln!("pincer-bench: round trip failed: {error}");
        return ExitCode::FAILURE;
    }
    report(opens);
    report(pings);
    ExitCode::SUCCESS
}
