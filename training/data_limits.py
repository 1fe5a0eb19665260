"""The limits on what reading a dataset file decodes (training.data_files explains them), the error a dataset's
reader raises, and the count of rows decoded in this process; the readers (data_files, data_parquet) share them."""
from __future__ import annotations

import csv
import os

MIB = 1024 * 1024
# A dataset file larger than this is refused before it is read (a web request or a worker never loads
# gigabytes by accident); $SEEDBED_MAX_DATASET_MB raises it for the operator.
MAX_DATASET_BYTES = int(float(os.environ.get("SEEDBED_MAX_DATASET_MB", "200")) * 1_000_000)


class DatasetError(ValueError):
    """A dataset that cannot be used; the message names the file and the line or field."""


DatasetError.__module__ = "training.data"  # where callers import it from: tracebacks and doctests name it so


def _value_limit() -> int:
    """SEEDBED_MAX_VALUE_MB in MiB, from 0.01 to 64 (1 by default): a bounded setting, refused loudly."""
    text = os.environ.get("SEEDBED_MAX_VALUE_MB", "1")
    try:
        mib = float(text)
        if not 0.01 <= mib <= 64:
            raise ValueError
    except ValueError:
        raise ValueError(f"SEEDBED_MAX_VALUE_MB: a number of MiB from 0.01 to 64; got {text!r}") from None
    return int(mib * MIB)


MAX_VALUE_BYTES = _value_limit()
MAX_ROW_BYTES = 4 * MAX_VALUE_BYTES
MAX_BATCH_BYTES = 64 * MAX_VALUE_BYTES
MAX_DECODED_BYTES = 8 * MAX_DATASET_BYTES
PARQUET_BATCH_ROWS = 1024  # at most; fewer when the footer says rows are large
# Rows turned into Python values in this process, their bytes, and the CSV records (rows and headers) the csv
# module parsed: the tests read them.
DECODED = {"rows": 0, "bytes": 0, "records": 0}
csv.field_size_limit(MAX_VALUE_BYTES)  # the csv module's own bound on one field (its default is 128 KiB)


def size_text(n: int) -> str:
    """A limit as people read it: ``size_text(1048576) == '1 MiB'``, ``size_text(4194304) == '4 MiB'``.

    >>> size_text(MIB), size_text(MIB // 2), size_text(3 * MIB // 2)
    ('1 MiB', '512 KiB', '1.5 MiB')
    """
    if n >= MIB:
        return f"{n // MIB} MiB" if n % MIB == 0 else f"{n / MIB:.1f} MiB"
    return f"{n // 1024} KiB"


def value_error(where: str, field, size: int) -> DatasetError:
    return DatasetError(f"{where}: field {str(field)!r} is {size:,} bytes, over the {size_text(MAX_VALUE_BYTES)} "
                        "limit per value (SEEDBED_MAX_VALUE_MB)")


def row_error(where: str, size: int, what: str = "row") -> DatasetError:
    return DatasetError(f"{where}: the {what} is {size:,} bytes, over the {size_text(MAX_ROW_BYTES)} limit per "
                        f"{what} (4 x SEEDBED_MAX_VALUE_MB)")


def check_size(path: str) -> None:
    """The file exists, has a data suffix and is within MAX_DATASET_BYTES; raises DatasetError otherwise."""
    if not os.path.isfile(path):
        raise DatasetError(f"data_path: no such file: {path}")
    if not path.endswith((".jsonl", ".parquet", ".csv")):
        raise DatasetError(f"data_path: must end in .jsonl, .parquet or .csv: {path}")
    size = os.path.getsize(path)
    if size > MAX_DATASET_BYTES:
        raise DatasetError(f"data_path: {path} is {size:,} bytes; at most {MAX_DATASET_BYTES:,} "
                           "(SEEDBED_MAX_DATASET_MB)")


def count_decoded(size: int, total: int, path: str) -> int:
    """Count a row of ``size`` bytes turned into Python; the file's running total, refused past the file limit."""
    DECODED["rows"] += 1
    DECODED["bytes"] += size
    total += size
    if total > MAX_DECODED_BYTES:
        raise DatasetError(f"{path}: decodes to more than {MAX_DECODED_BYTES:,} bytes, the limit per file "
                           "(8 x SEEDBED_MAX_DATASET_MB)")
    return total




# A row's values nest at most this many lists and objects deep. Real rows nest a few levels (a test list, a
# tool call, metadata); JSON nested 100,000 deep is 200 kB that Python's decoder refuses with RecursionError, and
# one nested 900 deep decodes but every later walk of it (the preview's JSON field, a verifier) recurses again.
MAX_NESTING = 64


def nesting_error(where: str, value) -> str:
    """The message for a row nested deeper than MAX_NESTING lists and objects ("" when it is not), measured level
    by level without recursion, so any depth Python could decode is measured (a flat row: one pass over its
    values, about 0.6 us; each level's containers held at once, never more than the row holds).

    >>> nesting_error("d.jsonl:2", {"prompt": "hi", "meta": [[[1]]]}), nesting_error("d.jsonl:3", [[[]]] * 2)
    ('', '')
    >>> deep = []
    >>> for _ in range(70): deep = [deep]
    >>> nesting_error("d.jsonl:4", {"prompt": "hi", "meta": deep})
    'd.jsonl:4: nested more than 64 lists and objects deep'
    """
    level, depth = ([value] if isinstance(value, (dict, list)) else []), 1
    while level:
        if depth > MAX_NESTING:
            return nesting_message(where)
        below = []
        for node in level:
            for child in (node.values() if isinstance(node, dict) else node):
                if isinstance(child, (dict, list)):
                    below.append(child)
        level, depth = below, depth + 1
    return ""


def nesting_message(where: str) -> str:
    return f"{where}: nested more than {MAX_NESTING} lists and objects deep"
