//! A private apt configuration per Debian suite, so that fetching a package
//! from another release neither reads nor changes the host's apt state.
//!
//! The mirrors are the host's own: read from its apt sources at run time.

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, Result, bail};

use crate::{process, say};

const KEYRING: &str = "/usr/share/keyrings/debian-archive-keyring.gpg";

/// Debian releases whose archive entry identifies the host's mirror.
const KNOWN_SUITES: &[&str] = &["bookworm", "trixie"];

/// The Debian archive and security mirrors the host uses.
#[derive(Debug, PartialEq, Eq)]
pub struct Mirrors {
    pub archive: String,
    pub security: Option<String>,
}

/// One `deb` entry of the host's sources.
#[derive(Debug, Default)]
struct Entry {
    uris: Vec<String>,
    suites: Vec<String>,
}

/// Reads the mirrors from the host's apt sources (one-line and deb822).
pub fn host_mirrors() -> Result<Mirrors> {
    let mut entries = Vec::new();
    let mut files = vec![PathBuf::from("/etc/apt/sources.list")];
    if let Ok(dir) = fs::read_dir("/etc/apt/sources.list.d") {
        let mut more: Vec<PathBuf> = dir.filter_map(|e| e.ok().map(|e| e.path())).collect();
        more.sort();
        files.extend(more);
    }
    for file in files {
        let Some(ext) = file.extension().and_then(|e| e.to_str()) else {
            continue;
        };
        let Ok(text) = fs::read_to_string(&file) else {
            continue;
        };
        match ext {
            "list" => entries.extend(parse_one_line(&text)),
            "sources" => entries.extend(parse_deb822(&text)),
            _ => {}
        }
    }
    mirrors_from(&entries).context(
        "no Debian archive found in /etc/apt/sources.list or /etc/apt/sources.list.d \
         (looked for a `deb` entry with suite bookworm or trixie)",
    )
}

fn mirrors_from(entries: &[Entry]) -> Option<Mirrors> {
    let serving = |wanted: &dyn Fn(&str) -> bool| {
        entries
            .iter()
            .find(|e| e.suites.iter().any(|s| wanted(s)))
            .and_then(|e| e.uris.first())
            .map(|uri| uri.trim_end_matches('/').to_owned())
    };
    let archive = serving(&|s| KNOWN_SUITES.contains(&s))?;
    let security = serving(&|s| {
        s.strip_suffix("-security")
            .is_some_and(|base| KNOWN_SUITES.contains(&base))
    });
    Some(Mirrors { archive, security })
}

fn parse_one_line(text: &str) -> Vec<Entry> {
    let mut entries = Vec::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or_default().trim();
        let Some(rest) = line
            .strip_prefix("deb ")
            .or_else(|| line.strip_prefix("deb\t"))
        else {
            continue;
        };
        let mut rest = rest.trim_start();
        // Options in brackets (`[signed-by=...]`) come before the URI.
        if rest.starts_with('[') {
            let Some(end) = rest.find(']') else { continue };
            rest = rest[end + 1..].trim_start();
        }
        let mut words = rest.split_whitespace();
        if let (Some(uri), Some(suite)) = (words.next(), words.next()) {
            entries.push(Entry {
                uris: vec![uri.to_owned()],
                suites: vec![suite.to_owned()],
            });
        }
    }
    entries
}

fn parse_deb822(text: &str) -> Vec<Entry> {
    let mut entries = Vec::new();
    for stanza in stanzas(text) {
        let field = |name: &str| {
            stanza
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
                .unwrap_or_default()
        };
        let enabled = field("Enabled").first().is_none_or(|v| v != "no");
        if enabled && field("Types").iter().any(|t| t == "deb") {
            entries.push(Entry {
                uris: field("URIs"),
                suites: field("Suites"),
            });
        }
    }
    entries
}

