"""The "default" project (work made without a user; only staff see it) exists from here on, so it is never made on
first need, where the first user to ask for the name became its admin. On a database where a user got there first:
their memberships of it go (each recorded in its activity), and a user's personal project that took the name is
renamed ("user-<id>") and a fresh "default" made."""
from django.db import migrations

DEFAULT = "default"


def forwards(apps, schema_editor):
    Project = apps.get_model("projects", "Project")
    Membership = apps.get_model("projects", "Membership")
    AuditEvent = apps.get_model("projects", "AuditEvent")
    project = Project.objects.filter(name=DEFAULT).first()
    if project is not None and project.personal_for_id is not None:
        name, n = f"user-{project.personal_for_id}", 1
        while Project.objects.filter(name=name).exists():
            n += 1
            name = f"user-{project.personal_for_id}-{n}"
        project.name = name
        project.save(update_fields=["name"])
        project = None
    if project is None:
        Project.objects.create(name=DEFAULT)
        return
    for membership in Membership.objects.filter(project=project).select_related("user"):
        AuditEvent.objects.create(project=project, actor=None, actor_name="system", action="project.member",
                                  target_type="project", target_id=project.pk,
                                  detail={"username": membership.user.username, "role": "removed",
                                          "reason": "the default project has no members (staff see it)"})
        membership.delete()
    if project.created_by_id is not None:
        project.created_by = None
        project.save(update_fields=["created_by"])


class Migration(migrations.Migration):
    dependencies = [("projects", "0002_everything_in_a_project")]
    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
