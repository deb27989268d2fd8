//! Self-protection: what an agent may never do, whatever its grants, because
//! it would switch pincer off or step outside its cgroup.

use pincer_common::{Agent, EPERM, counter, mode, verdict};

use crate::{maps::count, report};

/// Refuses a guarded action with `EPERM`, the kernel's own answer to a
/// forbidden signal, trace or mount (allows and reports it in audit mode).
#[inline(always)]
pub fn refuse(agent: &Agent, hook: u32, target: u32) -> i32 {
    if agent.mode == mode::AUDIT {
        count(counter::AUDITED);
        report::send_guard(agent, hook, target, verdict::AUDITED);
        return 0;
    }
    count(counter::GUARDED);
    count(counter::DENIED);
    report::send_guard(agent, hook, target, verdict::DENIED);
    -EPERM
}
