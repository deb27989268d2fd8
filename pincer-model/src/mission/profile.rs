//! Profiles of agent programs: what an agent's own runtime needs besides
//! the task's grants, shipped with pincer (`profiles/<name>.toml`) and added
//! to a mission with `[mission] profiles = [...]` or `pincer run --profile`.

use std::path::{Path, PathBuf};

use super::{
    model::{Mission, MissionError, Profile},
    parse::User,
};

/// The built-in profiles: name and text.
pub const BUILT_IN: &[(&str, &str)] = &[
    ("aider", include_str!("profiles/aider.toml")),
    ("claude-code", include_str!("profiles/claude-code.toml")),
    ("codex", include_str!("profiles/codex.toml")),
];

/// The built-in profile `name`, its paths `user`'s.
pub fn built_in(name: &str, user: &User) -> Result<Profile, MissionError> {
    let Some((_, text)) = BUILT_IN.iter().find(|(known, _)| *known == name) else {
        return Err(MissionError::UnknownProfile {
            name: name.to_owned(),
            known: BUILT_IN
                .iter()
                .map(|(known, _)| *known)
                .collect::<Vec<_>>()
                .join(", "),
        });
    };
    Profile::parse(text, &source(name), user)
}

/// How a built-in profile is named in messages.
fn source(name: &str) -> PathBuf {
    PathBuf::from(format!("profile {name}"))
}

impl Mission {
    /// Adds the built-in profiles `names` (`pincer run --profile`), each
    /// once, for [`User::current`].
    pub fn add_profiles(&mut self, names: &[String]) -> Result<(), MissionError> {
        let user = User::current();
        for name in names {
            if self.profiles.iter().any(|p| &p.name == name) {
                continue;
            }
            self.profiles.push(built_in(name, &user)?);
        }
        Ok(())
    }

    /// The environment the profiles set for the command.
    pub fn environment(&self) -> Vec<(String, String)> {
        self.profiles
            .iter()
            .flat_map(|profile| profile.env.iter().cloned())
            .collect()
    }

    /// Makes the missing directories of grants that say `make = true` (the
    /// mission's and its profiles'), mode 0700, with their parents; returns
    /// those it made. `pincer run` does it before resolving, so that a tree
    /// grant can name a directory the task (or its program) fills. What it
    /// makes as root belongs to the owner of the nearest directory that
    /// existed, so that `sudo pincer run` makes the user's directories the
    /// user's.
    pub fn make_dirs(&self) -> Result<Vec<PathBuf>, MissionError> {
        use std::os::unix::fs::{DirBuilderExt, MetadataExt};
        let grants = self
            .grants
            .iter()
            .chain(self.profiles.iter().flat_map(|p| p.grants.iter()));
        let mut made = Vec::new();
        for grant in grants.filter(|g| g.make) {
            if grant.path.exists() {
                continue;
            }
            let make_error = |source| MissionError::Make {
                path: grant.path.clone(),
                source,
            };
            let existing = grant
                .path
                .ancestors()
                .find(|a| a.exists())
                .unwrap_or(Path::new("/"));
            let owner = std::fs::metadata(existing).map_err(make_error)?;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&grant.path)
                .map_err(make_error)?;
            let made_here = grant
                .path
                .ancestors()
                .take_while(|a| *a != existing)
                .collect::<Vec<_>>();
            // Only root gives a directory away. Anyone else makes their
            // own, as in a sticky `/tmp` owned by root.
            if nix::unistd::geteuid().is_root() {
                for dir in made_here {
                    std::os::unix::fs::chown(dir, Some(owner.uid()), Some(owner.gid()))
                        .map_err(make_error)?;
                }
            }
            made.push(grant.path.clone());
        }
        Ok(made)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_built_in_profile_parses_and_is_named_after_itself() {
        let home = Path::new("/home/someone");
        let user = User {
            home: Some(home.to_owned()),
            uid: 1234,
        };
        for (name, _) in BUILT_IN {
            let profile = built_in(name, &user).unwrap();
            assert_eq!(profile.name, *name);
            assert!(!profile.description.is_empty());
            assert!(!profile.grants.is_empty());
            for grant in &profile.grants {
                // Only the home's own files, the listing of /etc, and the
                // user's own directory in /tmp.
                let per_user = grant.path.parent() == Some(Path::new("/tmp"))
                    && grant.path.to_str().unwrap().ends_with("-1234");
                assert!(
                    grant.path.starts_with(home) || grant.path == Path::new("/etc") || per_user,
                    "{name}: {}",
                    grant.path.display()
                );
            }
        }
    }

    #[test]
    fn an_unknown_profile_names_the_known_ones() {
        let error = built_in("goose", &User::current()).unwrap_err();
        assert_eq!(
            error.to_string(),
            "unknown profile \"goose\" (known: aider, claude-code, codex)"
        );
    }
}
