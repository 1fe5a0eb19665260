"""API tokens get a scope and an expiry. Every token made before keeps what it could do: scope read-write, and no
expiry (expires_at empty); new tokens choose both when they are made."""
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('api', '0003_idempotency_key_to_projects'),
    ]

    operations = [
        migrations.AddField(
            model_name='apitoken',
            name='scope',
            field=models.CharField(choices=[('read', 'read (GET only)'), ('read-write', 'read-write')],
                                   default='read-write', help_text='read: GET only; read-write: everything its user may do.',
                                   max_length=16),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name='apitoken',
            name='expires_at',
            field=models.DateTimeField(blank=True, help_text='Refused from then on; empty: never expires.', null=True),
        ),
        migrations.AddConstraint(
            model_name='apitoken',
            constraint=models.CheckConstraint(condition=models.Q(('scope__in', ['read', 'read-write'])),
                                              name='api_token_scope_known'),
        ),
    ]
