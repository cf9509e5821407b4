//! Which error of the catalogue (`error/registry.rs`) a refusal of the registry becomes: the
//! decision, given as values; the wording stays in the catalogue.

use crate::error::RegistryError;
use snowflake_core::clock::{Clock, SystemClock};
use snowflake_core::layout::Layout;
use snowflake_core::node::{Refusing, RegistryStatus};
use snowflake_core::registry::Refusal;

impl RegistryError {
    /// The error for the registry's refusal `why` of `node` (`label`: the holder's label, or
    /// for another layout the fleet's), with this server's layout described by `mine`.
    pub fn refused(
        node: u32,
        why: Refusal,
        label: String,
        last_seen: i64,
        mine: impl FnOnce() -> String,
    ) -> RegistryError {
        match why {
            Refusal::OtherLayout => RegistryError::OtherLayout {
                node,
                fleet: label,
                mine: mine(),
            },
            why => RegistryError::ClaimRefused {
                node,
                why,
                label,
                last_seen,
            },
        }
    }
}

/// The error a call meets while `refusing` for the registry (a claim not made after
/// `claim_wait_ms`, refused or lost, a lease run out, a clock off) on the server of node id
/// `node` and layout `layout`, with what the registry said last (`registry`, as the renewer left
/// it in shared memory) and the clock's limit `max_clock_skew_ms`. Given as values: it reads
/// neither shared memory nor the settings.
pub fn error_of(
    refusing: Refusing,
    node: u32,
    registry: &RegistryStatus,
    layout: &Layout,
    max_clock_skew_ms: i64,
    claim_wait_ms: i64,
) -> RegistryError {
    match refusing {
        Refusing::ClaimRefused => match registry.refusal {
            Some((node, why, last_seen)) => {
                RegistryError::refused(node, why, registry.label(), last_seen, || layout.describe())
            }
            None => RegistryError::NoFreeNodeId {
                max: layout.max_node(),
            },
        },
        Refusing::ClaimLost => RegistryError::ClaimLost {
            node,
            label: Some(registry.label()).filter(|label| !label.is_empty()),
        },
        Refusing::LeaseExpired => RegistryError::LeaseExpired {
            node,
            ago_ms: (SystemClock.monotonic() - registry.lease_ends_at).max(0),
        },
        Refusing::AwaitingLease => RegistryError::AwaitingLease {
            node,
            waited_ms: claim_wait_ms,
        },
        Refusing::ClockSkew => RegistryError::ClockSkew {
            offset_ms: registry.clock_offset_ms,
            max_ms: max_clock_skew_ms,
        },
        _ => RegistryError::AwaitingClaim {
            waited_ms: claim_wait_ms,
        },
    }
}
