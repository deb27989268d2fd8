//! `pincer-bench`: the open+close loop `cargo xtask bench` times in the guest.
//!
//! ```text
//! pincer-bench open-close PATH ITERATIONS   mean ns per openat+close
//! pincer-bench open-latency PATH ITERATIONS p50 and p99 µs of single openat+close
//! pincer-bench pingpong ITERATIONS          p50 and p99 µs of a pipe round trip
//! pincer-bench open-each DIR COUNT          mean ns per first open of DIR/0 .. DIR/COUNT-1
//! ```
//!
//! `open-close` lets the guest script time the same loop with no program
//! attached, with the programs attached but outside every agent cgroup, and
//! inside one. `open-latency` on a file that parks measures a parked
//! request's round trip (event, vote, verdict, task running again);
//! `pingpong` is the same-run baseline: one byte to a second process and back
//! through two pipes. `open-each` opens distinct files once each, so inside
//! an agent cgroup every open misses the grant cache and walks the file's
//! ancestors up to the tree grant: timed at several depths, it is the cost
//! of the walk.

use std::{ffi::CString, os::unix::ffi::OsStrExt, process::ExitCode, time::Instant};

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let number = |i: usize| {
        args.get(i)
            .and_then(|a| a.to_string_lossy().parse::<u64>().ok())
    };
    match (args.first().and_then(|a| a.to_str()), args.len()) {
        (Some("open-close"), 3) => {}
        (Some("open-latency"), 3) => {
            let path = CString::new(args[1].as_bytes()).expect("no NUL in the path");
            return match number(2) {
                Some(n) => open_latency(&path, n),
                None => usage(),
            };
        }
        (Some("open-each"), 3) => {
            return match number(2) {
                Some(n) => open_each(std::path::Path::new(&args[1]), n),
                None => usage(),
            };
        }
        (Some("pingpong"), 2) => {
            return match number(1) {
                Some(n) => pingpong(n),
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
        "usage: pincer-bench open-close PATH N | open-latency PATH N | pingpong N | open-each DIR N"
    );
    ExitCode::from(2)
}

/// Prints "p50 p99" of the samples, in microseconds.
fn report(mut samples: Vec<f64>) {
    samples.sort_by(f64::total_cmp);
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    println!("{:.1} {:.1}", at(0.50), at(0.99));
}

fn open_latency(path: &CString, iterations: u64) -> ExitCode {
    let mut samples = Vec::with_capacity(iterations as usize);
    for _ in 0..iterations {
        let start = Instant::now();
        if let Err(error) = open_close(path) {
            eprintln!("pincer-bench: open failed: {error}");
            return ExitCode::FAILURE;
        }
        samples.push(start.elapsed().as_secs_f64() * 1e6);
    }
    report(samples);
    ExitCode::SUCCESS
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

fn pingpong(iterations: u64) -> ExitCode {
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
    match unsafe { libc::fork() } {
        0 => {
            for _ in 0..iterations {
                // SAFETY: valid descriptors and a one-byte buffer.
                unsafe {
                    libc::read(there[0], byte.as_mut_ptr().cast(), 1);
                    libc::write(back[1], byte.as_ptr().cast(), 1);
                }
            }
            // SAFETY: leaves the child at once.
            unsafe { libc::_exit(0) }
        }
        pid if pid > 0 => {
            let mut samples = Vec::with_capacity(iterations as usize);
            for _ in 0..iterations {
                let start = Instant::now();
                // SAFETY: valid descriptors and a one-byte buffer.
                unsafe {
                    libc::write(there[1], byte.as_ptr().cast(), 1);
                    libc::read(back[0], byte.as_mut_ptr().cast(), 1);
                }
                samples.push(start.elapsed().as_secs_f64() * 1e6);
            }
            // SAFETY: reaping our own child.
            unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
            report(samples);
            ExitCode::SUCCESS
        }
        _ => ExitCode::FAILURE,
    }
}
