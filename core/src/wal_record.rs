//! The payload of pg_snowflake's one WAL record type, "reservation": the reserved-until time,
//! the layout and the node id it was made under, as little-endian integers (until, epoch, unit:
//! 8 bytes each; node and sequence bits, node id: 4 each), then, on a server with a node-id
//! registry, the claim the node id is held under (owner token: 16 bytes, generation: 8), so
//! that a standby knows the claim it would continue once promoted. 0.3.0 wrote the first 32
//! bytes only (no node id), 0.4.0 the first 36 (no claim): such records are still replayed. The extension's `reservation/store.rs`
//! writes it and `reservation/redo.rs` replays it.

use crate::layout::Layout;
use crate::registry::Identity;

/// The longest record: with a claim.
pub const LEN: usize = 60;
/// A record without a claim (and 0.4.0's).
pub const LEN_NO_CLAIM: usize = 36;
/// The length of 0.3.0's records, which carry no node id.
const LEN_V1: usize = 32;

/// What a record says: a reservation until `until` (Unix ms) made under `layout`, `node`
/// (`None` in a record of 0.3.0) and `claim` (`None`: no registry, or a record of 0.4.0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    pub until: i64,
    pub layout: Layout,
    pub node: Option<u32>,
    pub identity: Option<Identity>,
}

/// The payload of a reservation until `until` (Unix ms) made under `layout`, `node` and
/// `claim`: the buffer and how much of it is the record.
pub fn encode(
    until: i64,
    layout: &Layout,
    node: u32,
    identity: Option<Identity>,
) -> ([u8; LEN], usize) {
    let mut payload = [0u8; LEN];
    payload[..8].copy_from_slice(&until.to_le_bytes());
    payload[8..16].copy_from_slice(&layout.epoch_unix_ms.to_le_bytes());
    payload[16..24].copy_from_slice(&layout.unit_ms.to_le_bytes());
    payload[24..28].copy_from_slice(&layout.node_bits.to_le_bytes());
    payload[28..32].copy_from_slice(&layout.seq_bits.to_le_bytes());
    payload[32..36].copy_from_slice(&node.to_le_bytes());
    let Some(identity) = identity else {
        return (payload, LEN_NO_CLAIM);
    };
    payload[36..52].copy_from_slice(&identity.token.to_le_bytes());
    payload[52..60].copy_from_slice(&identity.generation.to_le_bytes());
    (payload, LEN)
}

/// The reservation a payload carries, or `None` if it is not one (wrong length, or a layout no
/// version of pg_snowflake writes).
pub fn decode(bytes: &[u8]) -> Option<Record> {
    if ![LEN, LEN_NO_CLAIM, LEN_V1].contains(&bytes.len()) {
        return None;
    }
    let i64_at = |at: usize| {
        let mut field = [0u8; 8];
        field.copy_from_slice(&bytes[at..at + 8]);
        i64::from_le_bytes(field)
    };
    let u32_at = |at: usize| {
        let mut field = [0u8; 4];
        field.copy_from_slice(&bytes[at..at + 4]);
        u32::from_le_bytes(field)
    };
    let layout = Layout::from_parts(i64_at(8), i64_at(16), u32_at(24), u32_at(28)).ok()?;
    let node = (bytes.len() >= LEN_NO_CLAIM).then(|| u32_at(32));
    let identity = (bytes.len() == LEN).then(|| {
        let mut token = [0u8; 16];
        token.copy_from_slice(&bytes[36..52]);
        Identity {
            token: u128::from_le_bytes(token),
            generation: i64_at(52),
        }
    });
    Some(Record {
        until: i64_at(0),
        layout,
        node,
        identity,
    })
}

#[cfg(test)]
mod tests;
