//! The payload of pg_snowflake's one WAL record type, "reservation": the reserved-until time,
//! the layout and the node id it was made under, as little-endian integers (until, epoch, unit:
//! 8 bytes each; node and sequence bits, node id: 4 each). 0.3.0 wrote the first 32 bytes
//! only (no node id): such records are still replayed. The extension's `reservation/store.rs`
//! writes it and `reservation/redo.rs` replays it.

use crate::layout::Layout;

pub const LEN: usize = 36;
/// The length of 0.3.0's records, which carry no node id.
const LEN_V1: usize = 32;

/// The payload of a reservation until `until` (Unix ms) made under `layout` and `node`.
pub fn encode(until: i64, layout: &Layout, node: u32) -> [u8; LEN] {
    let mut payload = [0u8; LEN];
    payload[..8].copy_from_slice(&until.to_le_bytes());
    payload[8..16].copy_from_slice(&layout.epoch_unix_ms.to_le_bytes());
    payload[16..24].copy_from_slice(&layout.unit_ms.to_le_bytes());
    payload[24..28].copy_from_slice(&layout.node_bits.to_le_bytes());
    payload[28..32].copy_from_slice(&layout.seq_bits.to_le_bytes());
    payload[32..36].copy_from_slice(&node.to_le_bytes());
    payload
}

/// The reservation a payload carries — until, layout and node id (`None` in a record of 0.3.0)
/// —, or `None` if it is not one (wrong length, or a layout no version of pg_snowflake writes).
pub fn decode(bytes: &[u8]) -> Option<(i64, Layout, Option<u32>)> {
    if bytes.len() != LEN && bytes.len() != LEN_V1 {
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
    let node = (bytes.len() == LEN).then(|| u32_at(32));
    Some((i64_at(0), layout, node))
}

#[cfg(test)]
mod tests;
