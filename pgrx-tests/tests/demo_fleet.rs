//! scripts/serve/demo-fleet, the fleet demo (`./dev demo --fleet`): three servers without node ids
//! are assigned distinct ones, a server configured with a held id is refused, a clone promoted
//! beside its origin is given a fresh id; `stop` removes them all.

use snowflake_it::{repo_root, PortBlock};
use std::collections::HashSet;
use std::process::Command;

fn run(fleet: &str, port: &str, command: &str) -> String {
    let output = Command::new(repo_root().join("scripts/serve/demo-fleet"))
        .arg(command)
        .env("PGSF_FLEET", fleet)
        .env("PGSF_FLEET_PORT", port)
        .output()
        .expect("scripts/serve/demo-fleet runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "scripts/serve/demo-fleet {command} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// The number after `marker` on the line that has it.
fn number_after(text: &str, marker: &str) -> i32 {
    let rest = &text[text
        .find(marker)
        .unwrap_or_else(|| panic!("{marker:?} in:\n{text}"))
        + marker.len()..];
    rest.split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("a number after {marker:?} in:\n{text}"))
}

#[test]
fn the_fleet_demo_assigns_refuses_and_gives_a_clone_a_fresh_id() {
    let fleet = format!("/tmp/pgsf-fleetdemo-{}", std::process::id());
    // The registry, servers a to d and the clone: six ports, from the first of the block.
    let ports = PortBlock::lease(6);
    let port = ports.first.to_string();
    let printed = run(&fleet, &port, "start");
    println!("{printed}");
    let assigned: Vec<i32> = printed
        .lines()
        .filter(|l| l.contains("assigned node id "))
        .map(|l| number_after(l, "assigned node id "))
        .collect();
    assert_eq!(assigned.len(), 3, "{printed}");
    assert_eq!(assigned.iter().collect::<HashSet<_>>().len(), 3);
    assert!(
        printed.contains(&format!(
            "node id {} is held by another server",
            assigned[0]
        )),
        "{printed}"
    );
    let kept = number_after(&printed, "server b keeps node id ");
    let fresh = number_after(&printed, "its clone was given node id ");
    assert_eq!(kept, assigned[1]);
    assert!(
        !assigned.contains(&fresh),
        "the clone's id {fresh} is one of {assigned:?}"
    );
    run(&fleet, &port, "stop");
    assert!(!std::path::Path::new(&format!("{fleet}-registry")).exists());
    assert!(!std::path::Path::new(&format!("{fleet}-clone")).exists());
}
