"""Decompression bombs: small files that decode to a lot. A 1.2 kB Parquet file holding one 16 MiB string in a
dictionary referenced by 64 rows (zstd) grew a process by about 2.6 GB on b1d04b3 and was accepted; 16 such values
plain-encoded (8.5 kB, one 256 MiB page) by about 780 MB; a JSONL file of one 64 MB line by 183 MB (the line, its
text and its value at once). Now the upload refuses each with a field error naming the limit (training.data_limits:
1 MiB per value, 4 MiB per line, 64 MiB per batch), and a worker's read of the same file refuses it the same way,
in bounded memory: peak RSS growth measured in a fresh process for each read."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils.html import escape

from tests.conftest import REPO, logged_in
from webapp.datasets.models import DatasetEntry

pytestmark = [pytest.mark.django_db]

MIB = 1024 * 1024
VALUE = 16 * MIB
VALUE_ERROR = "row 1: field 'prompt' is 16,777,216 bytes, over the 1 MiB limit per value (SEEDBED_MAX_VALUE_MB)"
PLAIN_ERROR = ("column 'prompt' (row group 1) decompresses to 268,435,",  # from 8.5 kB: one 256 MiB page
               "over 100 times and over the 64 MiB limit per batch (64 x SEEDBED_MAX_VALUE_MB)")
LINE = 64_000_000
LINE_ERROR = f":1: the line is {LINE + 29:,} bytes, over the 4 MiB limit per line (4 x SEEDBED_MAX_VALUE_MB)"


@pytest.fixture(scope="module")
def bombs(tmp_path_factory) -> dict[str, str]:
    """The files: a dictionary-encoded Parquet bomb, a plain-encoded one (16 rows of 16 MiB, each page
    compressed to a few hundred bytes), a JSONL file of one 64 MB line."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = tmp_path_factory.mktemp("bombs")
    big = "a" * VALUE
    pq.write_table(pa.table({"prompt": [big] * 64, "answer": ["1"] * 64}), folder / "dict.parquet",
                   compression="zstd")
    pq.write_table(pa.table({"prompt": [big[:-2] + f"{i:02}" for i in range(16)], "answer": ["1"] * 16}),
                   folder / "plain.parquet", compression="zstd", use_dictionary=False)
    with open(folder / "line.jsonl", "w") as fh:
        fh.write(json.dumps({"prompt": "a" * LINE, "answer": "1"}) + "\n")
    return {name: str(folder / name) for name in ("dict.parquet", "plain.parquet", "line.jsonl")}


def test_the_files_are_small_bombs(bombs):
    assert os.path.getsize(bombs["dict.parquet"]) < 5_000 and os.path.getsize(bombs["plain.parquet"]) < 50_000


# A fresh process: the modules a read needs imported first, the peak RSS reset (Linux's clear_refs), then the read;
# its growth is the peak after it (VmHWM) less the RSS before it.
READ = textwrap.dedent("""
    import json, os, sys
    os.environ["DJANGO_SETTINGS_MODULE"] = "webapp.settings"
    import django
    django.setup()
    import numpy, pyarrow.compute, pyarrow.parquet
    from training.config import TrainConfig
    from training.data import DatasetError, prompt_source
    from webapp.datasets.services import _checked
    how, path = sys.argv[1:]
    kib = lambda key: int(open("/proc/self/status").read().split(key + ":")[1].split()[0])
    with open("/proc/self/clear_refs", "w") as fh:  # the peak (VmHWM) starts again from what is resident now
        fh.write("5")
    base = kib("VmRSS")
    try:
        if how == "upload":  # what dataset_upload runs on the stored file
            _checked(path, None, None, None)
        else:  # what a worker's training loop runs first (training.loop)
            prompt_source(TrainConfig.from_dict({"task": "file", "data_path": path}, check_paths=False))
        error = ""
    except DatasetError as exc:
        error = str(exc)
    except Exception as exc:  # FieldErrors from the upload's check
        error = json.dumps(getattr(exc, "errors", str(exc)))
    print(json.dumps({"growth": (kib("VmHWM") - base) * 1024, "error": error}))
""")


def read_in_a_fresh_process(how: str, path: str, tmp_path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL",)}
    env.update({"SEEDBED_HOME": str(tmp_path), "DJANGO_ALLOWED_HOSTS": "127.0.0.1"})
    proc = subprocess.run([sys.executable, "-c", READ, how, path], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


@pytest.mark.parametrize("name, message, bound", [
    ("dict.parquet", VALUE_ERROR, 256 * MIB),  # b1d04b3: about 2.6 GB, accepted
    ("plain.parquet", PLAIN_ERROR, 32 * MIB),  # b1d04b3: about 780 MB, accepted
    ("line.jsonl", LINE_ERROR, 32 * MIB),  # b1d04b3: about 183 MB, accepted
])
@pytest.mark.parametrize("how", ["upload", "worker"])
def test_a_bomb_is_refused_naming_the_limit_in_bounded_memory(bombs, tmp_path, how, name, message, bound):
    result = read_in_a_fresh_process(how, bombs[name], tmp_path)
    assert all(part in result["error"] for part in ((message,) if isinstance(message, str) else message)), result
    assert result["growth"] < bound, (result["growth"] // MIB, "MiB")


@pytest.fixture
def ann(django_user_model, settings, tmp_path):
    settings.SEEDBED_LIBRARY_DIR = tmp_path / "library"
    return django_user_model.objects.create_user(username="ann", password="x")


@pytest.mark.parametrize("name, message", [("dict.parquet", VALUE_ERROR), ("line.jsonl", LINE_ERROR)])
def test_the_upload_page_refuses_a_bomb_with_a_field_error(ann, bombs, name, message):
    with open(bombs[name], "rb") as fh:
        file = SimpleUploadedFile(name, fh.read())
    response = logged_in(ann).post(reverse("datasets:list"), {"form": "upload", "name": "bomb", "project": "ann",
                                                               "file": file})
    body = response.content.decode()
    assert response.status_code == 400 and 'data-field="file"' in body, body[:3000]
    assert escape(f"{name}{'' if message.startswith(':') else ': '}{message}") in body, body[:3000]
    assert not DatasetEntry.objects.exists()


def test_values_rows_and_csv_fields_over_the_limits_are_field_errors(tmp_path):
    from training.data import DatasetError, load_file_dataset

    path = tmp_path / "wide.jsonl"  # each value within 1 MiB, the line over 4 MiB
    path.write_text(json.dumps({"prompt": "p", **{f"c{i}": "x" * (MIB - 10) for i in range(5)}}) + "\n")
    with pytest.raises(DatasetError, match=r"wide.jsonl:1: the line is 5,242,[0-9]{3} bytes, over the 4 MiB limit"):
        load_file_dataset(str(path))
    path = tmp_path / "value.jsonl"  # a line within 4 MiB, a value over 1 MiB
    path.write_text(json.dumps({"prompt": "p", "answer": "1", "tests": ["y" * (2 * MIB)]}) + "\n")
    with pytest.raises(DatasetError, match=r"value.jsonl:1: field 'tests' is 2,097,156 bytes, over the 1 MiB limit"):
        load_file_dataset(str(path))
    path = tmp_path / "big.csv"
    path.write_text("prompt,answer\n" + "z" * (2 * MIB) + ",1\n")
    with pytest.raises(DatasetError, match=r"big.csv:2: not valid CSV \(a field over the 1 MiB limit per value"):
        load_file_dataset(str(path))
