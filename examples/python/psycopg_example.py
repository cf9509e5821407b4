"""pg_snowflake with psycopg 3: the recipe of docs/CLIENTS.md#psycopg-3, and its test.

Run by scripts/test/clients against servers it starts: DATABASE_URL (preloaded, node id 7),
NODE_UNSET_URL (preloaded, no node id) and NOT_PRELOADED_URL (installed, not preloaded).
Every check is an assert; a failed one exits non-zero.
"""

import json
import os
import time
from datetime import datetime, timezone

import psycopg
from psycopg import errors

NODE_ID = 7  # the test server's pg_snowflake.node_id (scripts/test/clients)
LARGEST = 9223372036854775807  # the last ID of the layout: 19 digits, i64::MAX
MESSAGES = {  # the errors of point 5, as the server words them
    "F0000": "pg_snowflake.node_id is not set",
    "55000": "pg_snowflake must be loaded via shared_preload_libraries",
}


def say(text):
    print(f"psycopg: {text}", flush=True)


# snippet: migrate
def migrate(conn):
    conn.execute("CREATE EXTENSION IF NOT EXISTS pg_snowflake")
    conn.execute(
        """CREATE TABLE IF NOT EXISTS orders (
               id   bigint PRIMARY KEY DEFAULT snowflake_nextval(),
               item text NOT NULL
           )"""
    )
    conn.commit()
# end snippet


def main():
    with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
        migrate(conn)
        say("1. table declared with DEFAULT snowflake_nextval()")

        # snippet: insert
        order_id = conn.execute(
            "INSERT INTO orders (item) VALUES (%s) RETURNING id", ("apple",)
        ).fetchone()[0]

        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO orders (item) VALUES (%s) RETURNING id",
                [(f"bulk {i}",) for i in range(5000)],
                returning=True,
            )
            bulk_ids = []
            while True:
                bulk_ids.append(cur.fetchone()[0])
                if not cur.nextset():
                    break
        conn.commit()
        # end snippet
        assert isinstance(order_id, int) and order_id > 0, order_id
        check_bulk(conn, bulk_ids)
        say(f"2. single insert returned {order_id}; 5,000 bulk IDs returned in order")

        # snippet: round-trip
        largest = conn.execute(
            "SELECT snowflake_max_from_timestamp('2093-09-06 15:47:35.551+00')"
        ).fetchone()[0]
        text = json.dumps({"id": largest})  # '{"id": 9223372036854775807}'
        back = json.loads(text)["id"]
        same, ts = conn.execute(
            "SELECT %s = snowflake_max_from_timestamp('2093-09-06 15:47:35.551+00'),"
            " snowflake_timestamp(%s)",
            (back, back),
        ).fetchone()
        # end snippet
        assert largest == LARGEST and len(str(largest)) == 19, largest
        assert text == '{"id": 9223372036854775807}', text
        assert back == LARGEST and isinstance(back, int), back
        assert same is True, same
        assert ts == datetime(2093, 9, 6, 15, 47, 35, 551000, tzinfo=timezone.utc), ts
        again = json.loads(json.dumps({"id": order_id}))["id"]
        found = conn.execute("SELECT item FROM orders WHERE id = %s", (again,)).fetchone()
        assert found == ("apple",), found
        say("3. 19 digits through the driver and json, both ways")

        seed_history(conn)  # 100,000 older rows: the table of an application that has run a while

        # snippet: decode
        ts, node_id, seq, ts_only = conn.execute(
            "SELECT d.ts, d.node_id, d.seq, snowflake_timestamp(o.id)"
            " FROM orders o, snowflake_decode(o.id) d WHERE o.id = %s",
            (order_id,),
        ).fetchone()

        last_hour = "SELECT id FROM orders WHERE id >= snowflake_from_timestamp(now() - interval '1 hour')"
        recent = [row[0] for row in conn.execute(last_hour)]
        plan = "\n".join(row[0] for row in conn.execute("EXPLAIN " + last_hour))
        # end snippet
        assert node_id == NODE_ID, node_id
        assert 0 <= seq < 4096, seq
        assert ts == ts_only, (ts, ts_only)
        assert abs(ts.timestamp() - time.time()) < 120, ts
        assert sorted(recent) == sorted([order_id, *bulk_ids]), len(recent)
        assert "orders_pkey" in plan and "Seq Scan" not in plan, plan
        say(f"4. decoded (node {node_id}, seq {seq}, {ts}); last hour by key: {plan.splitlines()[0]}")

    # snippet: errors
    for url, sqlstate in ((os.environ["NODE_UNSET_URL"], "F0000"),
                          (os.environ["NOT_PRELOADED_URL"], "55000")):
        with psycopg.connect(url) as conn:
            migrate(conn)
            try:
                conn.execute("INSERT INTO orders (item) VALUES ('pear')")
            except psycopg.Error as e:
                error = e
                conn.rollback()
            else:
                raise AssertionError("the insert worked")
        assert error.sqlstate == sqlstate, (error.sqlstate, str(error))
        assert error.diag.message_primary == MESSAGES[sqlstate], error.diag.message_primary
    # end snippet
        assert isinstance(error, {"F0000": errors.ConfigFileError,
                                  "55000": errors.ObjectNotInPrerequisiteState}[sqlstate])
        say(f"5. {sqlstate}: {error.diag.message_primary} ({type(error).__name__})")


def check_bulk(conn, ids):
    """5,000 IDs, positive, distinct, increasing, and each the ID of its own row."""
    assert len(ids) == 5000, len(ids)
    assert all(isinstance(i, int) and i > 0 for i in ids)
    assert len(set(ids)) == 5000
    assert ids == sorted(ids)
    items = dict(conn.execute("SELECT id, item FROM orders WHERE id = ANY(%s)", (ids,)))
    assert [items[i] for i in ids] == [f"bulk {n}" for n in range(5000)]


def seed_history(conn):
    """100,000 older rows (30 to 18 days ago), keyed by IDs of their own time; then ANALYZE."""
    conn.execute(
        "INSERT INTO orders (id, item) SELECT snowflake_from_timestamp(now() - interval '30 days'"
        " + g * interval '10 seconds'), 'old' FROM generate_series(0, 99999) g"
    )
    conn.execute("ANALYZE orders")
    conn.commit()


if __name__ == "__main__":
    main()
    say("all five points hold")
