//! The check of pincer's Kubernetes deployment (`deploy/kubernetes`): kubectl
//! renders it, and every rendered document is read into the Kubernetes API
//! type of its kind and written back. The API types keep only the fields
//! they know, so a misspelled field (`imagePulPolicy`) is lost on the way
//! and shows up as a difference, named by its document and JSON path; a
//! value of the wrong type does not read at all. Either is a [`Finding`].
//!
//! Applied to a cluster, such a field is refused at best, and at worst
//! dropped with no more than a warning (as field validation is set); this
//! catches it without a cluster.

use std::{
    fmt,
    path::{Path, PathBuf},
    process::Command,
};

use k8s_openapi::{
    Resource,
    api::{
        apps::v1::DaemonSet,
        core::v1::{ConfigMap, Namespace, Service, ServiceAccount},
        rbac::v1::{ClusterRole, ClusterRoleBinding},
    },
};
use serde::{Serialize, de::DeserializeOwned};
use serde_json::Value;

pub use k8s_openapi;

/// Why the deployment could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error("failed to start {}", kubectl.display())]
    Start {
        kubectl: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("`{} kustomize {}` failed ({status}): {stderr}", kubectl.display(), dir.display())]
    Failed {
        kubectl: PathBuf,
        dir: PathBuf,
        status: std::process::ExitStatus,
        stderr: String,
    },
    #[error("kubectl's rendering is not a stream of YAML documents")]
    Yaml {
        #[source]
        source: serde_yaml_ng::Error,
    },
}

