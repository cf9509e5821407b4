"""pg_snowflake IDs made in an application process, under a node id leased from the fleet's registry.

A process that makes its own IDs (Kafka keys, outbox rows, client-side batches) takes a node id
from the registry the fleet's servers use, through any member server (docs/FLEETS.md,
"Applications"), so that no two processes, and no server, ever stamp IDs under one node id::

    with SnowflakeLease("host=db-1 dbname=app user=orders", "orders-producer") as ids:
        key = ids.next_id()

The lease is taken on start (its token lives in this process only), renewed by a background
thread three times a lease, and released on close. IDs are made in process with the fleet's
layout as the lease reports it. No ID is ever stamped above the ceiling the registry granted,
nor at or below the floor it resumed from; after a clock step back the generator holds until
the clock passes its last ID, and raises instead when that wait would outlast the lease. Once
the registry says the lease is lost, every call raises ``LeaseLost``: take a new lease.

Needs psycopg 3, and a role that is a member of ``snowflake_lease`` on the member server.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any, Optional

import psycopg
from psycopg import errors

__all__ = ["Layout", "LeaseError", "LeaseLost", "LeaseExpired", "CeilingReached",
           "ClockBehind", "SnowflakeLease"]


class LeaseError(Exception):
    """No ID can be made under the lease now."""


class LeaseLost(LeaseError):
    """The registry no longer holds this lease (it ran out and was retired, or it was released)."""


class LeaseExpired(LeaseError):
    """No renewal succeeded for a whole lease; IDs resume at the next renewal."""


class CeilingReached(LeaseError):
    """The next ID would be stamped past the ceiling the registry granted (a clock stepped ahead,
    or renewals failing)."""


class ClockBehind(LeaseError):
    """The clock stepped back further than the lease lets this process wait for it."""


@dataclass(frozen=True)
class Layout:
    """How the fleet splits an ID: ``time | node | sequence``, time in ``unit_ms`` since ``epoch_ms``."""

    epoch_ms: int
    unit_ms: int
    time_bits: int
    node_bits: int
    sequence_bits: int


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


def _mono_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class SnowflakeLease:
    """A node-id lease and the ID generator under it. Thread-safe; not to be shared across fork()."""

    def __init__(self, conninfo: str, label: str, **connect_kwargs: Any) -> None:
        self._conninfo = conninfo
        # A member that never answers must not hang the renewals for good (keyword arguments
        # are libpq's; the caller's win).
        self._connect_kwargs = {"connect_timeout": 10, "tcp_user_timeout": 10_000,
                                **connect_kwargs}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._lost: Optional[LeaseError] = None
        self._conn: Optional[psycopg.Connection[Any]] = None
        sent = _mono_ms()
        try:
            row = self._connection().execute(
                "SELECT node_id, token, generation, floor_ms, ceiling_ms, lease_ms, epoch_ms,"
                " unit_ms, time_bits, node_bits, sequence_bits FROM snowflake_lease_acquire(%s)",
                (label,),
            ).fetchone()
        except BaseException:
            self._drop_connection()
            raise
        assert row is not None
        node_id, token, generation, floor_ms, ceiling, lease_ms, *layout = row
        self.node_id: int = node_id
        self.lease_ms: int = lease_ms
        self.layout = Layout(*layout)
        self._token: str = token
        self._generation: int = generation
        self._ceiling: int = ceiling
        self._mark_own = True  # the registry's mark is the one our lease wrote
        self._lease_ends = sent + self.lease_ms  # monotonic: never after the registry's end
        self._max_seq = (1 << self.layout.sequence_bits) - 1
        self._max_tick = (1 << self.layout.time_bits) - 1
        # The floor counts as our last stamp, its sequence used up: the first ID lies above it.
        self._tick = -1 if floor_ms is None else self._tick_of(floor_ms)
        self._seq = self._max_seq
        _live.add(self)
        self._beat = threading.Thread(target=self._heartbeats, name=f"snowflake-lease-{label}",
                                      daemon=True)
        self._beat.start()

    # -- making IDs ---------------------------------------------------------------------------

    def next_id(self) -> int:
        """The next ID: greater than every ID this lease made before, unique across the fleet."""
        layout = self.layout
        with self._lock:
            while True:
                self._usable()
                now_ms = _wall_ms()
                tick = self._tick_of(now_ms)
                if tick > self._tick:
                    tick, seq = tick, 0
                elif self._seq < self._max_seq:
                    tick, seq = self._tick, self._seq + 1  # the clock at or behind our last stamp
                else:
                    self._hold(now_ms)
                    continue
                if tick > self._max_tick:
                    raise CeilingReached("the layout's time field is used up")
                stamp_ms = layout.epoch_ms + tick * layout.unit_ms
                if stamp_ms > self._ceiling:
                    raise CeilingReached(
                        f"node id {self.node_id}: the next ID would be stamped at {stamp_ms} ms,"
                        f" past the lease's ceiling {self._ceiling} ms")
                self._tick, self._seq = tick, seq
                return ((tick << (layout.node_bits + layout.sequence_bits))
                        | (self.node_id << layout.sequence_bits) | seq)

    def _tick_of(self, unix_ms: int) -> int:
        return (unix_ms - self.layout.epoch_ms) // self.layout.unit_ms

    def _hold(self, now_ms: int) -> None:
        """Waits until the clock passes our last stamp, or raises if that outlasts the lease."""
        next_ms = self.layout.epoch_ms + (self._tick + 1) * self.layout.unit_ms
        wait_ms = next_ms - now_ms
        if wait_ms > self._lease_ends - _mono_ms():
            raise ClockBehind(
                f"node id {self.node_id}: the clock is {wait_ms} ms behind the last ID, longer"
                " than the lease lets this process wait")
        self._lock.release()  # renewals go on meanwhile
        try:
            time.sleep(max(wait_ms, 0) / 1000)
        finally:
            self._lock.acquire()

    def _usable(self) -> None:
        if self._lost is not None:
            raise self._lost
        left = self._lease_ends - _mono_ms()
        if left <= 0:
            raise LeaseExpired(f"node id {self.node_id}: no renewal for {self.lease_ms - left} ms")

    # -- the lease ----------------------------------------------------------------------------

    @property
    def ceiling_ms(self) -> int:
        """The latest time (Unix ms) an ID of this lease may be stamped at, for now."""
        return self._ceiling

    def _connection(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(self._conninfo, autocommit=True, **self._connect_kwargs)
        return self._conn

    def _heartbeats(self) -> None:
        interval = max(self.lease_ms / 3, 100) / 1000
        pause = interval
        while not self._stop.wait(pause):
            try:
                self.renew()
                pause = interval
            except LeaseLost:
                return
            except psycopg.Error:
                # Out of reach: the lease runs on until its end; try again within a second.
                self._drop_connection()
                pause = min(interval, 1.0)

    def renew(self) -> None:
        """Extends the lease (the background thread calls this); raises ``LeaseLost`` if it is gone."""
        with self._lock:
            ceiling = self._ceiling
        sent = _mono_ms()
        try:
            row = self._connection().execute(
                "SELECT ceiling_ms, mark_own FROM snowflake_lease_renew(%s, %s, %s, %s)",
                (self.node_id, self._token, self._generation, ceiling),
            ).fetchone()
        except errors.ObjectNotInPrerequisiteState as e:
            if "is lost" not in (e.diag.message_primary or ""):
                raise  # the member's clock off the registry's: tried again
            with self._lock:
                self._lost = LeaseLost(str(e).splitlines()[0])
                raise self._lost from e
        assert row is not None
        with self._lock:
            self._ceiling = max(self._ceiling, row[0])
            self._mark_own = self._mark_own and row[1]
            self._lease_ends = max(self._lease_ends, sent + self.lease_ms)

    def _drop_connection(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def close(self) -> None:
        """Stops the renewals and releases the lease; no ID is made under it afterwards."""
        with self._lock:
            if self._stop.is_set():
                return
            self._stop.set()
            gone = self._lost is not None
            self._lost = LeaseLost(f"node id {self.node_id}: the lease was released")
            last_ms = self.layout.epoch_ms + max(self._tick, 0) * self.layout.unit_ms
            lower = (self._ceiling, last_ms) if self._mark_own else (None, None)
        self._beat.join()
        _live.discard(self)
        try:
            if not gone:
                self._connection().execute(
                    "SELECT snowflake_lease_release(%s, %s, %s, %s, %s)",
                    (self.node_id, self._token, self._generation, *lower),
                )
        finally:
            self._drop_connection()

    def __enter__(self) -> SnowflakeLease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# A child of fork() carries its parent's token: two processes under one node id. Its copies of
# the parent's leases make no ID.
_live: "weakref.WeakSet[SnowflakeLease]" = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for lease in list(_live):
        lease._lock = threading.Lock()  # another thread of the parent may have held it
        lease._lost = LeaseLost(f"node id {lease.node_id}: the lease belongs to the parent process")
        lease._stop.set()
        lease._conn = None  # the parent's socket: never used, never closed here


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
