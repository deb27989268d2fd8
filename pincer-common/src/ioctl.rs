//! `ioctl(2)` commands, and what each asks of an agent (the `file_ioctl`
//! programs decide by [`ioctl::need`](need)). Numbers are x86-64's; where a 32-bit
//! process passes another number for the same command (`FS_IOC32_*`), both
//! are listed, as the compat path may hand either to the hooks.

use crate::ops;

/// What an ioctl command needs of an agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    /// Nothing: the command reads (`FIONREAD`, `TCGETS`,
    /// `FS_IOC_GETFLAGS`, ...) or changes no file.
    Nothing,
    /// These operations on the object of the open file.
    Ops(u32),
    /// Refused whatever the grants: typing into a terminal, or changing
    /// a whole filesystem.
    Refused,
}

/// `TIOCSTI`: pushes a byte into a terminal's input, as if typed.
pub const TIOCSTI: u32 = 0x5412;
/// `TIOCLINUX`: virtual console requests, among them pasting the
/// selection into a terminal's input.
pub const TIOCLINUX: u32 = 0x541c;
/// `FIFREEZE`: stops every write to the filesystem.
pub const FIFREEZE: u32 = 0xc004_5877;
/// `FITHAW`: lets a frozen filesystem be written again.
pub const FITHAW: u32 = 0xc004_5878;
/// `FS_IOC_SETFSLABEL`: renames the filesystem.
pub const FS_IOC_SETFSLABEL: u32 = 0x4100_9432;
/// `EXT4_IOC_SETFSUUID`: changes an ext4 filesystem's UUID.
pub const EXT4_IOC_SETFSUUID: u32 = 0x4008_662c;
/// `EXT4_IOC_SHUTDOWN` (`XFS_IOC_GOINGDOWN`): shuts the filesystem down.
pub const EXT4_IOC_SHUTDOWN: u32 = 0x8004_587d;

/// `FS_IOC_SETFLAGS`: inode flags (immutable, append-only, ...).
pub const FS_IOC_SETFLAGS: u32 = 0x4008_6602;
/// `FS_IOC32_SETFLAGS`.
pub const FS_IOC32_SETFLAGS: u32 = 0x4004_6602;
/// `FS_IOC_FSSETXATTR`: extended inode flags, project id, extent size.
pub const FS_IOC_FSSETXATTR: u32 = 0x401c_5820;
/// `FS_IOC_SETVERSION`: the inode's generation number.
pub const FS_IOC_SETVERSION: u32 = 0x4008_7602;
/// `FS_IOC32_SETVERSION`.
pub const FS_IOC32_SETVERSION: u32 = 0x4004_7602;
/// `EXT4_IOC_SETVERSION`.
pub const EXT4_IOC_SETVERSION: u32 = 0x4008_6604;
/// `EXT4_IOC32_SETVERSION`.
pub const EXT4_IOC32_SETVERSION: u32 = 0x4004_6604;
/// `FS_IOC_ENABLE_VERITY`: makes the file read-only for good.
pub const FS_IOC_ENABLE_VERITY: u32 = 0x4080_6685;
/// `FS_IOC_SET_ENCRYPTION_POLICY`: encrypts what an empty directory
/// will hold.
pub const FS_IOC_SET_ENCRYPTION_POLICY: u32 = 0x800c_6613;

/// `FICLONE`: the file's data becomes another file's.
pub const FICLONE: u32 = 0x4004_9409;
/// `FICLONERANGE`: a range of the file's data becomes another file's.
pub const FICLONERANGE: u32 = 0x4020_940d;
/// `FIDEDUPERANGE`: ranges of other files that hold the same bytes as
/// this one are made to share its storage.
pub const FIDEDUPERANGE: u32 = 0xc018_9436;

/// What `cmd` needs of an agent.
#[inline(always)]
pub const fn need(cmd: u32) -> Need {
    match cmd {
        TIOCSTI | TIOCLINUX | FIFREEZE | FITHAW | FS_IOC_SETFSLABEL | EXT4_IOC_SETFSUUID
        | EXT4_IOC_SHUTDOWN => Need::Refused,
        FS_IOC_SETFLAGS
        | FS_IOC32_SETFLAGS
        | FS_IOC_FSSETXATTR
        | FS_IOC_SETVERSION
        | FS_IOC32_SETVERSION
        | EXT4_IOC_SETVERSION
        | EXT4_IOC32_SETVERSION
        | FS_IOC_ENABLE_VERITY
        | FS_IOC_SET_ENCRYPTION_POLICY => Need::Ops(ops::SETATTR),
        FICLONE | FICLONERANGE | FIDEDUPERANGE => Need::Ops(ops::WRITE),
        _ => Need::Nothing,
    }
}

