//! Embeds the BPF object built by `cargo xtask build-ebpf`.
//!
//! The object is copied into `OUT_DIR` so `include_bytes!` never names a path
//! in the source tree. When it has not been built (`cargo check`, clippy,
//! docs, host unit tests) an empty stub is embedded instead and the loader
//! refuses it with a message that says how to build the real one.

use std::{env, fs, path::PathBuf};

fn main() {
    println!("cargo:rerun-if-env-changed=PINCER_EBPF_OBJECT");
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let object = env::var_os("PINCER_EBPF_OBJECT").map_or_else(
        || manifest.join("../target/ebpf/bpfel-unknown-none/release/pincer-ebpf"),
        PathBuf::from,
    );
    println!("cargo:rerun-if-changed={}", object.display());
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("set by cargo")).join("pincer.bpf.o");
    let bytes = fs::read(&object).unwrap_or_default();
    fs::write(&out, bytes).expect("write the embedded BPF object");
}
