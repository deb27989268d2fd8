//! The approval service's harness for the guest tests: `pincer approvals
//! serve` as a child process ([`Approvals`]) and its operator's CLI. Here
//! rather than in a test file so the tests hold only tests.

use std::{
    fs,
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
};

use pincer::approvals::server::served_address;

use crate::pincer_bin;

/// `pincer approvals serve` on a free loopback port, killed when dropped.
pub struct Approvals {
    child: Child,
    /// Its address, `http://127.0.0.1:<port>`.
    pub server: String,
    token: PathBuf,
}

impl Approvals {
    /// Serves with `secret` (shared with the nodes) and an operator token,
    /// both files in `dir`.
    pub fn serve(dir: &Path, secret: &Path) -> Self {
        let token = dir.join("approvals.token");
        fs::write(&token, "operator token, long enough\n").unwrap();
        fs::set_permissions(&token, fs::Permissions::from_mode(0o600)).unwrap();
        let config = dir.join("approvals.toml");
        fs::write(
            &config,
            format!(
                "secret_file = \"{}\"\ntoken_file = \"{}\"\n",
                secret.display(),
                token.display()
            ),
        )
        .unwrap();
        let mut child = Command::new(pincer_bin())
            .args(["approvals", "serve", "--listen", "127.0.0.1:0", "--config"])
            .arg(&config)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        // Its first line names where it listens.
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        let addr = served_address(&line).unwrap_or_else(|| panic!("no address in {line:?}"));
        Self {
            child,
            server: format!("http://{addr}"),
            token,
        }
    }

    /// `pincer approvals <args>` against it, as an operator.
    pub fn cli(&self, args: &[&str]) -> Output {
        Command::new(pincer_bin())
            .arg("approvals")
            .args(args)
            .args(["--server", &self.server, "--token-file"])
            .arg(&self.token)
            .output()
            .unwrap()
    }

    pub fn pending(&self) -> Vec<serde_json::Value> {
        let out = self.cli(&["pending", "--json"]);
        assert!(out.status.success(), "{out:?}");
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()["requests"]
            .as_array()
            .cloned()
            .or_else(|| {
                serde_json::from_slice::<serde_json::Value>(&out.stdout)
                    .unwrap()
                    .as_array()
                    .cloned()
            })
            .unwrap_or_default()
    }
}

impl Drop for Approvals {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
