"""IdempotencyKey moves to the projects app (below every app that takes a launch); only Django's state changes:
the table stays api_idempotencykey (projects 0004 takes the model over with that db_table)."""
from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('api', '0002_idempotency_key'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name='IdempotencyKey')],
            database_operations=[],
        ),
    ]
