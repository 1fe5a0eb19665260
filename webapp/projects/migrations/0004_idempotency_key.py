"""IdempotencyKey, moved here from the api app: only Django's state changes, the table api_idempotencykey (made by
api 0002) is kept as it is, rows, index and constraint included."""
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('projects', '0003_default_project'),
        ('api', '0003_idempotency_key_to_projects'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='IdempotencyKey',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('key', models.CharField(max_length=210)),
                        ('request_hash', models.CharField(help_text='SHA-256 of the method, path and body it came with.', max_length=64)),
                        ('response_status', models.PositiveSmallIntegerField(blank=True, null=True)),
                        ('response_body', models.JSONField(blank=True, null=True)),
                        ('created_at', models.DateTimeField(auto_now_add=True, db_index=True)),
                        ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='idempotency_keys', to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        'db_table': 'api_idempotencykey',
                        'constraints': [models.UniqueConstraint(fields=('user', 'key'), name='idempotency_key_once_per_user')],
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
