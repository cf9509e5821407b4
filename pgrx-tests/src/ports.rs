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

pub(crate) fn lease_port() -> PortLease {
    const FIRST: u64 = 10_000;
    const END: u64 = 28_000;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let span = END - FIRST;
    let start =
        u64::from(std::process::id()) * 100 + u64::from(NEXT.fetch_add(1, Ordering::Relaxed));
    for i in 0..span {
        let number = (FIRST + (start + i) % span) as u16;
        let lock = match lock_port(number) {
            Ok(lock) => lock,
            Err(()) => continue,
        };
        if std::net::TcpListener::bind(("127.0.0.1", number)).is_ok() {
            return PortLease {
                number,
                _lock: lock,
            };
        }
    }
    panic!("no free TCP port on 127.0.0.1 between {FIRST} and {END}");
}

/// Locks `number`'s lease file: `Err` when another process holds it, `Ok(None)` when no lease
/// file can be made here (then only the bind check guards the port).
fn lock_port(number: u16) -> Result<Option<std::fs::File>, ()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let dir = std::env::temp_dir().join("pgsf-ports");
    if std::fs::create_dir(&dir).is_ok() {
        // Shared by every user who runs the tests, like /tmp itself.
        let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777));
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

    #[test]
    fn a_leased_port_is_neither_leased_again_nor_bound_by_another_process_until_dropped() {
        let first = lease_port();
        let second = lease_port();
        assert_ne!(first.number, second.number);
        assert!((10_000..28_000).contains(&first.number));
        // Another process (flock conflicts between open file descriptions, as between
        // processes) sees the lease as held.
        assert_eq!(lock_port(first.number).err(), Some(()));
        let number = first.number;
        drop(first);
        assert!(matches!(lock_port(number), Ok(Some(_))));
    }
}
