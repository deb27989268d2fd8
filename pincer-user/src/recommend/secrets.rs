//! Secrets: objects whose content is a credential. `pincer recommend` never
//! grants one, whatever the run did with it, and never folds a tree grant
//! over a directory that holds one; each access to one is listed in the
//! recommended mission as a comment instead. The list is here and only
//! here (the table in docs/audit.md, "Recommend a mission" is rendered
//! from it).
//!
//! A pattern is matched against the object's absolute path, name by name:
//!
//! - `/abs/path`: that path; `/abs/dir/`: that directory and everything
//!   below it;
//! - `name`: an object of that name in any directory;
//! - `dir/`: a directory of that name anywhere, and everything below it;
//! - `dir/name`: a name in a directory of that name;
//! - `a/b/`: a directory `b` in a directory `a`, and everything below it.
//!
//! In a name, `*` stands for any run of characters (`*.pem`). Patterns
//! match anywhere rather than in one home directory: the run's home is not
//! the one `pincer recommend` runs with (under `sudo`), and a copy of a key
//! in a project is as secret as the original.

use std::path::{Component, Path};

/// One pattern of the list, with what it protects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SecretPattern {
    /// The pattern (see the module documentation).
    pub pattern: &'static str,
    /// What it holds, for the comment and the documentation.
    pub why: &'static str,
}

/// Every secret pattern.
pub const SECRETS: &[SecretPattern] = &[
    secret("/etc/shadow", "password hashes"),
    secret("/etc/shadow-", "password hashes (the backup)"),
    secret("/etc/gshadow", "group password hashes"),
    secret("/etc/gshadow-", "group password hashes (the backup)"),
    secret("/etc/ssl/private/", "TLS private keys"),
    secret("ssh_host_*key", "SSH host keys"),
    secret(".ssh/", "SSH keys and the hosts they open"),
    secret(".gnupg/", "GnuPG keys"),
    secret(".password-store/", "pass's passwords"),
    secret(".aws/", "AWS credentials"),
    secret(".azure/", "Azure credentials"),
    secret(".config/gcloud/", "Google Cloud credentials"),
    secret(".config/gh/", "GitHub CLI tokens (`hosts.yml`)"),
    secret(".kube/", "Kubernetes credentials (`config`)"),
    secret(".docker/config.json", "container registry credentials"),
    secret(".netrc", "logins for curl, ftp and git"),
    secret(".git-credentials", "git's stored credentials"),
    secret(".pgpass", "PostgreSQL passwords"),
    secret(".npmrc", "npm registry tokens"),
    secret(".pypirc", "PyPI tokens"),
    secret(".vault-token", "a HashiCorp Vault token"),
    secret(
        ".env",
        "a project's environment: API keys, database passwords",
    ),
    secret(
        ".env.*",
        "a project's environment (`.env.local`, `.env.production`)",
    ),
    secret("*id_rsa*", "SSH keys by their usual names"),
    secret("*id_dsa*", "SSH keys by their usual names"),
    secret("*id_ecdsa*", "SSH keys by their usual names"),
    secret("*id_ed25519*", "SSH keys by their usual names"),
    secret("*.pem", "keys and certificates"),
    secret("*.key", "private keys"),
    secret("*.p12", "key stores (PKCS #12)"),
    secret("*.pfx", "key stores (PKCS #12)"),
    secret("*.jks", "Java key stores"),
    secret("*.keystore", "key stores"),
    secret("*.kdbx", "KeePass databases"),
];

const fn secret(pattern: &'static str, why: &'static str) -> SecretPattern {
    SecretPattern { pattern, why }
}

/// The names of a path's components that are text, in order: what the
/// patterns here, and the test of a run's own places, compare.
pub fn names(path: &Path) -> Vec<&str> {
    path.components()
        .filter_map(|part| match part {
            Component::Normal(name) => name.to_str(),
            _ => None,
        })
        .collect()
}

/// The first pattern that makes `path` (absolute, links resolved) a
/// secret.
pub fn secret_at(path: &Path) -> Option<&'static SecretPattern> {
    let names = names(path);
    SECRETS
        .iter()
        .find(|secret| matches(secret.pattern, path, &names))
}

