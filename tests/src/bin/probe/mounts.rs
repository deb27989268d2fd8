//! Mounts: bind mounts, the new mount API, unprivileged sandboxes as
//! bubblewrap makes them. Apart because each changes the mount table.

use std::ffi::OsStr;

use crate::{
    Outcome, c, done, errno,
    files::{close, write},
};

pub(crate) fn bind_mount(src: &OsStr, dst: &OsStr) -> Outcome {
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
pub(crate) fn sandbox() -> Outcome {
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

pub(crate) fn mount_tmpfs(dir: &OsStr) -> Outcome {
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

pub(crate) fn fsopen_mount(dir: &OsStr) -> Outcome {
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

pub(crate) fn fspick_ro(dir: &OsStr) -> Outcome {
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

pub(crate) fn mount_setattr_ro(dir: &OsStr) -> Outcome {
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
