"""Every run gets a UUID naming its folder: $SEEDBED_HOME/runs/<uid>/ instead of runs/<id>/, so a second database
on the same $SEEDBED_HOME never finds another run's checkpoints in "its" folder. Existing folders are moved and
their checkpoints' recorded paths follow."""
import os
import uuid

from django.conf import settings
from django.db import migrations, models


def give_uids_and_move_folders(apps, schema_editor):
    Run = apps.get_model("runs", "Run")
    Checkpoint = apps.get_model("runs", "Checkpoint")
    base = os.path.realpath(str(settings.SEEDBED_RUNS_DIR))
    for run in Run.objects.filter(uid__isnull=True).only("pk"):
        run.uid = uuid.uuid4()
        run.save(update_fields=["uid"])
        old, new = os.path.join(base, str(run.pk)), os.path.join(base, str(run.uid))
        if os.path.isdir(old) and not os.path.exists(new):
            os.rename(old, new)
            for checkpoint in Checkpoint.objects.filter(run_id=run.pk):
                if checkpoint.path.startswith(old + os.sep):
                    checkpoint.path = new + checkpoint.path[len(old):]
                    checkpoint.save(update_fields=["path"])


def move_folders_back(apps, schema_editor):
    Run = apps.get_model("runs", "Run")
    Checkpoint = apps.get_model("runs", "Checkpoint")
    base = os.path.realpath(str(settings.SEEDBED_RUNS_DIR))
    for run in Run.objects.exclude(uid__isnull=True).only("pk", "uid"):
        new, old = os.path.join(base, str(run.uid)), os.path.join(base, str(run.pk))
        if os.path.isdir(new) and not os.path.exists(old):
            os.rename(new, old)
            for checkpoint in Checkpoint.objects.filter(run_id=run.pk):
                if checkpoint.path.startswith(new + os.sep):
                    checkpoint.path = old + checkpoint.path[len(new):]
                    checkpoint.save(update_fields=["path"])


class Migration(migrations.Migration):
    dependencies = [("runs", "0005_run_dispatch_state")]

    operations = [
        migrations.AddField(model_name="run", name="uid", field=models.UUIDField(null=True, editable=False)),
        migrations.RunPython(give_uids_and_move_folders, move_folders_back),
        migrations.AlterField(
            model_name="run", name="uid",
            field=models.UUIDField(default=uuid.uuid4, editable=False, unique=True,
                                   help_text="Names the run's folder ($SEEDBED_HOME/runs/<uid>): unlike the id, "
                                             "never reused by another database on the same $SEEDBED_HOME.")),
    ]
