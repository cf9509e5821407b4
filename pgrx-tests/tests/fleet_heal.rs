//! The node-id registry after a member's link to it failed and came back: a server whose
//! assigned id a rival took meanwhile takes a fresh one; an old holder in
//! available mode finds at its first contact after a partition heals that its id was taken
//! over, and stops; a retired id whose old holder came back does not block assigning the
//! other free ids. Real servers; a member's link is cut and healed through a TCP proxy
//! ([`Proxy`]) between it and the registry.

use snowflake_it::registry::{
    claimed_node, claimed_within, log_lines_since, member_config, next_id, node_state, refusing,
    registry_rows, registry_server, LEASE_MS,
};
use snowflake_it::{describe, take_ids, wait_until, Proxy, Server};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

/// How long a fix has to act after the link heals: three leases and a second.
fn within_leases() -> Duration {
    Duration::from_millis(3 * LEASE_MS as u64 + 1_000)
}

fn create_table(member: &Server) {
    member.execute("SELECT snowflake_registry_create()");
}

fn node_of(server: &Server, id: i64) -> i32 {
    server.query_one(&format!("SELECT snowflake_node_id({id}::bigint)"))
}

/// Server a was assigned id 0; server d is configured with node id 0 and refused
/// while a holds it. a's link to the registry is cut and the registry is stopped for longer
/// than a lease and started again: d reaches it first and takes id 0 over (a's lease ran out:
/// correct). Once a's link is back, a, whose id was only assigned, takes a fresh one within
/// seconds and makes IDs again, none of d's; it does not log the registry as unreachable
/// while it reaches it.
#[test]
fn an_assigned_server_whose_id_a_rival_took_takes_a_fresh_one() {
    let registry = registry_server("r1registry");
    let link = Proxy::to(registry.port);
    let a = Server::start("r1a", member_config(&link.conninfo("postgres"), None));
    create_table(&a);
    assert_eq!(claimed_node(&a), 0);
    let d = Server::start(
        "r1d",
        member_config(&registry.conninfo("postgres"), Some(0)),
    );
    wait_until(Duration::from_secs(20), "d's refusal", || {
        refusing(&d).as_deref() == Some("claim refused")
    });
    let before = take_ids(&mut a.connect(), 1_000, 1_000);

    // The registry away for longer than the lease; back for d first.
    link.cut();
    registry.stop();
    thread::sleep(Duration::from_millis(LEASE_MS as u64 + 2_000));
    registry.start_again();
    assert_eq!(claimed_node(&d), 0, "d takes id 0 over");
    let d_ids = take_ids(&mut d.connect(), 10_000, 10_000);
    link.heal();
    let healed = Instant::now();
    let log_at_heal = a.log().len();

    let node = claimed_within(&a, Duration::from_secs(15)).unwrap_or_else(|said| {
        panic!(
            "a made no ID again within 15 s of its link's heal: {said}; a's log since the \
             heal:\n{}\nthe registry:\n{}",
            log_lines_since(&a, log_at_heal, "registry").join("\n"),
            registry_rows(&registry)
        )
    });
    println!(
        "a took node id {node} {:?} after the heal",
        healed.elapsed()
    );
    assert_ne!(node, 0, "a makes IDs under d's node id");
    let a_ids = take_ids(&mut a.connect(), 10_000, 10_000);
    assert_eq!(node_of(&a, a_ids[0]), node);
    assert!(a_ids[0] > *before.last().unwrap());
    let d_set: HashSet<i64> = d_ids.iter().copied().collect();
    assert!(a_ids.iter().all(|id| !d_set.contains(id)));
    let unreachable = log_lines_since(&a, log_at_heal, "could not reach the pg_snowflake registry");
    assert!(
        unreachable.is_empty(),
        "a says the registry it reaches is unreachable:\n{}",
        unreachable.join("\n")
    );
}

/// Takes IDs on `server` in batches of 1,000 until `until`, stopping at the first error: the
/// IDs, and the error if one came.
fn ids_until(server: &Server, until: Instant) -> (Vec<i64>, Option<String>) {
    let mut client = server.connect();
    let statement = client
        .prepare("SELECT snowflake_nextval() FROM generate_series(1, 1000)")
        .unwrap();
    let mut ids = vec![];
    while Instant::now() < until {
        match client.query(&statement, &[]) {
            Ok(rows) => ids.extend(rows.iter().map(|row| row.get::<_, i64>(0))),
            Err(e) => return (ids, Some(describe(&e))),
        }
    }
    (ids, None)
}

