//! Running external commands with a printed trace and checked status.

use std::{
    ffi::OsStr,
    path::Path,
    process::{Command, Stdio},
};

use anyhow::{Context, Result, bail};

use crate::say;

/// The cargo that runs this xtask, so nested builds use the same toolchain.
pub fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

/// A shell-like rendering of a command line, for messages (the program
/// without its directory, which is noise for cargo's toolchain path).
pub fn describe(cmd: &Command) -> String {
    let program = Path::new(cmd.get_program());
    let mut parts = vec![quote_os(program.file_name().unwrap_or(program.as_os_str()))];
    parts.extend(cmd.get_args().map(quote_os));
    parts.join(" ")
}

fn quote_os(s: &OsStr) -> String {
    shell_quote(&s.to_string_lossy())
}

/// Quotes one word for a POSIX shell; plain words stay as they are.
pub fn shell_quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
    if plain {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Runs a command with inherited output and fails unless it succeeds.
pub fn run(cmd: &mut Command) -> Result<()> {
    say!("running {}", describe(cmd));
    let status = cmd
        .status()
        .with_context(|| format!("cannot start {}", cmd.get_program().to_string_lossy()))?;
    if !status.success() {
        bail!("`{}` failed ({status})", describe(cmd));
    }
    Ok(())
}

/// Runs a quick query and returns its standard output; fails unless it
/// succeeds.
pub fn output(cmd: &mut Command) -> Result<String> {
    let out = cmd
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("cannot start {}", cmd.get_program().to_string_lossy()))?;
    if !out.status.success() {
        bail!("`{}` failed ({})", describe(cmd), out.status);
    }
    String::from_utf8(out.stdout).with_context(|| format!("`{}` printed non-UTF-8", describe(cmd)))
}
