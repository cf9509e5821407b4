use super::*;
use crate::layout::DEFAULT_LAYOUT;
use std::collections::HashSet;

/// A narrow layout: 4 sequence bits (16 numbers an instant), 10 ms ticks.
fn narrow() -> Layout {
    Layout::from_parts(DEFAULT_LAYOUT.epoch_unix_ms, 10, 4, 4).unwrap()
}

const NOW: i64 = DEFAULT_LAYOUT.epoch_unix_ms + 1_000_000_000;

/// A server: the cursor in shared memory and the ceilings on disk; `restart` loses the first.
struct Server {
    layout: Layout,
    cursor: Cursor,
    disk: Ceilings,
    writes: usize,
}

impl Server {
    fn new(layout: Layout) -> Server {
        Server {
            layout,
            cursor: Cursor::NEW,
            disk: Ceilings::new(layout),
            writes: 0,
        }
    }

    fn restart(&mut self) {
        self.cursor = Cursor::NEW;
    }

    fn at(&mut self, node: u32, unix_ms: i64) -> Result<i64, Refusal> {
        if !self.cursor.runs_for(node) {
            self.cursor.begin(node, self.disk.of(node));
        }
        loop {
            match self.cursor.next(&self.layout, unix_ms, NOW)? {
                Step::Issue { tick, seq } => {
                    return Ok(self.layout.pack(crate::layout::Parts {
                        time: tick,
                        node,
                        seq,
                    }))
                }
                Step::Reserve { node, ceiling } => {
                    self.disk.raise(node, ceiling);
                    self.writes += 1;
                    self.cursor.reserved(ceiling);
                }
            }
        }
    }
}

#[test]
fn an_id_decodes_to_its_instant_truncated_to_the_unit() {
    let mut server = Server::new(narrow());
    let t = DEFAULT_LAYOUT.epoch_unix_ms + 12_345;
    let id = server.at(3, t).unwrap();
    assert_eq!(server.layout.id_unix_ms(id).unwrap(), t - t % 10);
    assert_eq!(server.layout.decompose(id).unwrap().node, 3);
}

#[test]
fn ties_count_up_and_a_new_instant_starts_at_the_base() {
    let mut server = Server::new(narrow());
    let t = DEFAULT_LAYOUT.epoch_unix_ms + 1_000;
    let seqs: Vec<u32> = (0..3)
        .map(|_| {
            let id = server.at(1, t).unwrap();
            server.layout.decompose(id).unwrap().seq
        })
        .collect();
    assert_eq!(seqs, [0, 1, 2]);
    // Same tick (10 ms unit), later millisecond: still counts up.
    let same = server.at(1, t + 9).unwrap();
    assert_eq!(server.layout.decompose(same).unwrap().seq, 3);
    let next = server.at(1, t + 10).unwrap();
    assert_eq!(server.layout.decompose(next).unwrap().seq, 0);
    assert_eq!(server.writes, 1, "one write for the run, none per call");
}

#[test]
fn refusals_move_nothing() {
    let mut server = Server::new(narrow());
    let epoch = DEFAULT_LAYOUT.epoch_unix_ms;
    assert_eq!(
        server.at(1, NOW + 1),
        Err(Refusal::Future {
            unix_ms: NOW + 1,
            now_unix_ms: NOW
        })
    );
    assert_eq!(
        server.at(1, epoch - 1),
        Err(Refusal::BeforeEpoch {
            unix_ms: epoch - 1,
            epoch_unix_ms: epoch
        })
    );
    server.at(1, epoch + 500).unwrap();
    assert_eq!(
        server.at(1, epoch + 489),
        Err(Refusal::BelowCursor {
            unix_ms: epoch + 489,
            cursor_unix_ms: epoch + 500
        })
    );
    let before = server.cursor;
    for _ in 1..16 {
        server.at(1, epoch + 500).unwrap();
    }
    let full = server.cursor;
    assert_ne!(before, full);
    assert_eq!(
        server.at(1, epoch + 500),
        Err(Refusal::Exhausted {
            unix_ms: epoch + 500,
            first: 0,
            max: 15
        })
    );
    assert_eq!(server.cursor, full, "a refusal moves nothing");
    // The next instant is still served: never stamped at another instant.
    assert!(server.at(1, epoch + 510).is_ok());
}

