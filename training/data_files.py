"""Reading a dataset file (JSONL, Parquet, CSV) in bounded memory and time, wherever it is read: a web request
(an upload's check, the run page's prompt) and a worker (a run loading its rows) share these readers and limits.

A small file can stand for a large decoded dataset (a decompression bomb): a 16 MiB string stored once in a
Parquet dictionary and referenced by 64 rows is a 1.5 kB file that decodes to 1 GiB of Python strings; a 150 MB
JSONL file of one line is one 150 MB string. So what a reader decodes is bounded before it is turned into Python
values, per value, per row (a JSONL line, a CSV record, a Parquet row), per Parquet batch and per file:

- a value (one field of one row) is at most ``MAX_VALUE_BYTES`` (``SEEDBED_MAX_VALUE_MB``, 1 MiB by default);
- a row at most ``MAX_ROW_BYTES`` = 4 x the value limit (a prompt, an answer, tests and a few small fields);
- a Parquet batch handed to Python at most ``MAX_BATCH_BYTES`` = 64 x the value limit (a batch is cut smaller);
- a whole file at most ``MAX_DECODED_BYTES`` = 8 x ``MAX_DATASET_BYTES`` decoded (text compresses 3-5 x).

A JSONL line is read with a length limit (never more than ``MAX_ROW_BYTES`` + 1 bytes of it held); a Parquet
file is read in batches whose rows are bounded by its footer and its dictionary pages' headers, each row's size
computed from Arrow's lengths before any row becomes Python (training.data_parquet); a CSV field is bounded by
the csv module's field size limit, set to the value limit.

``count_rows`` counts a file's rows without decoding them (JSONL: its non-blank lines, bytes only; Parquet: its
footer; CSV: its records, found from its bytes by training.data_csv), and ``row_at`` decodes one row: the run page shows a run's
first prompt with these, so a view of it decodes one row of a 200 MB file, not all of it. ``DECODED`` counts the
rows (and their bytes) turned into Python values in this process: the tests read it.
"""
from __future__ import annotations

import csv
import functools
import io
import json
import mmap
import os
import sys

from training.data_csv import count_records, lines_before, record_start
from training.data_limits import (DECODED, MAX_ROW_BYTES, MAX_VALUE_BYTES, MIB, DatasetError, check_size,
                                  count_decoded, nesting_message, row_error, size_text, value_error)
SCAN_BYTES = 256 * 1024  # what a count reads at a time


def file_rows(path: str):
    """Yield (where, row) for each row of a JSONL, Parquet or CSV file (with a header line), streamed in bounded
    memory (one line, or one bounded Parquet batch, at a time); raises DatasetError naming the file and the line,
    or the limit a row passes."""
    check_size(path)
    if path.endswith(".jsonl"):
        yield from _jsonl_rows(path)
    elif path.endswith(".parquet"):
        from training.data_parquet import parquet_rows

        yield from parquet_rows(path)
    else:
        yield from _csv_rows(path)


def _read_line(fh, path: str, lineno: int) -> bytes:
    """The next line of a binary file (b"" at the end), at most MAX_ROW_BYTES of it held: a longer one is an
    error giving its length (the rest is read in 1 MiB pieces and dropped)."""
    raw = fh.readline(MAX_ROW_BYTES + 1)
    if len(raw) <= MAX_ROW_BYTES or raw.endswith(b"\n"):
        return raw
    size = len(raw)
    while not raw.endswith(b"\n"):
        raw = fh.readline(MIB)
        if not raw:
            break
        size += len(raw)
    raise row_error(f"{path}:{lineno}", size - (1 if raw.endswith(b"\n") else 0), "line")


