"""/api/v1/datasets: upload or register a dataset, list and read them, change a dataset's column mapping
(docs/architecture.md#projects-and-trust: every file is checked before it is kept)."""
from __future__ import annotations

import functools
from typing import Optional

from ninja import File, Form, Query, Schema, Status, UploadedFile
from ninja.decorators import decorate_view
from pydantic import Field

from webapp.api import selectors
from webapp.api.endpoints.launches import launch_project
from webapp.api.v1 import api
from webapp.datasets import selectors as dataset_selectors
from webapp.datasets import services as dataset_services
from webapp.datasets.models import DatasetEntry
from webapp.datasets.uploads import DatasetUpload
from webapp.projects import selectors as project_selectors


class DatasetPathIn(Schema):
    name: str = Field(max_length=100)
    path: str = Field(max_length=1000, description="A data file on the server, inside the allowed folders.")
    project: Optional[str] = Field(None, max_length=150)
    prompt_field: Optional[str] = Field(None, max_length=200, description="Blank: guessed from the columns.")
    answer_field: Optional[str] = Field(None, max_length=200)
    fields: Optional[dict[str, str]] = Field(None, description="tests, entry_point, setup_code, constraints, "
                                                               "system_prompt: the columns holding them")
    held_out_fraction: float = 0.1
    split_seed: int = 0


class DatasetMappingIn(Schema):
    prompt_field: str = Field(max_length=200)
    answer_field: str = Field("", max_length=200)
    fields: dict[str, str] = Field(default_factory=dict)
    held_out_fraction: float = 0.1
    split_seed: int = 0


def _dataset(request, dataset_id: int) -> DatasetEntry:
    return project_selectors.get_visible(DatasetEntry.objects.select_related("project"), request.user, pk=dataset_id)


@api.get("/datasets", tags=["datasets"])
def datasets_list(request, project: Optional[str] = Query(None, max_length=150)):
    entries = dataset_selectors.dataset_entries(user=request.user)
    if project is not None:
        entries = entries.filter(project__name=project)
    return {"datasets": [selectors.dataset_summary(e) for e in entries]}


# (declared before /datasets/{dataset_id}: the first route whose path matches answers)
@api.post("/datasets/register", response={201: dict}, tags=["datasets"])
def datasets_register(request, payload: DatasetPathIn):
    """Register a data file already on the server (inside the allowed folders)."""
    entry = dataset_services.dataset_register(
        user=request.user, project=launch_project(request, payload.project), name=payload.name, path=payload.path,
        prompt_field=payload.prompt_field, answer_field=payload.answer_field, fields=payload.fields,
        held_out_fraction=payload.held_out_fraction, split_seed=payload.split_seed)
    return Status(201, selectors.dataset_summary(entry))


@api.get("/datasets/{dataset_id}", tags=["datasets"])
def datasets_get(request, dataset_id: int):
    """A dataset: its file, columns, first rows, mapping and split (what ``task: dataset:<name>`` stands for)."""
    return selectors.dataset_detail(_dataset(request, dataset_id))


def _streamed_dataset(run):
    """Before ninja reads the form: the file streams into $SEEDBED_HOME/uploads and stops at the size limit
    (webapp.datasets.uploads); a file stopped there is answered as the field error it is."""
    @functools.wraps(run)
    def with_handler(request, *args, **kwargs):
        handler = DatasetUpload(request)
        request.upload_handlers = [handler]
        response = run(request, *args, **kwargs)
        if handler.too_large:
            return api.create_response(request, {"errors": {"file": handler.message}}, status=400)
        return response
    return with_handler


@api.post("/datasets", response={201: dict}, tags=["datasets"])
@decorate_view(_streamed_dataset)
def datasets_upload(request, file: UploadedFile = File(...), name: str = Form(..., max_length=100),
                    project: Optional[str] = Form(None, max_length=150),
                    prompt_field: Optional[str] = Form(None, max_length=200),
                    answer_field: Optional[str] = Form(None, max_length=200),
                    held_out_fraction: float = Form(0.1), split_seed: int = Form(0)):
    """Upload a .jsonl, .parquet or .csv file (multipart/form-data): checked row by row before it is kept."""
    entry = dataset_services.dataset_upload(
        user=request.user, project=launch_project(request, project), name=name, upload=file,
        prompt_field=prompt_field or None, answer_field=answer_field, held_out_fraction=held_out_fraction,
        split_seed=split_seed)
    return Status(201, selectors.dataset_summary(entry))


@api.post("/datasets/{dataset_id}/mapping", tags=["datasets"])
def datasets_mapping(request, dataset_id: int, payload: DatasetMappingIn):
    """Change the column mapping and the split (new runs only: runs made before keep theirs)."""
    entry = dataset_services.dataset_update(
        user=request.user, entry=_dataset(request, dataset_id), prompt_field=payload.prompt_field,
        answer_field=payload.answer_field, fields=payload.fields, held_out_fraction=payload.held_out_fraction,
        split_seed=payload.split_seed)
    return selectors.dataset_detail(entry)
