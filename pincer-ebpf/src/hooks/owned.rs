//! Objects outside the file system that belong to whoever made them: System
//! V message queues, shared memory segments and semaphore sets, and keys.
//! An agent reaches only those a task of its own cgroup created; anything
//! created outside (by the host's services, a user's session, another
//! agent) is out of its reach, whatever its user id or capabilities.
//!
//! Who created an object is recorded when it is created, in
//! [`maps::OWNERS`], keyed by its kernel address: an agent's creation is
//! recorded with its cgroup, anyone else's removes what a freed object at
//! the same address left there. (The allocation hooks are the only cost
//! this adds outside agents: a map update per IPC object or key created.)
//! Objects created before pincer started have no entry: they are not the
//! agent's. POSIX message queues and shared memory are files, decided by the
//! file hooks.
//!
//! The tables below are for a task in an agent cgroup; [`super`] says what
//! comes before.

use aya_ebpf::{
    EbpfContext,
    helpers::{bpf_get_current_cgroup_id, bpf_get_current_task, bpf_probe_read_kernel},
    programs::LsmContext,
};
use pincer_common::{Agent, EACCES, counter, event_flags, mode, verdict};

use super::agent;
use crate::{
    kernel,
    maps::{self, count},
    report,
};

/// `security_msg_queue_alloc(struct kern_ipc_perm *perm)`,
/// `security_shm_alloc(...)` and `security_sem_alloc(...)`: a System V IPC
/// object is created. Never refused; records who created it.
///
/// | the creator                      | every mode                                      |
/// |----------------------------------|-------------------------------------------------|
/// | an agent                         | allow; the object is its cgroup's               |
/// | anyone else (or already refused) | allow (or that refusal); the object is nobody's |
#[inline(always)]
pub fn created<const HOOK: u32>(ctx: &LsmContext) -> Result<i32, i32> {
    record::<HOOK>(ctx, true)
}

/// `security_key_alloc(struct key *key, const struct cred *cred, unsigned long flags)`:
/// a key or keyring is created. As [`created`], except that a user's own
/// keyrings (`KEY_ALLOC_UID_KEYRING`: `_uid.N` and `_uid_ses.N`, which the
/// kernel makes for whichever process of that user asks first) are never an
/// agent's: every process of the user shares them.
#[inline(always)]
pub fn key_created<const HOOK: u32>(ctx: &LsmContext) -> Result<i32, i32> {
    let flags: u64 = ctx.arg(2);
    record::<HOOK>(ctx, flags & KEY_ALLOC_UID_KEYRING == 0)
}

/// `KEY_ALLOC_UID_KEYRING`.
const KEY_ALLOC_UID_KEYRING: u64 = 0x0010;

/// Records who created the object of argument 0: the current agent's cgroup
/// when `own` is true and the task is an agent, nobody otherwise.
#[inline(always)]
fn record<const HOOK: u32>(ctx: &LsmContext, own: bool) -> Result<i32, i32> {
    let object: u64 = ctx.arg(0);
    match agent::<HOOK>(ctx) {
        Ok(_) if !own => {
            let _ = maps::OWNERS.remove(object);
            Ok(0)
        }
        Ok(_) => {
            let cgroup = unsafe { bpf_get_current_cgroup_id() };
            // A failed insert leaves the object nobody's: its creator is
            // refused it later, never someone else given it.
            let _ = maps::OWNERS.insert(object, cgroup, 0);
            Ok(0)
        }
        Err(answer) => {
            let _ = maps::OWNERS.remove(object);
            Err(answer)
        }
    }
}

