//! `[kubernetes]`: the daemon confines the annotated pods of its node.

use std::path::{Path, PathBuf};

use toml::Spanned;

use super::{DEFAULT_KUBEPODS, KubernetesConfig};
use crate::toml_file::{
    TomlError,
    fields::{Fields, raw_tables},
    toml_string,
};

raw_tables! {
    pub(super) struct RawKubernetes {
        missions: String,
        node: String,
        api: String,
        kubepods: String,
    }
}

/// `[kubernetes]`: `missions` (required), `node`, `api`, `kubepods`.
pub(super) fn parse_kubernetes(
    table: &Fields<'_, RawKubernetes>,
) -> Result<KubernetesConfig, TomlError> {
    let (doc, raw) = (table.doc, table.raw());
    let missions = table.required(&raw.missions, "missions")?;
    let directory = doc.path().parent().unwrap_or(Path::new(""));
    let missions = doc.path_from(missions, "kubernetes.missions", directory)?;
    // A string the check accepts, or the check's word on it at its place.
    let checked =
        |value: &Option<Spanned<String>>, field: &str, check: fn(&str) -> Result<(), String>| {
            value
                .as_ref()
                .map(|value| doc.check(value, field, |text| check(text).map(|()| text.clone())))
                .transpose()
        };
    let node = checked(&raw.node, "kubernetes.node", check_node_name)?;
    let api = checked(&raw.api, "kubernetes.api", check_api_url)?;
    let kubepods = checked(&raw.kubepods, "kubernetes.kubepods", check_relative_cgroup)?
        .map_or_else(|| PathBuf::from(DEFAULT_KUBEPODS), PathBuf::from);
    Ok(KubernetesConfig {
        node,
        api,
        missions,
        kubepods,
    })
}

/// A node's name is a DNS subdomain: it goes into the field selector of
/// every list and watch.
pub(super) fn check_node_name(name: &str) -> Result<(), String> {
    let valid = !name.is_empty()
        && name.len() <= 253
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-')
        && name
            .split('.')
            .all(|label| !label.is_empty() && !label.starts_with('-') && !label.ends_with('-'));
    if valid {
        Ok(())
    } else {
        Err(format!(
            "{} is not a node name (lower-case letters, digits, \"-\" and \".\", \
             at most 253 characters)",
            toml_string(name)
        ))
    }
}

/// The API server's URL: `http` or `https`, a host, and no credentials
/// (they would end up in logs; the client takes them from a kubeconfig or
/// the service account).
fn check_api_url(text: &str) -> Result<(), String> {
    let uri: http::Uri = text
        .parse()
        .map_err(|error| format!("invalid URL {}: {error}", toml_string(text)))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) {
        return Err(format!(
            "must be an http:// or https:// URL (not {})",
            toml_string(text)
        ));
    }
    let Some(authority) = uri.authority() else {
        return Err(format!("names no host: {}", toml_string(text)));
    };
    if authority.as_str().contains('@') {
        return Err(
            "must not carry credentials: use a kubeconfig or the pod's service account".to_owned(),
        );
    }
    Ok(())
}

/// A cgroup path relative to the cgroup root: no leading `/`, no empty,
/// `.` or `..` components.
fn check_relative_cgroup(text: &str) -> Result<(), String> {
    if text.is_empty() {
        return Err("must not be empty".to_owned());
    }
    if text.starts_with('/') {
        return Err(format!(
            "must be relative to daemon.cgroup_root (not {})",
            toml_string(text)
        ));
    }
    if text
        .split('/')
        .any(|part| part.is_empty() || part == "." || part == ".." || part.contains('\0'))
    {
        return Err(format!(
            "{} has an empty, \".\" or \"..\" component",
            toml_string(text)
        ));
    }
    Ok(())
}
