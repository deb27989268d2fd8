//! `[kubernetes]`.

use super::*;

#[test]
fn kubernetes_table_defaults_and_round_trip() {
    let config = parse("[kubernetes]\nmissions = \"pods\"\n").unwrap();
    let kubernetes = config.kubernetes.clone().unwrap();
    assert_eq!(
        kubernetes,
        KubernetesConfig {
            node: None,
            api: None,
            // Relative to the configuration's directory.
            missions: PathBuf::from("/etc/pincer/pods"),
            kubepods: PathBuf::from("kubepods.slice"),
        }
    );
    let rendered = config.render();
    assert!(
        rendered.ends_with(
            "\n[kubernetes]\nmissions = \"/etc/pincer/pods\"\n\
                 # node is not set: the NODE_NAME environment variable names it\n\
                 # api is not set: a kubeconfig or the pod's service account names it\n\
                 kubepods = \"kubepods.slice\"\n"
        ),
        "{rendered}"
    );
    assert_eq!(parse(&rendered).unwrap(), config);

    let full = parse(
        "[kubernetes]\nmissions = \"/srv/m\"\nnode = \"worker-1.example\"\n\
             api = \"http://127.0.0.1:8080\"\nkubepods = \"kubepods\"\n",
    )
    .unwrap();
    let kubernetes = full.kubernetes.clone().unwrap();
    assert_eq!(kubernetes.node.as_deref(), Some("worker-1.example"));
    assert_eq!(kubernetes.api.as_deref(), Some("http://127.0.0.1:8080"));
    assert_eq!(kubernetes.kubepods, Path::new("kubepods"));
    assert_eq!(
        kubernetes.node_name(Path::new(CONFIG)),
        Ok("worker-1.example".to_owned())
    );
    assert_eq!(parse(&full.render()).unwrap(), full);
}

#[test]
fn bad_kubernetes_tables_name_their_field() {
    for (text, line, name, message) in [
        (
            "[kubernetes]\nnode = \"a\"\n",
            1,
            "kubernetes.missions",
            "missing field",
        ),
        // Where the table starts, not where the file does.
        (
            "# the pods of this node\n\n[kubernetes]\nnode = \"a\"\n",
            3,
            "kubernetes.missions",
            "missing field",
        ),
        (
            "[kubernetes]\nmissions = \"m\"\nnode = \"Worker_1\"\n",
            3,
            "kubernetes.node",
            "\"Worker_1\" is not a node name",
        ),
        (
            "[kubernetes]\nmissions = \"m\"\napi = \"ftp://h/\"\n",
            3,
            "kubernetes.api",
            "must be an http:// or https:// URL",
        ),
        (
            "[kubernetes]\nmissions = \"m\"\napi = \"https://u:p@h:6443\"\n",
            3,
            "kubernetes.api",
            "must not carry credentials",
        ),
        (
            "[kubernetes]\nmissions = \"m\"\nkubepods = \"/kubepods\"\n",
            3,
            "kubernetes.kubepods",
            "must be relative to daemon.cgroup_root",
        ),
        (
            "[kubernetes]\nmissions = \"m\"\nkubepods = \"a/../b\"\n",
            3,
            "kubernetes.kubepods",
            "\"a/../b\" has an empty",
        ),
        (
            "[kubernetes]\nmissions = \"m\"\nnodes = \"a\"\n",
            3,
            "kubernetes.nodes",
            "unknown field `nodes`",
        ),
        (
            "[[kubernetes]]\nmissions = \"m\"\n",
            1,
            "kubernetes[1]",
            "invalid type: array, expected a table",
        ),
    ] {
        let (found_line, _, found_name, found_message) = invalid(text);
        assert_eq!(
            (found_line, found_name),
            (line, field(name)),
            "{text}: {found_message}"
        );
        assert!(
            found_message.starts_with(message),
            "{text}: {found_message}"
        );
    }
}
