//! Kernel struct member offsets from the running kernel's BTF.
//!
//! Rust BPF programs have no CO-RE field relocation, so the loader reads each
//! offset the programs need from `/sys/kernel/btf/vmlinux` and hands them over
//! as a global. Members of anonymous structs and unions are found by a
//! recursive search, as the kernel nests many hot fields that way.

use std::path::{Path, PathBuf};

use btf_rs::{Btf, Type};
use pincer_common::{
    KernelOffsets,
    hook::{self, Args, Hook},
};

/// Where the kernel publishes its own BTF.
pub const VMLINUX_BTF: &str = "/sys/kernel/btf/vmlinux";

/// Errors reading kernel offsets.
#[derive(Debug, thiserror::Error)]
pub enum BtfError {
    /// The BTF file could not be parsed.
    #[error("failed to read kernel BTF from {path}")]
    Read {
        /// The BTF file.
        path: PathBuf,
        /// The parser's error.
        #[source]
        source: btf_rs::Error,
    },
    /// A struct or member the programs need is not in this kernel's BTF.
    #[error("kernel BTF has no member `{member}` in `struct {strukt}`")]
    MissingMember {
        /// The struct searched.
        strukt: String,
        /// The dotted member path.
        member: String,
    },
    /// An LSM hook the programs attach to is not in this kernel's BTF.
    #[error("kernel BTF has no LSM hook `{hook}` (no function `{function}`)")]
    MissingHook {
        /// The hook.
        hook: String,
        /// The kernel function its program attaches to.
        function: String,
    },
    /// An LSM hook has another signature than the program expects.
    #[error(
        "the kernel's LSM hook `{hook}` takes {found} arguments, pincer's program expects {expected}"
    )]
    HookSignature {
        /// The hook.
        hook: String,
        /// Arguments the program reads.
        expected: usize,
        /// Arguments in the kernel's BTF.
        found: usize,
    },
    /// A member offset is not byte-aligned or too large.
    #[error("member `{member}` of `struct {strukt}` has an unusable offset")]
    BadOffset {
        /// The struct searched.
        strukt: String,
        /// The dotted member path.
        member: String,
    },
}

/// A kernel's BTF, parsed once for everything the loader reads from it.
pub struct KernelBtf {
    btf: Btf,
}

impl KernelBtf {
    /// Parses a BTF file.
    pub fn open(path: &Path) -> Result<Self, BtfError> {
        let btf = Btf::from_file(path).map_err(|source| BtfError::Read {
            path: path.to_owned(),
            source,
        })?;
        Ok(Self { btf })
    }

    /// The offsets the programs need.
    pub fn offsets(&self) -> Result<KernelOffsets, BtfError> {
        offsets(&Resolver { btf: &self.btf })
    }

    /// Checks that every LSM hook a program attaches to exists with the
    /// number of arguments the program reads (its verdict argument comes
    /// after them): reading a shifted argument would decide on the wrong
    /// object. A hook whose signature varies ([`Args::Varies`]) only has to
    /// exist.
    pub fn check_hooks<'a>(
        &self,
        hooks: impl IntoIterator<Item = &'a Hook>,
    ) -> Result<(), BtfError> {
        let btf = Resolver { btf: &self.btf };
        for hook in hooks {
            let found = btf.hook_params(hook)?.len();
            if let Args::Exactly(expected) | Args::Void(expected) = hook.args
                && found != expected
            {
                return Err(BtfError::HookSignature {
                    hook: hook.name.to_owned(),
                    expected,
                    found,
                });
            }
        }
        Ok(())
    }
}

impl KernelBtf {
    /// Whether the kernel has an LSM hook.
    pub fn has_hook(&self, hook: &Hook) -> bool {
        Resolver { btf: &self.btf }.hook_params(hook).is_ok()
    }
}

/// Reads the offsets the programs need from a BTF file.
pub fn kernel_offsets(path: &Path) -> Result<KernelOffsets, BtfError> {
    KernelBtf::open(path)?.offsets()
}