/// Renders the kustomization in `dir` with `kubectl kustomize` and reads
/// the documents it prints.
pub fn render(kubectl: &Path, dir: &Path) -> Result<Vec<Value>, RenderError> {
    let out = Command::new(kubectl)
        .arg("kustomize")
        .arg(dir)
        .output()
        .map_err(|source| RenderError::Start {
            kubectl: kubectl.to_owned(),
            source,
        })?;
    if !out.status.success() {
        return Err(RenderError::Failed {
            kubectl: kubectl.to_owned(),
            dir: dir.to_owned(),
            status: out.status,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    documents(&String::from_utf8_lossy(&out.stdout)).map_err(|source| RenderError::Yaml { source })
}

/// The documents of a YAML stream, as JSON values (empty documents left
/// out).
pub fn documents(yaml: &str) -> Result<Vec<Value>, serde_yaml_ng::Error> {
    let mut docs = Vec::new();
    for document in serde_yaml_ng::Deserializer::from_str(yaml) {
        let value: Value = serde::Deserialize::deserialize(document)?;
        if !value.is_null() {
            docs.push(value);
        }
    }
    Ok(docs)
}

/// `Kind/name` of a document, for messages.
pub fn name_of(doc: &Value) -> String {
    let field = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or("?").to_owned();
    format!(
        "{}/{}",
        field(doc.get("kind")),
        field(doc.pointer("/metadata/name"))
    )
}

/// Something wrong in one rendered document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// `Kind/name`.
    pub document: String,
    /// The JSON path of the field (`.spec.template.spec.hostPID`); `.` for
    /// the document as a whole.
    pub path: String,
    pub problem: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: {}", self.document, self.path, self.problem)
    }
}

/// Why a document does not read into its API type: the JSON path of the
/// value that does not fit, and why.
type Unfit = (String, String);

/// Reads a document into `T` and writes it back.
type RoundTrip = fn(&Value) -> Result<Value, Unfit>;

fn round_trip<T: DeserializeOwned + Serialize>(doc: &Value) -> Result<Value, Unfit> {
    let typed: T = serde_path_to_error::deserialize(doc.clone()).map_err(|err| {
        let path = err.path().to_string();
        let path = if path == "." {
            path
        } else {
            format!(".{path}")
        };
        (path, err.into_inner().to_string())
    })?;
    serde_json::to_value(typed).map_err(|err| (".".to_owned(), err.to_string()))
}

fn kind<T: Resource + DeserializeOwned + Serialize>() -> (&'static str, &'static str, RoundTrip) {
    (T::API_VERSION, T::KIND, round_trip::<T>)
}

/// The kinds the deployment is made of: a document of any other kind is a
/// finding too, so that a new kind is added here, and checked, first.
fn known_kinds() -> [(&'static str, &'static str, RoundTrip); 7] {
    [
        kind::<Namespace>(),
        kind::<ServiceAccount>(),
        kind::<ConfigMap>(),
        kind::<Service>(),
        kind::<DaemonSet>(),
        kind::<ClusterRole>(),
        kind::<ClusterRoleBinding>(),
    ]
}

/// Checks one document against the API type of its kind: every field
/// known, every value of the right type. Empty when it is sound.
pub fn check(doc: &Value) -> Vec<Finding> {
    let document = name_of(doc);
    let finding = |path: String, problem: String| Finding {
        document: document.clone(),
        path,
        problem,
    };
    let api_version = doc.get("apiVersion").and_then(Value::as_str);
    let kind = doc.get("kind").and_then(Value::as_str);
    let Some((_, _, round_trip)) = known_kinds()
        .into_iter()
        .find(|(v, k, _)| Some(*v) == api_version && Some(*k) == kind)
    else {
        return vec![finding(
            ".".to_owned(),
            format!(
                "no API type is known here for apiVersion {api_version:?}, kind {kind:?}: add it \
                 to the check's kinds"
            ),
        )];
    };
    let back = match round_trip(doc) {
        Ok(back) => back,
        Err((path, err)) => return vec![finding(path, err)],
    };
    let mut differences = Vec::new();
    compare(doc, &back, &mut String::new(), &mut differences);
    differences
        .into_iter()
        .map(|(path, problem)| finding(path, problem))
        .collect()
}

/// Every place where `back` (the document written back from its API type)
/// differs from `original`, as (JSON path, problem).
fn compare(original: &Value, back: &Value, path: &mut String, out: &mut Vec<(String, String)>) {
    let here = |path: &str| {
        if path.is_empty() {
            ".".to_owned()
        } else {
            path.to_owned()
        }
    };
    match (original, back) {
        (Value::Object(original), Value::Object(back)) => {
            for (key, value) in original {
                let len = path.len();
                push_key(path, key);
                match back.get(key) {
                    Some(written) => compare(value, written, path, out),
                    None if value.is_null() => out.push((
                        path.clone(),
                        "null, which the API type leaves out: remove it".to_owned(),
                    )),
                    None => out.push((
                        path.clone(),
                        "not a field of the API type (a misspelling?)".to_owned(),
                    )),
                }
                path.truncate(len);
            }
            for key in back.keys().filter(|k| !original.contains_key(*k)) {
                let len = path.len();
                push_key(path, key);
                out.push((path.clone(), "added by the API type".to_owned()));
                path.truncate(len);
            }
        }
        (Value::Array(original), Value::Array(back)) if original.len() == back.len() => {
            for (index, (value, written)) in original.iter().zip(back).enumerate() {
                let len = path.len();
                path.push_str(&format!("[{index}]"));
                compare(value, written, path, out);
                path.truncate(len);
            }
        }
        _ if original == back => {}
        _ => out.push((here(path), format!("{original} reads back as {back}"))),
    }
}

/// Appends `.key`, or `["key"]` when the key is not a plain word.
fn push_key(path: &mut String, key: &str) {
    let plain = !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if plain {
        path.push('.');
        path.push_str(key);
    } else {
        path.push_str(&format!("[{key:?}]"));
    }
}

/// The capabilities of `CapabilityBoundingSet=` in a systemd unit (the last
/// one, as systemd reads it), without their `CAP_` prefix, as Kubernetes
/// writes them.
pub fn bounding_set(unit: &str) -> Option<Vec<String>> {
    let value = unit
        .lines()
        .filter_map(|l| l.trim().strip_prefix("CapabilityBoundingSet="))
        .next_back()?;
    Some(
        value
            .split_whitespace()
            .map(|cap| cap.strip_prefix("CAP_").unwrap_or(cap).to_owned())
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn service_account() -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": { "name": "pincer", "labels": { "app.kubernetes.io/name": "pincer" } },
            "automountServiceAccountToken": true,
        })
    }

    #[test]
    fn a_sound_document_has_no_finding() {
        assert_eq!(check(&service_account()), []);
    }

    #[test]
    fn a_misspelled_field_is_named_with_its_path() {
        let mut doc = service_account();
        doc["metadata"]["lables"] = json!({});
        let findings = check(&doc);
        assert_eq!(findings.len(), 1, "{findings:?}");
        assert_eq!(
            findings[0].to_string(),
            "ServiceAccount/pincer: .metadata.lables: not a field of the API type (a misspelling?)"
        );
    }

    #[test]
    fn a_value_of_the_wrong_type_is_refused() {
        let mut doc = service_account();
        doc["automountServiceAccountToken"] = json!("yes");
        let findings = check(&doc);
        assert_eq!(findings.len(), 1, "{findings:?}");
        assert_eq!(
            findings[0].to_string(),
            "ServiceAccount/pincer: .automountServiceAccountToken: invalid type: string \"yes\", \
             expected a boolean"
        );
    }

    #[test]
    fn an_unknown_kind_is_a_finding() {
        let doc = json!({ "apiVersion": "v1", "kind": "Pod", "metadata": { "name": "p" } });
        let findings = check(&doc);
        assert_eq!(findings.len(), 1, "{findings:?}");
        assert!(
            findings[0].problem.contains("no API type"),
            "{}",
            findings[0]
        );
    }

    #[test]
    fn keys_that_are_not_words_are_quoted_in_paths() {
        let mut path = String::new();
        push_key(&mut path, "metadata");
        push_key(&mut path, "prometheus.io/port");
        assert_eq!(path, r#".metadata["prometheus.io/port"]"#);
    }

    #[test]
    fn the_bounding_set_is_read_without_prefixes() {
        let unit = "[Service]\nCapabilityBoundingSet=CAP_KILL\nCapabilityBoundingSet=CAP_BPF CAP_SYS_ADMIN\n";
        assert_eq!(
            bounding_set(unit),
            Some(vec!["BPF".to_owned(), "SYS_ADMIN".to_owned()])
        );
        assert_eq!(bounding_set("[Service]\n"), None);
    }

    #[test]
    fn yaml_streams_are_read_document_by_document() {
        let docs = documents("---\na: 1\n---\n---\nb: [x]\n").unwrap();
        assert_eq!(docs, [json!({ "a": 1 }), json!({ "b": ["x"] })]);
        assert!(documents("a: [1\n").is_err());
    }
}
