//! Missions: what an agent may touch, read from a TOML file and resolved to
//! the kernel identities (device and inode) the BPF programs check, and how
//! an access outside the grants is decided.
//!
//! ```toml
//! [mission]
//! name = "fix the failing test"
//!
//! [[grant]]
//! path = "~/project"          # absolute, or starting with `~/`
//! ops = ["read", "write", "create"]
//! extent = "tree"             # "file" (the default) or "tree"
//!
//! [defaults]
//! baseline = "runtime"        # "runtime" (the default) or "none"
//! on_unknown = "ask"          # "deny" (the default), "audit" or "ask"
//! capabilities = ["net_admin"] # added to the default set (pincer_common::caps)
//!
//! [vote]                      # how a parked request (on_unknown = "ask") is decided
//! voters = ["mission", "prompt", "webhook"]  # the default is ["mission", "prompt"]
//! timeout = "30s"             # deadline for the votes on one request: "60s" by default, at most "1h"
//! default = "deny"            # when no voter allows in time: "deny" (the default) or "allow-once"
//! max_lifetime = "ttl"        # longest allow: "once", "ttl" or "session" (the default)
//! max_ttl = "1h"              # required with max_lifetime = "ttl", refused otherwise
//! max_extent = "file"         # widest allow: "file" (the default) or "tree"
//!
//! [vote.webhook]              # required when the voters include "webhook"
//! url = "https://approvals.example/pincer"
//! secret_file = "/etc/pincer/webhook.key"    # absolute, or starting with `~/`
//! clock_skew = "30s"          # the default
//!
//! [[vote.rule]]               # the mission voter's rules: the first that matches decides
//! path = "~/.ssh"             # absolute, or starting with `~/`
//! extent = "tree"             # "file" (the default) or "tree"
//! ops = ["read"]              # every operation by default
//! verdict = "deny"            # "deny" or "allow"
//! reason = "credentials are never part of this task"
//!
//! [[vote.rule]]
//! path = "~/project/Cargo.lock"
//! ops = ["write"]
//! verdict = "allow"
//! lifetime = "ttl"            # with "allow": "once" (the default), "session" or "ttl"
//! ttl = "10m"                 # required with lifetime = "ttl", refused otherwise
//! ```
//!
//! Durations are written like `"30s"`, `"10m"` or `"1h30m"`.
//!
//! Parsing is strict: unknown keys, wrong types and unknown values are errors
//! that name the file, the line and column, and the field (`grant[2].ops`,
//! `vote.rule[1].ttl`; grants and rules are counted from 1 in the order they
//! are written). A file that is not UTF-8 is refused at its first bad byte.
//!
//! The model (what a mission says) is in `model`, reading it from TOML in
//! `parse`, turning grants into kernel map entries in `resolve`, and the
//! grants every mission gets in `baseline`. The `[vote]` section is
//! [`crate::vote::Voting`]: the mission voter's rules and the webhook's
//! endpoint are the vote's nouns.

mod baseline;
mod model;
pub(crate) mod parse;
mod profile;
mod resolve;

pub use baseline::RUNTIME_BASELINE;
pub use model::{
    ActionSpec, AssetKind, AssetSpec, Baseline, Constraints, GrantSpec, MAX_VOTE_TIMEOUT, Mission,
    MissionError, Mode, Profile, RunGrant, SourceSpec, Tmp,
};
pub use parse::{SOURCE_AUTHORITIES, User, asset_glob};
pub use profile::BUILT_IN as PROFILES;
pub use resolve::{PrefixKey, Reason, ResolvedGrants, format_ops};