/// `security_ipc_permission(struct kern_ipc_perm *ipcp, short flag)` (every
/// use of a System V IPC object but its control operations: `msgget`,
/// `shmget`, `semget` of an existing key, `msgsnd`, `msgrcv`, `shmat`,
/// `semop`, `IPC_STAT`), and `security_msg_queue_msgctl(struct kern_ipc_perm *perm, int cmd)`,
/// `security_shm_shmctl(...)`, `security_sem_semctl(...)` (`IPC_RMID`,
/// `IPC_SET`, `SHM_LOCK`, `*_STAT_ANY`, ...).
///
/// | the object                              | enforce  | audit          | ask      |
/// |-----------------------------------------|----------|----------------|----------|
/// | none (`IPC_INFO` and the like: counts)  | allow    | allow          | allow    |
/// | created by a task of the agent's cgroup | allow    | allow          | allow    |
/// | any other                               | `EACCES` | allow + report | `EACCES` |
#[inline(always)]
pub fn ipc<const HOOK: u32>(ctx: &LsmContext) -> Result<i32, i32> {
    let agent = agent::<HOOK>(ctx)?;
    let object: u64 = ctx.arg(0);
    if object == 0 || is_own(object) {
        return Ok(0);
    }
    let id = kernel::loaded().ok().and_then(|()| {
        kernel::read::<i32>(object as *const u8, kernel::off().kern_ipc_perm_id).ok()
    });
    Ok(refuse(&agent, HOOK, id.unwrap_or(-1)))
}

/// `security_key_permission(key_ref_t key_ref, const struct cred *cred, enum key_need_perm need_perm)`:
/// a key or keyring is searched, read, written, linked, ...
///
/// | the key                                                  | enforce  | audit          | ask      |
/// |----------------------------------------------------------|----------|----------------|----------|
/// | created by a task of the agent's cgroup                  | allow    | allow          | allow    |
/// | checked with credentials the kernel put in place itself  | allow    | allow          | allow    |
/// | any other (the user's and session keyrings made at login, another process's keys) | `EACCES` | allow + report | `EACCES` |
///
/// The kernel looks keys up for itself under credentials of its own while
/// it serves the agent (DNS and NFS id resolution, `override_creds`): those
/// lookups are not the agent's. An agent that wants a keyring makes its own
/// (`keyctl session`).
#[inline(always)]
pub fn key_permission<const HOOK: u32>(ctx: &LsmContext) -> Result<i32, i32> {
    let agent = agent::<HOOK>(ctx)?;
    // `key_ref_t` points to a type the kernel only declares, and the
    // verifier refuses a direct context read of such an argument: the slot
    // is copied out instead (unreadable: no key, refused below as not the
    // agent's).
    let slot = ctx.as_ptr().cast::<u64>();
    let key_ref = unsafe { bpf_probe_read_kernel(slot) }.unwrap_or(0);
    // The lowest bit of a key reference says whether it is possessed.
    let key = key_ref & !1;
    if is_own(key) {
        return Ok(0);
    }
    if kernel::loaded().is_err() {
        return Ok(refuse(&agent, HOOK, -1));
    }
    let off = kernel::off();
    let cred: u64 = ctx.arg(1);
    let task = unsafe { bpf_get_current_task() } as *const u8;
    match kernel::read::<u64>(task, off.task_struct_real_cred) {
        Ok(real) if real != cred => return Ok(0),
        _ => {}
    }
    let serial = kernel::read::<i32>(key as *const u8, off.key_serial).unwrap_or(-1);
    Ok(refuse(&agent, HOOK, serial))
}

/// Whether a task of the current cgroup created the object at `address`.
#[inline(always)]
fn is_own(address: u64) -> bool {
    let cgroup = unsafe { bpf_get_current_cgroup_id() };
    unsafe { maps::OWNERS.get(address) }.is_some_and(|owner| *owner == cgroup)
}

/// Refuses the use of an object that is not the agent's with `EACCES`, as
/// the kernel refuses one its permissions do not allow (allows and reports
/// it in audit mode); `id` is the IPC identifier or the key's serial number.
#[inline(always)]
fn refuse(agent: &Agent, hook: u32, id: i32) -> i32 {
    // The id is reported as the 32-bit value it is.
    let object = u64::from(id as u32);
    if agent.mode == mode::AUDIT {
        count(counter::AUDITED);
        report::send_refusal(
            agent,
            hook,
            object,
            verdict::AUDITED,
            event_flags::NOT_OWNED,
        );
        return 0;
    }
    count(counter::DENIED);
    report::send_refusal(agent, hook, object, verdict::DENIED, event_flags::NOT_OWNED);
    -EACCES
}