fn offsets(btf: &Resolver<'_>) -> Result<KernelOffsets, BtfError> {
    Ok(KernelOffsets {
        loaded: 1,
        file_f_inode: btf.offset("file", "f_inode")?,
        file_f_path_dentry: btf.offset("file", "f_path.dentry")?,
        file_f_mode: btf.offset("file", "f_mode")?,
        file_f_flags: btf.offset("file", "f_flags")?,
        inode_i_ino: btf.offset("inode", "i_ino")?,
        inode_i_sb: btf.offset("inode", "i_sb")?,
        super_block_s_dev: btf.offset("super_block", "s_dev")?,
        dentry_d_parent: btf.offset("dentry", "d_parent")?,
        dentry_d_name_name: btf.offset("dentry", "d_name.name")?,
        dentry_d_name_len: btf.offset("dentry", "d_name.len")?,
        dentry_d_inode: btf.offset("dentry", "d_inode")?,
        task_struct_flags: btf.offset("task_struct", "flags")?,
        task_struct_tgid: btf.offset("task_struct", "tgid")?,
        task_struct_io_uring: btf.offset("task_struct", "io_uring")?,
        task_struct_cgroups: btf.offset("task_struct", "cgroups")?,
        css_set_dfl_cgrp: btf.offset("css_set", "dfl_cgrp")?,
        cgroup_kn: btf.offset("cgroup", "kn")?,
        kernfs_node_id: btf.offset("kernfs_node", "id")?,
        inode_i_nlink: btf.offset("inode", "i_nlink")?,
        inode_i_mode: btf.offset("inode", "i_mode")?,
        iattr_ia_valid: btf.offset("iattr", "ia_valid")?,
        setattr_has_idmap: setattr_has_idmap(btf)?,
        proc_inode_vfs_inode: btf.offset("proc_inode", "vfs_inode")?,
        proc_inode_pid: btf.offset("proc_inode", "pid")?,
        pid_nr: btf.offset("pid", "numbers")? + btf.offset("upid", "nr")?,
        pipe_dev: anonymous_dev(|| nix::unistd::pipe().map(|(read, _)| read)),
        sock_dev: anonymous_dev(|| {
            std::os::unix::net::UnixStream::pair().map(|(one, _)| one.into())
        }),
        shm_dev: anonymous_dev(|| {
            nix::sys::memfd::memfd_create(
                c"pincer-shm-dev",
                nix::sys::memfd::MemFdCreateFlag::empty(),
            )
        }),
        super_block_s_magic: btf.offset("super_block", "s_magic")?,
        pid_tasks: btf.offset("pid", "tasks")?,
        task_struct_pid_links: btf.offset("task_struct", "pid_links")?,
        path_dentry: btf.offset("path", "dentry")?,
        kern_ipc_perm_id: btf.offset("kern_ipc_perm", "id")?,
        key_serial: btf.offset("key", "serial")?,
        task_struct_real_cred: btf.offset("task_struct", "real_cred")?,
        inode_i_generation: btf.offset("inode", "i_generation")?,
        kernfs_node_parent: btf
            .offset("kernfs_node", "parent")
            .or_else(|_| btf.offset("kernfs_node", "__parent"))?,
        task_struct_mm: btf.offset("task_struct", "mm")?,
        mm_struct_exe_file: btf.offset("mm_struct", "exe_file")?,
        vm_area_struct_vm_file: btf.offset("vm_area_struct", "vm_file")?,
        user_namespace_level: btf.offset("user_namespace", "level")?,
        super_block_s_user_ns: btf.offset("super_block", "s_user_ns")?,
        task_struct_nsproxy: btf.offset("task_struct", "nsproxy")?,
        nsproxy_mnt_ns: btf.offset("nsproxy", "mnt_ns")?,
        mnt_namespace_user_ns: btf.offset("mnt_namespace", "user_ns")?,
        proc_dev: std::fs::metadata("/proc").map_or(0, |m| {
            pincer_common::kernel_dev(std::os::unix::fs::MetadataExt::dev(&m)) as u32
        }),
        inode_i_size: btf.offset("inode", "i_size")?,
    })
}

/// The kernel device of the filesystem behind a descriptor `make` opens (a
/// pipe's pipefs, a socket's sockfs: one superblock each for the whole
/// kernel), or zero when it cannot be had (then pipes and sockets are
/// decided like files, and refused).
fn anonymous_dev<E>(make: impl FnOnce() -> Result<std::os::fd::OwnedFd, E>) -> u32 {
    make()
        .ok()
        .and_then(|fd| std::fs::File::from(fd).metadata().ok())
        .map_or(0, |m| {
            pincer_common::kernel_dev(std::os::unix::fs::MetadataExt::dev(&m)) as u32
        })
}

/// Whether `inode_setattr` takes `(idmap, dentry, attr)` (6.8 and later)
/// rather than `(dentry, attr)`.
fn setattr_has_idmap(btf: &Resolver<'_>) -> Result<u32, BtfError> {
    let setattr = hook::get(hook::INODE_SETATTR);
    match btf.hook_params(setattr)?.as_slice() {
        [_, dentry, attr] if dentry == "dentry" && attr == "attr" => Ok(1),
        [dentry, attr] if dentry == "dentry" && attr == "attr" => Ok(0),
        other => Err(BtfError::HookSignature {
            hook: setattr.name.to_owned(),
            expected: 2,
            found: other.len(),
        }),
    }
}

struct Resolver<'a> {
    btf: &'a Btf,
}

