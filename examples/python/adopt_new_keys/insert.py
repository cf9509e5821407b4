"""Inserts through the ORM after `manage.py migrate`, and prints the ids Django read back, one
JSON object: run by pgrx-tests/tests/adopt_new_keys_orms.rs, which checks them in the server."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "settings")

import django  # noqa: E402

django.setup()

from shop.models import Customer, Invoice, Order  # noqa: E402

customer = Customer.objects.create(name="Ada")  # INSERT … RETURNING "shop_customer"."id"
order = Order.objects.create(customer=customer, item="apple")
invoice = Invoice(order=order)
invoice.save()
bulk = Order.objects.bulk_create(Order(customer=customer, item=f"bulk {i}") for i in range(3))
print(json.dumps({
    "customer": customer.id,
    "order": order.id,
    "invoice": invoice.id,
    "bulk": [o.id for o in bulk],
}))
