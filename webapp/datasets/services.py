"""Writes to a project's datasets: upload a file (streamed to disk with a size limit, then checked row by row as
training reads it), register a file already on the server, change the field mapping and the split, remove."""
from __future__ import annotations

import os
import re
import tempfile
import uuid

from django.conf import settings
from django.db import transaction

from training.data import (CHECKED_ROWS, DATA_SUFFIXES, MAPPED_FIELDS, MAX_DATASET_BYTES, DatasetError,
                           check_file_dataset, data_fields_error, file_rows, row_example)
from training.fields import FieldErrors
from training.names import child_path, path_component_error, require_path_component
from webapp.projects.models import Role
from webapp.projects.services import audit, project_for_launch, require_role
from webapp.projects.paths import allowed_path

from .models import DatasetEntry

NAME = re.compile(r"^\w[\w.-]{0,99}\Z")
PREVIEW_ROWS = 5
PREVIEW_CHARS = 300
# What a column is usually called, per thing Seedbed reads: the mapping a new dataset starts with.
USUAL_COLUMNS = {"prompt": ("prompt", "question", "problem", "input", "instruction", "query"),
                 "answer": ("answer", "solution", "final_answer", "output", "target", "label", "canonical_solution"),
                 "tests": ("tests", "test", "test_list", "test_code"), "entry_point": ("entry_point",),
                 "setup_code": ("setup_code",), "constraints": ("constraints", "instruction_id_list"),
                 "system_prompt": ("system_prompt", "system")}


def datasets_dir(project) -> str:
    """$SEEDBED_HOME/library/<project>/datasets: only the project's members may name its files in a config."""
    require_path_component(project.name, "project")
    return os.path.join(str(settings.SEEDBED_LIBRARY_DIR), project.name, "datasets")


def _check_name(name, project) -> str:
    name = name.strip() if isinstance(name, str) else ""
    if not NAME.match(name):
        raise FieldErrors({"name": "1-100 letters, digits, '.', '_' or '-', the first a letter or digit"})
    problem = path_component_error(name)  # an uploaded file's name starts with it
    if problem:
        raise FieldErrors({"name": problem})
    if DatasetEntry.objects.filter(project=project, name=name).exists():
        raise FieldErrors({"name": f"project {project.name} has a dataset named {name!r} already"})
    return name


def _shorten(value):
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= PREVIEW_CHARS else text[:PREVIEW_CHARS] + "…"


def inspect_file(path: str) -> tuple[list[str], list[dict]]:
    """The columns (in order of appearance in the first rows) and the first rows, values shortened."""
    columns: dict[str, None] = {}
    preview = []
    for i, (where, row) in enumerate(file_rows(path)):
        if not isinstance(row, dict):  # refused by the one row check, as training would refuse it
            row_example(where, row, "", "")
        columns.update(dict.fromkeys(map(str, row)))
        if len(preview) < PREVIEW_ROWS:
            preview.append({str(k): _shorten(v) for k, v in row.items()})
        if i + 1 >= 100:
            break
    if not preview:
        raise DatasetError(f"{os.path.basename(path)}: the dataset is empty")
    return list(columns), preview


def guess_mapping(columns: list[str]) -> dict:
    """{"prompt": column, "answer": column, other mapped fields...} from the usual column names."""
    found = {}
    for name, usual in USUAL_COLUMNS.items():
        column = next((c for c in usual if c in columns), None)
        if column is not None:
            found[name] = column
    return found


