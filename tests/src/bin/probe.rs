//! `pincer-probe`: one file operation, reported by exit status.
//!
//! The confined "agent" of the integration tests. It performs exactly one
//! system call sequence and exits with 0 on success or with the errno of the
//! first failing call, printing `ok ...` or `err <errno>` on standard output,
//! so a test can assert the exact error the kernel returned.
//!
//! ```text
//! pincer-probe read PATH           open(O_RDONLY), read all, print the bytes read
//! pincer-probe write PATH DATA     open(O_WRONLY|O_TRUNC), write DATA
//! pincer-probe append PATH DATA    open(O_WRONLY|O_APPEND), write DATA
//! pincer-probe create PATH         open(O_WRONLY|O_CREAT|O_EXCL)
//! pincer-probe create-write PATH DATA   open(O_WRONLY|O_CREAT|O_TRUNC), write DATA
//! pincer-probe list DIR            open(O_RDONLY|O_DIRECTORY)
//! pincer-probe sleep SECONDS
//! ```

use std::{
    ffi::CString,
    io::{self, Write},
    os::unix::ffi::OsStrExt,
    process::ExitCode,
    time::Duration,
};

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let arg = |i: usize| args.get(i).cloned().unwrap_or_default();
    let op = arg(0);
    let result = match op.as_bytes() {
        b"read" => read(&arg(1)),
        b"write" => write(&arg(1), libc::O_WRONLY | libc::O_TRUNC, &arg(2)),
        b"append" => write(&arg(1), libc::O_WRONLY | libc::O_APPEND, &arg(2)),
        b"create" => open(&arg(1), libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL).map(|fd| {
            close(fd);
            "created".to_owned()
        }),
        b"create-write" => write(
            &arg(1),
            libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC,
            &arg(2),
        ),
        b"list" => open(&arg(1), libc::O_RDONLY | libc::O_DIRECTORY).map(|fd| {
            close(fd);
            "opened".to_owned()
        }),
        b"sleep" => {
            let secs: f64 = arg(1).to_string_lossy().parse().unwrap_or(1.0);
            std::thread::sleep(Duration::from_secs_f64(secs));
            Ok("slept".to_owned())
        }
        _ => {
            eprintln!("usage: pincer-probe read|write|append|create|create-write|list|sleep ...");
            return ExitCode::from(2);
        }
    };
    let mut out = io::stdout();
    match result {
        Ok(what) => {
            let _ = writeln!(out, "ok {what}");
            ExitCode::SUCCESS
        }
        Err(errno) => {
            let _ = writeln!(out, "err {errno}");
            ExitCode::from(errno.clamp(1, 255) as u8)
        }
    }
}

fn cstring(path: &std::ffi::OsStr) -> CString {
    CString::new(path.as_bytes()).expect("no NUL in arguments")
}

fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(255)
}

fn open(path: &std::ffi::OsStr, flags: i32) -> Result<i32, i32> {
    let path = cstring(path);
    // SAFETY: a valid NUL-terminated path; the mode is used only with O_CREAT.
    let fd = unsafe { libc::open(path.as_ptr(), flags | libc::O_CLOEXEC, 0o644) };
    if fd < 0 { Err(errno()) } else { Ok(fd) }
}

fn close(fd: i32) {
    // SAFETY: fd was returned by open and is closed once.
    unsafe { libc::close(fd) };
}

fn read(path: &std::ffi::OsStr) -> Result<String, i32> {
    let fd = open(path, libc::O_RDONLY)?;
    let mut total = 0usize;
    let mut buf = [0u8; 4096];
    loop {
        // SAFETY: buf is valid for its length.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            let e = errno();
            close(fd);
            return Err(e);
        }
        if n == 0 {
            break;
        }
        total += n as usize;
    }
    close(fd);
    Ok(format!("read {total}"))
}

fn write(path: &std::ffi::OsStr, flags: i32, data: &std::ffi::OsStr) -> Result<String, i32> {
    let fd = open(path, flags)?;
    let data = data.as_bytes();
    // SAFETY: data is valid for its length.
    let n = unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) };
    let result = if n < 0 {
        Err(errno())
    } else {
        Ok(format!("wrote {n}"))
    };
    close(fd);
    result
}
