//! Terminals: TIOCSTI injection, through the native and the 32-bit entry.
//! Apart because the 32-bit path needs its own low page and assembly.

use std::{ffi::OsStr, os::unix::ffi::OsStrExt};

use crate::{Outcome, errno};

/// A page below 4 GiB, where a 32-bit system call can point.
pub(crate) fn low_page() -> Result<*mut u8, i32> {
    // SAFETY: a fresh anonymous mapping.
    let page = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_32BIT,
            -1,
            0,
        )
    };
    if page == libc::MAP_FAILED {
        return Err(errno());
    }
    Ok(page.cast())
}

/// `ioctl(fd, cmd, arg)` through the 32-bit system call entry (`int 0x80`,
/// number 54), as a 32-bit process makes it: the kernel's compat path.
/// Returns what the system call returns (a negative errno on failure).
pub(crate) fn ioctl32(fd: i32, cmd: u32, arg: *mut u8) -> i64 {
    let ret: i64;
    // SAFETY: the 32-bit entry takes its arguments in ebx, ecx and edx and
    // clobbers r8-r11; rbx is saved around the call, as Rust reserves it.
    unsafe {
        std::arch::asm!(
            "xchg {fd:r}, rbx",
            "int 0x80",
            "xchg {fd:r}, rbx",
            fd = inout(reg) i64::from(fd) => _,
            inlateout("rax") 54i64 => ret,
            in("rcx") i64::from(cmd),
            in("rdx") arg as i64,
            out("r8") _,
            out("r9") _,
            out("r10") _,
            out("r11") _,
        );
    }
    // The result is a 32-bit value.
    i64::from(ret as i32)
}

pub(crate) fn sti(fd: i32, text: &OsStr, compat: bool) -> Outcome {
    let page = low_page()?;
    let text = text.as_bytes().to_vec();
    let text = String::from_utf8_lossy(&text).replace("\\n", "\n");
    let mut pushed = 0;
    for &byte in text.as_bytes() {
        // SAFETY: `page` is a mapped, writable page.
        unsafe { page.write(byte) };
        let r = if compat {
            ioctl32(fd, libc::TIOCSTI as u32, page)
        } else {
            // SAFETY: TIOCSTI reads one byte at the pointer.
            i64::from(unsafe { libc::ioctl(fd, libc::TIOCSTI, page) })
        };
        if r < 0 {
            return Err(if compat { -r as i32 } else { errno() });
        }
        pushed += 1;
    }
    Ok(format!("injected {pushed}"))
}
