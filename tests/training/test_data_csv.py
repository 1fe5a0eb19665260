"""A CSV file's rows counted and found from its bytes (training.data_csv) agree with the csv module's strict
reader on the files where a newline count is wrong: quoted line ends, doubled quotes, CRLF and lone CR line
ends, empty lines, quotes inside unquoted values, and the two strict-mode errors with their line numbers."""
from __future__ import annotations

import csv
import io
import os
import random

import pytest

from training import data_csv, data_files
from training.data_limits import DECODED, DatasetError


def reference(path: str):
    """The csv module's rows count (as csv.DictReader yields them), or its error as data_files words it."""
    with open(path, "rb") as raw:
        records = csv.reader(io.TextIOWrapper(raw, encoding="utf-8", newline=""), strict=True)
        try:
            if not next(records, None):
                return 0
            return sum(1 for record in records if record)
        except csv.Error as exc:
            return f"{path}:{records.line_num}: not valid CSV ({exc})"


def scanned(path: str):
    try:
        return data_csv.count_records(path)
    except DatasetError as exc:
        return str(exc)


def write(path, text: str, n: int = 0) -> str:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        fh.write(text)
    os.utime(path, ns=(n, n))  # a new version for the readers' caches
    return str(path)


TRICKY = [
    'prompt,answer\n"two\nlines",1\nplain,2\n',
    'prompt,answer\r\n"a ""quoted"" word\r\nand a CRLF",1\r\n"x",2',
    'prompt,answer\rlone,1\r"cr\rinside",2\r',
    'prompt,answer\n\n\r\nafter empty lines,1\n\n',
    'prompt,answer\nhalf"quote,1\na,"b"\n',
    '\nprompt,answer\na,1\n',  # an empty header: no rows
    'prompt,answer\n"closed" then text,1\n',  # strict: ',' expected after '"'
    'prompt,answer\na,1\r\n"never closed,\r\n2\r\n',  # strict: unexpected end of data
    'prompt,answer\na,1\n"ends in the quote\n',
    '',
]


@pytest.mark.parametrize("text", TRICKY)
def test_tricky_files_count_as_the_csv_module_counts_them(tmp_path, text):
    path = write(tmp_path / "t.csv", text)
    assert scanned(path) == reference(path)


def test_quoted_line_ends_are_not_rows(tmp_path):
    path = write(tmp_path / "t.csv", 'prompt,answer\r\n"one\r\ntwo\nthree",1\r\n"""q""\r\n",2\r\n')
    assert data_csv.count_records(path) == 2  # five line ends after the header
    assert data_files.row_at(path, 1) == (f"{path}:6", {"prompt": '"q"\r\n', "answer": "2"})


def test_random_files_count_and_rows_agree_with_the_csv_module(tmp_path, monkeypatch):
    """3,000 random small files of the characters that matter; pieces of 3 bytes, so pieces end everywhere."""
    monkeypatch.setattr(data_csv, "SCAN_BYTES", 3)
    rng = random.Random(43)
    parts = ["a", ",", '"', '""', "\n", "\r", "\r\n", " ", "é", '"x\r\ny"']
    path = str(tmp_path / "r.csv")
    compared = 0
    for n in range(3000):
        text = rng.choice(["", "h\r\n", "h\n", "h,g\n"]) + "".join(rng.choice(parts) for _ in range(rng.randint(0, 24)))
        write(path, text, n)
        assert scanned(path) == reference(path), repr(text)
        try:
            rows = list(data_files.file_rows(path))
        except DatasetError:
            continue
        compared += 1
        assert [data_files.row_at(path, i) for i in range(len(rows))] == rows, repr(text)
        with pytest.raises(IndexError):
            data_files.row_at(path, len(rows))
    assert compared > 500


def test_counting_parses_no_record_and_a_row_parses_the_header_and_itself(tmp_path):
    path = write(tmp_path / "t.csv", "prompt,answer\n" + "".join(f'"q {i}\nline two",{i}\n' for i in range(5000)))
    before = dict(DECODED)
    assert data_files.count_rows(path) == 5000
    assert data_files.row_at(path, 4321) == (f"{path}:8645", {"prompt": "q 4321\nline two", "answer": "4321"})
    assert (DECODED["records"] - before["records"], DECODED["rows"] - before["rows"]) == (2, 1)


def test_many_empty_lines_scan_in_linear_time(tmp_path):
    """An empty line after each record: each piece stops at one, so the pieces shrink rather than re-read."""
    import time

    path = write(tmp_path / "e.csv", "prompt,answer\n" + "a,1\n\n" * 200_000)
    start = time.process_time()
    assert data_csv.count_records(path) == 200_000
    assert time.process_time() - start < 5  # a re-read of 1 MiB per record would take minutes


@pytest.mark.django_db
def test_an_upload_of_a_large_csv_parses_only_the_rows_it_checks(django_user_model, settings, tmp_path):
    """The upload page checks CHECKED_ROWS rows and shows the first 100; the other 19,000 are counted from the
    bytes (a newline count would say 40,000: every prompt holds a quoted CRLF)."""
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.urls import reverse

    from tests.conftest import logged_in
    from training.data import CHECKED_ROWS
    from webapp.datasets.models import DatasetEntry

    settings.SEEDBED_LIBRARY_DIR = tmp_path / "library"
    ann = django_user_model.objects.create_user(username="ann", password="x")
    content = ("prompt,answer\r\n" + "".join(f'"question {i}:\r\nwhat is ""{i}""?",{i}\r\n'
                                             for i in range(20_000))).encode()
    before = dict(DECODED)
    response = logged_in(ann).post(reverse("datasets:list"), {
        "form": "upload", "name": "big", "project": "ann", "file": SimpleUploadedFile("big.csv", content)})
    assert response.status_code == 302, response.content.decode()[:2000]
    assert DatasetEntry.objects.get(name="big").rows == 20_000
    assert DECODED["records"] - before["records"] <= (CHECKED_ROWS + 1) + (100 + 1), DECODED
