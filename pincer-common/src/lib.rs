//! The ABI between pincer's BPF programs and its userspace.
//!
//! Every type here is `#[repr(C)]`, `Copy`, made of fixed-size integers and
//! arrays with explicit padding, so both sides agree on the layout byte for
//! byte. Flags are plain integers rather than Rust enums: a value written by one
//! side is never undefined behaviour for the other, and userspace decodes them
//! with `TryFrom`. Each type's size is checked at compile time. A list of
//! values that has names ([`caps`], [`counter`], [`ops`], [`authority`],
//! [`label_flags`], [`policy_rule`]) declares each value beside its name, and
//! `NAMES` is made from that one list.
//!
//! - Words: [`ops`] (operation bits), [`mode`] (an agent's mode),
//!   [`agent_flags`], [`verdict`] and [`event_flags`] (what an event says),
//!   [`counter`] (the kernel's counters), [`names`] (map names), [`caps`]
//!   (capabilities: the default set and those never given), and
//!   [`hook`], the one table of hooks (id, name, BTF function, argument
//!   count) the programs, the loader's BTF check and the event decoder read;
//!   labels: [`authority`] levels, [`label_flags`], [`policy_rule`],
//!   [`policy_entry`].
//! - Map keys and values: [`Agent`], [`GrantKey`], [`GrantValue`],
//!   [`CachedGrant`], [`NameGrantKey`], [`Pending`], [`Verdict`], [`Twin`],
//!   [`KernelOffsets`], [`ObjectKey`], [`Label`], [`PolicyNameKey`],
//!   [`PolicySuffixKey`], [`PolicyRules`], [`VacatedKey`],
//!   [`Making`]; the ring-buffer record [`AccessEvent`].
//! - Limits: path components, tree depth, map sizes, the ring buffer.
#![no_std]

/// Declares named `u32` values from one list: each a documented constant,
/// and `NAMES`, each value with the name missions, audit lines and metrics
/// use, in the order written. A value and its name are written once, side
/// by side, so the two lists cannot drift apart.
macro_rules! named {
    (
        $(#[doc = $names_doc:literal])*
        NAMES;
        $(
            $(#[doc = $doc:literal])*
            $id:ident = $value:expr => $name:literal;
        )*
    ) => {
        $(
            $(#[doc = $doc])*
            pub const $id: u32 = $value;
        )*

        $(#[doc = $names_doc])*
        pub const NAMES: [(u32, &str); [$($name),*].len()] = [$(($id, $name)),*];

        // No two values, and no two names, are the same.
        const _: () = assert!(crate::text::one_to_one(&NAMES));
    };
}

pub mod caps;
pub mod counter;
pub mod hook;
pub mod ioctl;
pub mod names;
pub mod ops;

mod agent;
mod event;
mod grant;
mod kernel;
mod label;
mod limits;
mod park;
mod policy;
mod text;

// The types and words live in modules by concern; the crate's root is where
// both sides name them.
pub use agent::*;
pub use event::*;
pub use grant::*;
pub use kernel::*;
pub use label::*;
pub use limits::*;
pub use park::*;
pub use policy::*;

const _: () = {
    assert!(core::mem::size_of::<Agent>() == 24);
    assert!(core::mem::size_of::<GrantKey>() == 24);
    assert!(core::mem::size_of::<GrantValue>() == 8);
    assert!(core::mem::size_of::<CachedGrant>() == 16);
    assert!(core::mem::size_of::<NameGrantKey>() == 24 + NAME_LEN);
    assert!(core::mem::size_of::<AccessEvent>() == 136 + COMPONENT_LEN * MAX_COMPONENTS);
    assert!(core::mem::size_of::<KernelOffsets>() == 192);
    assert!(core::mem::size_of::<ObjectKey>() == 16);
    assert!(core::mem::size_of::<Label>() == 24 + 8 * MAX_ORIGINS);
    assert!(core::mem::size_of::<PolicyNameKey>() == POLICY_NAME_LEN);
    assert!(core::mem::size_of::<PolicySuffixKey>() == POLICY_SUFFIX_LEN);
    assert!(core::mem::size_of::<PolicyPair>() == 16);
    assert!(core::mem::size_of::<PolicyRules>() == 16 + 16 * POLICY_PAIRS);
    assert!(core::mem::size_of::<VacatedKey>() == 24);
    assert!(core::mem::size_of::<Making>() == 16);
    assert!(core::mem::size_of::<Taint>() == 24 + 8 * MAX_ORIGINS);
    assert!(core::mem::size_of::<Action>() == 8);
    assert!(core::mem::size_of::<Pending>() == 40);
    assert!(core::mem::size_of::<Verdict>() == 32);
    assert!(core::mem::size_of::<Twin>() == 16);
};

#[cfg(feature = "user")]
mod pod {
    // SAFETY: each type is `repr(C)`, `Copy`, made only of integers and integer
    // arrays with explicit padding fields, so every bit pattern is valid.
    unsafe impl aya::Pod for super::Agent {}
    unsafe impl aya::Pod for super::GrantKey {}
    unsafe impl aya::Pod for super::GrantValue {}
    unsafe impl aya::Pod for super::CachedGrant {}
    unsafe impl aya::Pod for super::NameGrantKey {}
    unsafe impl aya::Pod for super::PrefixName {}
    unsafe impl aya::Pod for super::AccessEvent {}
    unsafe impl aya::Pod for super::KernelOffsets {}
    unsafe impl aya::Pod for super::Pending {}
    unsafe impl aya::Pod for super::Verdict {}
    unsafe impl aya::Pod for super::Twin {}
    unsafe impl aya::Pod for super::ObjectKey {}
    unsafe impl aya::Pod for super::Label {}
    unsafe impl aya::Pod for super::PolicyNameKey {}
    unsafe impl aya::Pod for super::PolicySuffixKey {}
    unsafe impl aya::Pod for super::PolicyRules {}
    unsafe impl aya::Pod for super::VacatedKey {}
    unsafe impl aya::Pod for super::Making {}
    unsafe impl aya::Pod for super::Taint {}
    unsafe impl aya::Pod for super::Action {}
}
