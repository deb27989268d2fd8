//! Executing and mapping code: fork and execve, memfd execution, executable
//! mappings. Apart because each forks or maps, with its own unsafe.

use std::{
    ffi::{CString, OsStr},
    io::Write,
    os::fd::{AsRawFd, FromRawFd, OwnedFd},
};

use crate::{
    Outcome, c, errno,
    files::{close, open},
};

/// Forks; the child runs `exec` and exits with its errno if it returns.
/// `Ok` when the program ran and exited 0.
fn fork_exec(exec: impl FnOnce() -> i32) -> Outcome {
    // SAFETY: the probe is single-threaded; the child only execs or exits.
    match unsafe { libc::fork() } {
        -1 => Err(errno()),
        0 => {
            // The program's own output is not this operation's line.
            let null = c(OsStr::new("/dev/null"));
            // SAFETY: open and dup2 in the child before exec.
            unsafe {
                let fd = libc::open(null.as_ptr(), libc::O_WRONLY);
                if fd >= 0 {
                    libc::dup2(fd, 1);
                }
            }
            exec();
            // SAFETY: leave the child without running the parent's cleanup.
            unsafe { libc::_exit(errno().clamp(1, 255)) }
        }
        child => {
            let mut status = 0;
            // SAFETY: waiting for our own child.
            unsafe { libc::waitpid(child, &mut status, 0) };
            match libc::WEXITSTATUS(status) {
                0 => Ok("ran".to_owned()),
                code => Err(code),
            }
        }
    }
}

/// `argv` of an executed program: `PROG sleep 0`, which exits 0 for the probe
/// itself.
fn exec_argv(prog: &CString) -> ([CString; 3], [*const libc::c_char; 4]) {
    let args = [prog.clone(), c(OsStr::new("sleep")), c(OsStr::new("0"))];
    let ptrs = [
        args[0].as_ptr(),
        args[1].as_ptr(),
        args[2].as_ptr(),
        std::ptr::null(),
    ];
    (args, ptrs)
}

pub(crate) fn exec(path: &OsStr) -> Outcome {
    let prog = c(path);
    let (_args, argv) = exec_argv(&prog);
    let envp: [*const libc::c_char; 1] = [std::ptr::null()];
    // SAFETY: NUL-terminated argument and environment arrays that outlive the call.
    fork_exec(|| unsafe { libc::execve(prog.as_ptr(), argv.as_ptr(), envp.as_ptr()) })
}

pub(crate) fn exec_memfd(path: &OsStr) -> Outcome {
    let bytes = std::fs::read(path).map_err(|e| e.raw_os_error().unwrap_or(255))?;
    let name = c(OsStr::new("probe"));
    // SAFETY: a valid name; the flags ask for nothing unusual.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), 0) };
    if fd < 0 {
        return Err(errno());
    }
    // SAFETY: fd was just created and is owned here.
    let memfd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut file = std::fs::File::from(memfd);
    file.write_all(&bytes)
        .map_err(|e| e.raw_os_error().unwrap_or(255))?;
    let (_args, argv) = exec_argv(&name);
    let envp: [*const libc::c_char; 1] = [std::ptr::null()];
    let empty = c(OsStr::new(""));
    fork_exec(|| unsafe {
        // SAFETY: as in `exec`; an empty path with AT_EMPTY_PATH runs the fd.
        libc::execveat(
            file.as_raw_fd(),
            empty.as_ptr(),
            argv.as_ptr().cast(),
            envp.as_ptr().cast(),
            libc::AT_EMPTY_PATH,
        )
    })
}

/// Maps the first page of `path` with `prot`, then, when `then` is not
/// zero, changes the mapping to `then`; unmaps it again.
pub(crate) fn map_file(path: &OsStr, prot: i32, then: i32) -> Outcome {
    let fd = open(path, libc::O_RDONLY)?;
    let result = map_fd(fd, prot, libc::MAP_PRIVATE, then);
    close(fd);
    result
}

fn map_fd(fd: i32, prot: i32, flags: i32, then: i32) -> Outcome {
    const PAGE: usize = 4096;
    // SAFETY: a fresh mapping of an open descriptor, unmapped below.
    let addr = unsafe { libc::mmap(std::ptr::null_mut(), PAGE, prot, flags, fd, 0) };
    if addr == libc::MAP_FAILED {
        return Err(errno());
    }
    // SAFETY: the mapping just made, of PAGE bytes.
    let changed = then == 0 || unsafe { libc::mprotect(addr, PAGE, then) } == 0;
    let result = if changed {
        Ok(if then == 0 { "mapped" } else { "protected" }.to_owned())
    } else {
        Err(errno())
    };
    // SAFETY: as above.
    unsafe { libc::munmap(addr, PAGE) };
    result
}

pub(crate) fn memfd_map_exec() -> Outcome {
    let name = c(OsStr::new("probe-code"));
    // SAFETY: a valid name; no flags.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), 0) };
    if fd < 0 {
        return Err(errno());
    }
    // SAFETY: fd was just created.
    let result = if unsafe { libc::ftruncate(fd, 4096) } == 0 {
        map_fd(fd, libc::PROT_READ | libc::PROT_EXEC, libc::MAP_SHARED, 0)
    } else {
        Err(errno())
    };
    close(fd);
    result
}

pub(crate) fn execveat(dir: &OsStr, name: &OsStr) -> Outcome {
    // O_PATH: the directory itself is not read, only named.
    let dirfd = open(dir, libc::O_PATH | libc::O_DIRECTORY)?;
    let prog = c(name);
    let (_args, argv) = exec_argv(&prog);
    let envp: [*const libc::c_char; 1] = [std::ptr::null()];
    // SAFETY: as in `exec`, relative to an open directory.
    let result = fork_exec(|| unsafe {
        libc::execveat(
            dirfd,
            prog.as_ptr(),
            argv.as_ptr().cast(),
            envp.as_ptr().cast(),
            0,
        )
    });
    close(dirfd);
    result
}