impl Resolver<'_> {
    /// Byte offset of a dotted member path in `struct strukt`.
    fn offset(&self, strukt: &str, member: &str) -> Result<u32, BtfError> {
        let missing = || BtfError::MissingMember {
            strukt: strukt.to_owned(),
            member: member.to_owned(),
        };
        let mut current = self.named_struct(strukt).ok_or_else(missing)?;
        let mut bits = 0u32;
        for part in member.split('.') {
            let (offset, ty) = self.find_member(&current, part).ok_or_else(missing)?;
            bits = bits.checked_add(offset).ok_or_else(missing)?;
            current = ty;
        }
        if !bits.is_multiple_of(8) {
            return Err(BtfError::BadOffset {
                strukt: strukt.to_owned(),
                member: member.to_owned(),
            });
        }
        Ok(bits / 8)
    }

    /// Parameter names of an LSM hook (of `bpf_lsm_<hook>`, the function
    /// BPF LSM programs attach to).
    fn hook_params(&self, hook: &Hook) -> Result<Vec<String>, BtfError> {
        let missing = || BtfError::MissingHook {
            hook: hook.name.to_owned(),
            function: hook.btf_function.to_owned(),
        };
        let func = self
            .btf
            .resolve_types_by_name(hook.btf_function)
            .map_err(|_| missing())?
            .into_iter()
            .find_map(|t| match t {
                Type::Func(func) => Some(func),
                _ => None,
            })
            .ok_or_else(missing)?;
        let Ok(Type::FuncProto(proto)) = self.btf.resolve_chained_type(&func) else {
            return Err(missing());
        };
        Ok(proto
            .parameters
            .iter()
            .map(|p| self.btf.resolve_name(p).unwrap_or_default())
            .collect())
    }

    /// The struct definition (not a forward declaration) named `name`.
    fn named_struct(&self, name: &str) -> Option<Type> {
        self.btf
            .resolve_types_by_name(name)
            .ok()?
            .into_iter()
            .find(|t| matches!(t, Type::Struct(s) if !s.members.is_empty()))
    }

    /// (bit offset, type) of member `name` of a struct or union, searching
    /// anonymous members recursively.
    fn find_member(&self, ty: &Type, name: &str) -> Option<(u32, Type)> {
        let members = match ty {
            Type::Struct(s) | Type::Union(s) => &s.members,
            _ => return None,
        };
        for member in members {
            let member_name = self.btf.resolve_name(member).unwrap_or_default();
            let member_ty = self.strip(self.btf.resolve_chained_type(member).ok()?)?;
            if member_name == name {
                return Some((member.bit_offset(), member_ty));
            }
            if member_name.is_empty()
                && let Some((inner, found)) = self.find_member(&member_ty, name)
            {
                return Some((member.bit_offset() + inner, found));
            }
        }
        None
    }

    /// Follows typedefs and qualifiers to the underlying type.
    fn strip(&self, mut ty: Type) -> Option<Type> {
        for _ in 0..16 {
            match &ty {
                Type::Typedef(t) => ty = self.btf.resolve_chained_type(t).ok()?,
                Type::Const(t) | Type::Volatile(t) => ty = self.btf.resolve_chained_type(t).ok()?,
                _ => return Some(ty),
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The host's own BTF exercises the parser on a real kernel (machines of
    /// this kind all publish it); the 6.1 and 6.12 layouts are proven in the
    /// guest, where the programs compare what they read with `stat(2)`.
    #[test]
    fn reads_offsets_from_running_kernel() {
        let off = kernel_offsets(Path::new(VMLINUX_BTF)).unwrap();
        assert_eq!(off.loaded, 1);
        // `struct qstr` is { u32 hash; u32 len } then the name pointer.
        let qstr = Resolver {
            btf: &Btf::from_file(VMLINUX_BTF).unwrap(),
        }
        .offset("qstr", "name")
        .unwrap();
        assert_eq!(qstr, 8);
        for field in [
            off.file_f_inode,
            off.inode_i_sb,
            off.task_struct_mm,
            off.mm_struct_exe_file,
            off.vm_area_struct_vm_file,
            off.super_block_s_user_ns,
            off.task_struct_nsproxy,
            off.nsproxy_mnt_ns,
            off.mnt_namespace_user_ns,
            off.dentry_d_parent,
            off.dentry_d_inode,
        ] {
            assert_eq!(field % 8, 0, "pointers are 8-byte aligned");
            assert!(field > 0);
        }
        assert_eq!(off.dentry_d_name_name % 8, 0);
        // The length is the second half of the hash and length word.
        assert_eq!(off.dentry_d_name_len + 4, off.dentry_d_name_name);
    }

    #[test]
    fn hooks_of_the_running_kernel_match_the_programs() {
        let btf = KernelBtf::open(Path::new(VMLINUX_BTF)).unwrap();
        btf.check_hooks(hook::required()).unwrap();
        let file_open = Hook {
            args: Args::Exactly(3),
            ..*hook::get(hook::FILE_OPEN)
        };
        let err = btf.check_hooks(&[file_open]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "the kernel's LSM hook `file_open` takes 1 arguments, pincer's program expects 3"
        );
        let no_such_hook = Hook {
            name: "no_such_hook",
            btf_function: "bpf_lsm_no_such_hook",
            ..file_open
        };
        let err = btf.check_hooks(&[no_such_hook]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "kernel BTF has no LSM hook `no_such_hook` (no function `bpf_lsm_no_such_hook`)"
        );
    }

    #[test]
    fn missing_member_is_named() {
        let btf = Btf::from_file(VMLINUX_BTF).unwrap();
        let err = Resolver { btf: &btf }
            .offset("file", "f_no_such")
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "kernel BTF has no member `f_no_such` in `struct file`"
        );
    }
}
