"""Plain Django models, as a project has them before pg_snowflake: BigAutoField keys (an
identity column each), nothing of pg_snowflake in them. With pg_snowflake.adopt_new_keys on,
their migrations put every key on snowflake_nextval()."""

from django.db import models


class Customer(models.Model):
    name = models.TextField()


class Order(models.Model):
    customer = models.ForeignKey(Customer, on_delete=models.CASCADE)
    item = models.TextField()


class Invoice(models.Model):
    """Added by a later migration, with an integer key (AutoField): widened to bigint."""

    id = models.AutoField(primary_key=True)
    order = models.ForeignKey(Order, on_delete=models.CASCADE)
