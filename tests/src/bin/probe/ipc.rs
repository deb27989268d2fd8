//! Talking to other processes: Unix sockets, TCP ports, System V IPC and
//! keyrings. Apart because none of it touches a file.

use std::{
    ffi::OsStr,
    io::IoSliceMut,
    os::{fd::AsRawFd, unix::net::UnixStream},
    time::Duration,
};

use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};

use crate::{
    Outcome, c, done, errno,
    files::{close, read_fd},
};

pub(crate) fn recv_fd(socket: &OsStr) -> Outcome {
    let stream = UnixStream::connect(socket).map_err(|e| e.raw_os_error().unwrap_or(255))?;
    let mut byte = [0u8; 1];
    let mut iov = [IoSliceMut::new(&mut byte)];
    let mut space = nix::cmsg_space!([std::os::fd::RawFd; 1]);
    let msg = recvmsg::<()>(
        stream.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )
    .map_err(|e| e as i32)?;
    if msg.flags.contains(MsgFlags::MSG_CTRUNC) {
        return Ok("no-fd ctrunc".to_owned());
    }
    let mut fds = Vec::new();
    for cmsg in msg.cmsgs().map_err(|e| e as i32)? {
        if let ControlMessageOwned::ScmRights(received) = cmsg {
            fds.extend(received);
        }
    }
    match fds.first() {
        Some(&fd) => {
            let result = read_fd(fd).map(|r| format!("fd {r}"));
            fds.iter().for_each(|&fd| close(fd));
            result
        }
        None => Ok("no-fd".to_owned()),
    }
}

/// Opens up to `n` connections to a Unix socket (as many descriptors as
/// the hard limit allows) and holds them open for `seconds`, as an agent
/// trying to exhaust a server would; reports how many connected.
pub(crate) fn flood(socket: &OsStr, n: usize, seconds: u64) -> Outcome {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: get and set this process's own limit.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut limit);
        limit.rlim_cur = limit.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &raw const limit);
    }
    let mut held = Vec::with_capacity(n);
    let mut failed = 0;
    for _ in 0..n {
        match std::os::unix::net::UnixStream::connect(socket) {
            Ok(stream) => held.push(stream),
            Err(_) => failed += 1,
        }
    }
    std::thread::sleep(Duration::from_secs(seconds));
    Ok(format!("flood {} connected {failed} failed", held.len()))
}

pub(crate) fn bind_port(port: u16) -> Outcome {
    // SAFETY: a plain socket, bound to a zeroed and filled sockaddr_in.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(errno());
        }
        let mut addr: libc::sockaddr_in = std::mem::zeroed();
        addr.sin_family = libc::AF_INET as u16;
        addr.sin_port = port.to_be();
        let r = libc::bind(
            fd,
            (&raw const addr).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as u32,
        );
        let result = done(r, "bound");
        close(fd);
        result
    }
}

pub(crate) fn msg_send(id: i32) -> Outcome {
    /// A message: its type, then its text.
    #[repr(C)]
    struct Message {
        mtype: libc::c_long,
        text: [u8; 4],
    }
    let message = Message {
        mtype: 1,
        text: *b"ping",
    };
    // SAFETY: a message of the size passed.
    done(
        unsafe { libc::msgsnd(id, (&raw const message).cast(), 4, libc::IPC_NOWAIT) },
        "sent",
    )
}

pub(crate) fn shm_attach(id: i32) -> Outcome {
    // SAFETY: attach anywhere, detach at once.
    let at = unsafe { libc::shmat(id, std::ptr::null(), libc::SHM_RDONLY) };
    if at as isize == -1 {
        return Err(errno());
    }
    unsafe { libc::shmdt(at) };
    Ok("attached".to_owned())
}

pub(crate) fn sem_op(id: i32) -> Outcome {
    let mut op = libc::sembuf {
        sem_num: 0,
        sem_op: 1,
        sem_flg: libc::IPC_NOWAIT as i16,
    };
    // SAFETY: one operation on semaphore 0.
    done(unsafe { libc::semop(id, &mut op, 1) }, "done")
}

pub(crate) fn msg_remove(id: i32) -> Outcome {
    // SAFETY: IPC_RMID takes no buffer.
    done(
        unsafe { libc::msgctl(id, libc::IPC_RMID, std::ptr::null_mut()) },
        "removed",
    )
}

pub(crate) fn shm_remove(id: i32) -> Outcome {
    // SAFETY: IPC_RMID takes no buffer.
    done(
        unsafe { libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut()) },
        "removed",
    )
}

pub(crate) fn sem_remove(id: i32) -> Outcome {
    // SAFETY: IPC_RMID of the whole set.
    done(unsafe { libc::semctl(id, 0, libc::IPC_RMID) }, "removed")
}

pub(crate) fn ipc_own() -> Outcome {
    let perms = libc::IPC_CREAT | 0o600;
    // SAFETY: private objects, used and removed here.
    let msg = unsafe { libc::msgget(libc::IPC_PRIVATE, perms) };
    done(msg, "")?;
    msg_send(msg)?;
    let mut buf = [0u8; 64];
    let n = unsafe { libc::msgrcv(msg, buf.as_mut_ptr().cast(), 56, 0, libc::IPC_NOWAIT) };
    if n != 4 {
        return Err(errno());
    }
    msg_remove(msg)?;
    let shm = unsafe { libc::shmget(libc::IPC_PRIVATE, 4096, perms) };
    done(shm, "")?;
    shm_attach(shm)?;
    shm_remove(shm)?;
    let sem = unsafe { libc::semget(libc::IPC_PRIVATE, 1, perms) };
    done(sem, "")?;
    sem_op(sem)?;
    sem_remove(sem)?;
    Ok("queue, segment and semaphores used".to_owned())
}

/// `keyctl(2)` commands.
const KEYCTL_JOIN_SESSION_KEYRING: i32 = 1;
const KEYCTL_READ: i32 = 11;
/// `KEY_SPEC_SESSION_KEYRING`.
const KEY_SPEC_SESSION_KEYRING: i32 = -3;

pub(crate) fn key_read(serial: i32) -> Outcome {
    let mut buf = [0u8; 256];
    // SAFETY: a buffer of the length passed.
    let n = unsafe {
        libc::syscall(
            libc::SYS_keyctl,
            KEYCTL_READ,
            serial,
            buf.as_mut_ptr(),
            buf.len(),
        )
    };
    if n < 0 {
        Err(errno())
    } else {
        Ok(format!("read {n}"))
    }
}

pub(crate) fn key_own() -> Outcome {
    // SAFETY: an anonymous session keyring, then a user key in it.
    let ring = unsafe {
        libc::syscall(
            libc::SYS_keyctl,
            KEYCTL_JOIN_SESSION_KEYRING,
            std::ptr::null::<u8>(),
        )
    };
    if ring < 0 {
        return Err(errno());
    }
    let (kind, name) = (c(OsStr::new("user")), c(OsStr::new("own")));
    let key = unsafe {
        libc::syscall(
            libc::SYS_add_key,
            kind.as_ptr(),
            name.as_ptr(),
            b"mine".as_ptr(),
            4usize,
            KEY_SPEC_SESSION_KEYRING,
        )
    };
    if key < 0 {
        return Err(errno());
    }
    key_read(key as i32)
}
