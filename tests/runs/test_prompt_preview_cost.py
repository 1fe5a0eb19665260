"""The run page's prompt (GET /runs/<id>/prompt/) on a large dataset decodes one row of it, not the file: its rows
are counted without decoding them and only the row training draws first is read (training.data_files.count_rows,
row_at). Measured by the readers' own count of rows made Python (data_limits.DECODED) and by the request's CPU
time against decoding the file once, on a real 110 MB JSONL file; on a CSV file (whose quoted values span lines)
by the csv records parsed (DECODED["records"]): the header and the one row, the records found from the bytes."""
from __future__ import annotations

import json
import time

import pytest
from django.urls import reverse

from tests.conftest import logged_in, tiny_config
from training import data_files
from training.data import data_generator_seed, first_draw, load_file_dataset
from training.data_limits import DECODED, MAX_ROW_BYTES
from webapp.runs.services import run_create

pytestmark = [pytest.mark.django_db]

BOXED = {"answer_instruction": "Put your final answer within \\boxed{}."}
PAD = "lorem ipsum dolor sit amet " * 10


@pytest.fixture(scope="module")
def large_jsonl(tmp_path_factory) -> tuple[str, int]:
    """A 110 MB JSONL file of numbered questions (about 300,000 rows) and its row count."""
    path = tmp_path_factory.mktemp("large") / "large.jsonl"
    size = rows = 0
    with open(path, "w") as fh:
        while size < 110_000_000:
            line = json.dumps({"prompt": f"question {rows}: {PAD}", "answer": str(rows)}) + "\n"
            fh.write(line)
            size, rows = size + len(line), rows + 1
    return str(path), rows


def view(client, run) -> tuple[str, dict, float]:
    """The prompt section's HTML, the rows (and bytes) decoded meanwhile, the request's CPU seconds."""
    before, cpu = dict(DECODED), time.thread_time()  # the test client runs the view in this thread
    html = client.get(reverse("runs:prompt", args=[run.pk])).content.decode()
    return html, {k: DECODED[k] - before[k] for k in DECODED}, time.thread_time() - cpu


def test_a_view_of_a_large_datasets_prompt_decodes_one_row(user, tiny_model_dir, large_jsonl):
    path, rows = large_jsonl
    run = run_create(config=tiny_config(task="file", data_path=path, seed=3, **BOXED), user=user)
    client = logged_in(user)
    first = first_draw(rows, data_generator_seed(3))  # no held-out split: the row training draws first
    for _ in range(2):  # the first view counts the rows (bytes only); the next finds the count cached
        html, decoded, cpu = view(client, run)
        assert f"question {first}: lorem" in html, html[:2000]
        assert decoded["rows"] == 1 and decoded["bytes"] <= MAX_ROW_BYTES, decoded
    before, start = DECODED["rows"], time.thread_time()
    assert len(load_file_dataset(path)) == rows  # decoding the file once, as b1d04b3's view did twice
    full = time.thread_time() - start
    assert DECODED["rows"] - before == rows
    data_files._count.cache_clear(), data_files._jsonl_line.cache_clear()  # as a fresh web process finds them
    uncached = view(client, run)[2]
    assert uncached < full / 5, (uncached, full)


def test_a_view_of_a_parquet_datasets_prompt_decodes_one_row_of_its_row_group(user, tiny_model_dir, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = 20_000
    path = tmp_path / "many.parquet"
    pq.write_table(pa.table({"prompt": [f"question {i}: {PAD}" for i in range(n)], "answer": [str(i) for i in range(n)]}),
                   path, row_group_size=4096)
    run = run_create(config=tiny_config(task="file", data_path=str(path), seed=5, **BOXED), user=user)
    html, decoded, _ = view(logged_in(user), run)
    assert f"question {first_draw(n, data_generator_seed(5))}: lorem" in html, html[:2000]
    assert decoded["rows"] == 1, decoded


@pytest.fixture(scope="module")
def large_csv(tmp_path_factory) -> tuple[str, int]:
    """A 60 MB CSV file (about 170,000 rows) whose prompts hold a quoted line end and doubled quotes, and its
    row count: a newline count would find twice its rows."""
    import csv

    path = tmp_path_factory.mktemp("large") / "large.csv"
    size = rows = 0
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["prompt", "answer"])
        while size < 60_000_000:
            writer.writerow([f'question {rows}: "{PAD}"\r\n{PAD}', str(rows)])
            size, rows = size + 2 * len(PAD) + 40, rows + 1
    return str(path), rows


def test_a_view_of_a_large_csv_datasets_prompt_and_its_upload_check_parse_a_bounded_number_of_records(
        user, tiny_model_dir, large_csv):
    from training.data import check_file_dataset

    path, rows = large_csv
    run = run_create(config=tiny_config(task="file", data_path=path, seed=4, held_out_fraction=0.1, **BOXED),
                     user=user)
    data_files._count.cache_clear(), data_files._csv_record.cache_clear()  # as a fresh web process finds them
    html, decoded, _ = view(logged_in(user), run)
    assert "lorem" in html and "question " in html, html[:2000]
    assert decoded["rows"] == 1 and decoded["records"] == 2, decoded  # the header and that row
    data_files._count.cache_clear()
    before = dict(DECODED)
    assert check_file_dataset(path, max_rows=100) == rows  # an upload's check: 100 rows, the rest counted
    assert DECODED["records"] - before["records"] == 101, DECODED  # the header and 100 rows, none counted
