//! Loading the embedded BPF object and attaching its programs, or reopening
//! them from their pins. One [`Enforcer`] owns the loaded object; dropping it
//! detaches every program and frees the maps, unless they were pinned. Its
//! maps are read and written through the [`Kernel`] trait (`maps.rs`).
//!
//! # Pins
//!
//! `pincer daemon` pins what it loads, so enforcement outlives the process
//! (a restart, a crash, an upgrade that is not yet finished):
//!
//! ```text
//! <pin dir>/                      (default /sys/fs/bpf/pincer)
//!   object-<hash>                 the object's identity: its hash names a second
//!                                 pin of the PINCER_TWIN map
//!   links/<hook>                  one LSM link per attached hook (file_open, ...)
//!   links/cgroup_mkdir            the tracepoint that holds new cgroups below
//!                                 watched ones
//!   maps/<MAP>                    every map of pincer_common::names::MAPS
//!                                 (PINCER_AGENTS, PINCER_GRANTS, ...)
//! ```
//!
//! A link pin keeps its program attached; a map pin keeps its contents. A
//! daemon that starts finds the pins of the same object and reattaches to
//! them ([`Enforcer::open_pinned`]) without a moment of unenforced access;
//! pins of another build are replaced only after the new programs are
//! attached. Removing the directory ([`unpin`]) detaches everything.

mod maps;
pub mod runs;

use std::{
    collections::HashMap as StdHashMap,
    fs,
    path::{Path, PathBuf},
};

use aya::{
    Ebpf, EbpfLoader,
    maps::{Map, MapData, RingBuf},
    programs::{
        Lsm, RawTracePoint,
        links::{FdLink, PinnedLink},
        lsm::LsmLinkId,
        raw_trace_point::RawTracePointLinkId,
    },
};
use pincer_common::{
    hook::{self, Attach, Hook},
    names,
};
use pincer_model::paths;
use sha2::Digest;

pub use self::maps::{Held, Kernel, SlotGrants};
use crate::{btf, doctor};

/// The program (and tracepoint) that holds new cgroups below watched ones
/// until the daemon decides what they are.
pub const HOLD_PROGRAM: &str = "cgroup_mkdir";

/// The BPF object, embedded at build time (empty when it was not built).
static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/pincer.bpf.o"));