def _mapping(columns: list[str], prompt_field, answer_field, fields) -> tuple[str, str, dict]:
    guess = guess_mapping(columns)
    prompt_field = (prompt_field or "").strip() or guess.get("prompt", "")
    answer_field = guess.get("answer", "") if answer_field is None else answer_field.strip()
    if fields is None:
        fields = {k: v for k, v in guess.items() if k in MAPPED_FIELDS}
    fields = {k: v.strip() for k, v in fields.items() if isinstance(v, str) and v.strip()} \
        if isinstance(fields, dict) else fields
    errors = {}
    if not prompt_field:
        errors["prompt_field"] = f"which column holds the prompt? The rows have: {', '.join(columns)[:500]}"
    elif prompt_field not in columns:
        errors["prompt_field"] = f"no column {prompt_field!r}; the rows have: {', '.join(columns)[:500]}"
    if answer_field and answer_field not in columns:
        errors["answer_field"] = f"no column {answer_field!r}; the rows have: {', '.join(columns)[:500]}"
    problem = data_fields_error(fields)
    if problem:
        errors["fields"] = problem
    else:
        for name, column in fields.items():
            if column not in columns:
                errors[f"fields.{name}"] = f"no column {column!r}; the rows have: {', '.join(columns)[:500]}"
    if errors:
        raise FieldErrors(errors)
    return prompt_field, answer_field, fields


def _split(held_out_fraction, split_seed) -> tuple[float, int]:
    errors = {}
    try:
        fraction = float(held_out_fraction)
        if not 0.0 <= fraction <= 0.5:
            raise ValueError
    except (TypeError, ValueError):
        errors["held_out_fraction"] = f"a number from 0 to 0.5; got {held_out_fraction!r}"
    try:
        seed = int(split_seed)
        if not 0 <= seed <= 2**32 - 1:
            raise ValueError
    except (TypeError, ValueError):
        errors["split_seed"] = f"a whole number from 0 to {2**32 - 1}; got {split_seed!r}"
    if errors:
        raise FieldErrors(errors)
    return fraction, seed


def _checked(path: str, prompt_field, answer_field, fields) -> dict:
    """Columns, preview, mapping and row count of a file, checked as training reads it (first rows parsed)."""
    try:
        columns, preview = inspect_file(path)
        prompt_field, answer_field, fields = _mapping(columns, prompt_field, answer_field, fields)
        rows = check_file_dataset(path, prompt_field, answer_field, max_rows=CHECKED_ROWS, fields=fields)
    except DatasetError as exc:
        raise FieldErrors({"file": str(exc).removeprefix("data_path: ")}) from None
    return {"columns": columns, "preview": preview, "prompt_field": prompt_field, "answer_field": answer_field,
            "fields": fields, "rows": rows}


def _suffix(filename: str) -> str:
    suffix = os.path.splitext(filename or "")[1].lower()
    if suffix not in DATA_SUFFIXES:
        raise FieldErrors({"file": f"must be a {', '.join(DATA_SUFFIXES)} file; got {filename!r}"})
    return suffix


@transaction.atomic
def dataset_upload(*, user, name, upload, project=None, prompt_field=None, answer_field=None, fields=None,
                   held_out_fraction=0.1, split_seed=0) -> DatasetEntry:
    """Store an uploaded file (a Django UploadedFile, read in chunks) as ``dataset:<name>`` of ``project``. The
    size limit is checked before the file is copied, the rows before the entry exists; a refused upload leaves
    nothing behind."""
    project = project_for_launch(user=user, project=project)
    name = _check_name(name, project)
    if upload is None:
        raise FieldErrors({"file": "choose a .jsonl, .parquet or .csv file"})
    suffix = _suffix(upload.name)
    if upload.size > MAX_DATASET_BYTES:
        raise FieldErrors({"file": f"{upload.size:,} bytes; at most {MAX_DATASET_BYTES:,} (SEEDBED_MAX_DATASET_MB)"})
    fraction, seed = _split(held_out_fraction, split_seed)
    folder = datasets_dir(project)
    os.makedirs(folder, exist_ok=True)
    # a fresh file name: a removed entry's file stays for the runs whose configs name it
    final = child_path(folder, f"{name}-{uuid.uuid4().hex[:8]}{suffix}", "name")
    fd, partial = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=suffix)
    try:
        with os.fdopen(fd, "wb") as out:
            if not _moved(upload, partial):
                for chunk in upload.chunks():
                    out.write(chunk)
        try:
            checked = _checked(partial, prompt_field, answer_field, fields)
        except FieldErrors as exc:  # messages name the user's file, not where it waited
            raise FieldErrors({k: v.replace(partial, upload.name).replace(os.path.basename(partial), upload.name)
                               for k, v in exc.errors.items()}) from None
        os.replace(partial, final)  # the entry and its file appear together (the transaction below)
    except BaseException:
        if os.path.exists(partial):
            os.unlink(partial)
        raise
    try:
        entry = _create(project, user, name, final, DatasetEntry.Source.UPLOAD, upload.name, checked, fraction, seed)
    except BaseException:
        os.unlink(final)
        raise
    return entry


