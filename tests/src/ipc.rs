//! System V IPC objects and keys made outside every agent cgroup, which no
//! agent may reach whatever their permissions say.

use crate::SECRET;

/// System V IPC keys of the objects made outside the agent's cgroup.
pub const IPC_KEY: i32 = 0x5049_4e43;

/// A message queue, a shared memory segment and a semaphore set made
/// outside every agent cgroup, open to everyone by their modes; removed on
/// drop.
pub struct ForeignIpc {
    pub msg: i32,
    pub shm: i32,
    pub sem: i32,
}

impl ForeignIpc {
    /// Makes the three at [`IPC_KEY`] and the two keys after it.
    pub fn new() -> ForeignIpc {
        let flags = libc::IPC_CREAT | 0o666;
        // SAFETY: plain System V calls with valid arguments.
        let ipc = unsafe {
            ForeignIpc {
                msg: libc::msgget(IPC_KEY, flags),
                shm: libc::shmget(IPC_KEY + 1, 4096, flags),
                sem: libc::semget(IPC_KEY + 2, 1, flags),
            }
        };
        assert!(ipc.msg >= 0 && ipc.shm >= 0 && ipc.sem >= 0);
        ipc
    }

    /// Whether all three still exist.
    pub fn exist(&self) -> bool {
        // SAFETY: IPC_STAT into zeroed structures of the right types.
        unsafe {
            let mut msg: libc::msqid_ds = std::mem::zeroed();
            let mut shm: libc::shmid_ds = std::mem::zeroed();
            libc::msgctl(self.msg, libc::IPC_STAT, &mut msg) == 0
                && libc::shmctl(self.shm, libc::IPC_STAT, &mut shm) == 0
                && libc::semctl(self.sem, 0, libc::GETVAL) >= 0
        }
    }
}

impl Default for ForeignIpc {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for ForeignIpc {
    fn drop(&mut self) {
        // SAFETY: removing what `new` made; errors (already gone) are fine.
        unsafe {
            libc::msgctl(self.msg, libc::IPC_RMID, std::ptr::null_mut());
            libc::shmctl(self.shm, libc::IPC_RMID, std::ptr::null_mut());
            libc::semctl(self.sem, 0, libc::IPC_RMID);
        }
    }
}

/// Adds a user key holding the secret to root's user keyring, readable by
/// anyone its permissions concern; returns its serial number.
pub fn foreign_key() -> String {
    const KEY_SPEC_USER_KEYRING: i32 = -4;
    const KEYCTL_SETPERM: i32 = 5;
    let (kind, name) = (c"user", c"pincer-test-secret");
    // SAFETY: add_key and keyctl with valid strings and lengths.
    let serial = unsafe {
        libc::syscall(
            libc::SYS_add_key,
            kind.as_ptr(),
            name.as_ptr(),
            SECRET.as_ptr(),
            SECRET.len(),
            KEY_SPEC_USER_KEYRING,
        )
    };
    assert!(serial > 0, "add_key: {}", std::io::Error::last_os_error());
    // Every permission to possessor, user, group and others: only pincer
    // stands between an agent and the key.
    let r = unsafe { libc::syscall(libc::SYS_keyctl, KEYCTL_SETPERM, serial, 0x3f3f_3f3fu32) };
    assert_eq!(r, 0, "setperm: {}", std::io::Error::last_os_error());
    serial.to_string()
}
