//! [`Proxy`]: a TCP forwarder on 127.0.0.1 between a server and another (a member and its
//! registry), whose link a test can cut and heal: a network partition, without root or
//! firewall rules.
//!
//! One thread accepts; each connection gets two threads copying bytes, one each way. [`Proxy::cut`]
//! shuts down every connection it carries (both ends see the link go, as after a reset) and,
//! until [`Proxy::heal`], closes every new connection as soon as it is accepted, without
//! reaching the target. [`Proxy::freeze`] stops every thread of it where it stands, as a hung
//! proxy or pooler whose kernel still acknowledges: bytes and closes wait in the kernel's
//! buffers, neither end hears of the other, until [`Proxy::thaw`].

use crate::ports::{lease_port, PortLease};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

/// What the proxy's threads share.
struct Link {
    target: u16,
    cut: AtomicBool,
    frozen: AtomicBool,
    closing: AtomicBool,
    /// The open connections: the accepted stream and the one to the target, by number.
    open: Mutex<HashMap<u64, (TcpStream, TcpStream)>>,
    next: AtomicU64,
    /// Connections forwarded, and connections closed at once while the link was cut.
    forwarded: AtomicU64,
    refused: AtomicU64,
}

/// A forwarder from a port of its own on 127.0.0.1 to `target` on 127.0.0.1; stops (closing
/// every connection) on drop.
pub struct Proxy {
    /// Where clients connect instead of the target.
    pub port: u16,
    _port_lease: PortLease,
    link: Arc<Link>,
    acceptor: Option<thread::JoinHandle<()>>,
}

impl Proxy {
    /// A proxy to the TCP port `target` on 127.0.0.1, forwarding from now on.
    pub fn to(target: u16) -> Proxy {
        let lease = lease_port();
        let listener = TcpListener::bind(("127.0.0.1", lease.number))
            .unwrap_or_else(|e| panic!("the proxy binding port {}: {e}", lease.number));
        let link = Arc::new(Link {
            target,
            cut: AtomicBool::new(false),
            frozen: AtomicBool::new(false),
            closing: AtomicBool::new(false),
            open: Mutex::new(HashMap::new()),
            next: AtomicU64::new(0),
            forwarded: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        });
        let acceptor = {
            let link = Arc::clone(&link);
            thread::spawn(move || accept(&listener, &link))
        };
        Proxy {
            port: lease.number,
            _port_lease: lease,
            link,
            acceptor: Some(acceptor),
        }
    }

    /// A libpq connection string for database `dbname` as the superuser, through the proxy.
    pub fn conninfo(&self, dbname: &str) -> String {
        format!(
            "host=127.0.0.1 port={} user=postgres dbname={dbname}",
            self.port
        )
    }

    /// Cuts the link: every open connection is shut down at both ends, and new ones are closed
    /// as soon as they are accepted, until [`Proxy::heal`].
    pub fn cut(&self) {
        self.link.cut.store(true, Ordering::SeqCst);
        let open: Vec<_> = self.link.open.lock().unwrap().drain().collect();
        for (_, (client, target)) in open {
            let _ = client.shutdown(Shutdown::Both);
            let _ = target.shutdown(Shutdown::Both);
        }
    }

    /// Heals the link: new connections are forwarded again.
    pub fn heal(&self) {
        self.link.cut.store(false, Ordering::SeqCst);
    }

    /// Freezes the proxy: nothing is read, written, accepted or closed by it until
    /// [`Proxy::thaw`]; the kernel still accepts and acknowledges, so neither end sees the
    /// link fail (TCP keepalives are answered too).
    pub fn freeze(&self) {
        self.link.frozen.store(true, Ordering::SeqCst);
    }

    /// Thaws a frozen proxy: it forwards what waited, and goes on.
    pub fn thaw(&self) {
        self.link.frozen.store(false, Ordering::SeqCst);
    }

    /// How many connections were forwarded, and how many closed at once while cut.
    pub fn connections(&self) -> (u64, u64) {
        (
            self.link.forwarded.load(Ordering::SeqCst),
            self.link.refused.load(Ordering::SeqCst),
        )
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.link.closing.store(true, Ordering::SeqCst);
        self.thaw();
        self.cut();
        // Wakes the acceptor, which sees `closing` and returns.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
    }
}

