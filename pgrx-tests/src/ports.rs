//! Port leases: each server gets a port no other test process on this machine holds, by a
//! `flock` on a file per port.

use std::sync::atomic::{AtomicU32, Ordering};

/// A TCP port on 127.0.0.1, held for one server for as long as the [`Server`] lives.
///
/// Ports come from 10000–27999: below pgrx's own test and run ports (28800 and 32200 up) and
/// below the kernel's ephemeral range (32768 up), from which every client connection to
/// 127.0.0.1 takes its local port. A server cannot bind a port that a client connection holds,
/// so a port checked free in that range can be taken a moment later by any `psql`.
///
/// The lease is an exclusive `flock` on `$TMPDIR/pgsf-ports/<port>`: test processes running at
/// once (several test binaries, other checkouts) never hand out the same port, also not while
/// its server is down between a crash and a restart. The kernel drops the lock when the process
/// dies, so a killed run leaves nothing held. A port whose lock is free is also checked unbound.
pub(crate) struct PortLease {
    pub(crate) number: u16,
    _lock: Option<std::fs::File>,
}

/// The ports leased: 10000–27999 (see [`PortLease`]).
const FIRST: u64 = 10_000;
const END: u64 = 28_000;

pub(crate) fn lease_port() -> PortLease {
    lease_port_in(&leases_dir())
}

/// The folder of the lease files, shared by every test process on the machine.
fn leases_dir() -> std::path::PathBuf {
    std::env::temp_dir().join("pgsf-ports")
}

fn lease_port_in(dir: &std::path::Path) -> PortLease {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let span = END - FIRST;
    let start =
        u64::from(std::process::id()) * 100 + u64::from(NEXT.fetch_add(1, Ordering::Relaxed));
    (0..span)
        .find_map(|i| take(dir, (FIRST + (start + i) % span) as u16))
        .unwrap_or_else(|| panic!("no free TCP port on 127.0.0.1 between {FIRST} and {END}"))
}

/// `number`, leased, if no other process holds its lease and nothing is bound to it.
fn take(dir: &std::path::Path, number: u16) -> Option<PortLease> {
    let lock = lock_port(dir, number).ok()?;
    std::net::TcpListener::bind(("127.0.0.1", number)).ok()?;
    Some(PortLease {
        number,
        _lock: lock,
    })
}

/// A block of consecutive ports, all leased, for a script that picks its servers' ports itself
/// (`scripts/serve/cluster`, `scripts/serve/demo-fleet`: the first free port from a given one, upwards).
/// Started at [`PortBlock::first`], such a script finds each port of the block free and takes
/// them in order, and no test process running beside it is handed one of them.
pub struct PortBlock {
    pub first: u16,
    _leases: Vec<PortLease>,
}

impl PortBlock {
    pub fn lease(count: u16) -> PortBlock {
        Self::lease_in(&leases_dir(), count)
    }

    fn lease_in(dir: &std::path::Path, count: u16) -> PortBlock {
        let size = u64::from(count);
        let blocks = (END - FIRST) / size;
        let start = u64::from(std::process::id());
        (0..blocks)
            .find_map(|i| {
                let first = (FIRST + (start + i) % blocks * size) as u16;
                let leases = (first..first + count)
                    .map(|number| take(dir, number))
                    .collect::<Option<Vec<_>>>()?;
                Some(PortBlock {
                    first,
                    _leases: leases,
                })
            })
            .unwrap_or_else(|| {
                panic!(
                    "no {count} consecutive free TCP ports on 127.0.0.1 between {FIRST} and {END}"
                )
            })
    }
}

/// Locks `number`'s lease file: `Err` when another process holds it, `Ok(None)` when no lease
/// file can be made here (then only the bind check guards the port).
fn lock_port(dir: &std::path::Path, number: u16) -> Result<Option<std::fs::File>, ()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    if std::fs::create_dir(dir).is_ok() {
        // Shared by every user who runs the tests, like /tmp itself.
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o1777));
    }
    let path = dir.join(number.to_string());
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o666)
        .open(&path)
        .or_else(|_| std::fs::File::open(&path));
    let Ok(file) = file else {
        return Ok(None);
    };
    match file.try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(std::fs::TryLockError::WouldBlock) => Err(()),
        Err(std::fs::TryLockError::Error(_)) => Ok(None),
    }
}

#[cfg(test)]
mod port_lease_tests {
    use super::*;

    /// A lease folder of this test's own: the tests beside it lease from the shared one, and
    /// could take a port the moment it is given back, so what is asserted after a drop is
    /// asserted where no other process leases.
    fn own_dir(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("pgsf-ports-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn a_leased_port_is_neither_leased_again_nor_bound_by_another_process_until_dropped() {
        let dir = own_dir("single");
        let first = lease_port_in(&dir);
        let second = lease_port_in(&dir);
        assert_ne!(first.number, second.number);
        assert!((10_000..28_000).contains(&first.number));
        // Another process (flock conflicts between open file descriptions, as between
        // processes) sees the lease as held.
        assert_eq!(lock_port(&dir, first.number).err(), Some(()));
        let number = first.number;
        drop(first);
        assert!(matches!(lock_port(&dir, number), Ok(Some(_))));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_block_is_consecutive_ports_each_leased() {
        let dir = own_dir("block");
        let block = PortBlock::lease_in(&dir, 6);
        let single = lease_port_in(&dir);
        let first = block.first;
        for number in first..first + 6 {
            assert_eq!(
                lock_port(&dir, number).err(),
                Some(()),
                "port {number} of the block"
            );
            assert_ne!(single.number, number);
        }
        drop(block);
        assert!(matches!(lock_port(&dir, first), Ok(Some(_))));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
