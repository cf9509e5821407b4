//! The watermark's arithmetic: the least ID still held by a transaction that has not ended, over
//! the backends' slots and the table of prepared transactions. The extension keeps both in
//! shared memory (`src/shmem.rs`) and asks Postgres which transactions are still in progress
//! (`src/watermark.rs`); what it does with the answers is decided here.
//!
//! A backend's slot holds the lowest ID drawn in its current top-level transaction, or [`NONE`].
//! A prepared transaction's entry holds its top-level xid and the lowest ID it drew, or
//! [`NO_IDS`] (it drew none: it is recorded so that it is known), or [`UNKNOWN`] (it was
//! prepared before the server's last start, and what it drew was lost with the shared memory:
//! every ID may be its, so the watermark falls to [`UNKNOWN`] until it ends).

/// A slot with no ID: the backend's transaction has drawn none. IDs are never negative.
pub const NONE: i64 = -1;

/// A prepared transaction that drew no ID.
pub const NO_IDS: i64 = i64::MAX;

/// A prepared transaction whose IDs are not known (prepared before the last start): the
/// watermark stays at this value, below every ID, while it is pending.
pub const UNKNOWN: i64 = 0;

/// One prepared transaction: its top-level xid (0, Postgres' invalid xid: a free entry) and the
/// lowest ID it drew ([`NO_IDS`], [`UNKNOWN`] or an ID).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct Prepared {
    pub xid: u32,
    pub lowest: i64,
}

impl Prepared {
    pub const FREE: Prepared = Prepared {
        xid: 0,
        lowest: NO_IDS,
    };
}

/// The least of `drawn` (the ID the watermark call itself drew, above every ID drawn before it)
/// and the IDs of the slots that hold one.
pub fn least_open(drawn: i64, slots: impl IntoIterator<Item = i64>) -> i64 {
    slots
        .into_iter()
        .filter(|&id| id != NONE)
        .fold(drawn, i64::min)
}

/// Frees the entries of transactions that have ended (`in_progress(xid)` false) and returns the
/// least ID held by those still pending (`NO_IDS` when none holds one).
pub fn least_prepared(table: &mut [Prepared], mut in_progress: impl FnMut(u32) -> bool) -> i64 {
    let mut least = NO_IDS;
    for entry in table.iter_mut().filter(|e| e.xid != 0) {
        if in_progress(entry.xid) {
            least = least.min(entry.lowest);
        } else {
            *entry = Prepared::FREE;
        }
    }
    least
}

/// Records a transaction being prepared, with the lowest ID it drew (or `NO_IDS`): in a free
/// entry, after freeing those of transactions that have ended. `false` when every entry belongs
/// to a transaction still in progress (the table is sized so that this cannot happen).
pub fn record(
    table: &mut [Prepared],
    xid: u32,
    lowest: i64,
    in_progress: impl FnMut(u32) -> bool,
) -> bool {
    least_prepared(table, in_progress);
    match table.iter_mut().find(|e| e.xid == 0) {
        Some(entry) => {
            *entry = Prepared { xid, lowest };
            true
        }
        None => false,
    }
}

/// Marks the prepared transactions found pending (`pending`, their xids) that the table does not
/// know as [`UNKNOWN`]: they were prepared before the server started, so their IDs were lost.
/// `false` when the table has no room for them.
pub fn mark_unknown(table: &mut [Prepared], pending: impl IntoIterator<Item = u32>) -> bool {
    for xid in pending {
        if xid == 0 || table.iter().any(|e| e.xid == xid) {
            continue;
        }
        match table.iter_mut().find(|e| e.xid == 0) {
            Some(entry) => {
                *entry = Prepared {
                    xid,
                    lowest: UNKNOWN,
                }
            }
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_least_open_slot_is_below_the_drawn_id() {
        assert_eq!(least_open(100, [NONE, 40, NONE, 70]), 40);
        assert_eq!(least_open(100, [NONE, NONE]), 100);
        assert_eq!(least_open(100, []), 100);
    }

    #[test]
    fn prepared_entries_count_while_in_progress_and_are_freed_after() {
        let mut table = [Prepared::FREE; 3];
        assert!(record(&mut table, 7, 50, |_| true));
        assert!(record(&mut table, 8, NO_IDS, |_| true));
        assert_eq!(least_prepared(&mut table, |_| true), 50);
        assert_eq!(least_prepared(&mut table, |xid| xid != 7), NO_IDS);
        assert_eq!(table.iter().filter(|e| e.xid != 0).count(), 1);
    }

    #[test]
    fn a_full_table_frees_ended_entries_before_refusing() {
        let mut table = [Prepared::FREE; 2];
        assert!(record(&mut table, 1, 10, |_| true));
        assert!(record(&mut table, 2, 20, |_| true));
        assert!(!record(&mut table, 3, 30, |_| true));
        assert!(record(&mut table, 3, 30, |xid| xid != 1));
        assert_eq!(least_prepared(&mut table, |_| true), 20);
    }

    #[test]
    fn transactions_prepared_before_the_start_hold_the_watermark_at_unknown() {
        let mut table = [Prepared::FREE; 3];
        assert!(record(&mut table, 5, 90, |_| true));
        assert!(mark_unknown(&mut table, [5, 6]));
        assert_eq!(table.iter().filter(|e| e.xid == 5).count(), 1);
        assert_eq!(least_prepared(&mut table, |_| true), UNKNOWN);
        assert_eq!(least_prepared(&mut table, |xid| xid != 6), 90);
        assert!(!mark_unknown(&mut [Prepared::FREE; 0], [1]));
    }
}