/// A and B both configured with node id 650 in available mode; A holds it, B is
/// refused. A's link to the registry is cut: B takes 650 over once A's lease has run out, and
/// A, available, goes on issuing meanwhile (as available mode allows). The link heals: within
/// three leases A's next contact finds its claim lost and A refuses (SQLSTATE 55000, naming
/// node id 650); from then on, with both asked for IDs at once, A makes none that B makes.
#[test]
fn after_a_partition_heals_the_old_holder_stops_and_makes_none_of_the_new_holders_ids() {
    let registry = registry_server("r2registry");
    let link = Proxy::to(registry.port);
    let available = "pg_snowflake.registry_mode = 'available'";
    let a = Server::start(
        "r2a",
        member_config(&link.conninfo("postgres"), Some(650)).setting(available),
    );
    create_table(&a);
    assert_eq!(claimed_node(&a), 650);
    let b = Server::start(
        "r2b",
        member_config(&registry.conninfo("postgres"), Some(650)).setting(available),
    );
    wait_until(Duration::from_secs(20), "B's refusal", || {
        refusing(&b).as_deref() == Some("claim refused")
    });

    let before = take_ids(&mut a.connect(), 1_000, 1_000);
    link.cut();
    assert_eq!(claimed_node(&b), 650, "B takes 650 over");
    let during = next_id(&a)
        .unwrap_or_else(|e| panic!("A, available, refused while cut off: {}", describe(&e)));
    assert_eq!(node_of(&a, during), 650);
    assert!(during > *before.last().unwrap());
    println!(
        "the registry after B's takeover:\n{}",
        registry_rows(&registry)
    );
    link.heal();
    let healed = Instant::now();

    // A's first contacts after the heal: it is to refuse within three leases.
    let refused = loop {
        match next_id(&a) {
            Err(e) => break Some(e),
            Ok(_) if healed.elapsed() > within_leases() => break None,
            Ok(_) => thread::sleep(Duration::from_millis(100)),
        }
    };
    let waited = healed.elapsed();

    // Both asked for IDs at once for a second: none of A's may be one of B's.
    let until = Instant::now() + Duration::from_secs(1);
    let ((a_ids, a_error), (b_ids, b_error)) = thread::scope(|scope| {
        let from_a = scope.spawn(|| ids_until(&a, until));
        let from_b = scope.spawn(|| ids_until(&b, until));
        (from_a.join().unwrap(), from_b.join().unwrap())
    });
    assert_eq!(b_error, None, "B, the holder, refused");
    let b_set: HashSet<i64> = b_ids.iter().copied().collect();
    let both = a_ids.iter().filter(|id| b_set.contains(id)).count();
    println!(
        "{:?} after the heal: A made {} IDs (then {a_error:?}), B {}; {both} made by both",
        waited + Duration::from_secs(1),
        a_ids.len(),
        b_ids.len()
    );
    assert_eq!(
        both,
        0,
        "{both} of the {} IDs A made from {waited:?} after the heal were also made by B (B: {} \
         IDs); A's first ID of them under node id {}; A's stats: refusing {:?}, generation {:?}; \
         the registry:\n{}",
        a_ids.len(),
        b_ids.len(),
        a_ids.first().map_or(-1, |&id| node_of(&a, id)),
        refusing(&a),
        a.query_one::<Option<i64>>("SELECT registry_generation FROM snowflake_stats()"),
        registry_rows(&registry)
    );
    let err = refused.unwrap_or_else(|| {
        panic!("A still issued under 650 {waited:?} after the heal (and made none of B's IDs)")
    });
    let db = err.as_db_error().expect("an error of the server");
    assert_eq!(db.code().code(), "55000", "{}", describe(&err));
    assert!(db.message().contains("node id 650"), "{}", describe(&err));
    println!("A refused {waited:?} after the heal: {}", describe(&err));
}

