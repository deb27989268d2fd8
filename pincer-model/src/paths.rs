//! Where pincer keeps things by default, in one place.
//!
//! ```text
//! /etc/pincer/daemon.toml              the daemon's configuration
//! /run/pincer/                         runtime directory (mode 0700)
//!   pincer.sock                        control socket
//!   parked/<tid>                       parked events, until their verdict
//!   registered/<cgroup id>             cgroups `pincer run` registered
//!   daemon<pin dir>.lock               one daemon per pin directory
//! /sys/fs/bpf/pincer/                  the daemon's pinned programs and maps
//! /sys/fs/bpf/pincer-guarded           pincer's processes, one map shared by
//!                                      every pincer on the host
//! /sys/fs/bpf/pincer-runs/<pid>/       the programs and maps of a `pincer run`
//! /sys/fs/bpf/pincer-idle/             programs a finished run left idle for the
//!                                      next one (see `loader::runs`)
//! /var/log/pincer/audit.jsonl(.key)    the daemon's audit log and its key
//! /var/lib/pincer/labels.json(state.key) the sealed labels snapshot and its key
//! /var/lib/pincer/revocations.json     the sources' sealed revocation counters
//! /var/lib/pincer/promotions.jsonl     the owner's promotions of files' authority
//! ```
//!
//! The journal and the registrations sit next to the socket, so a daemon
//! given another socket keeps them apart from the default one's.

use std::path::{Path, PathBuf};

/// The runtime directory.
pub const RUN_DIR: &str = "/run/pincer";
/// The control socket, unless `--socket` or [`SOCKET_ENV`] says otherwise.
pub const DEFAULT_SOCKET: &str = "/run/pincer/pincer.sock";
/// The environment variable naming the control socket.
pub const SOCKET_ENV: &str = "PINCER_SOCKET";
/// The daemon's configuration file.
pub const DEFAULT_CONFIG: &str = "/etc/pincer/daemon.toml";
/// Where the daemon pins programs and maps.
pub const DEFAULT_PIN_DIR: &str = "/sys/fs/bpf/pincer";
/// The daemon's audit log.
pub const DEFAULT_AUDIT: &str = "/var/log/pincer/audit.jsonl";
/// The map of pincer's processes, guarded from every agent on the host: each
/// `pincer run` and the daemon load it from this pin (or create it there).
pub const GUARDED_PIN: &str = "/sys/fs/bpf/pincer-guarded";
/// The map of objects' labels, one for every pincer on the host (each
/// `pincer run` and the daemon load it from this pin, or create it there):
/// what one agent made is evidence to every other. The suffix is the
/// layout's version: a build with another layout of `Label` makes its own.
pub const LABELS_PIN: &str = "/sys/fs/bpf/pincer-labels-v3";
/// The sources' revocation counters, one map for every pincer on the host
/// (kept in the state directory too, sealed: the map is gone after a
/// reboot).
pub const REVOKED_PIN: &str = "/sys/fs/bpf/pincer-revoked-v1";
/// Each map shared by every pincer on the host ([`pincer_common::names::SHARED`])
/// with its pin.
pub const SHARED_PINS: [(&str, &str); 3] = [
    (pincer_common::names::GUARDED, GUARDED_PIN),
    (pincer_common::names::LABELS, LABELS_PIN),
    (pincer_common::names::REVOKED, REVOKED_PIN),
];
/// pincer's state directory (mode 0700): the sealed labels snapshot and its
/// key, the promotions journal. A policy place: no agent changes it.
pub const STATE_DIR: &str = "/var/lib/pincer";
/// The owner's promotions of files' authority (`pincer label promote`,
/// with the content's digest) and revocations of sources (`pincer label
/// revoke`), one JSON line each.
pub const PROMOTIONS: &str = "/var/lib/pincer/promotions.jsonl";
/// Where each `pincer run` pins its programs and maps, in a directory named
/// after its process id, so its agent stays confined whatever happens to
/// its processes.
pub const RUN_PINS: &str = "/sys/fs/bpf/pincer-runs";
/// Where finished runs leave their programs idle for the next run to take
/// over.
pub const IDLE_PINS: &str = "/sys/fs/bpf/pincer-idle";
/// The cgroup2 mount the daemon looks for agent cgroups under.
pub const DEFAULT_CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// The directory of a socket's companions (journal, registrations).
fn beside(socket: &Path) -> &Path {
    socket
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new(RUN_DIR))
}

/// Where the daemon serving `socket` keeps parked events until their
/// verdict.
pub fn journal_dir(socket: &Path) -> PathBuf {
    beside(socket).join("parked")
}

/// Where the daemon serving `socket` keeps the registrations of `pincer run`.
pub fn registrations_dir(socket: &Path) -> PathBuf {
    beside(socket).join("registered")
}

/// The lock that makes one daemon per pin directory.
pub fn daemon_lock(pin_dir: &Path) -> PathBuf {
    let name: String = pin_dir
        .to_string_lossy()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    Path::new(RUN_DIR).join(format!("daemon{name}.lock"))
}

/// How the name of a `pincer run`'s private temporary directory starts
/// (then the run's pid and `-`): every run gets its own, and what a run
/// used there is not worth recommending to the next.
pub const PRIVATE_TMP_PREFIX: &str = "pincer-run-";

/// The key file of an audit log when none is given: `<log>.key`.
pub fn default_key_path(log: &std::path::Path) -> std::path::PathBuf {
    let mut path = log.as_os_str().to_owned();
    path.push(".key");
    path.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn companions_sit_next_to_the_socket() {
        let socket = Path::new(DEFAULT_SOCKET);
        assert_eq!(journal_dir(socket), Path::new("/run/pincer/parked"));
        assert_eq!(
            registrations_dir(Path::new("/tmp/x/p.sock")),
            Path::new("/tmp/x/registered")
        );
        assert_eq!(
            journal_dir(Path::new("p.sock")),
            Path::new("/run/pincer/parked")
        );
        assert_eq!(
            daemon_lock(Path::new(DEFAULT_PIN_DIR)),
            Path::new("/run/pincer/daemon-sys-fs-bpf-pincer.lock")
        );
    }

    #[test]
    fn every_shared_map_has_one_pin() {
        let names: Vec<&str> = SHARED_PINS.iter().map(|(name, _)| *name).collect();
        assert_eq!(names, pincer_common::names::SHARED);
    }
}