#[test]
fn now_and_the_epoch_themselves_are_served() {
    let mut server = Server::new(narrow());
    assert!(server.at(1, DEFAULT_LAYOUT.epoch_unix_ms).is_ok());
    assert!(server.at(1, NOW).is_ok());
}

#[test]
fn a_restart_never_makes_an_id_twice_and_may_go_back_in_time() {
    let mut server =
        Server::new(Layout::from_parts(DEFAULT_LAYOUT.epoch_unix_ms, 10, 4, 12).unwrap());
    let epoch = DEFAULT_LAYOUT.epoch_unix_ms;
    let mut made = HashSet::new();
    // Runs that crash at every point, each revisiting the same instants.
    for run in 0..5 {
        for i in 0..20 {
            let id = server.at(2, epoch + 1_000 + i * 7).unwrap();
            assert!(made.insert(id), "run {run}: {id} made twice");
        }
        server.restart();
    }
    // Each run cost BLOCK sequence numbers of every instant.
    assert_eq!(server.disk.of(2), 5 * BLOCK);
}

#[test]
fn a_spent_node_id_is_refused_at_every_instant_and_another_serves() {
    let mut server = Server::new(narrow());
    let t = DEFAULT_LAYOUT.epoch_unix_ms + 5_000;
    server.at(4, t).unwrap();
    server.restart();
    // The first run reserved all 16 numbers (BLOCK = 16): the base of the next is 16.
    assert_eq!(
        server.at(4, t + 1_000),
        Err(Refusal::Exhausted {
            unix_ms: t + 1_000,
            first: 16,
            max: 15
        })
    );
    assert!(server.at(5, t).is_ok());
}

#[test]
fn many_ties_raise_the_ceiling_by_blocks() {
    let layout = Layout::from_parts(DEFAULT_LAYOUT.epoch_unix_ms, 1, 4, 12).unwrap();
    let mut server = Server::new(layout);
    let t = DEFAULT_LAYOUT.epoch_unix_ms + 5_000;
    let mut made = HashSet::new();
    for _ in 0..100 {
        assert!(made.insert(server.at(1, t).unwrap()));
    }
    assert_eq!(server.writes, 7, "ceil(100 / 16) writes");
    server.restart();
    let after = server.at(1, t).unwrap();
    assert!(!made.contains(&after));
    assert_eq!(layout.decompose(after).unwrap().seq, 112);
}

#[test]
fn the_backfill_node_id_is_checked() {
    let layout = narrow();
    assert_eq!(check_node(&layout, 3, Some(1), false), Ok(()));
    assert_eq!(check_node(&layout, 3, None, false), Ok(()));
    assert_eq!(
        check_node(&layout, 1, Some(1), false),
        Err(NodeRefusal::Live { node: 1 })
    );
    assert_eq!(
        check_node(&layout, 3, Some(1), true),
        Err(NodeRefusal::UsedBefore { node: 3 })
    );
    assert_eq!(
        check_node(&layout, 16, Some(1), false),
        Err(NodeRefusal::OutOfRange { node: 16, max: 15 })
    );
}

#[test]
fn the_file_and_the_record_read_back() {
    let mut ceilings = Ceilings::new(narrow());
    assert!(ceilings.raise(7, 32));
    assert!(ceilings.raise(2, 16));
    assert!(!ceilings.raise(7, 16), "never lowered");
    let text = ceilings.format();
    assert_eq!(Ceilings::parse(&text), Ok(ceilings.clone()));
    assert_eq!(ceilings.nodes, [(2, 16), (7, 32)]);
    for bad in [
        "",
        "pg_snowflake backfill 2\n",
        "pg_snowflake backfill 1\nlayout 1 2 3\n",
        "pg_snowflake backfill 1\nlayout 0 1 40 40\n",
        "pg_snowflake backfill 1\nlayout 0 1 4 4\nnode 1 x\n",
        "pg_snowflake backfill 1\nlayout 0 1 4 4\nnode 1 2\nnode 1 3\n",
        UPGRADE_MARKER,
    ] {
        assert!(Ceilings::parse(bad).is_err(), "{bad:?}");
    }
    let record = Record {
        layout: narrow(),
        node: 9,
        ceiling: 48,
    };
    assert_eq!(decode(&encode(&record)), Some(record));
    assert_eq!(decode(&encode(&record)[..35]), None);
}