def _moved(upload, path: str) -> bool:
    """An upload streamed to a file on this disk ($SEEDBED_HOME/uploads, webapp.datasets.uploads) becomes ``path``
    by a rename, not a second copy; False when it is in memory or on another disk."""
    if not hasattr(upload, "temporary_file_path"):
        return False
    try:
        os.replace(upload.temporary_file_path(), path)
    except OSError:
        return False
    return True


def _create(project, user, name, path, source, original_name, checked, fraction, seed) -> DatasetEntry:
    entry = DatasetEntry.objects.create(
        project=project, name=name, path=path, source=source, original_name=(original_name or "")[:255],
        size_bytes=os.path.getsize(path), rows=checked["rows"], columns=checked["columns"],
        preview=checked["preview"], prompt_field=checked["prompt_field"], answer_field=checked["answer_field"],
        fields=checked["fields"], held_out_fraction=fraction, split_seed=seed, created_by=user)
    audit(project=project, user=user, action=f"dataset.{source}", target_type="dataset", target_id=entry.pk,
          name=name, rows=entry.rows)
    return entry


@transaction.atomic
def dataset_register(*, user, name, path, project=None, prompt_field=None, answer_field=None, fields=None,
                     held_out_fraction=0.1, split_seed=0) -> DatasetEntry:
    """Register a data file already on the server (inside the allowed folders, readable by the user) as it is."""
    project = project_for_launch(user=user, project=project)
    name = _check_name(name, project)
    path = allowed_path(user=user, value=path, field="path", missing="give the data file")
    _suffix(path)
    if not os.path.isfile(path):
        raise FieldErrors({"path": f"no such file: {path}"})
    fraction, seed = _split(held_out_fraction, split_seed)
    try:
        checked = _checked(path, prompt_field, answer_field, fields)
    except FieldErrors as exc:
        raise FieldErrors({("path" if k == "file" else k): v for k, v in exc.errors.items()}) from None
    return _create(project, user, name, os.path.realpath(path), DatasetEntry.Source.PATH, "", checked, fraction, seed)


@transaction.atomic
def dataset_update(*, user, entry: DatasetEntry, prompt_field, answer_field, fields, held_out_fraction,
                   split_seed) -> DatasetEntry:
    """Change how the columns map and the split. Runs already made keep what they were submitted with (their
    configs hold the mapping); new runs get the new one."""
    require_role(user, entry.project_id, Role.MEMBER)
    fraction, seed = _split(held_out_fraction, split_seed)
    prompt_field, answer_field, fields = _mapping(entry.columns, prompt_field, answer_field or "", fields or {})
    try:
        check_file_dataset(entry.path, prompt_field, answer_field, fields=fields)
    except DatasetError as exc:
        raise FieldErrors({"fields": str(exc).removeprefix("data_path: ")}) from None
    entry.prompt_field, entry.answer_field, entry.fields = prompt_field, answer_field, fields
    entry.held_out_fraction, entry.split_seed = fraction, seed
    entry.save(update_fields=["prompt_field", "answer_field", "fields", "held_out_fraction", "split_seed"])
    audit(project=entry.project_id, user=user, action="dataset.mapping", target_type="dataset", target_id=entry.pk,
          prompt_field=prompt_field, answer_field=answer_field, fields=fields, held_out_fraction=fraction,
          split_seed=seed)
    return entry


def dataset_delete(*, user, entry: DatasetEntry) -> None:
    """Remove the entry; an uploaded file goes to the runs that used it only through their configs, so it is
    kept (runs may resume from it): the operator prunes $SEEDBED_HOME/library by hand."""
    require_role(user, entry.project_id, Role.MEMBER)
    audit(project=entry.project_id, user=user, action="dataset.remove", target_type="dataset", target_id=entry.pk,
          name=entry.name)
    entry.delete()
