"""Projects arrive: every user gets a personal project (admin of it), and every existing run, sweep and
evaluation goes to its creator's personal project (sweeps' runs to their sweep's; work without a creator to
the "default" project, which only staff see)."""
from django.conf import settings
from django.db import migrations


def _personal(apps, user, cache):
    Project = apps.get_model("projects", "Project")
    Membership = apps.get_model("projects", "Membership")
    if user.pk in cache:
        return cache[user.pk]
    project = Project.objects.filter(personal_for_id=user.pk).first()
    if project is None:
        name, n = user.username, 1
        while Project.objects.filter(name=name).exists():
            n += 1
            name = f"{user.username}-{n}"
        project = Project.objects.create(name=name, personal_for_id=user.pk, created_by_id=user.pk)
    Membership.objects.get_or_create(project=project, user_id=user.pk, defaults={"role": "admin"})
    cache[user.pk] = project
    return project


def forwards(apps, schema_editor):
    User = apps.get_model(*settings.AUTH_USER_MODEL.split("."))
    Project = apps.get_model("projects", "Project")
    cache = {}
    for user in User.objects.all():
        _personal(apps, user, cache)
    default = None

    def owner(created_by_id):
        nonlocal default
        if created_by_id is not None and created_by_id in cache:
            return cache[created_by_id]
        if default is None:
            default, _ = Project.objects.get_or_create(name="default")
        return default

    Sweep = apps.get_model("sweeps", "Sweep")
    Run = apps.get_model("runs", "Run")
    EvalJob = apps.get_model("evals", "EvalJob")
    for sweep in Sweep.objects.filter(project__isnull=True):
        sweep.project = owner(sweep.created_by_id)
        sweep.save(update_fields=["project"])
        Run.objects.filter(sweep=sweep).update(project=sweep.project)
    for run in Run.objects.filter(project__isnull=True):
        run.project = owner(run.created_by_id)
        run.save(update_fields=["project"])
    for job in EvalJob.objects.filter(project__isnull=True).select_related("run", "sweep"):
        origin = job.run or job.sweep
        job.project_id = origin.project_id if origin is not None else owner(job.created_by_id).pk
        job.save(update_fields=["project"])


class Migration(migrations.Migration):
    dependencies = [
        ("projects", "0001_initial"),
        ("runs", "0003_run_project"),
        ("sweeps", "0005_sweep_project"),
        ("evals", "0003_evaljob_project"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]
    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
