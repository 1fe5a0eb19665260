"""Parquet rows in bounded memory (the limits: training.data_limits; why: training.data_files).

Four things keep a small Parquet file from becoming a large decoded one:

1. Every string and binary column (nested ones too, ``tests.list.element``) is read as Arrow dictionaries
   (``read_dictionary``): a value the file stores once in a dictionary page stays one buffer however many rows
   reference it, instead of Arrow copying it into every row.
2. A batch has at most ``PARQUET_BATCH_ROWS`` rows and fewer when the footer's uncompressed sizes say rows are
   large: rows = MAX_BATCH_BYTES / (row group's uncompressed bytes / its rows), so that Arrow's own decoding of a
   batch stays near MAX_BATCH_BYTES for a file whose footer tells the truth.
3. The footer's uncompressed sizes are checked before anything is decoded: all row groups within
   MAX_DECODED_BYTES, and no column chunk over MAX_BATCH_BYTES that decompresses over MAX_RATIO times its stored
   bytes (Arrow decompresses a page whole; a writer may put a whole chunk in one page).
4. Before a batch becomes Python values, each row's decoded size is computed from Arrow's lengths (a dictionary
   value counted in every row that references it): a value over MAX_VALUE_BYTES or a row over MAX_ROW_BYTES is an
   error naming its row and field; a batch over MAX_BATCH_BYTES is handed over in slices within it.
"""
from __future__ import annotations

from training.data_limits import (MAX_BATCH_BYTES, MAX_DECODED_BYTES, MAX_ROW_BYTES, MAX_VALUE_BYTES, PARQUET_BATCH_ROWS, DatasetError, count_decoded,
                                  row_error, size_text, value_error)

MAX_RATIO = 100  # the most a column chunk over MAX_BATCH_BYTES may decompress from its stored bytes


def parquet_file(path: str, dictionaries: bool = False):
    """A ``pyarrow.parquet.ParquetFile``; with ``dictionaries``, its string and binary columns read as Arrow
    dictionaries. DatasetError for a file that is not Parquet."""
    import pyarrow.parquet as pq

    try:
        plain = pq.ParquetFile(path)
        if not dictionaries:
            return plain
        footer = sum(plain.metadata.row_group(g).total_byte_size for g in range(plain.metadata.num_row_groups))
        if footer > MAX_DECODED_BYTES:  # before any page is decoded
            raise DatasetError(f"{path}: decodes to {footer:,} bytes (its footer), over the "
                               f"{MAX_DECODED_BYTES:,} limit per file (8 x SEEDBED_MAX_DATASET_MB)")
        _check_ratios(plain.metadata, path)
        leaves = [plain.schema.column(i) for i in range(len(plain.schema))]
        binary = [leaf.path for leaf in leaves if leaf.physical_type in ("BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY")]
        return pq.ParquetFile(path, read_dictionary=binary) if binary else plain
    except DatasetError:
        raise
    except Exception as exc:  # pyarrow's errors for a file that is not Parquet
        raise DatasetError(f"{path}: not a readable Parquet file ({exc})") from None


def _check_ratios(metadata, path: str) -> None:
    """No column chunk decompresses to more than MAX_BATCH_BYTES at over MAX_RATIO times its stored size (by the
    footer): Arrow decompresses a page whole, and a writer may put a chunk's values in one page. Text compresses
    3-10 times; a column repeating one value is small before compression too (dictionary and run lengths)."""
    for g in range(metadata.num_row_groups):
        group = metadata.row_group(g)
        for c in range(group.num_columns):
            chunk = group.column(c)
            stored, size = max(chunk.total_compressed_size, 1), chunk.total_uncompressed_size
            if size > MAX_BATCH_BYTES and size > MAX_RATIO * stored:
                raise DatasetError(f"{path}: column {chunk.path_in_schema!r} (row group {g + 1}) decompresses to "
                                   f"{size:,} bytes from {stored:,}, over {MAX_RATIO} times and over the "
                                   f"{size_text(MAX_BATCH_BYTES)} limit per batch (64 x SEEDBED_MAX_VALUE_MB)")


