// Part of the `decide` module (see the end of `decide.rs`): what the agent's
// mode makes of the grants' answer (`settle`), and the two exceptions a
// policy place leaves to a sandbox: its placeholders and their removal.

/// Whether a new name refused only by its policy place may be made as a
/// **placeholder**: bubblewrap, as agents' own sandboxes use it, makes an
/// empty file or directory at each name it binds something over, and the
/// names an agent's sandbox protects that way are policy names
/// (`.claude/settings.json`, `.git`).
///
/// It may when the grants would give the creation but for the policy place
/// (never outside the mission), the name is made from a mount namespace of
/// the agent's own sandbox ([`kernel::own_mount_namespace`]), it is a
/// directory or a file with no execute or set-id bit (`may_hold`), and it
/// is not a name that sends a tool elsewhere made as a file (an empty
/// `.git` file breaks git). A placeholder file's open is refused with
/// `EEXIST` (`hooks::file::file_open`), so no descriptor that writes it is
/// ever given: it stays empty. Either kind is labelled a policy object
/// (a directory a policy tree), not the agent's own: only the owner changes
/// or removes it, and in a placeholder directory the agent makes nothing
/// but placeholders, whatever the names (a `.git` it made so holds no
/// `HEAD` of its own).
#[inline(always)]
fn placeholder(checked: &Checked) -> bool {
    let access = &checked.access;
    let file = access.hook == hook::INODE_CREATE;
    if access.exists
        || (checked.granted | checked.masked) & access.ops != access.ops
        || checked.agent.userns_home == NO_OWN_NAMESPACES
        || (file && checked.place.bits & policy_rule::REDIRECT != 0)
        || !kernel::own_mount_namespace(kernel::off(), checked.agent.userns_home)
    {
        return false;
    }
    // Audit mode changes nothing a program sees: the open keeps its
    // descriptor (the placeholder is still made as one, unreported, as
    // enforce mode would allow it).
    if !file || checked.agent.mode == mode::AUDIT {
        return true;
    }
    // Recorded before it is made: a file whose open could not be refused
    // is not made at all.
    let tid = bpf_get_current_pid_tgid() as u32;
    PLACEHOLDERS.insert(tid, access.dentry as u64, 0).is_ok()
}

/// The callback that makes the new name of the entry its context holds a
/// placeholder when it may be one ([`placeholder`]).
extern "C" fn placeholder_step(_index: u64, ctx: *mut c_void) -> i64 {
    let Some(checked) = callback_entry(ctx) else {
        return 1;
    };
    if checked.identified != 0 && checked.revoked == 0 && placeholder(checked) {
        count(counter::PLACEHOLDERS);
        checked.placeholder = 1;
        checked.granted |= checked.access.ops & !checked.reserved;
    }
    1
}

/// Whether the access removes a placeholder file ([`placeholder`]) its
/// own agent made, still empty, where the grants would give the removal
/// but for the policy place: bubblewrap's users tidy up the placeholders
/// of a sandboxed command after it. (A placeholder directory is removed
/// like any directory: only an empty one is.) One the owner has written
/// since is the owner's. Asked only by [`decide_removal`], for an unlink
/// of an object labelled a placeholder.
#[inline(always)]
fn tidied(checked: &Checked) -> bool {
    // The label is read again, though `decide_removal` looked at it: without
    // this test the verifier checks inode_unlink's program 3.7 % longer on
    // 6.1 (250 454 instructions against 241 568).
    if checked.label.flags & label_flags::PLACEHOLDER == 0
        || (checked.granted | checked.masked) & ops::DELETE == 0
        || checked.label.agent != unsafe { bpf_get_current_cgroup_id() }
    {
        return false;
    }
    // `i_size` is a `loff_t`.
    kernel::read::<i64>(checked.access.inode, kernel::off().inode_i_size)
        .is_ok_and(|size| size == 0)
}