def _jsonl_row(raw: bytes, where: str):
    """One JSONL line (bytes, not blank) as its value; its fields checked against the value limit."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise DatasetError(f"{where}: not UTF-8 text (a binary file?)") from None
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{where}: not valid JSON ({exc.msg})") from None
    except RecursionError:  # nested about 1,000 deep or more: refused as row_example refuses past MAX_NESTING
        raise DatasetError(nesting_message(where)) from None
    except ValueError:  # an integer longer than Python converts from text (int_max_str_digits)
        raise DatasetError(f"{where}: a number of more than {sys.get_int_max_str_digits()} "
                           "digits, too long to read") from None
    if len(raw) > MAX_VALUE_BYTES and isinstance(row, dict):  # a shorter line holds no longer value
        for key, value in row.items():
            size = len(value.encode("utf-8", "surrogatepass")) if isinstance(value, str) else \
                len(json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass"))
            if size > MAX_VALUE_BYTES:
                raise value_error(where, key, size)
    return row


def _jsonl_rows(path: str):
    """JSONL rows; a blank line (ASCII white space only) is skipped, as ``count_rows`` skips it."""
    total = 0
    with open(path, "rb") as fh:
        lineno = 0
        while raw := _read_line(fh, path, lineno + 1):
            lineno += 1
            if not raw.strip():
                continue
            row = _jsonl_row(raw, f"{path}:{lineno}")
            total = count_decoded(len(raw), total, path)
            yield f"{path}:{lineno}", row


def _csv_rows(path: str, start: int = 0, fieldnames: list | None = None, lines: int = 0):
    """CSV rows as DictReader reads them, from the start of the file (its header the first record) or from the
    record starting at byte ``start`` with the header given (row_at; ``lines`` the line ends before it)."""
    with open(path, "rb") as raw:
        raw.seek(start)
        text = io.TextIOWrapper(raw, encoding="utf-8", newline="")
        total = 0
        try:
            reader = csv.DictReader(text, fieldnames=fieldnames, strict=True)
            if not reader.fieldnames:
                return
            DECODED["records"] += fieldnames is None
            for row in reader:
                DECODED["records"] += 1
                where = f"{path}:{lines + reader.line_num}"
                if None in row:
                    raise DatasetError(f"{where}: more values than the header's {len(reader.fieldnames)} columns")
                if any(value is None for value in row.values()):
                    raise DatasetError(f"{where}: fewer values than the header's {len(reader.fieldnames)} columns")
                size = sum(len(value) for value in row.values())
                if size > MAX_ROW_BYTES:
                    raise row_error(where, size)
                total = count_decoded(size, total, path)
                yield where, row
        except UnicodeDecodeError:
            raise DatasetError(f"{path}: not UTF-8 text (a binary file?)") from None
        except csv.Error as exc:
            message, line = str(exc), lines + reader.line_num
            if "field larger than field limit" in message:  # raised before the record's line is counted
                message, line = f"a field over the {size_text(MAX_VALUE_BYTES)} limit per value " \
                                "(SEEDBED_MAX_VALUE_MB)", line + 1
            raise DatasetError(f"{path}:{line}: not valid CSV ({message})") from None


def _jsonl_lines(path: str):
    """(line number, offset) of each non-blank line of a JSONL file, reading bytes only (no line is decoded)."""
    with open(path, "rb") as fh:
        lineno, pos, start, blank = 1, 0, 0, True
        while chunk := fh.read(SCAN_BYTES):
            at = 0
            while True:
                end = chunk.find(b"\n", at)
                if blank and chunk[at:len(chunk) if end < 0 else end].strip():
                    blank = False
                if end < 0:
                    break
                if not blank:
                    yield lineno, start
                lineno, start, blank, at = lineno + 1, pos + end + 1, True, end + 1
            pos += len(chunk)
        if not blank:
            yield lineno, start


def _identity(path: str) -> tuple:
    st = os.stat(path)
    return os.path.realpath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def count_rows(path: str) -> int:
    """The number of rows ``file_rows`` yields, without decoding them: JSONL its non-blank lines (bytes only),
    Parquet its footer, CSV its records (from its bytes, training.data_csv: no record parsed). Cached per version of the
    file (path, inode, size, modification time), so a page shown again counts nothing."""
    check_size(path)
    return _count(*_identity(path))


@functools.lru_cache(maxsize=64)
def _count(path: str, *version) -> int:
    if path.endswith(".jsonl"):
        return sum(1 for _ in _jsonl_lines(path))
    if path.endswith(".parquet"):
        from training.data_parquet import parquet_file

        return parquet_file(path).metadata.num_rows
    return count_records(path)


@functools.lru_cache(maxsize=256)
def _jsonl_line(path: str, *version, index: int) -> tuple[int, int]:
    """(line number, offset) of non-blank line ``index`` of a version of a JSONL file; IndexError past the end."""
    for n, found in enumerate(_jsonl_lines(path)):
        if n == index:
            return found
    raise IndexError(index)


def row_at(path: str, index: int):
    """(where, row) of row ``index`` (from 0) as ``file_rows`` yields it, decoding that row only (JSONL: the
    lines before it are found by their bytes; Parquet: one batch of its row group made Python; CSV: its header
    and that record parsed, the record found from the file's bytes). IndexError past the end."""
    check_size(path)
    if path.endswith(".jsonl"):
        lineno, offset = _jsonl_line(*_identity(path), index=index)
        with open(path, "rb") as fh:
            fh.seek(offset)
            raw = _read_line(fh, path, lineno)
        row = _jsonl_row(raw, f"{path}:{lineno}")
        count_decoded(len(raw), 0, path)
        return f"{path}:{lineno}", row
    if path.endswith(".parquet"):
        from training.data_parquet import parquet_row_at

        return parquet_row_at(path, index)
    return _csv_row_at(path, index)


@functools.lru_cache(maxsize=256)
def _csv_record(path: str, *version, index: int) -> int:
    """The byte offset of record ``index`` after the header of a version of a CSV file, found from its bytes
    (training.data_csv); IndexError past the end."""
    return record_start(path, index)


def _csv_row_at(path: str, index: int):
    """Row ``index`` of a CSV file: its header and that one record parsed, the line ends before it counted."""
    start = _csv_record(*_identity(path), index=index)
    with open(path, "rb") as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8", newline="")
        try:
            header = next(csv.reader(text, strict=True))
        except UnicodeDecodeError:
            raise DatasetError(f"{path}: not UTF-8 text (a binary file?)") from None
        except csv.Error as exc:
            raise DatasetError(f"{path}:1: not valid CSV ({exc})") from None
    DECODED["records"] += 1
    with open(path, "rb") as raw, mmap.mmap(raw.fileno(), 0, access=mmap.ACCESS_READ) as data:
        lines = lines_before(data, start)
    rows = _csv_rows(path, start, header, lines)
    item = next(rows)
    rows.close()
    return item
