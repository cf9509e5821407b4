"""pg_snowflake with the SQLAlchemy 2 ORM (psycopg 3 underneath): the recipe of
docs/CLIENTS.md#sqlalchemy-2-orm, and its test.

Run by scripts/test/clients against servers it starts: DATABASE_URL (preloaded, node id 7),
NODE_UNSET_URL (preloaded, no node id) and NOT_PRELOADED_URL (installed, not preloaded).
Every check is an assert; a failed one exits non-zero.
"""

import json
import os
import time
from datetime import datetime, timedelta, timezone

from sqlalchemy import DDL, BigInteger, create_engine, event, exc, func, select, text, true
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

NODE_ID = 7  # the test server's pg_snowflake.node_id (scripts/test/clients)
LARGEST = 9223372036854775807  # the last ID of the layout: 19 digits, i64::MAX
MESSAGES = {  # the errors of point 5, as the server words them
    "F0000": "pg_snowflake.node_id is not set",
    "55000": "pg_snowflake must be loaded via shared_preload_libraries",
}


def say(words):
    print(f"sqlalchemy: {words}", flush=True)


# snippet: model
class Base(DeclarativeBase):
    pass


class Order(Base):
    __tablename__ = "orders"
    # monotonic=True: the IDs rise in insertion order, so SQLAlchemy can match a multi-row
    # INSERT's RETURNING rows to their objects by sorting them (insertmanyvalues)
    id: Mapped[int] = mapped_column(
        BigInteger, primary_key=True, server_default=func.snowflake_nextval(monotonic=True)
    )
    item: Mapped[str]


event.listen(
    Base.metadata, "before_create", DDL("CREATE EXTENSION IF NOT EXISTS pg_snowflake")
)


def engine_for(url):  # postgresql://... from the environment; the psycopg 3 dialect
    return create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
# end snippet


def main():
    engine = engine_for(os.environ["DATABASE_URL"])
    Base.metadata.create_all(engine)
    inserts = []
    event.listen(engine, "before_cursor_execute",
                 lambda conn, cur, statement, *rest: inserts.append(statement)
                 if statement.startswith("INSERT") else None)
    with engine.connect() as conn:
        default = conn.scalar(text(
            "SELECT column_default FROM information_schema.columns"
            " WHERE table_name = 'orders' AND column_name = 'id'"))
    assert default == "snowflake_nextval()", default
    say("1. model declared with server_default=snowflake_nextval(); create_all made it")

    with Session(engine) as session:
        # snippet: insert
        order = Order(item="apple")
        session.add(order)
        session.flush()  # INSERT ... RETURNING orders.id: order.id is set

        bulk = [Order(item=f"bulk {i}") for i in range(5000)]
        session.add_all(bulk)
        session.flush()  # insertmanyvalues: a few multi-row INSERT ... RETURNING
        session.commit()
        # end snippet
        bulk_ids = [o.id for o in bulk]
        assert isinstance(order.id, int) and order.id > 0, order.id
        check_bulk(session, bulk_ids)
        # One statement for the single row, then batches of 1000 rows (insertmanyvalues).
        assert len(inserts) == 6, len(inserts)
        say(f"2. single insert returned {order.id}; 5,000 bulk IDs in {len(inserts) - 1} statements, in order")

        # snippet: round-trip
        end = func.snowflake_max_from_timestamp(datetime(2093, 9, 6, 15, 47, 35, 551000, timezone.utc))
        largest = session.scalar(select(end))
        text_ = json.dumps({"id": largest})  # '{"id": 9223372036854775807}'
        back = json.loads(text_)["id"]
        same = session.scalar(select(end == back))
        # end snippet
        assert largest == LARGEST and len(str(largest)) == 19, largest
        assert text_ == '{"id": 9223372036854775807}', text_
        assert back == LARGEST and same is True, (back, same)
        again = json.loads(json.dumps({"id": order.id}))["id"]
        assert session.get(Order, again).item == "apple"
        say("3. 19 digits through the driver and json, both ways")

        seed_history(session)  # 100,000 older rows: the table of an application that has run a while

        # snippet: decode
        d = func.snowflake_decode(Order.id).table_valued("ts", "node_id", "seq")
        ts, node_id, seq, ts_only = session.execute(
            select(d.c.ts, d.c.node_id, d.c.seq, func.snowflake_timestamp(Order.id))
            .join(d, true())
            .where(Order.id == order.id)
        ).one()

        since = func.snowflake_from_timestamp(func.now() - timedelta(hours=1))
        last_hour = select(Order.id).where(Order.id >= since)
        recent = session.scalars(last_hour).all()
        compiled = last_hour.compile(engine)
        plan = session.connection().exec_driver_sql(f"EXPLAIN {compiled}", compiled.params)
        plan = "\n".join(row[0] for row in plan)
        # end snippet
        assert node_id == NODE_ID, node_id
        assert 0 <= seq < 4096, seq
        assert ts == ts_only, (ts, ts_only)
        assert abs(ts.timestamp() - time.time()) < 120, ts
        assert sorted(recent) == sorted([order.id, *bulk_ids]), len(recent)
        assert "orders_pkey" in plan and "Seq Scan" not in plan, plan
        say(f"4. decoded (node {node_id}, seq {seq}, {ts}); last hour by key: {plan.splitlines()[0]}")

    # snippet: errors
    for url, sqlstate in ((os.environ["NODE_UNSET_URL"], "F0000"),
                          (os.environ["NOT_PRELOADED_URL"], "55000")):
        other = engine_for(url)
        Base.metadata.create_all(other)
        with Session(other) as session:
            session.add(Order(item="pear"))
            try:
                session.commit()
            except exc.DBAPIError as e:
                error = e
            else:
                raise AssertionError("the insert worked")
        assert error.orig.sqlstate == sqlstate, (error.orig.sqlstate, str(error))
        assert error.orig.diag.message_primary == MESSAGES[sqlstate], str(error)
        other.dispose()
    # end snippet
        say(f"5. {sqlstate}: {MESSAGES[sqlstate]} ({type(error).__name__})")


def check_bulk(session, ids):
    """5,000 IDs, positive, distinct, increasing, and each the ID of its own row."""
    assert len(ids) == 5000, len(ids)
    assert all(isinstance(i, int) and i > 0 for i in ids)
    assert len(set(ids)) == 5000
    assert ids == sorted(ids)
    items = dict(session.execute(select(Order.id, Order.item).where(Order.id.in_(ids))).all())
    assert [items[i] for i in ids] == [f"bulk {n}" for n in range(5000)]


def seed_history(session):
    """100,000 older rows (30 to 18 days ago), keyed by IDs of their own time; then ANALYZE."""
    session.execute(text(
        "INSERT INTO orders (id, item) SELECT snowflake_from_timestamp(now() - interval '30 days'"
        " + g * interval '10 seconds'), 'old' FROM generate_series(0, 99999) g"
    ))
    session.execute(text("ANALYZE orders"))
    session.commit()


if __name__ == "__main__":
    main()
    say("all five points hold")
