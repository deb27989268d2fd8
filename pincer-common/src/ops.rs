//! Operation bits of a grant and of a request.
//!
//! A request carries the operations the access needs; it is allowed when the
//! grants that cover the object hold every one of them.

/// Open for reading (files) or listing (directories).
pub const READ: u32 = 1 << 0;
/// Open for writing, appending or truncating.
pub const WRITE: u32 = 1 << 1;
/// Create a file, a named pipe, a socket or a symbolic link
/// (`open(O_CREAT)`, `creat`, `mknod`, `mkfifo`, `bind`, `symlink`).
/// Device nodes are never created by agents.
pub const CREATE: u32 = 1 << 2;
/// Execute (the kernel opens the program and its interpreter for exec).
pub const EXEC: u32 = 1 << 3;
/// Remove a name: `unlink`, `rmdir`, or a rename that replaces an
/// existing object.
pub const DELETE: u32 = 1 << 4;
/// Move or rename the object (its source end; the destination needs
/// `create` in the new directory, or `delete` of the object it replaces).
pub const RENAME: u32 = 1 << 5;
/// Give the object another name with a hard link (the new name needs
/// `create` in its directory).
pub const LINK: u32 = 1 << 6;
/// Change mode, owner or extended attributes (`chmod`, `chown`,
/// `setxattr`, `removexattr`). Size and time changes are `write`.
pub const SETATTR: u32 = 1 << 7;
/// Create a directory.
pub const MKDIR: u32 = 1 << 8;
/// Every operation this version knows.
pub const ALL: u32 = READ | WRITE | CREATE | EXEC | DELETE | RENAME | LINK | SETATTR | MKDIR;

/// Names used in missions and audit lines, in bit order.
pub const NAMES: [(u32, &str); 9] = [
    (READ, "read"),
    (WRITE, "write"),
    (CREATE, "create"),
    (EXEC, "exec"),
    (DELETE, "delete"),
    (RENAME, "rename"),
    (LINK, "link"),
    (SETATTR, "setattr"),
    (MKDIR, "mkdir"),
];
