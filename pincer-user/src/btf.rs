//! Kernel struct member offsets from the running kernel's BTF.
//!
//! Rust BPF programs have no CO-RE field relocation, so the loader reads each
//! offset the programs need from `/sys/kernel/btf/vmlinux` and hands them over
//! as a global. Members of anonymous structs and unions are found by a
//! recursive search, as the kernel nests many hot fields that way.

use std::path::{Path, PathBuf};

use btf_rs::{Btf, Type};
use pincer_common::KernelOffsets;

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
    /// A member offset is not byte-aligned or too large.
    #[error("member `{member}` of `struct {strukt}` has an unusable offset")]
    BadOffset {
        /// The struct searched.
        strukt: String,
        /// The dotted member path.
        member: String,
    },
}

/// Reads the offsets the programs need from a BTF file.
pub fn kernel_offsets(path: &Path) -> Result<KernelOffsets, BtfError> {
    let btf = Btf::from_file(path).map_err(|source| BtfError::Read {
        path: path.to_owned(),
        source,
    })?;
    let btf = Resolver { btf: &btf };
    Ok(KernelOffsets {
        loaded: 1,
        file_f_inode: btf.offset("file", "f_inode")?,
        file_f_path_dentry: btf.offset("file", "f_path.dentry")?,
        file_f_mode: btf.offset("file", "f_mode")?,
        inode_i_ino: btf.offset("inode", "i_ino")?,
        inode_i_sb: btf.offset("inode", "i_sb")?,
        super_block_s_dev: btf.offset("super_block", "s_dev")?,
        dentry_d_parent: btf.offset("dentry", "d_parent")?,
        dentry_d_name_name: btf.offset("dentry", "d_name.name")?,
        dentry_d_inode: btf.offset("dentry", "d_inode")?,
        task_struct_flags: btf.offset("task_struct", "flags")?,
        _pad: 0,
    })
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
            off.dentry_d_parent,
            off.dentry_d_inode,
        ] {
            assert_eq!(field % 8, 0, "pointers are 8-byte aligned");
            assert!(field > 0);
        }
        assert_eq!(off.dentry_d_name_name % 8, 0);
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
