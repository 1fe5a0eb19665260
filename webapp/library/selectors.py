"""Reads of the library (the judge verifier's endpoint provider)."""
from __future__ import annotations

from typing import Any, Callable

from django.db.models import Q

from training.verifiers.judge import JudgeEndpoint as Endpoint

from .models import JudgeEndpoint


def judge_endpoints(*, project_id: int | None = None) -> dict[str, Endpoint]:
    """Every registered judge endpoint, as the training core knows them (a small table, read each time); given
    ``project_id``, only those open to that project (``open_to``: the training process of a run sees no other)."""
    rows = JudgeEndpoint.objects.all() if project_id is None else open_to(project_id)
    return {row.name: Endpoint(name=row.name, base_url=row.base_url, model=row.model,
                               local_model_path=row.local_model_path, secret=row.secret)
            for row in rows}


def open_to(project_id: int):
    """The endpoints a project's runs may name: those limited to no project, and those limited to it."""
    return JudgeEndpoint.objects.filter(Q(projects=None) | Q(projects=project_id)).distinct()


def judge_problem(rewards, *, project) -> str:
    """"" when every judge endpoint the reward spec ``rewards`` names is open to ``project`` (or is not
    registered at all: the judge verifier's own check names that), else the message for the first one that is
    not, naming it and the project (never the projects it is open to: another project's name is not the
    user's to see)."""
    if not isinstance(rewards, list) or project is None:
        return ""  # not a list: the schema's own error
    names = sorted({item["params"]["endpoint"] for item in rewards
                    if isinstance(item, dict) and item.get("name") == "judge" and isinstance(item.get("params"), dict)
                    and isinstance(item["params"].get("endpoint"), str)})
    if not names:
        return ""
    registered = set(JudgeEndpoint.objects.filter(name__in=names).values_list("name", flat=True))
    allowed = set(open_to(project.pk).filter(name__in=names).values_list("name", flat=True))
    for name in names:
        if name in registered and name not in allowed:
            return (f"judge endpoint {name!r} is not open to project {project.name!r}: staff limit it to other "
                    "projects (ask them to add this one, or name another endpoint)")
    return ""


def model_entries(*, user):
    """The model library entries of the user's projects."""
    from webapp.projects.selectors import visible

    from .models import ModelEntry

    return visible(ModelEntry.objects.select_related("project", "created_by"), user)


def builtin_models() -> list[dict]:
    """The models every project can use: the built-in tiny model and SmolLM2-135M-Instruct, once made."""
    import os

    from training.config import default_tiny_model_dir
    from training.models import SMOLLM2, default_models_dir, describe_model, imported_ready
    from training.tiny import tiny_model_ready

    rows = []
    for key, name, path, ready in (
            ("tiny", "tiny (built-in)", default_tiny_model_dir(), tiny_model_ready),
            ("smollm2", "SmolLM2-135M-Instruct (built-in)", os.path.join(default_models_dir(), SMOLLM2),
             imported_ready)):
        if ready(path):
            # path: what a run config's model_path says (empty: the tiny model); folder: where it lies
            rows.append({"key": key, "name": name, "path": "" if key == "tiny" else path, "folder": path,
                         "description": describe_model(path)})
    return rows


def builtin_model(key: str) -> dict:
    """One built-in model (``builtin_models``' row) by its key; Http404 if there is no such model, or it is not
    made yet."""
    from django.http import Http404

    for row in builtin_models():
        if row["key"] == key:
            return row
    raise Http404(f"no built-in model {key!r} on this server (yet)")


def trials_of(*, user, entry=None, builtin: str = "", limit: int = 5):
    """The user's newest trials of a library entry (or of a built-in model), in the projects they may read."""
    from webapp.projects.selectors import visible

    from .models import ModelTrial

    trials = visible(ModelTrial.objects.filter(created_by=user), user)
    trials = trials.filter(entry=entry) if entry is not None else trials.filter(entry__isnull=True, builtin=builtin)
    return list(trials.order_by("-created_at", "-id")[:limit])


def get_trial(*, user, trial_id: int):
    """One of the user's own trials (another user's, even in a shared project, is 404: a prompt is private)."""
    from webapp.projects.selectors import get_visible

    from .models import ModelTrial

    return get_visible(ModelTrial.objects.filter(created_by=user).select_related("entry"), user, pk=trial_id)


#: What an app to the library's right shows on the model pages, registered from its ``AppConfig.ready`` (the runs
#: app: ``runs_using``, ``checkpoint_models``), so the library reads runs without importing them
#: (docs/architecture.md#layers). Without one registered, a section is empty.
_MODEL_SECTIONS: dict[str, Callable[..., Any]] = {}


def register_model_section(name: str, read: Callable[..., Any]) -> None:
    """``read(user=..., ...)`` fills the model pages' section ``name`` (``runs_using`` or ``checkpoint_models``)."""
    if name not in ("runs_using", "checkpoint_models"):
        raise ValueError(f"no model page section {name!r}")
    _MODEL_SECTIONS[name] = read


def runs_using(*, user, path: str, limit: int = 50):
    """The user's runs that started from the model folder ``path`` (their config's model_path), as the runs app
    reads them (``register_model_section``)."""
    read = _MODEL_SECTIONS.get("runs_using")
    return read(user=user, path=path, limit=limit) if read else []


def checkpoint_models(*, user, limit: int = 100) -> list[dict]:
    """Checkpoints of the user's runs, as models: {"checkpoint", "run", "base"} (base model -> run -> checkpoint,
    iterative RLVR lineage), as the runs app reads them (``register_model_section``)."""
    read = _MODEL_SECTIONS.get("checkpoint_models")
    return read(user=user, limit=limit) if read else []


def model_paths_for(*, user) -> list[tuple[str, str]]:
    """The model folders the run form suggests, each with its name: the built-in models (the tiny one's folder,
    where it lies in the allowed folders: its empty model_path cannot be picked) and the ready entries of the
    user's projects (``model_entries``: never another project's)."""
    from django.conf import settings

    from training.config import outside_roots

    paths = [(m["path"] or m["folder"], m["name"]) for m in builtin_models()
             if m["path"] or not outside_roots(m["folder"], settings.SEEDBED_DATA_ROOTS)]
    paths += [(e.path, f"{e.name} ({e.project.name})") for e in model_entries(user=user).filter(status="ready")]
    named: dict[str, str] = {}
    for path, name in paths:  # a folder once, by its first name
        named.setdefault(path, name)
    return list(named.items())