/// The callback that gives the removal of the entry its context holds
/// when it tidies a placeholder away ([`tidied`]).
extern "C" fn tidied_step(_index: u64, ctx: *mut c_void) -> i64 {
    let Some(checked) = callback_entry(ctx) else {
        return 1;
    };
    if checked.identified != 0 && checked.revoked == 0 && tidied(checked) {
        checked.granted |= ops::DELETE & !checked.reserved;
    }
    1
}

/// The inode of the object, or for a creation of its directory (null when
/// it cannot be read).
#[inline(always)]
fn object_inode(access: &Access) -> *const u8 {
    if !access.inode.is_null() || access.dentry.is_null() {
        return access.inode;
    }
    let off = kernel::off();
    match kernel::parent(off, access.dentry) {
        Ok(Some(dir)) => kernel::dentry_inode(off, dir).unwrap_or(core::ptr::null()),
        _ => core::ptr::null(),
    }
}

/// The callback that decides the entry whose number its context holds
/// ([`settle`]) and leaves the hook's verdict in it.
extern "C" fn decide_step(_index: u64, ctx: *mut c_void) -> i64 {
    let Some(checked) = callback_entry(ctx) else {
        return 1;
    };
    checked.ret = settle(checked);
    1
}

/// Applies the agent's mode to a checked access and reports the result.
///
/// The entry's `no_park` is the event flag of the reason an ungranted
/// access cannot be parked in ask mode (zero when it can be); its `forced`
/// makes the access ungranted whatever the grants, with that flag. Every
/// path reaches the one reporting call at the end: each call site of
/// `report::fill` is a copy of the path walk the verifier checks again,
/// and the programs load faster with one.
///
/// What the access makes or changes is labelled before it goes on, on the
/// two ways an access is allowed: granted (or audit mode, which allows
/// everything), and a verdict that allows a parked one.
#[inline(always)]
fn settle(checked: &Checked) -> i32 {
    let agent = &checked.agent;
    // Each field the decision branches on is read once: the verifier does
    // not follow values in a map, so two reads of one field are two values
    // to it, and a choice the compiler makes from one read and relies on
    // at another would not hold for it.
    // SAFETY: plain values in this CPU's entry.
    let (identified, granted, barrier, ops, forced, no_park, reserved, revoked, inspect) = unsafe {
        (
            core::ptr::read_volatile(&checked.identified) != 0,
            core::ptr::read_volatile(&checked.granted),
            core::ptr::read_volatile(&checked.barrier) != 0,
            core::ptr::read_volatile(&checked.access.ops),
            core::ptr::read_volatile(&checked.forced),
            core::ptr::read_volatile(&checked.no_park),
            core::ptr::read_volatile(&checked.reserved),
            core::ptr::read_volatile(&checked.revoked) != 0,
            core::ptr::read_volatile(&checked.inspect) != 0,
        )
    };
    let covered = identified && granted & ops == ops;
    let allowed = (forced == 0 && covered) || agent.mode == mode::AUDIT;
    if allowed && label_allowed(checked).is_err() {
        count(counter::DENIED);
        return -EACCES;
    }
    let tainted = if allowed {
        match taint(checked) {
            Ok(flag) => flag,
            Err(()) => {
                count(counter::DENIED);
                return -EACCES;
            }
        }
    } else {
        0
    };
    // All three are the owner's alone to allow.
    let policy = if forced == 0 && revoked {
        count(counter::REVOKED);
        event_flags::REVOKED
    } else if forced == 0 && barrier && ops & CHANGE_OPS & !granted != 0 {
        count(counter::POLICY);
        if inspect {
            event_flags::POLICY | event_flags::INSPECT
        } else {
            event_flags::POLICY
        }
    } else if forced == 0 && reserved & ops != 0 {
        count(counter::ACTION);
        event_flags::ACTION
    } else {
        0
    };
    let access = &checked.access;
    let mut parked: Option<(u32, u64, u64)> = None;
    let (ret, verdict, flags) = if forced == 0 && covered {
        count(counter::ALLOWED);
        if agent.flags & agent_flags::REPORT_ALLOWED == 0 && tainted == 0 {
            return 0;
        }
        (0, verdict::ALLOWED, tainted)
    } else if agent.mode == mode::AUDIT {
        count(counter::AUDITED);
        (0, verdict::AUDITED, forced | policy | tainted)
    } else if (agent.mode == mode::ASK || policy & event_flags::INSPECT != 0)
        && no_park == 0
        && identified
    {
        // A change the twin inspects parks in enforce mode too: the twin
        // answers it from what is moved in, asking nobody.
        let moved = (checked.moved_dev, checked.moved_ino);
        match park::prepare(access, moved) {
            park::Prepared::Done(0) => {
                // A verdict allowed it.
                if label_allowed(checked).is_err() {
                    count(counter::DENIED);
                    return -EACCES;
                }
                if taint(checked).is_err() {
                    count(counter::DENIED);
                    return -EACCES;
                }
                return 0;
            }
            park::Prepared::Done(ret) => return ret,
            park::Prepared::New { tid, id, name_hash } => {
                parked = Some((tid, id, name_hash));
                (-ERESTARTNOINTR, verdict::PARKED, policy)
            }
            park::Prepared::Deny(why) => {
                count(counter::DENIED);
                (-EACCES, verdict::DENIED, why | policy)
            }
        }
    } else {
        count(counter::DENIED);
        let why = if agent.mode == mode::ASK {
            no_park
        } else {
            forced
        };
        (-EACCES, verdict::DENIED, why | forced | policy)
    };

    let Some(mut event) = report::reserve() else {
        count(counter::RINGBUF_FULL);
        if let Some((tid, _, _)) = parked {
            // A request nobody will hear of cannot wait: deny it.
            park::abandon(tid);
            count(counter::DENIED);
            return -EACCES;
        }
        return ret;
    };
    let (request_id, name_hash) = parked.map_or((0, 0), |(_, id, hash)| (id, hash));
    let place = if flags & event_flags::POLICY != 0 {
        checked.place
    } else {
        Place::NONE
    };
    let outcome = report::Outcome {
        granted,
        verdict,
        flags,
        request_id,
        name_hash,
        policy_entry: place.entry,
        policy_step: place.step,
    };
    report::fill(&mut event, agent, access, identified, outcome);
    if let Some((tid, _, _)) = parked {
        // Stop before the event is visible, so the twin never answers a
        // request whose task is still running.
        if !park::stop() {
            park::abandon(tid);
            count(counter::UNPARKABLE);
            count(counter::DENIED);
            report::mark_denied(&mut event, event_flags::UNPARKABLE);
            event.submit(0);
            return -EACCES;
        }
        count(counter::PARKED);
    }
    event.submit(0);
    ret
}

