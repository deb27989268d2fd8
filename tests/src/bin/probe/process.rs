//! Processes, their cgroups, namespaces and capabilities, and kernel modules.
//! Apart because each acts on a task or the kernel, not a file.

use std::ffi::OsStr;

use crate::{
    Outcome, c, done, errno,
    files::{close, open},
};

pub(crate) fn ptrace(pid: i32) -> Outcome {
    // SAFETY: PTRACE_ATTACH takes a pid and no data.
    let r = unsafe { libc::ptrace(libc::PTRACE_ATTACH, pid, 0, 0) };
    if r < 0 {
        return Err(errno());
    }
    // SAFETY: detach what was just attached.
    unsafe { libc::ptrace(libc::PTRACE_DETACH, pid, 0, 0) };
    Ok("attached".to_owned())
}

pub(crate) fn clone_into_cgroup(dir: &OsStr) -> Outcome {
    let cgroup = open(dir, libc::O_PATH | libc::O_DIRECTORY)?;
    /// `struct clone_args` (version 2, with `cgroup`).
    #[repr(C)]
    #[derive(Default)]
    struct CloneArgs {
        flags: u64,
        pidfd: u64,
        child_tid: u64,
        parent_tid: u64,
        exit_signal: u64,
        stack: u64,
        stack_size: u64,
        tls: u64,
        set_tid: u64,
        set_tid_size: u64,
        cgroup: u64,
    }
    let args = CloneArgs {
        flags: 0x2_0000_0000, // CLONE_INTO_CGROUP
        exit_signal: libc::SIGCHLD as u64,
        cgroup: cgroup as u64,
        ..CloneArgs::default()
    };
    // SAFETY: a fork-like clone3 without a new stack; the child exits at once.
    let child = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            &args as *const CloneArgs,
            std::mem::size_of::<CloneArgs>(),
        )
    };
    close(cgroup);
    match child {
        // SAFETY: leave the child at once.
        0 => unsafe { libc::_exit(0) },
        -1 => Err(errno()),
        child => {
            let mut status = 0;
            // SAFETY: waiting for our own child.
            unsafe { libc::waitpid(child as i32, &mut status, 0) };
            Ok("cloned".to_owned())
        }
    }
}

/// Enters the user namespace of process `pid`.
pub(crate) fn setns_user(pid: i32) -> Outcome {
    let fd = open(OsStr::new(&format!("/proc/{pid}/ns/user")), libc::O_RDONLY)?;
    // SAFETY: setns on a descriptor we opened.
    let entered = unsafe { libc::setns(fd, libc::CLONE_NEWUSER) };
    close(fd);
    done(entered, "entered")
}

pub(crate) fn kill_child() -> Outcome {
    // SAFETY: the child only sleeps until it is killed.
    match unsafe { libc::fork() } {
        -1 => Err(errno()),
        0 => loop {
            // SAFETY: async-signal-safe; the parent's SIGTERM ends it.
            unsafe { libc::pause() };
        },
        child => {
            // SAFETY: our own child, killed then reaped.
            let r = unsafe { libc::kill(child, libc::SIGTERM) };
            let sent = if r < 0 { Err(errno()) } else { Ok(()) };
            if sent.is_err() {
                unsafe { libc::kill(child, libc::SIGKILL) };
            }
            let mut status = 0;
            unsafe { libc::waitpid(child, &mut status, 0) };
            sent?;
            if libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGTERM {
                Ok("killed".to_owned())
            } else {
                Err(libc::ECHILD)
            }
        }
    }
}

pub(crate) fn finit_module(path: &OsStr) -> Outcome {
    let fd = open(path, libc::O_RDONLY)?;
    let empty = c(OsStr::new(""));
    // SAFETY: an open descriptor and empty parameters.
    let r = unsafe { libc::syscall(libc::SYS_finit_module, fd, empty.as_ptr(), 0) };
    close(fd);
    done(r as i32, "loaded")
}

pub(crate) fn init_module(path: &OsStr) -> Outcome {
    let image = std::fs::read(path).map_err(|e| e.raw_os_error().unwrap_or(255))?;
    let empty = c(OsStr::new(""));
    // SAFETY: the image's bytes and length, and empty parameters.
    let r = unsafe {
        libc::syscall(
            libc::SYS_init_module,
            image.as_ptr(),
            image.len(),
            empty.as_ptr(),
        )
    };
    done(r as i32, "loaded")
}

/// `CAP_FSETID`: keeps set-id bits when a file is written or truncated.
const CAP_FSETID: u32 = 4;

pub(crate) fn drop_fsetid() -> Outcome {
    /// `struct __user_cap_header_struct`.
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    /// `struct __user_cap_data_struct`.
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let mut header = Header {
        version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3
        pid: 0,
    };
    let mut data = [Data::default(); 2];
    // SAFETY: a version 3 header and the two data words it asks for.
    let r = unsafe { libc::syscall(libc::SYS_capget, &raw mut header, data.as_mut_ptr()) };
    if r < 0 {
        return Err(errno());
    }
    data[0].effective &= !(1 << CAP_FSETID);
    // SAFETY: as above.
    let r = unsafe { libc::syscall(libc::SYS_capset, &raw mut header, data.as_ptr()) };
    done(r as i32, "dropped")
}