/// Fenced (the default mode). A and B both configured with node id 650; A holds
/// it. A's link is cut: A stops at the end of its lease (fenced), and B takes 650 over. The
/// link heals: A's first contact finds the id taken over and says so, naming the loss, not an
/// unreachable registry (0.5.0 went on logging `could not reach the pg_snowflake registry:
/// "another session of the registry holds node id 650's lock"`), and A is refused naming the
/// holder. A made no ID B makes.
#[test]
fn after_a_partition_heals_a_fenced_old_holder_finds_its_claim_lost() {
    let registry = registry_server("r2fregistry");
    let link = Proxy::to(registry.port);
    let a = Server::start("r2fa", member_config(&link.conninfo("postgres"), Some(650)));
    create_table(&a);
    assert_eq!(claimed_node(&a), 650);
    let b = Server::start(
        "r2fb",
        member_config(&registry.conninfo("postgres"), Some(650)),
    );
    wait_until(Duration::from_secs(20), "B's refusal", || {
        refusing(&b).as_deref() == Some("claim refused")
    });
    let mut a_ids = take_ids(&mut a.connect(), 1_000, 1_000);
    link.cut();
    // Fenced: A issues until its lease ends, then refuses; B takes 650 over.
    let (more, _) = ids_until(
        &a,
        Instant::now() + Duration::from_millis(LEASE_MS as u64 + 500),
    );
    a_ids.extend(more);
    assert_eq!(claimed_node(&b), 650, "B takes 650 over");
    let b_ids = take_ids(&mut b.connect(), 10_000, 1_000);
    let since = a.log().len();
    link.heal();
    wait_until(within_leases(), "A's lost claim found", || {
        !log_lines_since(&a, since, "this server lost node id 650: another server, ").is_empty()
    });
    let unreachable = log_lines_since(&a, since, "could not reach the pg_snowflake registry");
    assert!(
        unreachable.is_empty(),
        "A took the registry for unreachable after the heal: {unreachable:?}"
    );
    wait_until(within_leases(), "A refused naming the holder", || {
        refusing(&a).as_deref() == Some("claim refused")
    });
    let err = next_id(&a).expect_err("A makes no ID under 650");
    let db = err.as_db_error().expect("an error of the server");
    assert_eq!(db.code().code(), "55000", "{}", describe(&err));
    assert!(
        db.message()
            .starts_with("node id 650 is held by another server, "),
        "{}",
        describe(&err)
    );
    let b_set: HashSet<i64> = b_ids.iter().copied().collect();
    assert!(
        a_ids.iter().all(|id| !b_set.contains(id)),
        "A and B made the same IDs"
    );
}

/// Servers assigned ids 0 (the keeper) and 1 (the old holder); the old holder's
/// link is cut, its lease runs out, and the keeper retires id 1 while the old holder still
/// runs. The link heals: the old holder's next contact finds its claim gone. Once id 1 is past
/// its mark, a new server without a node id asks for one: it gets a free one within seconds,
/// whatever the old holder's session still holds.
#[test]
fn a_retired_id_whose_old_holder_came_back_does_not_block_assigning_the_others() {
    let registry = registry_server("r3registry");
    let link = Proxy::to(registry.port);
    let keeper = Server::start(
        "r3keeper",
        member_config(&registry.conninfo("postgres"), None),
    );
    create_table(&keeper);
    assert_eq!(claimed_node(&keeper), 0);
    let old = Server::start("r3old", member_config(&link.conninfo("postgres"), None));
    assert_eq!(claimed_node(&old), 1);

    link.cut();
    wait_until(Duration::from_secs(20), "id 1's lease to run out", || {
        node_state(&keeper, 1).as_deref() == Some("lost")
    });
    keeper.execute("SELECT snowflake_registry_retire(1)");
    link.heal();
    // Its next contact finds the id gone: it says so, and (its id was assigned) takes another.
    wait_until(
        Duration::from_secs(20),
        "the old holder's lost claim",
        || {
            refusing(&old).as_deref() == Some("claim lost")
                || claimed_within(&old, Duration::ZERO).is_ok_and(|node| node != 1)
        },
    );
    assert!(
        old.log()
            .contains("this server lost node id 1: it was retired in the registry"),
        "{}",
        old.log()
    );
    wait_until(Duration::from_secs(20), "id 1 to be free again", || {
        node_state(&keeper, 1).as_deref() == Some("free")
    });
    println!(
        "the registry before the new server:\n{}",
        registry_rows(&registry)
    );

    let new = Server::start("r3new", member_config(&registry.conninfo("postgres"), None));
    let node = claimed_within(&new, Duration::from_secs(15)).unwrap_or_else(|said| {
        panic!(
            "the new server got no node id: {said}; the registry:\n{}",
            registry_rows(&registry)
        )
    });
    println!("the new server got node id {node}");
    let mut taken = vec![0];
    if let Ok(other) = claimed_within(&old, Duration::ZERO) {
        taken.push(other);
    }
    assert!(
        !taken.contains(&node),
        "node id {node} is also another's ({taken:?})"
    );
    let id = next_id(&new).unwrap_or_else(|e| panic!("{}", describe(&e)));
    assert_eq!(node_of(&new, id), node);
}