/// Labels what an allowed access makes or changes ([`labels::allowed`]).
#[inline(always)]
fn label_allowed(checked: &Checked) -> Result<(), ()> {
    if checked.labelled == 0 {
        return Ok(());
    }
    // What an agent makes in a policy place (the owner allowed it) or where
    // a person's directory was is not its own; a placeholder is a policy
    // object by its label too, and below a placeholder directory
    // everything is policy, work names included.
    let made = if checked.placeholder != 0 {
        if checked.access.hook == hook::INODE_MKDIR {
            label_flags::POLICY | label_flags::PLACEHOLDER | label_flags::TREE
        } else {
            label_flags::POLICY | label_flags::PLACEHOLDER
        }
    } else if checked.barrier != 0 || checked.vacated != 0 {
        0
    } else {
        label_flags::AGENT_MADE
    };
    labels::allowed(&checked.access, &checked.label, made)
}

/// Lowers the agent's level when an allowed access read tainted content
/// ([`labels::read`]): the event flag to report it with, or zero; `Err`
/// when the level could not be written, and the read is then refused.
#[inline(always)]
fn taint(checked: &Checked) -> Result<u32, ()> {
    if checked.labelled == 0 {
        return Ok(0);
    }
    Ok(if labels::read(&checked.access, &checked.label)? {
        event_flags::TAINT
    } else {
        0
    })
}
