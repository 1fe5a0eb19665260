"""What members write on runs besides their status: names, notes, tags, and archiving
(docs/architecture.md#a-runs-life)."""
from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from training.fields import FieldErrors, control_character_error
from webapp.projects.models import Role
from webapp.projects.services import audit, require_role
from webapp.runs.models import Run

from .transitions import TransitionError, locked_run


TAG_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.:/+")
MAX_TAGS, MAX_TAG, MAX_NOTES, MAX_NAME = 20, 40, 10_000, 200


def parse_tags(text: str) -> list[str]:
    """Tags from "baseline, lr-sweep  v2" (commas or spaces), each once, in order; raises FieldErrors naming what
    is wrong.

    >>> parse_tags("baseline, lr-sweep  baseline v2")
    ['baseline', 'lr-sweep', 'v2']
    """
    tags = []
    for tag in text.replace(",", " ").split():
        if len(tag) > MAX_TAG or not set(tag) <= TAG_CHARS:
            raise FieldErrors({"tags": f"a tag is 1 to {MAX_TAG} letters, digits or _-.:/+; got {tag[:50]!r}"})
        if tag not in tags:
            tags.append(tag)
    if len(tags) > MAX_TAGS:
        raise FieldErrors({"tags": f"at most {MAX_TAGS} tags; got {len(tags)}"})
    return tags


@transaction.atomic
def run_annotate(*, run_ids: list[int], user=None, name: str | None = None, notes: str | None = None,
                 tags: list[str] | None = None, add_tags: list[str] | None = None) -> list[Run]:
    """Rename, note or tag runs (``add_tags``: added to each run's own, for a bulk action), for ``user`` (a member
    of each run's project). Every value is checked before anything is written; raises FieldErrors."""
    errors = {}
    if name is not None and len(name) > MAX_NAME:
        errors["name"] = f"at most {MAX_NAME} characters; got {len(name)}"
    elif name is not None and control_character_error(name):
        errors["name"] = control_character_error(name)
    if notes is not None and len(notes) > MAX_NOTES:
        errors["notes"] = f"at most {MAX_NOTES} characters; got {len(notes)}"
    if errors:
        raise FieldErrors(errors)
    runs = [locked_run(run_id) for run_id in run_ids]
    for run in runs:
        if user is not None:
            require_role(user, run.project_id, Role.MEMBER)
    for run in runs:
        changed = {}
        if name is not None and name.strip() != run.name:
            changed["name"] = run.name = name.strip()
        if notes is not None and notes != run.notes:
            run.notes = notes
            changed["notes"] = f"{len(notes)} characters"
        new_tags = tags if tags is not None else run.tags + [t for t in add_tags or [] if t not in run.tags]
        if new_tags != run.tags:
            if len(new_tags) > MAX_TAGS:
                raise FieldErrors({"tags": f"run {run.pk} would have {len(new_tags)} tags; at most {MAX_TAGS}"})
            changed["tags"] = run.tags = new_tags
        if changed:
            run.save(update_fields=["name", "notes", "tags"])
            audit(project=run.project_id, user=user, action="run.annotate", target_type="run", target_id=run.pk,
                  **changed)
    return runs


@transaction.atomic
def run_archive(*, run_ids: list[int], user=None, archived: bool = True) -> int:
    """Archive runs (hidden from the runs list, kept whole) or bring them back; an archived run must have ended.
    Returns how many changed."""
    changed = 0
    for run_id in run_ids:
        run = locked_run(run_id)
        if user is not None:
            require_role(user, run.project_id, Role.MEMBER)
        if archived and not run.is_ended:
            raise TransitionError(f"run {run.pk} is {run.status}; only a run that has ended can be archived")
        if (run.archived_at is not None) != archived:
            run.archived_at = timezone.now() if archived else None
            run.save(update_fields=["archived_at"])
            audit(project=run.project_id, user=user, action="run.archive" if archived else "run.unarchive",
                  target_type="run", target_id=run.pk)
            changed += 1
    return changed
