"""pg_snowflake with Django: the recipe of docs/CLIENTS.md#django, and its test.

Run by scripts/test/clients against servers it starts: DATABASE_URL (preloaded, node id 7),
NODE_UNSET_URL (preloaded, no node id) and NOT_PRELOADED_URL (installed, not preloaded), the
databases "default", "node_unset" and "not_preloaded" of settings.py. Every check is an assert;
a failed one exits non-zero.
"""

import os
import sys
import time
from datetime import datetime, timedelta, timezone

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "settings")

import django  # noqa: E402

django.setup()

from django.core import serializers  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import DatabaseError, connection, models  # noqa: E402
from django.db.models.functions import Now  # noqa: E402

from orders.models import Order  # noqa: E402

NODE_ID = 7  # the test server's pg_snowflake.node_id (scripts/test/clients)
LARGEST = 9223372036854775807  # the last ID of the layout: 19 digits, i64::MAX
MESSAGES = {  # the errors of point 5, as the server words them
    "F0000": "pg_snowflake.node_id is not set",
    "55000": "pg_snowflake must be loaded via shared_preload_libraries",
}


def say(words):
    print(f"django: {words}", flush=True)


# snippet: functions
class SnowflakeFunc(models.Func):
    """snowflake_timestamp(id), snowflake_node_id(id), ...: the decoders as ORM expressions."""

    def __init__(self, function, expression, output_field):
        super().__init__(expression, function=function, output_field=output_field)


def made_since(instant):
    """The smallest ID made at `instant` or later: the lower bound of a key range."""
    return SnowflakeFunc("snowflake_from_timestamp", instant, models.BigIntegerField())
# end snippet


def main():
    call_command("migrate", verbosity=0)
    with connection.cursor() as cursor:
        cursor.execute("SELECT column_default FROM information_schema.columns"
                       " WHERE table_name = 'orders' AND column_name = 'id'")
        assert cursor.fetchone() == ("snowflake_nextval()",)
    say("1. migration made orders.id bigint DEFAULT snowflake_nextval()")

    # snippet: insert
    order = Order(item="apple")
    order.save()  # INSERT ... RETURNING "orders"."id": order.id is set

    bulk = Order.objects.bulk_create(Order(item=f"bulk {i}") for i in range(5000))
    # end snippet
    bulk_ids = [o.id for o in bulk]
    assert isinstance(order.id, int) and order.id > 0, order.id
    check_bulk(bulk_ids)
    say(f"2. save() returned {order.id}; bulk_create 5,000 IDs, in order")

    # snippet: round-trip
    text = serializers.serialize("json", [Order(id=LARGEST, item="far")])
    back = next(serializers.deserialize("json", text)).object.id
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT %s = snowflake_max_from_timestamp('2093-09-06 15:47:35.551+00'),"
            " snowflake_max_from_timestamp('2093-09-06 15:47:35.551+00')",
            [back],
        )
        same, largest = cursor.fetchone()
    # end snippet
    assert '"pk": 9223372036854775807' in text, text
    assert back == LARGEST and largest == LARGEST and same is True, (back, largest, same)
    assert len(str(largest)) == 19
    again = next(serializers.deserialize("json", serializers.serialize("json", [order]))).object
    assert Order.objects.get(id=again.id).item == "apple"
    say("3. 19 digits through the driver and Django's JSON serializer, both ways")

    seed_history()  # 100,000 older rows: the table of an application that has run a while

    # snippet: decode
    decoded = Order.objects.annotate(
        ts=SnowflakeFunc("snowflake_timestamp", "id", models.DateTimeField()),
        node=SnowflakeFunc("snowflake_node_id", "id", models.IntegerField()),
        seq=SnowflakeFunc("snowflake_seq", "id", models.IntegerField()),
    ).get(id=order.id)

    hour_ago = models.ExpressionWrapper(
        Now() - timedelta(hours=1), output_field=models.DateTimeField()
    )
    last_hour = Order.objects.filter(id__gte=made_since(hour_ago))
    recent = list(last_hour.values_list("id", flat=True))
    plan = last_hour.explain()
    # end snippet
    assert decoded.node == NODE_ID, decoded.node
    assert 0 <= decoded.seq < 4096, decoded.seq
    assert abs(decoded.ts.timestamp() - time.time()) < 120, decoded.ts
    assert decoded.ts.tzinfo is not None and decoded.ts <= datetime.now(timezone.utc)
    assert sorted(recent) == sorted([order.id, *bulk_ids]), len(recent)
    assert "orders_pkey" in plan and "Seq Scan" not in plan, plan
    say(f"4. decoded (node {decoded.node}, seq {decoded.seq}, {decoded.ts}); last hour by key: {plan.splitlines()[0]}")

    # snippet: errors
    for alias, sqlstate in (("node_unset", "F0000"), ("not_preloaded", "55000")):
        call_command("migrate", database=alias, verbosity=0)
        try:
            Order.objects.using(alias).create(item="pear")
        except DatabaseError as e:
            error = e
        else:
            raise AssertionError("the insert worked")
        assert error.__cause__.sqlstate == sqlstate, (error.__cause__.sqlstate, str(error))
        assert error.__cause__.diag.message_primary == MESSAGES[sqlstate], str(error)
    # end snippet
        say(f"5. {sqlstate}: {MESSAGES[sqlstate]} ({type(error).__name__})")


def check_bulk(ids):
    """5,000 IDs, positive, distinct, increasing, and each the ID of its own row."""
    assert len(ids) == 5000, len(ids)
    assert all(isinstance(i, int) and i > 0 for i in ids)
    assert len(set(ids)) == 5000
    assert ids == sorted(ids)
    items = dict(Order.objects.filter(id__in=ids).values_list("id", "item"))
    assert [items[i] for i in ids] == [f"bulk {n}" for n in range(5000)]


def seed_history():
    """100,000 older rows (30 to 18 days ago), keyed by IDs of their own time; then ANALYZE."""
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO orders (id, item) SELECT snowflake_from_timestamp(now() - interval '30 days'"
            " + g * interval '10 seconds'), 'old' FROM generate_series(0, 99999) g"
        )
        cursor.execute("ANALYZE orders")


if __name__ == "__main__":
    main()
    say("all five points hold")