/// The retired id never taken straight back. As above, but the link heals only once the
/// retired id 1 is free again (past its mark and the clock margin): the old holder, whose id
/// the registry assigns, finds its claim gone and is given a fresh id, as FLEETS says of a lost
/// claim; it never takes back the id the operator retired under it. Before the fix it did,
/// within a second ("pg_snowflake claimed node id 1 from the registry (recycled, …)"), undoing
/// the retirement.
#[test]
fn the_old_holder_of_a_retired_id_is_given_a_fresh_one_not_the_retired_one() {
    let registry = registry_server("retiredregistry");
    let link = Proxy::to(registry.port);
    let keeper = Server::start(
        "retiredkeeper",
        member_config(&registry.conninfo("postgres"), None),
    );
    create_table(&keeper);
    assert_eq!(claimed_node(&keeper), 0);
    let old = Server::start(
        "retiredold",
        member_config(&link.conninfo("postgres"), None),
    );
    assert_eq!(claimed_node(&old), 1);

    link.cut();
    wait_until(Duration::from_secs(20), "id 1's lease to run out", || {
        node_state(&keeper, 1).as_deref() == Some("lost")
    });
    keeper.execute("SELECT snowflake_registry_retire(1)");
    wait_until(Duration::from_secs(20), "id 1 to be free again", || {
        node_state(&keeper, 1).as_deref() == Some("free")
    });
    link.heal();
    wait_until(
        within_leases(),
        "the old holder's claim after its loss",
        || old.log().matches("pg_snowflake claimed node id").count() >= 2,
    );
    let claims = log_lines_since(&old, 0, "pg_snowflake claimed node id");
    assert!(
        old.log()
            .contains("this server lost node id 1: it was retired in the registry"),
        "{}",
        old.log()
    );
    assert!(
        !claims[1].contains("node id 1 "),
        "the old holder took back the retired id 1: {claims:?}"
    );
    assert_ne!(claimed_node(&old), 1, "{claims:?}");
    assert_eq!(node_state(&keeper, 1).as_deref(), Some("free"));
}

