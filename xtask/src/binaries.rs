//! Static host binaries and test executables that go into the guest.

use std::{
    fs,
    io::{BufRead, BufReader},
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use anyhow::{Context, Result, bail};

use crate::{process, say, workspace_root};

const TARGET: &str = "x86_64-unknown-linux-gnu";

/// An executable to install in the guest as `/bin/<name>`.
#[derive(Clone, Debug)]
pub struct Binary {
    pub name: String,
    pub path: PathBuf,
}

fn target_dir() -> PathBuf {
    workspace_root().join("target").join("static")
}

fn release_dir() -> PathBuf {
    target_dir().join(TARGET).join("release")
}

/// Binaries left by an earlier build (executables directly in the release
/// directory), for booting without building.
pub fn existing() -> Result<Vec<Binary>> {
    let mut found = Vec::new();
    let dir = release_dir();
    let Ok(entries) = fs::read_dir(&dir) else {
        return Ok(found);
    };
    for entry in entries {
        let entry = entry?;
        let meta = entry.metadata()?;
        let name = entry.file_name().to_string_lossy().into_owned();
        // Executables have no extension; `.d` files and `build/` are cargo's.
        if meta.is_file() && meta.permissions().mode() & 0o111 != 0 && !name.contains('.') {
            found.push(Binary {
                name,
                path: entry.path(),
            });
        }
    }
    found.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(found)
}

/// A cargo command for the static build: a separate target dir, and a
/// statically linked C runtime so the binaries need nothing in the guest.
fn static_cargo(ebpf_object: &Path) -> Command {
    let mut cmd = process::cargo();
    cmd.current_dir(workspace_root())
        .env("RUSTFLAGS", "-C target-feature=+crt-static")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env("PINCER_EBPF_OBJECT", ebpf_object);
    cmd
}

/// Builds the binaries of `pincer-user` and `pincer-tests` (`pincer`,
/// `pincer-probe`, ...) and the privileged test executables; returns
/// everything to install in the guest.
pub fn build(ebpf_object: &Path) -> Result<Vec<Binary>> {
    say!("building static binaries for the guest");
    let mut cmd = static_cargo(ebpf_object);
    cmd.args(["build", "--locked", "--release", "--target", TARGET])
        .arg("--target-dir")
        .arg(target_dir())
        .args(["-p", "pincer-user", "-p", "pincer-tests", "--bins"]);
    let mut binaries = artifacts(cmd, false).context("building the guest binaries")?;
    for required in ["pincer", "pincer-probe"] {
        if !binaries.iter().any(|b| b.name == required) {
            bail!("the build produced no `{required}` binary");
        }
    }
    say!("guest binaries: {}", names(&binaries));

    say!("building the guest test executables");
    let mut cmd = static_cargo(ebpf_object);
    cmd.args([
        "test",
        "--locked",
        "--release",
        "--no-run",
        "--target",
        TARGET,
    ])
    .arg("--target-dir")
    .arg(target_dir())
    .args(["-p", "pincer-tests"]);
    let tests = artifacts(cmd, true).context("building the guest test executables")?;
    say!("guest test executables: {}", names(&tests));
    binaries.extend(tests);
    Ok(binaries)
}

fn names(binaries: &[Binary]) -> String {
    if binaries.is_empty() {
        return "none".to_owned();
    }
    let names: Vec<&str> = binaries.iter().map(|b| b.name.as_str()).collect();
    names.join(" ")
}

/// Runs a cargo build with JSON messages and collects the executables it
/// produced: test harnesses if `tests`, else plain binaries.
fn artifacts(mut cmd: Command, tests: bool) -> Result<Vec<Binary>> {
    cmd.arg("--message-format=json-render-diagnostics")
        .stdout(Stdio::piped());
    say!("running {}", process::describe(&cmd));
    let mut child = cmd.spawn().context("starting cargo")?;
    let stdout = child.stdout.take().expect("piped");
    let mut found = Vec::new();
    for line in BufReader::new(stdout).lines() {
        if let Some(binary) = parse_artifact(&line?, tests) {
            found.push(binary);
        }
    }
    let status = child.wait()?;
    if !status.success() {
        bail!("`{}` failed ({status})", process::describe(&cmd));
    }
    found.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(found)
}

/// An executable from one line of cargo's JSON messages. Binaries keep
/// their name; integration tests become `pincer-tests-<target>`, unit tests
/// of the library and binaries `pincer-tests-<kind>-<target>` so that names
/// cannot collide.
fn parse_artifact(line: &str, tests: bool) -> Option<Binary> {
    let msg: serde_json::Value = serde_json::from_str(line).ok()?;
    if msg["reason"] != "compiler-artifact" || msg["profile"]["test"] != tests {
        return None;
    }
    let path = PathBuf::from(msg["executable"].as_str()?);
    let target = msg["target"]["name"].as_str()?;
    let kind = msg["target"]["kind"][0].as_str().unwrap_or("test");
    let name = match (tests, kind) {
        (false, _) => target.to_owned(),
        (true, "test") => format!("pincer-tests-{target}"),
        (true, _) => format!("pincer-tests-{kind}-{target}"),
    };
    Some(Binary { name, path })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_test_artifacts() {
        let line = r#"{"reason":"compiler-artifact","target":{"kind":["test"],"name":"enforcement"},"profile":{"test":true},"executable":"/t/enforcement-123"}"#;
        let b = parse_artifact(line, true).unwrap();
        assert_eq!(b.name, "pincer-tests-enforcement");
        assert_eq!(b.path, PathBuf::from("/t/enforcement-123"));

        let lib = r#"{"reason":"compiler-artifact","target":{"kind":["lib"],"name":"pincer_tests"},"profile":{"test":true},"executable":"/t/x"}"#;
        assert_eq!(
            parse_artifact(lib, true).unwrap().name,
            "pincer-tests-lib-pincer_tests"
        );

        let not_test = r#"{"reason":"compiler-artifact","target":{"kind":["bin"],"name":"p"},"profile":{"test":false},"executable":"/t/p"}"#;
        assert!(parse_artifact(not_test, true).is_none());
        assert_eq!(parse_artifact(not_test, false).unwrap().name, "p");
        let no_exe = r#"{"reason":"compiler-artifact","target":{"kind":["lib"],"name":"l"},"profile":{"test":true},"executable":null}"#;
        assert!(parse_artifact(no_exe, true).is_none());
    }
}
