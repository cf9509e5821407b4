# Made by Django 5.2.19's makemigrations; CreateExtension added by hand, first.
# snippet: migration

import orders.models
from django.contrib.postgres.operations import CreateExtension
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
    ]

    operations = [
        CreateExtension("pg_snowflake"),
        migrations.CreateModel(
            name='Order',
            fields=[
                ('id', orders.models.SnowflakeField(primary_key=True, serialize=False)),
                ('item', models.TextField()),
            ],
            options={
                'db_table': 'orders',
            },
        ),
    ]
# end snippet