/// Splits deb822 text into stanzas of (field, value) with continuation
/// lines folded in.
fn stanzas(text: &str) -> Vec<Vec<(String, String)>> {
    let mut out = Vec::new();
    let mut current: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        if line.starts_with('#') {
            continue;
        }
        if line.trim().is_empty() {
            if !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
            continue;
        }
        if line.starts_with([' ', '\t']) {
            if let Some((_, value)) = current.last_mut() {
                value.push(' ');
                value.push_str(line.trim());
            }
            continue;
        }
        if let Some((key, value)) = line.split_once(':') {
            current.push((key.trim().to_owned(), value.trim().to_owned()));
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// A private apt configuration for one suite.
pub struct Apt {
    dir: PathBuf,
    config: PathBuf,
}

impl Apt {
    /// Writes the configuration for `suite` (plus its security suite when the
    /// host has a security mirror) under `dir`.
    pub fn new(dir: &Path, suite: &str) -> Result<Self> {
        let mirrors = host_mirrors()?;
        describe(&mirrors);
        for sub in ["lists/partial", "cache/archives/partial"] {
            fs::create_dir_all(dir.join(sub))
                .with_context(|| format!("creating {}", dir.join(sub).display()))?;
        }
        let mut sources = format!(
            "deb [signed-by={KEYRING}] {} {suite} main\n",
            mirrors.archive
        );
        if let Some(security) = &mirrors.security {
            sources.push_str(&format!(
                "deb [signed-by={KEYRING}] {security} {suite}-security main\n"
            ));
        }
        let list = dir.join("sources.list");
        write(&list, &sources)?;
        // An empty dpkg status: nothing about the host's installed packages
        // may influence which version is picked.
        let status = dir.join("status");
        write(&status, "")?;
        let d = |p: &Path| p.display().to_string();
        let config = dir.join("apt.conf");
        write(
            &config,
            &format!(
                r#"Dir::Etc::SourceList "{list}";
Dir::Etc::SourceParts "/dev/null";
Dir::Etc::Preferences "/dev/null";
Dir::Etc::PreferencesParts "/dev/null";
Dir::State::Lists "{lists}";
Dir::State::Status "{status}";
Dir::Cache "{cache}";
APT::Architectures {{ "amd64"; }};
Acquire::Languages "none";
// Only package indices are needed, not the host's extra index targets.
Acquire::IndexTargets::deb::DEP-11::DefaultEnabled "false";
// The host's hooks refresh caches of its own packages: not ours to touch.
#clear APT::Update::Post-Invoke-Success;
#clear APT::Update::Post-Invoke;
"#,
                list = d(&list),
                lists = d(&dir.join("lists")),
                status = d(&status),
                cache = d(&dir.join("cache")),
            ),
        )?;
        Ok(Self {
            dir: dir.to_owned(),
            config,
        })
    }

    fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(program);
        cmd.arg("-c").arg(&self.config);
        cmd
    }

    pub fn update(&self) -> Result<()> {
        process::run(self.command("apt-get").args(["-q", "update"]))
            .with_context(|| format!("updating the package lists in {}", self.dir.display()))
    }

    /// The candidate version's control fields of `package`.
    pub fn show(&self, package: &str) -> Result<String> {
        process::output(
            self.command("apt-cache")
                .args(["show", "--no-all-versions", package]),
        )
    }

    /// Downloads `package` into `dest`; apt checks it against the signed
    /// Release file of its suite.
    pub fn download(&self, package: &str, dest: &Path) -> Result<PathBuf> {
        // apt downloads as its unprivileged user, which must own the target.
        if let Some(uid) = apt_uid() {
            // Failing (not root) only costs apt's sandbox, with a warning.
            let _ = std::os::unix::fs::chown(dest, Some(uid), None);
        }
        process::run(
            self.command("apt-get")
                .args(["-q", "download", package])
                .current_dir(dest),
        )?;
        let deb = fs::read_dir(dest)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| p.extension().is_some_and(|e| e == "deb"));
        match deb {
            Some(deb) => Ok(deb),
            None => bail!(
                "apt-get download {package} left no .deb in {}",
                dest.display()
            ),
        }
    }
}

/// Value of `field` in the first stanza of deb822 text (`apt-cache show`).
pub fn control_field(text: &str, field: &str) -> Option<String> {
    stanzas(text)
        .into_iter()
        .next()?
        .into_iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(field))
        .map(|(_, v)| v)
}

fn apt_uid() -> Option<u32> {
    let passwd = fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        (fields.next()? == "_apt").then_some(())?;
        fields.nth(1)?.parse().ok()
    })
}

fn write(path: &Path, text: &str) -> Result<()> {
    fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// Logs which mirrors are used.
fn describe(mirrors: &Mirrors) {
    say!(
        "Debian mirrors from the host's apt sources: {}{}",
        mirrors.archive,
        mirrors
            .security
            .as_deref()
            .map(|s| format!(", {s}"))
            .unwrap_or_default()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_deb822_and_one_line_sources() {
        let deb822 = "Types: deb\n# comment\nURIs: http://mirror.example/debian/\n\
                      Suites: bookworm bookworm-updates\nComponents: main\n\n\
                      Types: deb\nURIs: http://mirror.example/debian-security\n\
                      Suites: bookworm-security\nComponents: main\n\n\
                      Types: deb\nURIs: http://other.example/x\nSuites: nodistro\n";
        let mirrors = mirrors_from(&parse_deb822(deb822)).unwrap();
        assert_eq!(
            mirrors,
            Mirrors {
                archive: "http://mirror.example/debian".into(),
                security: Some("http://mirror.example/debian-security".into()),
            }
        );

        let one_line = "# deb http://no.example bookworm main\n\
                        deb [arch=amd64 signed-by=/k.gpg] http://m.example/debian bookworm main\n";
        let mirrors = mirrors_from(&parse_one_line(one_line)).unwrap();
        assert_eq!(mirrors.archive, "http://m.example/debian");
        assert_eq!(mirrors.security, None);
    }

    #[test]
    fn disabled_deb822_stanzas_are_ignored() {
        let text = "Enabled: no\nTypes: deb\nURIs: http://a.example\nSuites: bookworm\n";
        assert!(mirrors_from(&parse_deb822(text)).is_none());
    }

    #[test]
    fn reads_control_fields() {
        let text = "Package: linux-image-cloud-amd64\nVersion: 6.1.1\n\
                    Depends: linux-image-6.1.0-9-cloud-amd64 (= 6.1.1)\nDescription: x\n more\n";
        assert_eq!(control_field(text, "version").as_deref(), Some("6.1.1"));
        assert_eq!(
            control_field(text, "Depends").as_deref(),
            Some("linux-image-6.1.0-9-cloud-amd64 (= 6.1.1)")
        );
    }
}
