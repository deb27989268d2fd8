//! The daemon's hold on the kernel: its pins, the lock that makes it the
//! only daemon on them, and `--uninstall`.

use std::{
    fs,
    time::{Duration, Instant},
};

use pincer_model::{config::daemon::Config, paths};

use super::{DaemonError, io_error};
use crate::loader::{self, Enforcer, Kernel};

/// One daemon per pin directory: a second one would read the same ring
/// buffer and replace the first one's guards. The lock (on a file in
/// [`paths::RUN_DIR`], named after the pin directory) lasts as long as the
/// daemon: the kernel releases it when the process ends, however it ends.
pub(super) fn lock(config: &Config) -> Result<nix::fcntl::Flock<fs::File>, DaemonError> {
    let path = paths::daemon_lock(&config.daemon.pin_dir);
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(io_error(format!("creating {}", dir.display())))?;
    }
    let file = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(io_error(format!("opening {}", path.display())))?;
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock).map_err(
        |(_, errno)| DaemonError::Io {
            what: format!(
                "another pincer daemon serves the pins under {} (it holds {})",
                config.daemon.pin_dir.display(),
                path.display()
            ),
            source: errno.into(),
        },
    )
}

/// Reattaches to the pins of this build, or loads, attaches and pins;
/// says which.
pub(super) fn enforcer(config: &Config) -> Result<(Enforcer, bool), DaemonError> {
    let dir = &config.daemon.pin_dir;
    match Enforcer::open_pinned(dir) {
        Ok(enforcer) => {
            tracing::info!(pins = %dir.display(), "reattached to the pinned programs");
            return Ok((enforcer, true));
        }
        Err(error) if dir.exists() => {
            tracing::warn!(error = %error, "the pins cannot be reused; loading the programs again");
        }
        Err(_) => {}
    }
    let started = Instant::now();
    if !dir.exists()
        && let Some(enforcer) = loader::runs::Pool::host().take_idle(dir, config.daemon.ring_bytes)
    {
        // What a finished `pincer run` of this build left: the same
        // programs, cleared, and pinned where the daemon keeps its own.
        tracing::info!(pins = %dir.display(), "took over the idle programs of a finished run");
        return Ok((enforcer, false));
    }
    let mut enforcer = Enforcer::load_with_ring(config.daemon.ring_bytes)?;
    // The old programs (if any) still enforce until their pins go; the new
    // ones already do.
    loader::unpin(dir)?;
    if let Some(parent) = dir.parent() {
        fs::create_dir_all(parent).map_err(io_error(format!("creating {}", parent.display())))?;
    }
    enforcer.pin(dir)?;
    tracing::info!(pins = %dir.display(), elapsed = ?started.elapsed(), "programs loaded, attached and pinned");
    Ok((enforcer, false))
}

/// Refuses what is parked, then removes the pins, and the programs that
/// finished `pincer run`s left idle.
pub(super) fn uninstall(config: &Config) -> Result<(), DaemonError> {
    // Not under a running daemon's feet.
    let _lock = lock(config)?;
    let idle = loader::runs::Pool::host().drop_idle();
    if idle > 0 {
        println!("removed {idle} idle set(s) of programs left by finished runs");
    }
    let dir = &config.daemon.pin_dir;
    match Enforcer::open_pinned(dir) {
        Ok(mut enforcer) => {
            // No heartbeat: a continued task meets EACCES from the programs,
            // which are still attached.
            enforcer.heartbeat(0, 0)?;
            crate::watchdog::continue_parked(&mut enforcer, Duration::from_secs(3), true);
        }
        Err(error) if dir.exists() => {
            tracing::warn!(error = %error, "removing pins of another build");
        }
        Err(_) => {
            println!("nothing to remove: no pins under {}", dir.display());
            return Ok(());
        }
    }
    loader::unpin(dir)?;
    let _ = fs::remove_dir_all(paths::journal_dir(&config.daemon.socket));
    let _ = fs::remove_dir_all(paths::registrations_dir(&config.daemon.socket));
    println!(
        "removed the pins under {}; the programs are detached",
        dir.display()
    );
    Ok(())
}
