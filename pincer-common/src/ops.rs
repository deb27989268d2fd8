//! Operation bits of a grant and of a request.
//!
//! A request carries the operations the access needs; it is allowed when the
//! grants that cover the object hold every one of them.

named! {
    /// Names used in missions and audit lines, in bit order.
    NAMES;

    /// Open for reading (files) or listing (directories).
    READ = 1 << 0 => "read";
    /// Open for writing, appending or truncating.
    WRITE = 1 << 1 => "write";
    /// Create a file, a named pipe, a socket or a symbolic link
    /// (`open(O_CREAT)`, `creat`, `mknod`, `mkfifo`, `bind`, `symlink`).
    /// Device nodes are never created by agents.
    CREATE = 1 << 2 => "create";
    /// Execute (the kernel opens the program and its interpreter for exec).
    EXEC = 1 << 3 => "exec";
    /// Remove a name: `unlink`, `rmdir`, or a rename that replaces an
    /// existing object.
    DELETE = 1 << 4 => "delete";
    /// Move or rename the object (its source end; the destination needs
    /// `create` in the new directory, or `delete` of the object it replaces).
    RENAME = 1 << 5 => "rename";
    /// Give the object another name with a hard link (the new name needs
    /// `create` in its directory).
    LINK = 1 << 6 => "link";
    /// Change mode, owner or extended attributes (`chmod`, `chown`,
    /// `setxattr`, `removexattr`). Size and time changes are `write`.
    SETATTR = 1 << 7 => "setattr";
    /// Create a directory.
    MKDIR = 1 << 8 => "mkdir";
}

/// Every operation this version knows.
pub const ALL: u32 = crate::text::union(&NAMES);
