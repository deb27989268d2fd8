//! `cargo xtask demo`: the demo scenario in a VM.

use std::time::Duration;

use anyhow::Result;

use crate::{kernels::Kernel, say, vm};

const DEMO: &str = include_str!("../guest/demo.sh");

pub fn command(kernel: Kernel, timeout: Duration) -> Result<u8> {
    say!("demo on Linux {kernel}");
    let code = vm::run_vm(kernel, DEMO, timeout, &|line| println!("{line}"))?;
    Ok(u8::try_from(code).unwrap_or(1))
}
