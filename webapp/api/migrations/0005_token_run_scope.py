"""API tokens get a third scope, run: bound to one run (a nullable foreign key, set exactly when the scope is run,
a check constraint), it may only append that run's metrics and samples and read it. Existing tokens keep their
scope and have no run."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('api', '0004_token_scope_expiry'),
        ('runs', '0020_disk_budgets'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='apitoken',
            name='api_token_scope_known',
        ),
        migrations.AddField(
            model_name='apitoken',
            name='run',
            field=models.ForeignKey(blank=True, help_text='The one run a run-scoped token may log to (set exactly for scope run).', null=True, on_delete=django.db.models.deletion.CASCADE, related_name='api_tokens', to='runs.run'),
        ),
        migrations.AlterField(
            model_name='apitoken',
            name='scope',
            field=models.CharField(choices=[('read', 'read (GET only)'), ('read-write', 'read-write'), ('run', 'one run (append its metrics and samples, read it)')], help_text="read: GET only; read-write: everything its user may do; run: one run's metrics and samples appended, that run read.", max_length=16),
        ),
        migrations.AddConstraint(
            model_name='apitoken',
            constraint=models.CheckConstraint(condition=models.Q(('scope__in', ['read', 'read-write', 'run'])), name='api_token_scope_known'),
        ),
        migrations.AddConstraint(
            model_name='apitoken',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('run__isnull', False), ('scope', 'run')), models.Q(models.Q(('scope', 'run'), _negated=True), ('run__isnull', True)), _connector='OR'), name='api_token_run_iff_run_scope'),
        ),
    ]
