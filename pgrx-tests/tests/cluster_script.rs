//! scripts/serve/cluster, the by-hand harness: `start N` gives N servers with node ids 1..N, each
//! making IDs with its own node id and ready for logical replication, each its own cluster to the
//! registry (a system identifier of its own, though scripts/serve/pgserver copies one initdb);
//! `stop` removes them all.

use postgres::{Client, NoTls};
use snowflake_it::{repo_root, PortBlock};
use std::process::Command;

/// Runs scripts/serve/cluster with the cluster named `name`, its servers on the ports of `ports`;
/// stops it when dropped.
struct Cluster {
    name: String,
    ports: PortBlock,
}

impl Cluster {
    fn run(&self, args: &[&str]) -> String {
        let output = Command::new(repo_root().join("scripts/serve/cluster"))
            .args(args)
            .env("PGSF_CLUSTER", &self.name)
            .env("PGSF_CLUSTER_PORT", self.ports.first.to_string())
            .output()
            .expect("scripts/serve/cluster runs");
        assert!(
            output.status.success(),
            "scripts/serve/cluster {args:?} failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.run(&["stop"]);
    }
}

#[test]
fn start_gives_each_server_its_node_id_and_stop_removes_them() {
    let cluster = Cluster {
        name: format!("/tmp/pgsf-clustertest-{}", std::process::id()),
        ports: PortBlock::lease(2),
    };
    let printed = cluster.run(&["start", "2"]);
    println!("{printed}");
    let nodes = std::fs::read_to_string(format!("{}.nodes", cluster.name)).unwrap();
    let mut seen = vec![];
    for line in nodes.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let (node, port) = (fields[0].parse::<i32>().unwrap(), fields[1]);
        let mut client = Client::connect(
            &format!("host=127.0.0.1 port={port} user=postgres dbname=postgres"),
            NoTls,
        )
        .unwrap();
        let row = client
            .query_one(
                "SELECT snowflake_node_id(snowflake_nextval()), current_setting('wal_level'), \
                 system_identifier::text FROM pg_control_system()",
                &[],
            )
            .unwrap();
        assert_eq!(row.get::<_, i32>(0), node);
        assert_eq!(row.get::<_, String>(1), "logical");
        seen.push((node, row.get::<_, String>(2)));
    }
    assert_eq!(seen.iter().map(|s| s.0).collect::<Vec<_>>(), [1, 2]);
    assert_ne!(
        seen[0].1, seen[1].1,
        "two servers share a system identifier"
    );

    cluster.run(&["stop"]);
    assert!(!std::path::Path::new(&format!("{}.nodes", cluster.name)).exists());
    assert!(!std::path::Path::new(&format!("{}-node1", cluster.name)).exists());
}