/// A server switched from available to fenced mode while cut off from the registry makes no
/// ID past the mark its last heartbeat recorded. A (available, node id 12, a lease of 12 s)
/// reaches the registry through a proxy; B (fenced, configured with 12, its clock 1 s behind:
/// within the clock check's 2 s) is refused while A holds 12. Right after one of A's heartbeats
/// A's link is cut and A is switched to fenced, and asked for IDs all the while; B takes 12
/// over once A's lease has run out and makes IDs through the seconds A was asked for them in.
/// B makes none of A's: A refuses from the switch on (`awaiting a fenced lease`), its IDs all
/// below the mark B starts above. Before the fix A went on issuing until its lease ran out, up
/// to a lease past that mark, and B made some of them again.
#[test]
fn a_server_switched_to_fenced_while_cut_off_makes_no_id_past_the_mark() {
    // Longer than a call's wait for a heartbeat (10 s), so that the wait ends in its refusal.
    const LEASE: i64 = 4 * LEASE_MS;
    let lease = format!("pg_snowflake.registry_lease_ms = {LEASE}");
    let registry = registry_server("fsregistry");
    let link = Proxy::to(registry.port);
    let a = Server::start(
        "fsa",
        member_config(&link.conninfo("postgres"), Some(12))
            .setting(&lease)
            .setting("pg_snowflake.registry_mode = 'available'"),
    );
    create_table(&a);
    assert_eq!(claimed_node(&a), 12);
    let b = Server::start(
        "fsb",
        member_config(&registry.conninfo("postgres"), Some(12))
            .setting(&lease)
            .fake_clock("-1s"),
    );
    wait_until(Duration::from_secs(20), "b's refusal", || {
        refusing(&b).as_deref() == Some("claim refused")
    });
    let (before, _) = ids_until(&a, Instant::now() + Duration::from_millis(500));

    // Cut right after one of A's heartbeats, then the switch.
    let last_seen = || -> f64 {
        registry.query_one(
            "SELECT extract(epoch FROM last_seen)::float8 FROM snowflake_nodes WHERE node_id = 12",
        )
    };
    let seen = last_seen();
    wait_until(Duration::from_secs(10), "a's next heartbeat", || {
        last_seen() != seen
    });
    link.cut();
    let cut_at = Instant::now();
    a.execute("ALTER SYSTEM SET pg_snowflake.registry_mode = 'fenced'");
    a.execute("SELECT pg_reload_conf()");
    // What a says once its renewer has read the new mode (it wakes at the reload).
    let switched_at = Instant::now();
    let switched = loop {
        let said = refusing(&a);
        if said.is_some() || switched_at.elapsed() > Duration::from_secs(2) {
            break said;
        }
        thread::sleep(Duration::from_millis(20));
    };
    // A call waits for the heartbeat the switch asked for (10 s), then fails.
    let (after, refused) = ids_until(&a, cut_at + Duration::from_millis(LEASE as u64));
    println!(
        "a made {} IDs after the cut (within {:?}), then: {refused:?}",
        after.len(),
        cut_at.elapsed()
    );

    assert_eq!(claimed_within(&b, Duration::from_secs(20)), Ok(12));
    let (b_ids, _) = ids_until(&b, Instant::now() + Duration::from_secs(3));
    let a_ids: HashSet<i64> = before.iter().chain(&after).copied().collect();
    let again = b_ids.iter().filter(|id| a_ids.contains(id)).count();
    assert_eq!(
        again,
        0,
        "b, taking node id 12 over, made {again} of a's IDs again (a made {} after the cut)",
        after.len()
    );
    assert_eq!(switched.as_deref(), Some("awaiting a fenced lease"));
    let refused = refused.expect("a refused once switched to fenced");
    assert!(
        refused.contains(
            "55000 this server was switched to fenced mode and has no fenced lease on node id \
             12 yet"
        ),
        "{refused}"
    );
}

