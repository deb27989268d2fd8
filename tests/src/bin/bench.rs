//! `pincer-bench`: the open+close loop `cargo xtask bench` times in the guest.
//!
//! ```text
//! pincer-bench open-close PATH ITERATIONS
//! ```
//!
//! Prints the mean nanoseconds per `openat`+`close` pair on one line, so the
//! guest script can time the same loop with no program attached, with the
//! programs attached but outside every agent cgroup, and inside one.

use std::{ffi::CString, os::unix::ffi::OsStrExt, process::ExitCode, time::Instant};

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if args.len() != 3 || args[0] != "open-close" {
        eprintln!("usage: pincer-bench open-close PATH ITERATIONS");
        return ExitCode::from(2);
    }
    let path = CString::new(args[1].as_bytes()).expect("no NUL in the path");
    let Ok(iterations) = args[2].to_string_lossy().parse::<u64>() else {
        eprintln!("pincer-bench: ITERATIONS must be a number");
        return ExitCode::from(2);
    };
    let start = Instant::now();
    for _ in 0..iterations {
        // SAFETY: a valid NUL-terminated path; the descriptor is closed at once.
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        if fd < 0 {
            eprintln!(
                "pincer-bench: open failed: {}",
                std::io::Error::last_os_error()
            );
            return ExitCode::FAILURE;
        }
        // SAFETY: fd is ours and closed once.
        unsafe { libc::close(fd) };
    }
    let elapsed = start.elapsed();
    println!(
        "{:.1}",
        elapsed.as_nanos() as f64 / iterations.max(1) as f64
    );
    ExitCode::SUCCESS
}
