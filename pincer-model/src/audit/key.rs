//! The audit key: which key chains a log, and reading or drawing it. Apart
//! from the chain because a key is a secret kept on its own, read by
//! `pincer audit verify` as well as by the writer.

use std::{
    fs::OpenOptions,
    io::{self, Read, Write},
    os::unix::fs::{OpenOptionsExt, PermissionsExt},
    path::{Path, PathBuf},
};

use super::{AuditError, KEY_LEN, MAX_KEY_LEN};
use crate::{files, paths::default_key_path};

/// Which key chains a log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AuditKey {
    /// A key file: read when it exists, otherwise created with [`KEY_LEN`]
    /// random bytes, mode 0600.
    File(PathBuf),
    /// A random key kept in memory only: the chain is written, but nobody
    /// can verify it.
    Ephemeral,
}

impl AuditKey {
    /// The key a log gets when none is given: [`default_key_path`] for a
    /// file, an ephemeral key for standard error.
    pub fn default_for(log: Option<&Path>) -> Self {
        log.map_or(Self::Ephemeral, |log| Self::File(default_key_path(log)))
    }

    pub(super) fn load(&self) -> Result<Vec<u8>, AuditError> {
        match self {
            Self::File(path) => read_or_create_key(path),
            Self::Ephemeral => random_key(),
        }
    }
}

/// Reads a key file: its bytes, as they are, are the key.
pub fn read_key(path: &Path) -> Result<Vec<u8>, AuditError> {
    let read_error = |source| AuditError::ReadKey {
        path: path.to_owned(),
        source,
    };
    let file = files::open_regular(path).map_err(read_error)?;
    let mode = file.metadata().map_err(read_error)?.permissions().mode();
    if mode & 0o077 != 0 {
        tracing::warn!(
            path = %path.display(),
            mode = format!("{:o}", mode & 0o777),
            "the audit key can be read by others than its owner: they can forge audit lines"
        );
    }
    let mut key = Vec::with_capacity(KEY_LEN);
    file.take(MAX_KEY_LEN as u64 + 1)
        .read_to_end(&mut key)
        .map_err(read_error)?;
    if key.len() < KEY_LEN || key.len() > MAX_KEY_LEN {
        return Err(AuditError::KeyLength {
            path: path.to_owned(),
            len: key.len(),
            too_long: key.len() > MAX_KEY_LEN,
        });
    }
    Ok(key)
}

fn read_or_create_key(path: &Path) -> Result<Vec<u8>, AuditError> {
    match read_key(path) {
        Err(AuditError::ReadKey { source, .. }) if source.kind() == io::ErrorKind::NotFound => {}
        other => return other,
    }
    let key = random_key()?;
    let create_error = |source| AuditError::CreateKey {
        path: path.to_owned(),
        source,
    };
    // O_EXCL: never overwrite a key that appeared meanwhile, and never
    // follow a symlink planted in its place.
    let mut file = match OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(file) => file,
        Err(source) if source.kind() == io::ErrorKind::AlreadyExists => return read_key(path),
        Err(source) => return Err(create_error(source)),
    };
    // Synced: a log that outlives its key after a crash cannot be verified.
    if let Err(source) = file.write_all(&key).and_then(|()| file.sync_all()) {
        // A short key file would make every later open fail.
        let _ = std::fs::remove_file(path);
        return Err(create_error(source));
    }
    tracing::info!(path = %path.display(), "created the audit key");
    Ok(key)
}

fn random_key() -> Result<Vec<u8>, AuditError> {
    let mut key = vec![0; KEY_LEN];
    getrandom::fill(&mut key).map_err(|e| {
        AuditError::Random(e.raw_os_error().map_or_else(
            || io::Error::other(e.to_string()),
            io::Error::from_raw_os_error,
        ))
    })?;
    Ok(key)
}