/// Available mode's one risk, bounded and counted. A holds node id 652 in available mode
/// (lease 3 s) and makes IDs without a pause; B, configured with 652 and refused, has a clock
/// 5 s behind (its margin 6 s). While both are connected, A counts no ID past the mark. Then
/// A's link to the registry is cut: A goes on making IDs, B takes 652 over once A has been
/// silent a heartbeat interval and B's margin, and starts at the mark A's last heartbeat
/// recorded. B may repeat only IDs A made after that heartbeat's lease had run out (the
/// ceiling gave way), and never more than A counts in `snowflake_stats().ids_past_mark`.
/// Before, available mode's mark was A's reservation at its last heartbeat: B started below
/// IDs A made within that lease, and nothing counted them.
#[test]
fn a_takeover_in_available_mode_repeats_only_ids_made_past_the_mark_and_counted() {
    let (registry, link, a, b) = available_holder_and_refused_rival("pastmark", 652);
    let past_mark = || a.query_one::<i64>("SELECT ids_past_mark FROM snowflake_stats()");

    // A makes IDs without a pause from now until the end: connected for 3 s, then cut off.
    let done = AtomicBool::new(false);
    let (a_ids, b_ids, last_seen, connected_past) = thread::scope(|scope| {
        let from_a = scope.spawn(|| {
            let mut client = a.connect();
            let (mut ids, mut error) = (vec![], None);
            while !done.load(Ordering::Relaxed) {
                match client.query(
                    "SELECT snowflake_nextval() FROM generate_series(1, 1000)",
                    &[],
                ) {
                    Ok(rows) => ids.extend(rows.iter().map(|row| row.get::<_, i64>(0))),
                    Err(e) => {
                        error = Some(describe(&e));
                        break;
                    }
                }
            }
            (ids, error)
        });
        // A stops when this ends, a failed assertion's unwinding too (the scope waits for it).
        let _stop_a = SetOnDrop(&done);
        thread::sleep(Duration::from_secs(3));
        let connected_past = past_mark();
        link.cut();
        let cut = Instant::now();
        // A's last heartbeat: none passes the cut link.
        let last_seen: i64 = registry.query_one(
            "SELECT (extract(epoch FROM last_seen) * 1000)::bigint FROM snowflake_nodes \
             WHERE node_id = 652",
        );
        let took = claimed_within(&b, Duration::from_secs(25))
            .unwrap_or_else(|said| panic!("B never took 652 over: {said}"));
        assert_eq!(took, 652);
        println!("B took 652 over {:?} after the cut", cut.elapsed());
        let (b_ids, b_error) = ids_until(&b, Instant::now() + Duration::from_secs(3));
        done.store(true, Ordering::Relaxed);
        assert_eq!(b_error, None, "B, the holder, refused");
        let (a_ids, a_error) = from_a.join().unwrap();
        assert_eq!(a_error, None, "A, available, refused while cut off");
        (a_ids, b_ids, last_seen, connected_past)
    });
    assert_eq!(
        connected_past, 0,
        "A counted IDs past the mark while connected to the registry"
    );
    let repeated = made_by_both(&a, &a_ids, &b_ids, last_seen, &registry);
    let counted = past_mark();
    println!("A counts {counted} IDs past the mark");
    assert!(
        repeated.len() as i64 <= counted,
        "B repeated {} of A's IDs, more than the {counted} A counts as past the mark",
        repeated.len()
    );
    assert!(counted > 0, "A, cut off past its lease, counted nothing");
}

/// Available mode's one risk across a crash. A holds node id 654 in available mode and B,
/// configured with 654, is refused (its clock 5 s behind, its margin 6 s), as in the test
/// above. A's link is cut; A makes IDs until its ceiling has given way and it counts IDs past
/// the mark, and is then killed (-9) and started again, still cut off: a restart from disk
/// cannot prove it is the running holder, and a server that cannot reach the registry claims
/// nothing, so it makes no ID (the counter, like every counter of `snowflake_stats()`, starts
/// again at 0 with the server). B takes 654 over. The IDs both made are only IDs A made past
/// the mark of its last heartbeat, and no more than A counted before the crash. Once the link
/// heals, A is refused naming the takeover.
#[test]
fn a_crash_while_counting_past_the_mark_leaves_a_takeover_repeating_only_counted_ids() {
    let (registry, link, a, b) = available_holder_and_refused_rival("crashpast", 654);
    let past_mark = || a.query_one::<i64>("SELECT ids_past_mark FROM snowflake_stats()");

    let (mut a_ids, _) = ids_until(&a, Instant::now() + Duration::from_secs(1));
    link.cut();
    let last_seen: i64 = registry.query_one(
        "SELECT (extract(epoch FROM last_seen) * 1000)::bigint FROM snowflake_nodes \
         WHERE node_id = 654",
    );
    // Past the lease of A's last heartbeat, and a second more of IDs counted past its mark.
    let (cut_off, error) = ids_until(
        &a,
        Instant::now() + Duration::from_millis(LEASE_MS as u64 + 1_000),
    );
    assert_eq!(error, None, "A, available, refused while cut off");
    a_ids.extend(cut_off);
    let counted = past_mark();
    assert!(counted > 0, "A, cut off past its lease, counted nothing");
    a.crash();
    a.start_again();
    let restarted = Instant::now();
    let (mut made, mut refused) = (vec![], None);
    while restarted.elapsed() < Duration::from_secs(3) {
        match next_id(&a) {
            Ok(id) => made.push(id),
            Err(e) => refused = Some(describe(&e)),
        }
        thread::sleep(Duration::from_millis(100));
    }
    let counted_after = past_mark();
    println!(
        "A counted {counted} IDs past the mark before its crash, {counted_after} after; \
         restarted cut off, it said: {refused:?}"
    );
    assert!(
        made.is_empty(),
        "A, restarted from disk and cut off, made {} IDs",
        made.len()
    );
    assert_eq!(
        refused.as_deref(),
        Some("55000 this server has not claimed its node id from the registry yet"),
        "A, restarted from disk and cut off"
    );

    let took = claimed_within(&b, Duration::from_secs(25))
        .unwrap_or_else(|said| panic!("B never took 654 over: {said}"));
    assert_eq!(took, 654);
    let (b_ids, b_error) = ids_until(&b, Instant::now() + Duration::from_secs(3));
    assert_eq!(b_error, None, "B, the holder, refused");
    let repeated = made_by_both(&a, &a_ids, &b_ids, last_seen, &registry);
    assert!(
        repeated.len() as i64 <= counted + counted_after,
        "B repeated {} of A's IDs, more than the {counted} A counted before its crash and the \
         {counted_after} after",
        repeated.len()
    );

    link.heal();
    wait_until(within_leases(), "A's refusal once the link healed", || {
        refusing(&a).is_some()
    });
    let told = next_id(&a).map_err(|e| describe(&e));
    assert!(
        matches!(&told, Err(said) if said.contains("55000") && said.contains("654")),
        "A, back after B's takeover: {told:?}"
    );
}