/// Errors loading or driving the programs.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The binary was built without the BPF object.
    #[error(
        "this pincer binary was built without its BPF programs; build them with `cargo xtask build-ebpf` and rebuild pincer"
    )]
    NoObject,
    /// Kernel offsets or hook signatures could not be read, or do not fit.
    #[error("the running kernel does not fit the programs")]
    Offsets(#[source] btf::BtfError),
    /// The kernel's BTF could not be loaded for attaching.
    #[error("failed to load kernel BTF for attaching LSM programs")]
    Btf(#[source] aya::BtfError),
    /// The object could not be loaded.
    #[error("failed to load the BPF object")]
    Object(#[source] aya::EbpfError),
    /// A program is missing from the object.
    #[error("the BPF object has no program `{0}`")]
    MissingProgram(&'static str),
    /// A program could not be loaded or attached.
    #[error("failed to load or attach the LSM program on `{hook}`")]
    Program {
        /// The hook.
        hook: &'static str,
        /// The kernel's or aya's error.
        #[source]
        source: aya::programs::ProgramError,
    },
    /// Pinning, or opening pins, failed.
    #[error("pins under {}: {message}", .path.display())]
    Pins {
        /// The file or directory.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// Loading failed on a machine that lacks something pincer needs: what
    /// `pincer doctor` finds missing says why better than the kernel's
    /// error (a verifier log of the first program tried, say).
    #[error(
        "this machine cannot enforce missions: {diagnosis}; run `pincer doctor` for every check"
    )]
    Unsupported {
        /// The first missing piece and its fix.
        diagnosis: String,
        /// The error loading met.
        #[source]
        source: Box<LoadError>,
    },
    /// A map is missing or has the wrong type.
    #[error("failed to open map `{name}`")]
    Map {
        /// The map.
        name: &'static str,
        /// The cause.
        #[source]
        source: aya::maps::MapError,
    },
}

/// A loading error, with the doctor's diagnosis when `checks` find
/// something missing.
pub(crate) fn explain(error: LoadError, checks: &[doctor::Check]) -> LoadError {
    match doctor::diagnosis(checks) {
        Some(diagnosis) => LoadError::Unsupported {
            diagnosis,
            source: Box::new(error),
        },
        None => error,
    }
}

/// Loads (verifies) the programs on a few threads: the kernel verifies
/// programs of a privileged loader concurrently, and verification is most
/// of the start-up time. The threads end before this returns, so the process
/// is single-threaded again when `pincer run` forks its watchdog.
fn load_in_parallel(
    programs: &mut [(&'static str, &mut Lsm)],
    btf: &aya::Btf,
) -> Result<(), LoadError> {
    let workers = std::thread::available_parallelism()
        .map_or(1, std::num::NonZero::get)
        .clamp(1, 4);
    // A shared queue rather than fixed shares: a few programs (the two-ended
    // `inode_link` and `inode_rename`) take much longer than the rest.
    let queue = std::sync::Mutex::new(programs.iter_mut());
    std::thread::scope(|scope| {
        let jobs: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| {
                    loop {
                        let next = queue
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .next();
                        let Some((hook, program)) = next else {
                            return Ok(());
                        };
                        let hook = *hook;
                        let started = std::time::Instant::now();
                        program
                            .load(hook, btf)
                            .map_err(|source| LoadError::Program { hook, source })?;
                        // The verifier's work per program, for whoever tunes
                        // start-up time.
                        let insns = program
                            .info()
                            .ok()
                            .and_then(|info| info.verified_instruction_count());
                        tracing::trace!(hook, elapsed = ?started.elapsed(), ?insns, "program verified");
                    }
                })
            })
            .collect();
        // The scope joins any thread left after the first error.
        jobs.into_iter()
            .try_for_each(|job| job.join().expect("a loader thread panicked"))
    })
}

/// The loaded, attached programs and their maps.
pub struct Enforcer {
    /// Taken out of the object (or opened from pins), by name.
    maps: StdHashMap<String, Map>,
    /// The object, when this process loaded it: it owns the programs and
    /// their links. `None` for an enforcer opened from pins.
    ebpf: Option<Ebpf>,
    /// The attached hooks and their links, until they are pinned.
    links: Vec<(&'static str, LsmLinkId)>,
    /// The attached [`HOLD_PROGRAM`]'s link, until it is pinned.
    hold_link: Option<RawTracePointLinkId>,
    /// Every program attached, by hook, with the kernel's id of the
    /// program: what [`Kernel::attached`] looks for among the live links.
    programs: Vec<(&'static str, u32)>,
}

impl Enforcer {
    /// Loads the programs with this kernel's struct offsets and attaches them.
    pub fn load() -> Result<Self, LoadError> {
        Self::load_with_ring(pincer_common::EVENTS_BYTES)
    }

    /// Like [`Enforcer::load`], with an event ring buffer of `ring_bytes` (a
    /// power of two, at least a page).
    pub fn load_with_ring(ring_bytes: u32) -> Result<Self, LoadError> {
        if OBJECT.is_empty() {
            return Err(LoadError::NoObject);
        }
        Self::load_object(ring_bytes)
            .map_err(|error| explain(error, &doctor::run_checks(&doctor::SystemPaths::default())))
    }

    fn load_object(ring_bytes: u32) -> Result<Self, LoadError> {
        let started = std::time::Instant::now();
        let vmlinux =
            btf::KernelBtf::open(Path::new(btf::VMLINUX_BTF)).map_err(LoadError::Offsets)?;
        let offsets = vmlinux.offsets().map_err(LoadError::Offsets)?;
        // Every hook of the table, less the optional ones this kernel lacks;
        // a kernel without a hook pincer always attaches to fails the check.
        let hooks: Vec<&'static Hook> = hook::ALL
            .iter()
            .filter(|hook| hook.attach == Attach::Always || vmlinux.has_hook(hook))
            .collect();
        vmlinux
            .check_hooks(hooks.iter().copied())
            .map_err(LoadError::Offsets)?;
        drop(vmlinux);
        tracing::debug!(elapsed = ?started.elapsed(), "read kernel BTF");
        let mut loader = EbpfLoader::new();
        loader
            .override_global(names::OFFSETS, &offsets, true)
            .map_max_entries(names::EVENTS, ring_bytes);
        // One guard map for every pincer on the host, so that no agent can
        // signal or trace any pincer process, whichever run confines it; one
        // label map, so that what one agent made is evidence to every other.
        if on_bpffs(
            Path::new(paths::GUARDED_PIN)
                .parent()
                .unwrap_or(Path::new("/")),
        ) {
            for (name, pin) in paths::SHARED_PINS {
                loader.map_pin_path(name, Path::new(pin));
            }
        } else {
            tracing::warn!(
                pin = paths::GUARDED_PIN,
                "no BPF file system there: this pincer guards only its own processes, \
                 and its labels are its own"
            );
        }
        let mut ebpf = loader.load(OBJECT).map_err(LoadError::Object)?;
        tracing::debug!(elapsed = ?started.elapsed(), "object loaded");
        let kernel_btf = aya::Btf::from_sys_fs().map_err(LoadError::Btf)?;
        tracing::debug!(elapsed = ?started.elapsed(), "kernel BTF for the loader");
        let hooks: Vec<&'static str> = hooks.iter().map(|hook| hook.name).collect();
        let mut programs: Vec<(&'static str, &mut Lsm)> = Vec::with_capacity(hooks.len());
        for (name, program) in ebpf.programs_mut() {
            // Programs are named after their hooks.
            let Some(&hook) = hooks.iter().find(|&&hook| hook == name) else {
                continue;
            };
            let program: &mut Lsm = program
                .try_into()
                .map_err(|source| LoadError::Program { hook, source })?;
            programs.push((hook, program));
        }
        if let Some(&missing) = hooks
            .iter()
            .find(|&&hook| !programs.iter().any(|(h, _)| *h == hook))
        {
            return Err(LoadError::MissingProgram(missing));
        }
        load_in_parallel(&mut programs, &kernel_btf)?;
        tracing::debug!(elapsed = ?started.elapsed(), "programs verified");
        // Attaching takes the kernel's trampoline locks one hook at a time.
        let mut links = Vec::with_capacity(programs.len());
        let mut ids = Vec::with_capacity(programs.len() + 1);
        for (hook, program) in &mut programs {
            let hook = *hook;
            let link = program
                .attach()
                .map_err(|source| LoadError::Program { hook, source })?;
            links.push((hook, link));
            let info = program
                .info()
                .map_err(|source| LoadError::Program { hook, source })?;
            ids.push((hook, info.id()));
        }
        drop(programs);
        let hold = hold_program(&mut ebpf)?;
        let hold_link = hold
            .load()
            .and_then(|()| hold.attach(HOLD_PROGRAM))
            .map_err(|source| LoadError::Program {
                hook: HOLD_PROGRAM,
                source,
            })?;
        let hold_id = hold.info().map_err(|source| LoadError::Program {
            hook: HOLD_PROGRAM,
            source,
        })?;
        ids.push((HOLD_PROGRAM, hold_id.id()));
        tracing::debug!(elapsed = ?started.elapsed(), "programs loaded and attached");
        let names: Vec<String> = ebpf.maps().map(|(name, _)| name.to_owned()).collect();
        let maps = names
            .into_iter()
            .filter_map(|name| ebpf.take_map(&name).map(|map| (name, map)))
            .collect();
        Ok(Self {
            maps,
            ebpf: Some(ebpf),
            links,
            hold_link: Some(hold_link),
            programs: ids,
        })
    }

    /// Pins every map and link under `dir` (see the module docs), which must
    /// not exist yet and whose parent must be on a BPF file system. From
    /// then on the programs stay attached when this process ends.
    pub fn pin(&mut self, dir: &Path) -> Result<(), LoadError> {
        let pins = |path: &Path, message: String| LoadError::Pins {
            path: path.to_owned(),
            message,
        };
        if self.ebpf.is_none() {
            return Err(pins(dir, "these programs are pinned already".into()));
        }
        let maps_dir = dir.join("maps");
        for sub in [dir, &maps_dir] {
            fs::create_dir(sub).map_err(|e| pins(sub, format!("cannot create: {e}")))?;
        }
        // The maps of the list: the object's data sections (`.rodata`, ...)
        // are the programs' own, and bpffs refuses names with a dot.
        for (name, map) in self
            .maps
            .iter()
            .filter(|(name, _)| names::MAPS.contains(&name.as_str()))
        {
            let path = maps_dir.join(name);
            map.pin(&path)
                .map_err(|e| pins(&path, format!("cannot pin map: {e}")))?;
        }
        let twin = self
            .maps
            .get(names::TWIN)
            .ok_or_else(|| missing_map(names::TWIN))?;
        let marker = dir.join(object_marker());
        twin.pin(&marker)
            .map_err(|e| pins(&marker, format!("cannot pin: {e}")))?;
        self.pin_links(&dir.join("links"))
    }

    /// Pins every link under `dir`, which must not exist yet and whose
    /// parent must be on a BPF file system: the programs stay attached until
    /// the pins are removed, whatever happens to this process.
    fn pin_links(&mut self, dir: &Path) -> Result<(), LoadError> {
        let pins = |path: &Path, message: String| LoadError::Pins {
            path: path.to_owned(),
            message,
        };
        let Some(ebpf) = self.ebpf.as_mut() else {
            return Err(pins(dir, "these programs are pinned already".into()));
        };
        fs::create_dir(dir).map_err(|e| pins(dir, format!("cannot create: {e}")))?;
        for (hook, id) in std::mem::take(&mut self.links) {
            let path = dir.join(hook);
            let program: &mut Lsm = ebpf
                .program_mut(hook)
                .ok_or(LoadError::MissingProgram(hook))?
                .try_into()
                .map_err(|source| LoadError::Program { hook, source })?;
            let link = program
                .take_link(id)
                .map_err(|source| LoadError::Program { hook, source })?;
            FdLink::from(link)
                .pin(&path)
                .map_err(|e| pins(&path, format!("cannot pin link: {e}")))?;
        }
        if let Some(id) = self.hold_link.take() {
            let path = dir.join(HOLD_PROGRAM);
            let link = hold_program(ebpf)?
                .take_link(id)
                .map_err(|source| LoadError::Program {
                    hook: HOLD_PROGRAM,
                    source,
                })?;
            FdLink::from(link)
                .pin(&path)
                .map_err(|e| pins(&path, format!("cannot pin link: {e}")))?;
        }
        Ok(())
    }

    /// Opens the maps pinned under `dir` by a daemon that ran the same
    /// object; its links keep the programs attached. Fails when the pins are
    /// missing, incomplete or of another build of pincer.
    pub fn open_pinned(dir: &Path) -> Result<Self, LoadError> {
        let pins = |path: &Path, message: String| LoadError::Pins {
            path: path.to_owned(),
            message,
        };
        let marker = dir.join(object_marker());
        if !marker.exists() {
            return Err(pins(
                dir,
                format!("no pins of this build ({} is missing)", marker.display()),
            ));
        }
        let links_dir = dir.join("links");
        for name in hook::required().map(|hook| hook.name).chain([HOLD_PROGRAM]) {
            let path = links_dir.join(name);
            PinnedLink::from_pin(&path).map_err(|e| pins(&path, format!("no link: {e}")))?;
        }
        // The programs the pinned links run (optional hooks where this
        // kernel has them): what the integrity check looks for.
        let programs = hook::ALL
            .iter()
            .map(|hook| hook.name)
            .chain([HOLD_PROGRAM])
            .filter_map(|name| {
                let link = FdLink::from(PinnedLink::from_pin(links_dir.join(name)).ok()?);
                Some((name, link.info().ok()?.program_id()))
            })
            .collect();
        let maps_dir = dir.join("maps");
        let entries =
            fs::read_dir(&maps_dir).map_err(|e| pins(&maps_dir, format!("cannot list: {e}")))?;
        let mut maps = StdHashMap::new();
        for entry in entries {
            let entry = entry.map_err(|e| pins(&maps_dir, format!("cannot list: {e}")))?;
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            let map = MapData::from_pin(&path)
                .and_then(Map::from_map_data)
                .map_err(|e| pins(&path, format!("cannot open map: {e}")))?;
            maps.insert(name, map);
        }
        // Every map userspace reads or writes must be among them.
        for &name in names::USERSPACE {
            if !maps.contains_key(name) {
                return Err(pins(&maps_dir.join(name), "missing map".into()));
            }
        }
        Ok(Self {
            maps,
            ebpf: None,
            links: Vec::new(),
            hold_link: None,
            programs,
        })
    }

    fn map_mut(&mut self, name: &'static str) -> Result<&mut Map, LoadError> {
        self.maps.get_mut(name).ok_or_else(|| missing_map(name))
    }

    /// The size of the event ring buffer, when it can be read.
    pub fn ring_bytes(&self) -> Option<u32> {
        match self.maps.get(names::EVENTS)? {
            Map::RingBuf(data) => data.info().ok().map(|info| info.max_entries()),
            _ => None,
        }
    }

    /// Takes the event ring buffer out of the object (once).
    pub fn take_events(&mut self) -> Result<RingBuf<MapData>, LoadError> {
        let name = names::EVENTS;
        let map = self.maps.remove(name).ok_or_else(|| missing_map(name))?;
        RingBuf::try_from(map).map_err(|source| LoadError::Map { name, source })
    }
}

/// The object's [`HOLD_PROGRAM`].
fn hold_program(ebpf: &mut Ebpf) -> Result<&mut RawTracePoint, LoadError> {
    ebpf.program_mut(HOLD_PROGRAM)
        .ok_or(LoadError::MissingProgram(HOLD_PROGRAM))?
        .try_into()
        .map_err(|source| LoadError::Program {
            hook: HOLD_PROGRAM,
            source,
        })
}

/// Whether `dir` is on a BPF file system, where maps and links can be
/// pinned.
pub fn on_bpffs(dir: &Path) -> bool {
    const BPF_FS_MAGIC: i64 = 0xcafe_4a11;
    nix::sys::statfs::statfs(dir).is_ok_and(|fs| fs.filesystem_type().0 == BPF_FS_MAGIC)
}

/// The pin that says which object the pins belong to: a hash of the
/// embedded object, so a daemon of another build never reuses maps whose
/// layout it does not know.
fn object_marker() -> String {
    let digest = sha2::Sha256::digest(OBJECT);
    format!("object-{}", hex::encode(&digest[..8]))
}

/// Removes the pins under `dir`: the programs they kept attached are
/// detached as soon as no process holds them. A missing directory is fine.
pub fn unpin(dir: &Path) -> Result<(), LoadError> {
    match fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(LoadError::Pins {
            path: dir.to_owned(),
            message: format!("cannot remove: {e}"),
        }),
    }
}

fn missing_map(name: &'static str) -> LoadError {
    LoadError::Map {
        name,
        source: aya::maps::MapError::InvalidName {
            name: name.to_owned(),
        },
    }
}
