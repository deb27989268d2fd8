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

// The operations by kind; `run` below is the table that names them all.
mod exec;
mod files;
mod ipc;
mod mounts;
mod process;
mod tty;

use std::{
    ffi::{CString, OsStr, OsString},
    io::{self, Write},
    os::unix::ffi::OsStrExt,
    process::ExitCode,
    time::Duration,
};

use crate::{
    exec::{exec, exec_memfd, execveat, map_file, memfd_map_exec},
    files::{
        clone_from, close, config_swap, config_write, create, fanotify_perm, fsxattr_immutable,
        inotify, on_file, opath_reopen, open, peek, read, read_fd, set_flags, uring_open, write,
    },
    ipc::{
        bind_port, flood, ipc_own, key_own, key_read, msg_remove, msg_send, recv_fd, sem_op,
        sem_remove, shm_attach, shm_remove,
    },
    mounts::{bind_mount, fsopen_mount, fspick_ro, mount_setattr_ro, mount_tmpfs, sandbox},
    process::{
        clone_into_cgroup, drop_fsetid, finit_module, init_module, kill_child, ptrace, setns_user,
    },
    tty::sti,
};

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