/// The registry; a proxy to it (`link`, which a test cuts); A, holding `node` in available
/// mode through the link; and B, configured with `node` too and reaching the registry directly,
/// its clock 5 s behind (its margin 6 s), refused while A holds it. Servers named `name` + a,
/// b and registry.
fn available_holder_and_refused_rival(name: &str, node: i32) -> (Server, Proxy, Server, Server) {
    let registry = registry_server(&format!("{name}registry"));
    let link = Proxy::to(registry.port);
    let available = "pg_snowflake.registry_mode = 'available'";
    let a = Server::start(
        &format!("{name}a"),
        member_config(&link.conninfo("postgres"), Some(node)).setting(available),
    );
    create_table(&a);
    assert_eq!(claimed_node(&a), node);
    let b = Server::start(
        &format!("{name}b"),
        member_config(&registry.conninfo("postgres"), Some(node))
            .setting(available)
            .fake_clock("-5s")
            .setting("pg_snowflake.max_clock_skew_ms = 6000"),
    );
    wait_until(Duration::from_secs(20), "B's refusal", || {
        refusing(&b).as_deref() == Some("claim refused")
    });
    (registry, link, a, b)
}

/// The IDs of `a_ids` that B made too (`b_ids`), after checking that A stamped none of them
/// within the lease of its last heartbeat, seen by `registry` at `last_seen` (Unix ms; less
/// 100 ms for the heartbeat's way to the registry): only IDs past the mark may be repeated.
fn made_by_both(
    a: &Server,
    a_ids: &[i64],
    b_ids: &[i64],
    last_seen: i64,
    registry: &Server,
) -> Vec<i64> {
    let b_set: HashSet<i64> = b_ids.iter().copied().collect();
    let repeated: Vec<i64> = a_ids
        .iter()
        .copied()
        .filter(|id| b_set.contains(id))
        .collect();
    let lease_end = last_seen + LEASE_MS - 100;
    let within_lease: i64 = a
        .connect()
        .query_one(
            "SELECT count(*) FROM unnest($1::int8[]) AS id \
             WHERE extract(epoch FROM snowflake_timestamp(id)) * 1000 < $2::int8",
            &[&repeated, &lease_end],
        )
        .unwrap()
        .get(0);
    println!(
        "A made {} IDs, B {} after its takeover; {} made by both, {within_lease} of them \
         stamped within the lease of A's last heartbeat (seen at {last_seen}, Unix ms)",
        a_ids.len(),
        b_ids.len(),
        repeated.len()
    );
    assert_eq!(
        within_lease,
        0,
        "B repeated {within_lease} IDs A made within the lease of its last heartbeat; the \
         registry:\n{}",
        registry_rows(registry)
    );
    repeated
}

/// Sets its flag when dropped.
struct SetOnDrop<'a>(&'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}