fn accept(listener: &TcpListener, link: &Arc<Link>) {
    for client in listener.incoming() {
        if link.closing.load(Ordering::SeqCst) {
            return;
        }
        let Ok(client) = client else { continue };
        link.wait_while_frozen();
        if link.cut.load(Ordering::SeqCst) {
            link.refused.fetch_add(1, Ordering::SeqCst);
            let _ = client.shutdown(Shutdown::Both);
            continue;
        }
        let Ok(target) = TcpStream::connect(("127.0.0.1", link.target)) else {
            // The target is down: the client sees its connection closed, as it would.
            let _ = client.shutdown(Shutdown::Both);
            continue;
        };
        let _ = client.set_nodelay(true);
        let _ = target.set_nodelay(true);
        let Ok([client_2, target_2, client_3, target_3]) = clone_twice(&client, &target) else {
            continue;
        };
        let number = link.next.fetch_add(1, Ordering::SeqCst);
        {
            let mut open = link.open.lock().unwrap();
            // Cut since the check above: `cut` did not see this one, so it is shut down here.
            if link.cut.load(Ordering::SeqCst) {
                let _ = client.shutdown(Shutdown::Both);
                let _ = target.shutdown(Shutdown::Both);
                continue;
            }
            open.insert(number, (client_3, target_3));
        }
        link.forwarded.fetch_add(1, Ordering::SeqCst);
        for (from, to) in [(client, target), (target_2, client_2)] {
            let link = Arc::clone(link);
            thread::spawn(move || {
                copy(from, to, &link);
                // One direction ended: the connection is over, both ends closed.
                if let Some((client, target)) = link.open.lock().unwrap().remove(&number) {
                    let _ = client.shutdown(Shutdown::Both);
                    let _ = target.shutdown(Shutdown::Both);
                }
            });
        }
    }
}

/// Each end twice more: one for the copy the other way, one for [`Proxy::cut`] to shut down.
fn clone_twice(client: &TcpStream, target: &TcpStream) -> std::io::Result<[TcpStream; 4]> {
    Ok([
        client.try_clone()?,
        target.try_clone()?,
        client.try_clone()?,
        target.try_clone()?,
    ])
}

impl Link {
    /// Sleeps while the proxy is frozen (not once it is closing).
    fn wait_while_frozen(&self) {
        while self.frozen.load(Ordering::SeqCst) && !self.closing.load(Ordering::SeqCst) {
            thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

/// Copies bytes from `from` to `to` until either end closes or fails, then shuts both down;
/// stands still while the proxy is frozen, before each read and before acting on what it read.
fn copy(mut from: TcpStream, mut to: TcpStream, link: &Link) {
    let mut buffer = [0u8; 16 * 1024];
    loop {
        link.wait_while_frozen();
        let read = from.read(&mut buffer);
        // A read that was waiting when the proxy froze: its bytes (or the close it saw) wait
        // for the thaw too.
        link.wait_while_frozen();
        match read {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if to.write_all(&buffer[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}

#[cfg(test)]
mod proxy_tests {
    use super::*;
    use std::time::Duration;

    /// An echo server on a leased port: writes back what each connection sends.
    fn echo() -> (PortLease, thread::JoinHandle<()>) {
        let lease = lease_port();
        let listener = TcpListener::bind(("127.0.0.1", lease.number)).unwrap();
        let server = thread::spawn(move || {
            for stream in listener.incoming().take(2) {
                let mut stream = stream.unwrap();
                thread::spawn(move || {
                    let mut buffer = [0u8; 64];
                    while let Ok(n @ 1..) = stream.read(&mut buffer) {
                        if stream.write_all(&buffer[..n]).is_err() {
                            break;
                        }
                    }
                });
            }
        });
        (lease, server)
    }

    fn round_trip(stream: &mut TcpStream, text: &[u8]) -> std::io::Result<Vec<u8>> {
        stream.write_all(text)?;
        let mut answer = vec![0u8; text.len()];
        stream.read_exact(&mut answer)?;
        Ok(answer)
    }

    #[test]
    fn a_cut_closes_the_open_connections_and_refuses_new_ones_until_healed() {
        let (target, _server) = echo();
        let proxy = Proxy::to(target.number);
        let mut open = TcpStream::connect(("127.0.0.1", proxy.port)).unwrap();
        open.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        assert_eq!(round_trip(&mut open, b"one").unwrap(), b"one");
        proxy.cut();
        assert!(
            round_trip(&mut open, b"two").is_err(),
            "the open link is cut"
        );
        let mut new = TcpStream::connect(("127.0.0.1", proxy.port)).unwrap();
        new.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        assert!(
            round_trip(&mut new, b"three").is_err(),
            "a new link is refused"
        );
        proxy.heal();
        let mut healed = TcpStream::connect(("127.0.0.1", proxy.port)).unwrap();
        healed
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        assert_eq!(round_trip(&mut healed, b"four").unwrap(), b"four");
        assert_eq!(proxy.connections(), (2, 1));
    }
}