/// Whether `path`, whose names are `names`, matches `pattern`.
fn matches(pattern: &str, path: &Path, names: &[&str]) -> bool {
    let (body, tree) = match pattern.strip_suffix('/') {
        Some(body) => (body, true),
        None => (pattern, false),
    };
    if body.starts_with('/') {
        let place = Path::new(body);
        return path == place || (tree && path.starts_with(place));
    }
    let parts: Vec<&str> = body.split('/').collect();
    let Some(last) = names.len().checked_sub(1) else {
        return false;
    };
    names.windows(parts.len()).enumerate().any(|(at, window)| {
        let ends_at = at + parts.len() - 1;
        (ends_at == last || tree)
            && window
                .iter()
                .zip(&parts)
                .all(|(name, part)| glob(part, name))
    })
}

/// Whether `name` matches `pattern`, where `*` stands for any run of
/// characters.
pub(super) fn glob(pattern: &str, name: &str) -> bool {
    let mut pieces = pattern.split('*');
    let first = pieces.next().unwrap_or_default();
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let pieces: Vec<&str> = pieces.collect();
    let Some((last, middle)) = pieces.split_last() else {
        // No `*`: the whole name.
        return rest.is_empty();
    };
    for piece in middle {
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

/// The documentation's table of the secret patterns.
pub fn readme_table() -> String {
    let mut table = String::from("| pattern | what it holds |\n|---------|---------------|\n");
    for secret in SECRETS {
        table.push_str(&format!("| `{}` | {} |\n", secret.pattern, secret.why));
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern_of(path: &str) -> Option<&'static str> {
        secret_at(Path::new(path)).map(|secret| secret.pattern)
    }

    #[test]
    fn credentials_are_secrets_wherever_they_are() {
        for (path, pattern) in [
            ("/home/u/.ssh/id_rsa", ".ssh/"),
            ("/home/u/.ssh", ".ssh/"),
            ("/tmp/scratch/home/.ssh/config", ".ssh/"),
            ("/home/u/.aws/credentials", ".aws/"),
            ("/root/.gnupg/private-keys-v1.d/x.key", ".gnupg/"),
            ("/home/u/.netrc", ".netrc"),
            ("/home/u/project/.env", ".env"),
            ("/home/u/project/.env.local", ".env.*"),
            ("/home/u/backup/old_id_rsa.bak", "*id_rsa*"),
            ("/srv/site/tls/site.pem", "*.pem"),
            ("/srv/site/tls/site.key", "*.key"),
            ("/home/u/.config/gh/hosts.yml", ".config/gh/"),
            ("/home/u/.config/gcloud", ".config/gcloud/"),
            ("/home/u/.docker/config.json", ".docker/config.json"),
            ("/home/u/.kube/config", ".kube/"),
            ("/etc/shadow", "/etc/shadow"),
            (
                "/etc/ssl/private/ssl-cert-snakeoil.key",
                "/etc/ssl/private/",
            ),
            ("/etc/ssh/ssh_host_ed25519_key", "ssh_host_*key"),
        ] {
            assert_eq!(pattern_of(path), Some(pattern), "{path}");
        }
    }

    #[test]
    fn ordinary_files_are_not() {
        for path in [
            "/home/u/project/src/main.rs",
            "/home/u/project/.envrc",
            "/home/u/project/environment.md",
            "/home/u/.config/ghostty/config",
            "/home/u/.docker/contexts/meta.json",
            "/home/u/keys.txt",
            "/home/u/project/key",
            "/etc/shadowsocks/config.json",
            "/etc/ssl/certs",
            "/",
        ] {
            assert_eq!(pattern_of(path), None, "{path}");
        }
    }

    #[test]
    fn globs_match_whole_names() {
        assert!(glob("*.pem", "a.pem"));
        assert!(glob("*.pem", ".pem"));
        assert!(!glob("*.pem", "a.pem.txt"));
        assert!(glob("*id_rsa*", "id_rsa"));
        assert!(glob("*id_rsa*", "id_rsa.pub"));
        assert!(glob("ssh_host_*key", "ssh_host_rsa_key"));
        assert!(!glob("ssh_host_*key", "ssh_host_rsa_key.pub"));
        assert!(glob(".env", ".env"));
        assert!(!glob(".env", ".envrc"));
        assert!(!glob(".env.*", ".envrc"));
        assert!(glob("a*b*c", "aXbYc"));
        assert!(!glob("a*b*c", "aXcYb"));
    }

    #[test]
    fn the_readme_table_is_the_secret_list() {
        pincer_model::readme::check_table("secret-table", &readme_table());
    }
}
