"""Metric export as CSV and JSONL (a run's, a sweep's): streamed, a long run is never held in memory whole."""
from __future__ import annotations

import csv
import io
import json
from typing import Iterable, Iterator

from django.http import Http404, StreamingHttpResponse

from . import selectors

FORMATS = {"csv": "text/csv; charset=utf-8", "jsonl": "application/x-ndjson"}


def _csv_lines(header: list[str], rows: Iterable[list]) -> Iterator[str]:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(header)
    for row in rows:
        writer.writerow(row)
        if buffer.tell() > 64_000:  # send in pieces of about 64 kB
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()


def export_response(*, runs: dict[int, int], fmt: str, filename: str) -> StreamingHttpResponse:
    """``runs``: run id -> seed. CSV: one row per run and step (run, seed, step, then every metric with a finite
    value as a column, empty where not logged or not finite); JSONL: ``{"run": id, "seed": s, "step": N, "metrics": {...}}`` a line, the JSONL
    event contract's shape (a non-finite value is null)."""
    if fmt not in FORMATS:
        raise Http404(f"no export as {fmt!r}: csv or jsonl")
    ids = sorted(runs)
    steps = selectors.metric_steps(run_ids=ids)
    if fmt == "csv":
        keys = selectors.metric_keys(run_ids=ids)
        rows = ([run_id, runs[run_id], step, *("" if values.get(k) is None else values[k] for k in keys)]
                for run_id, step, values in steps)
        body = _csv_lines(["run", "seed", "step", *keys], rows)
    else:
        body = (json.dumps({"run": run_id, "seed": runs[run_id], "step": step, "metrics": values}) + "\n"
                for run_id, step, values in steps)
    response = StreamingHttpResponse(body, content_type=FORMATS[fmt])
    response["Content-Disposition"] = f'attachment; filename="{filename}.{fmt}"'
    return response
