//! `deploy/kubernetes` as kubectl renders it: every document sound for the
//! Kubernetes API types, the daemon's container bounded like the systemd
//! unit, and the daemon's role only reading pods.
//!
//! kubectl is the one `cargo xtask test` installs, named by `PINCER_KUBECTL`;
//! without it these tests fail, so that the check is never silently skipped.

use std::{collections::BTreeSet, path::PathBuf, sync::OnceLock};

use k8s_openapi::api::{apps::v1::DaemonSet, core::v1::Container, rbac::v1::ClusterRole};
use pincer_deploy_check::{bounding_set, check, name_of, render};
use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../..")
}

/// The rendered documents, rendered once for all the tests.
fn rendered() -> &'static [Value] {
    static DOCS: OnceLock<Vec<Value>> = OnceLock::new();
    DOCS.get_or_init(|| {
        let kubectl = std::env::var_os("PINCER_KUBECTL").expect(
            "PINCER_KUBECTL names no kubectl: `cargo xtask test` installs one and sets it \
             (or set it to a kubectl yourself)",
        );
        render(kubectl.as_ref(), &root().join("deploy/kubernetes"))
            .unwrap_or_else(|err| panic!("rendering deploy/kubernetes: {err}"))
    })
}

/// The rendered document of `kind`, as JSON.
fn document(kind: &str) -> &'static Value {
    rendered()
        .iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} is rendered"))
}

fn the<T: serde::de::DeserializeOwned + k8s_openapi::Resource>() -> Vec<T> {
    rendered()
        .iter()
        .filter(|doc| doc["kind"] == T::KIND)
        .map(|doc| serde_json::from_value(doc.clone()).unwrap())
        .collect()
}

fn daemon_set() -> DaemonSet {
    let mut sets = the::<DaemonSet>();
    assert_eq!(sets.len(), 1, "one DaemonSet");
    sets.remove(0)
}

fn containers(set: &DaemonSet) -> Vec<Container> {
    let pod = set.spec.template.spec.as_ref().expect("a pod spec");
    pod.containers
        .iter()
        .chain(pod.init_containers.iter().flatten())
        .cloned()
        .collect()
}

#[test]
fn every_document_is_sound_for_the_api_types() {
    let findings: Vec<String> = rendered()
        .iter()
        .flat_map(check)
        .map(|f| f.to_string())
        .collect();
    assert!(findings.is_empty(), "\n{}", findings.join("\n"));
    let kinds: BTreeSet<String> = rendered().iter().map(name_of).collect();
    for expected in [
        "Namespace/pincer-system",
        "ServiceAccount/pincer",
        "ClusterRole/pincer",
        "ClusterRoleBinding/pincer",
        "Service/pincer-metrics",
        "DaemonSet/pincer",
    ] {
        assert!(kinds.contains(expected), "{expected} missing: {kinds:?}");
    }
}

#[test]
fn a_misspelled_field_is_caught() {
    let mut doc = document("DaemonSet").clone();
    let container = &mut doc["spec"]["template"]["spec"]["containers"][0];
    let policy = container
        .as_object_mut()
        .unwrap()
        .remove("imagePullPolicy")
        .expect("the container names its imagePullPolicy");
    container["imagePulPolicy"] = policy;
    let findings: Vec<String> = check(&doc).iter().map(ToString::to_string).collect();
    assert_eq!(
        findings,
        [
            "DaemonSet/pincer: .spec.template.spec.containers[0].imagePulPolicy: not a field of \
          the API type (a misspelling?)"
        ]
    );
}

#[test]
fn a_value_of_the_wrong_type_is_caught() {
    let mut doc = document("DaemonSet").clone();
    doc["spec"]["template"]["spec"]["hostPID"] = Value::from("yes");
    let findings = check(&doc);
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert_eq!(
        findings[0].to_string(),
        "DaemonSet/pincer: .spec.template.spec.hostPID: invalid type: string \"yes\", expected \
         a boolean"
    );
}

#[test]
fn the_daemon_holds_exactly_the_units_capabilities_and_no_privilege() {
    let unit = std::fs::read_to_string(root().join("dist/pincer.service")).unwrap();
    let mut unit_caps = bounding_set(&unit).expect("the unit bounds its capabilities");
    unit_caps.sort();
    let set = daemon_set();
    let containers = containers(&set);
    assert!(!containers.is_empty());
    for container in containers {
        let context = container
            .security_context
            .as_ref()
            .unwrap_or_else(|| panic!("container {} has no securityContext", container.name));
        let caps = context.capabilities.as_ref().expect("capabilities");
        let mut added = caps.add.clone().unwrap_or_default();
        added.sort();
        assert_eq!(added, unit_caps, "container {}", container.name);
        assert_eq!(caps.drop.as_deref(), Some(&["ALL".to_owned()][..]));
        assert_eq!(
            context.privileged,
            Some(false),
            "container {}",
            container.name
        );
        assert_eq!(context.read_only_root_filesystem, Some(true));
        assert_eq!(context.run_as_user, Some(0));
        // The API server refuses `false` beside CAP_SYS_ADMIN.
        assert_ne!(context.allow_privilege_escalation, Some(false));
    }
}

#[test]
fn the_daemon_sees_host_processes_and_its_own_node() {
    let set = daemon_set();
    let pod = set.spec.template.spec.expect("a pod spec");
    assert_eq!(pod.host_pid, Some(true));
    assert_eq!(
        pod.priority_class_name.as_deref(),
        Some("system-node-critical")
    );
    let env = pod.containers[0].env.clone().unwrap_or_default();
    let node = env
        .iter()
        .find(|e| e.name == "NODE_NAME")
        .expect("NODE_NAME");
    let field = node
        .value_from
        .as_ref()
        .and_then(|v| v.field_ref.as_ref())
        .expect("from the downward API");
    assert_eq!(field.field_path, "spec.nodeName");
}

#[test]
fn every_file_of_the_config_map_is_mounted() {
    // A ConfigMap's keys are flat and the volume lists each: a mission added
    // to the generator but not to the items would be missing in the pod.
    let map = document("ConfigMap");
    let keys: BTreeSet<&str> = map["data"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let set = daemon_set();
    let pod = set.spec.template.spec.expect("a pod spec");
    let volume = pod
        .volumes
        .unwrap_or_default()
        .into_iter()
        .find(|v| v.name == "config")
        .and_then(|v| v.config_map)
        .expect("the config volume");
    assert_eq!(Some(volume.name.as_str()), map["metadata"]["name"].as_str());
    let items: BTreeSet<String> = volume
        .items
        .unwrap_or_default()
        .into_iter()
        .map(|i| i.key)
        .collect();
    assert_eq!(
        items,
        keys.iter()
            .map(|k| (*k).to_owned())
            .collect::<BTreeSet<_>>()
    );
}

#[test]
fn the_role_only_reads_pods() {
    let roles = the::<ClusterRole>();
    assert_eq!(roles.len(), 1);
    let rules = roles[0].rules.clone().unwrap_or_default();
    assert_eq!(rules.len(), 1, "{rules:?}");
    let rule = &rules[0];
    assert_eq!(rule.api_groups.as_deref(), Some(&[String::new()][..]));
    assert_eq!(rule.resources.as_deref(), Some(&["pods".to_owned()][..]));
    let verbs: BTreeSet<&str> = rule.verbs.iter().map(String::as_str).collect();
    assert_eq!(verbs, BTreeSet::from(["get", "list", "watch"]));
    assert_eq!(rule.resource_names, None);
    assert_eq!(rule.non_resource_urls, None);
}
