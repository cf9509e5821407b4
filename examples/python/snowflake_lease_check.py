"""The test of snowflake_lease.py against real servers, driven by pgrx-tests/tests/app_leases.rs.

    snowflake_lease_check.py CONNINFO LABEL make N     N IDs, printed one a line, then released
    snowflake_lease_check.py CONNINFO LABEL hold       IDs every few ms until killed; an error
                                                       line ("error: Class: text") per failure
    snowflake_lease_check.py CONNINFO LABEL clock      the clock stepped back and ahead
    snowflake_lease_check.py CONNINFO - bench SECS     bench/lease-clients: acquire to first ID,
                                                       IDs per second, snowflake-id's beside
    snowflake_lease_check.py CONNINFO - idle SECS      a lease held SECS seconds, no ID made

Every line is "lease NODE CEILING LEASE_MS", "id ID", "key ID" (the recipe's, under a lease of
its own), "error: ..." or "done"; a failed assert exits non-zero.
"""

import sys
import time

import snowflake_lease
from snowflake_lease import CeilingReached, ClockBehind, LeaseError, SnowflakeLease


def say(text: str) -> None:
    print(text, flush=True)


# snippet: lease
def keyed(conninfo: str, orders: list[str]) -> list[tuple[int, str]]:
    """Kafka keys for orders, made in this process under a node id leased from the fleet."""
    with SnowflakeLease(conninfo, "orders-producer") as ids:
        return [(ids.next_id(), order) for order in orders]
# end snippet


def make(lease: SnowflakeLease, n: int) -> None:
    ids = [lease.next_id() for _ in range(n)]
    assert ids == sorted(set(ids)), "IDs not strictly increasing"
    for i in ids:
        say(f"id {i}")


def hold(lease: SnowflakeLease) -> None:
    while True:
        try:
            say(f"id {lease.next_id()}")
        except LeaseError as e:
            say(f"error: {type(e).__name__}: {e}")
        time.sleep(0.002)


def clock(lease: SnowflakeLease) -> None:
    """Steps the clock the generator reads (the module's one reading of the wall clock)."""
    real = snowflake_lease._wall_ms
    offset = 0
    snowflake_lease._wall_ms = lambda: real() + offset
    first = lease.next_id()
    # Back by a second: held until the clock passes the last ID, never backwards.
    offset = -1_000
    started = time.monotonic()
    after = [lease.next_id() for _ in range(5_000)]
    held = time.monotonic() - started
    assert after[0] > first and after == sorted(set(after)), "an ID went backwards"
    assert held >= 0.9, f"held {held:.2f} s for a step back of 1 s"
    say(f"held {held:.2f} s")
    # Back by an hour: the last ID's sequence is used up, then the wait would outlast the lease.
    offset = -3_600_000
    try:
        for _ in range(1 << lease.layout.sequence_bits):
            after.append(lease.next_id())
            assert after[-1] > after[-2], "an ID went backwards"
        raise AssertionError("an ID an hour behind")
    except ClockBehind as e:
        say(f"error: ClockBehind: {e}")
    # Ahead by an hour: past the ceiling.
    offset = 3_600_000
    try:
        lease.next_id()
        raise AssertionError("an ID an hour ahead")
    except CeilingReached as e:
        say(f"error: CeilingReached: {e}")
    offset = 0
    after.append(lease.next_id())
    assert after[-1] > after[-2], "an ID after the steps went backwards"
    for i in [first, *after]:
        say(f"id {i}")


def rate(next_id, secs: float) -> float:
    """IDs per second from one thread calling next_id for secs seconds."""
    n, start = 0, time.perf_counter()
    end = start + secs
    while True:
        for _ in range(1000):
            next_id()
        n += 1000
        if time.perf_counter() >= end:
            return n / (time.perf_counter() - start)


def bench(conninfo: str, secs: float) -> None:
    started = time.perf_counter()
    with SnowflakeLease(conninfo, "bench") as lease:
        lease.next_id()
        say(f"first_id_ms {(time.perf_counter() - started) * 1000:.1f}")
        say(f"lease_ids_per_s {rate(lease.next_id, secs):.0f}")
    try:
        from snowflake import SnowflakeGenerator  # PyPI's snowflake-id, if installed
    except ImportError:
        say("other none")
        return
    generator = SnowflakeGenerator(1)

    def spin() -> int:  # it answers None once a millisecond's sequence is used up
        while (made := next(generator)) is None:
            pass
        return made

    say(f"other snowflake-id {rate(spin, secs):.0f}")


def main() -> None:
    conninfo, label, mode = sys.argv[1:4]
    if mode == "bench":
        bench(conninfo, float(sys.argv[4]))
        return
    if mode == "idle":
        with SnowflakeLease(conninfo, "idle"):
            time.sleep(float(sys.argv[4]))
        return
    if mode == "make":
        keys = [key for key, _ in keyed(conninfo, ["apple", "pear"])]
        assert keys[0] < keys[1], keys
        for key in keys:
            say(f"key {key}")
    with SnowflakeLease(conninfo, label) as lease:
        say(f"lease {lease.node_id} {lease.ceiling_ms} {lease.lease_ms}")
        if mode == "make":
            make(lease, int(sys.argv[4]))
        elif mode == "hold":
            hold(lease)
        elif mode == "clock":
            clock(lease)
        else:
            raise SystemExit(f"unknown mode {mode}")
    say("done")


if __name__ == "__main__":
    main()
