//! `pincer mission check` and `pincer daemon --check`: everything a start
//! would load, loaded (the grants resolved, the webhook's secret read), the
//! secret's permissions checked, and the grants a reviewer should look at
//! twice named as warnings.

use std::{
    net::IpAddr,
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
};

use pincer_common::ops;
use pincer_model::{
    mission::{Mission, MissionError, ResolvedGrants},
    vote::{Extent, webhook::WebhookConfig},
};

use crate::voters::webhook::{WebhookError, WebhookVoter};

/// What keeps a mission from starting.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// The grants do not resolve.
    #[error(transparent)]
    Mission(#[from] MissionError),
    /// The webhook voter cannot be set up.
    #[error(transparent)]
    Webhook(#[from] WebhookError),
    /// The webhook's secret file is missing, unreadable, empty or short:
    /// the error points at `secret_file` in the mission.
    #[error("{}:{line}: vote.webhook.secret_file", .mission.display())]
    Secret {
        /// The mission file.
        mission: PathBuf,
        /// Line of `secret_file`.
        line: usize,
        /// What is wrong with the secret.
        #[source]
        source: WebhookError,
    },
    /// The webhook's secret can be read by others than its owner, who could
    /// then sign answers.
    #[error(
        "{}:{line}: vote.webhook.secret_file: {} can be read by others than its owner \
         (mode {mode:o}); chmod 600 it",
        .mission.display(), .path.display()
    )]
    SecretReadable {
        /// The mission file.
        mission: PathBuf,
        /// Line of `secret_file`.
        line: usize,
        /// The secret file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
}

/// A mission that would start, and what a reviewer should look at.
#[derive(Debug)]
pub struct Checked {
    /// The grants it resolves to on this machine.
    pub grants: ResolvedGrants,
    /// `file:line: what` for each risky setting.
    pub warnings: Vec<String>,
}

/// Operations that change what they reach.
const CHANGES: u32 = ops::ALL & !(ops::READ | ops::EXEC);

/// Checks `mission` as a start would, and more.
pub fn check(mission: &Mission) -> Result<Checked, CheckError> {
    let grants = mission.resolve(crate::twin::FIRST_SLOT)?;
    if let Some(webhook) = &mission.vote.webhook {
        WebhookVoter::new(webhook.clone(), mission.vote.policy.timeout).map_err(
            |error| match error {
                WebhookError::ReadSecret { .. }
                | WebhookError::EmptySecret { .. }
                | WebhookError::ShortSecret { .. } => CheckError::Secret {
                    mission: mission.source.clone(),
                    line: webhook.secret_line,
                    source: error,
                },
                other => CheckError::Webhook(other),
            },
        )?;
        // Read just above: a secret that vanished since fails the start.
        let mode =
            std::fs::metadata(&webhook.secret_file).map_or(0, |m| m.permissions().mode() & 0o7777);
        if mode & 0o077 != 0 {
            return Err(CheckError::SecretReadable {
                mission: mission.source.clone(),
                line: webhook.secret_line,
                path: webhook.secret_file.clone(),
                mode,
            });
        }
    }
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let at = |line: usize| format!("{}:{line}", mission.source.display());
    let mut warnings = Vec::new();
    for grant in &mission.grants {
        let wide = grant.extent == Extent::Tree && grant.ops & CHANGES != 0;
        if wide && grant.path == Path::new("/") {
            warnings.push(format!(
                "{}: `/` as a tree with operations that change files: the agent may change \
                 every file of the host",
                at(grant.line)
            ));
        }
        if wide && home.as_deref() == Some(grant.path.as_path()) {
            warnings.push(format!(
                "{}: the home directory as a tree with operations that change files: that \
                 takes in ~/.ssh, ~/.bashrc and every credential kept there",
                at(grant.line)
            ));
        }
        if grant.path.starts_with("/proc/self") || grant.path.starts_with("/proc/thread-self") {
            warnings.push(format!(
                "{}: {} names a different process for every reader: the grant is resolved for \
                 pincer's own process, not the agent's",
                at(grant.line),
                grant.path.display()
            ));
        }
    }
    if let Some(webhook) = &mission.vote.webhook
        && plain_http_off_loopback(webhook)
    {
        warnings.push(format!(
            "{}: webhook {} is plain http off this host: requests (paths, process names) can \
             be read on the way",
            at(webhook.line),
            webhook.url
        ));
    }
    Ok(Checked { grants, warnings })
}

/// An `http://` endpoint whose host is not a loopback address.
fn plain_http_off_loopback(webhook: &WebhookConfig) -> bool {
    let Ok(url) = reqwest::Url::parse(&webhook.url) else {
        return false;
    };
    if url.scheme() != "http" {
        return false;
    }
    let Some(host) = url.host_str() else {
        return true;
    };
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    match bare.parse::<IpAddr>() {
        Ok(ip) => !ip.is_loopback(),
        Err(_) => host != "localhost",
    }
}