/// The name of a command [`need`] refuses or asks operations for.
pub const fn name(cmd: u32) -> Option<&'static str> {
    Some(match cmd {
        TIOCSTI => "TIOCSTI",
        TIOCLINUX => "TIOCLINUX",
        FIFREEZE => "FIFREEZE",
        FITHAW => "FITHAW",
        FS_IOC_SETFSLABEL => "FS_IOC_SETFSLABEL",
        EXT4_IOC_SETFSUUID => "EXT4_IOC_SETFSUUID",
        EXT4_IOC_SHUTDOWN => "EXT4_IOC_SHUTDOWN",
        FS_IOC_SETFLAGS | FS_IOC32_SETFLAGS => "FS_IOC_SETFLAGS",
        FS_IOC_FSSETXATTR => "FS_IOC_FSSETXATTR",
        FS_IOC_SETVERSION | FS_IOC32_SETVERSION => "FS_IOC_SETVERSION",
        EXT4_IOC_SETVERSION | EXT4_IOC32_SETVERSION => "EXT4_IOC_SETVERSION",
        FS_IOC_ENABLE_VERITY => "FS_IOC_ENABLE_VERITY",
        FS_IOC_SET_ENCRYPTION_POLICY => "FS_IOC_SET_ENCRYPTION_POLICY",
        FICLONE => "FICLONE",
        FICLONERANGE => "FICLONERANGE",
        FIDEDUPERANGE => "FIDEDUPERANGE",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use crate::{ioctl, ops};

    #[test]
    fn ioctls_that_change_a_file_need_operations_and_injection_is_refused() {
        use ioctl::{Need, need};
        assert_eq!(need(ioctl::TIOCSTI), Need::Refused);
        assert_eq!(need(ioctl::TIOCLINUX), Need::Refused);
        assert_eq!(need(ioctl::FIFREEZE), Need::Refused);
        for cmd in [
            ioctl::FS_IOC_SETFLAGS,
            ioctl::FS_IOC32_SETFLAGS,
            ioctl::FS_IOC_FSSETXATTR,
            ioctl::FS_IOC_SETVERSION,
            ioctl::EXT4_IOC32_SETVERSION,
            ioctl::FS_IOC_ENABLE_VERITY,
        ] {
            assert_eq!(need(cmd), Need::Ops(ops::SETATTR), "{cmd:#x}");
        }
        for cmd in [ioctl::FICLONE, ioctl::FICLONERANGE, ioctl::FIDEDUPERANGE] {
            assert_eq!(need(cmd), Need::Ops(ops::WRITE), "{cmd:#x}");
        }
        // FIONREAD, TCGETS, FS_IOC_GETFLAGS, FS_IOC_FSGETXATTR, FS_IOC_FIEMAP.
        for cmd in [0x541b, 0x5401, 0x8008_6601, 0x801c_581f, 0xc020_660b] {
            assert_eq!(need(cmd), Need::Nothing, "{cmd:#x}");
            assert_eq!(ioctl::name(cmd), None);
        }
        assert_eq!(
            ioctl::name(ioctl::FS_IOC32_SETFLAGS),
            Some("FS_IOC_SETFLAGS")
        );
        // Every command with a rule has a name for the audit log.
        for cmd in [
            ioctl::TIOCSTI,
            ioctl::TIOCLINUX,
            ioctl::FIFREEZE,
            ioctl::FITHAW,
            ioctl::FS_IOC_SETFSLABEL,
            ioctl::EXT4_IOC_SETFSUUID,
            ioctl::EXT4_IOC_SHUTDOWN,
            ioctl::FS_IOC_SETFLAGS,
            ioctl::FS_IOC32_SETFLAGS,
            ioctl::FS_IOC_FSSETXATTR,
            ioctl::FS_IOC_SETVERSION,
            ioctl::FS_IOC32_SETVERSION,
            ioctl::EXT4_IOC_SETVERSION,
            ioctl::EXT4_IOC32_SETVERSION,
            ioctl::FS_IOC_ENABLE_VERITY,
            ioctl::FS_IOC_SET_ENCRYPTION_POLICY,
            ioctl::FICLONE,
            ioctl::FICLONERANGE,
            ioctl::FIDEDUPERANGE,
        ] {
            assert_ne!(need(cmd), Need::Nothing, "{cmd:#x}");
            assert!(ioctl::name(cmd).is_some(), "{cmd:#x}");
        }
    }
}
