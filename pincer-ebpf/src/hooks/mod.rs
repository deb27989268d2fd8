//! The programs: one `#[lsm]` entry point per hook of
//! `pincer_common::hook::ALL`, defined by [`programs!`] from a list of
//! hook names and the functions that decide them. [`file`] has the hooks
//! that decide an access to a file against the agent's grants; [`guard`] the
//! self-protection hooks, which refuse whatever the grants (capabilities
//! among them); [`owned`] the hooks of IPC objects and keys, which an agent
//! reaches only when its own cgroup created them.
//!
//! Every such function is generic over its hook's id and starts with
//! [`agent`], so every program starts the same way:
//!
//! | task                                   | every mode                 |
//! |----------------------------------------|----------------------------|
//! | an earlier program on the hook refused | that refusal, nothing read |
//! | not in an agent cgroup                 | allow (one hash lookup)    |
//! | in a held cgroup ([`crate::held`])     | wait for the daemon        |
//! | confined from its first exec, before it ([`crate::held::armed`]) | allow; the exec's open is decided and ends this |
//! | in an agent cgroup                     | the function's own table   |
//!
//! and every file hook's table ends the same way, as [`crate::decide`] does:
//!
//! | the access                                       | enforce  | audit          | ask      |
//! |--------------------------------------------------|----------|----------------|----------|
//! | cannot be identified (no offsets, a read failed) | `EACCES` | allow + report | `EACCES` |

pub mod file;
pub mod guard;
pub mod owned;

use aya_ebpf::{EbpfContext, programs::LsmContext};
use pincer_common::{Agent, agent_flags, hook, mode};

use crate::{held, maps};

/// The agent a program decides for, or the program's answer without
/// deciding (`Err`): the refusal of an earlier program on the hook, or 0
/// for a task in no agent cgroup.
///
/// `HOOK` is the hook's id: the hook table says which slot of the context
/// holds the earlier programs' verdict (the one after the hook's
/// arguments), and hooks whose signature varies have none to read.
#[inline(always)]
pub fn agent<const HOOK: u32>(ctx: &LsmContext) -> Result<Agent, i32> {
    if let Some(slot) = const { hook::get(HOOK).verdict_slot() } {
        let previous: i32 = ctx.arg(slot);
        if previous != 0 {
            return Err(previous);
        }
    }
    let agent = maps::current_agent().ok_or(0)?;
    if agent.mode == mode::HELD {
        return Err(held::stop(&agent, HOOK));
    }
    if agent.flags & agent_flags::FROM_EXEC != 0 {
        return held::armed::<HOOK>(ctx, agent);
    }
    Ok(agent)
}

/// Defines the programs: for each `name => function(args)`, an `#[lsm]`
/// entry point called `name` that returns what `function::<ID>(&ctx, args)`
/// answers, whether it decided (`Ok`) or not (`Err`), `ID` being the id of
/// the hook of that name in the hook table. A name no hook has fails the
/// build.
///
/// A program is named after its hook, which is all the loader needs: it
/// attaches each program to the hook it is named after, so `#[lsm]` takes no
/// `hook =`.
macro_rules! programs {
    ($($name:ident => $($function:ident)::+ ($($arg:expr),*),)*) => {$(
        #[aya_ebpf::macros::lsm]
        pub fn $name(ctx: aya_ebpf::programs::LsmContext) -> i32 {
            const HOOK: u32 = pincer_common::hook::named(stringify!($name)).id;
            $crate::hooks::answer($($function)::+::<HOOK>(&ctx $(, $arg)*))
        }
    )*};
}
pub(crate) use programs;

/// A program's return value, whether it decided (`Ok`) or answered without
/// deciding (`Err`).
#[inline(always)]
pub fn answer(result: Result<i32, i32>) -> i32 {
    match result {
        Ok(verdict) | Err(verdict) => verdict,
    }
}

/// Argument `N` of a hook, read with a load the compiler can neither drop nor
/// merge with another: the verifier only accepts context reads at constant
/// offsets, and a choice between two `ctx.arg` reads may be compiled into
/// one read at a computed offset.
#[inline(always)]
pub fn fixed_arg<const N: usize>(ctx: &LsmContext) -> *const u8 {
    let slot = ctx.as_ptr().cast::<u64>().wrapping_add(N);
    // SAFETY: the context holds the hook's arguments and verdict, at least
    // N + 1 slots for every `N` used here.
    unsafe { core::ptr::read_volatile(slot) as *const u8 }
}