def batch_rows(metadata) -> int:
    """Rows per batch: PARQUET_BATCH_ROWS, or fewer so that a batch of the largest rows (by the row groups'
    uncompressed bytes per row, from the footer) is about MAX_BATCH_BYTES; at least 1."""
    rows = PARQUET_BATCH_ROWS
    for g in range(metadata.num_row_groups):
        group = metadata.row_group(g)
        if group.num_rows:
            per_row = max(group.total_byte_size // group.num_rows, 1)
            rows = min(rows, max(MAX_BATCH_BYTES // per_row, 1))
    return rows


def value_sizes(array):
    """The decoded bytes of each value of an Arrow array (numpy int64, one per row; a null is 0): strings and
    binaries their lengths, a dictionary's values as often as referenced, lists and structs the sum of theirs,
    fixed-width values their width."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    kind, n = array.type, len(array)
    if pa.types.is_dictionary(kind):
        sizes = value_sizes(array.dictionary)
        indices = array.indices.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        out = sizes[indices] if len(sizes) else np.zeros(n, dtype=np.int64)
    elif (pa.types.is_string(kind) or pa.types.is_binary(kind) or pa.types.is_large_string(kind)
          or pa.types.is_large_binary(kind) or pa.types.is_fixed_size_binary(kind)):
        out = pc.binary_length(array).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    elif pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_map(kind):
        inner = np.concatenate([[0], np.cumsum(value_sizes(array.values))])
        offsets = array.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
        out = inner[offsets[1:]] - inner[offsets[:-1]]
    elif pa.types.is_fixed_size_list(kind):
        out = value_sizes(array.flatten()).reshape(n, kind.list_size).sum(axis=1) if n else np.zeros(0, np.int64)
    elif pa.types.is_struct(kind):
        out = sum((value_sizes(child) for child in array.flatten()), np.zeros(n, dtype=np.int64))
    elif pa.types.is_null(kind):
        out = np.zeros(n, dtype=np.int64)
    else:
        width = kind.bit_width // 8 if hasattr(kind, "bit_width") and kind.bit_width >= 8 else 1
        out = np.full(n, width, dtype=np.int64)
    if array.null_count:
        out = np.where(array.is_valid().to_numpy(zero_copy_only=False), out, 0)
    return out


def checked_sizes(batch, path: str, first: int):
    """Each row's decoded bytes in ``batch`` (rows ``first``+1...), raising DatasetError for the first value over
    MAX_VALUE_BYTES or row over MAX_ROW_BYTES, naming the row and the field."""
    import numpy as np

    columns = [value_sizes(column) for column in batch.columns]
    for name, sizes in zip(batch.schema.names, columns):
        over = np.flatnonzero(sizes > MAX_VALUE_BYTES)
        if len(over):
            raise value_error(f"{path}: row {first + over[0] + 1}", name, int(sizes[over[0]]))
    rows = sum(columns, np.zeros(batch.num_rows, dtype=np.int64))
    over = np.flatnonzero(rows > MAX_ROW_BYTES)
    if len(over):
        raise row_error(f"{path}: row {first + over[0] + 1}", int(rows[over[0]]))
    return rows


def slices(sizes) -> list[tuple[int, int]]:
    """(start, stop) pieces of a batch whose rows' sizes sum to at most MAX_BATCH_BYTES each (a row alone may
    not be cut: it is within MAX_ROW_BYTES, below MAX_BATCH_BYTES)."""
    pieces, start, held = [], 0, 0
    for i, size in enumerate(sizes.tolist()):
        if held + size > MAX_BATCH_BYTES and i > start:
            pieces.append((start, i))
            start, held = i, 0
        held += size
    return [*pieces, (start, len(sizes))] if len(sizes) else pieces


def _batches(parquet, groups=None):
    """The file's batches, one row group at a time (a batch across two groups of a nested dictionary column is
    an Arrow chunked array it cannot convert)."""
    size = batch_rows(parquet.metadata)
    for g in range(parquet.metadata.num_row_groups) if groups is None else groups:
        yield from parquet.iter_batches(batch_size=size, row_groups=[g])


def parquet_rows(path: str):
    """Yield (where, row) for each row of a Parquet file, a bounded batch at a time (the module's four rules)."""
    parquet = parquet_file(path, dictionaries=True)
    i = total = 0
    for batch in _batches(parquet):
        sizes = checked_sizes(batch, path, i)
        for start, stop in slices(sizes):
            for j, row in enumerate(batch.slice(start, stop - start).to_pylist(), start=start):
                i += 1
                total = count_decoded(int(sizes[j]), total, path)
                yield f"{path}: row {i}", row


def parquet_row_at(path: str, index: int):
    """(where, row) of row ``index`` (from 0): its row group found in the footer, the batches before it decoded
    by Arrow and skipped, the one row made Python. IndexError past the end."""
    parquet = parquet_file(path, dictionaries=True)
    metadata, first = parquet.metadata, 0
    for g in range(metadata.num_row_groups):
        rows = metadata.row_group(g).num_rows
        if index < first + rows:
            break
        first += rows
    else:
        raise IndexError(index)
    for batch in _batches(parquet, [g]):
        if index < first + batch.num_rows:
            one = batch.slice(index - first, 1)
            size = int(checked_sizes(one, path, index)[0])
            count_decoded(size, 0, path)
            return f"{path}: row {index + 1}", one.to_pylist()[0]
        first += batch.num_rows
    raise IndexError(index)

