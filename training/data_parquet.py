"""Parquet rows in bounded memory (the limits: training.data_limits; why: training.data_files).

Arrow turns a dictionary-encoded column into one value per row as it reads a batch, so a value stored once and
referenced by every row is copied into each (the 1.2 kB file of 64 rows of one 16 MiB string is 1 GiB in a
batch of 64). Four things keep a small Parquet file from becoming a large decoded one:

1. The footer's uncompressed sizes are checked before anything is decoded: all row groups within
   MAX_DECODED_BYTES, and no column chunk over MAX_BATCH_BYTES that decompresses over MAX_RATIO times its stored
   bytes (Arrow decompresses a page whole; a writer may put a whole chunk in one page).
2. Each column chunk's dictionary page header (a few bytes at its offset; Arrow checks that the page decompresses
   to the size it states) gives the largest a value of that column can be: a dictionary page over MAX_BATCH_BYTES
   is refused, and a batch has at most MAX_BATCH_BYTES / (the row group's largest dictionary page) rows, so a
   batch Arrow expands is within MAX_BATCH_BYTES.
3. A batch also has at most ``PARQUET_BATCH_ROWS`` rows and at most MAX_BATCH_BYTES / (the row group's
   uncompressed bytes per row) of them.
4. Before a batch becomes Python values, each row's decoded size is computed from Arrow's lengths: a value over
   MAX_VALUE_BYTES or a row over MAX_ROW_BYTES is an error naming its row and field; a batch over MAX_BATCH_BYTES
   is handed over in slices within it.
"""
from __future__ import annotations

from training.data_limits import (MAX_BATCH_BYTES, MAX_DECODED_BYTES, MAX_ROW_BYTES, MAX_VALUE_BYTES,
                                  PARQUET_BATCH_ROWS, DatasetError, count_decoded, row_error, size_text,
                                  value_error)

MAX_RATIO = 100  # the most a column chunk over MAX_BATCH_BYTES may decompress from its stored bytes
DICTIONARY_PAGE = 2  # parquet.thrift PageType.DICTIONARY_PAGE


def parquet_file(path: str, checked: bool = False):
    """A ``pyarrow.parquet.ParquetFile``; ``checked``: its footer's sizes checked first (rule 1). DatasetError
    for a file that is not Parquet."""
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow's errors for a file that is not Parquet
        raise DatasetError(f"{path}: not a readable Parquet file ({exc})") from None
    if checked:
        metadata = parquet.metadata
        footer = sum(metadata.row_group(g).total_byte_size for g in range(metadata.num_row_groups))
        if footer > MAX_DECODED_BYTES:
            raise DatasetError(f"{path}: decodes to {footer:,} bytes (its footer), over the "
                               f"{MAX_DECODED_BYTES:,} limit per file (8 x SEEDBED_MAX_DATASET_MB)")
        _check_ratios(metadata, path)
    return parquet


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


def page_header_sizes(head: bytes) -> tuple[int, int]:
    """(page type, uncompressed size) from the start of a Parquet page header: a Thrift compact struct whose
    fields 1 (type) and 2 (uncompressed_page_size) are i32s, each a field byte (id delta << 4 | 5) and a zigzag
    varint. ValueError when the bytes are not that.

    >>> page_header_sizes(bytes([0x15, 0x04, 0x15, 0x80, 0x80, 0x80, 0x10]))  # DICTIONARY_PAGE, 16 MiB
    (2, 16777216)
    """
    fields, at, field = {}, 0, 0
    while len(fields) < 2:
        if at >= len(head) or head[at] & 0x0F != 5 or not head[at] >> 4:
            raise ValueError("not a page header")
        field, at = field + (head[at] >> 4), at + 1
        value = shift = 0
        while True:
            if at >= len(head) or shift > 35:
                raise ValueError("not a page header")
            byte, at = head[at], at + 1
            value, shift = value | (byte & 0x7F) << shift, shift + 7
            if not byte & 0x80:
                break
        fields[field] = (value >> 1) ^ -(value & 1)
    return fields.get(1, -1), fields.get(2, -1)


def dictionary_bytes(path: str, metadata, g: int) -> dict[str, int]:
    """{column path: its dictionary page's uncompressed bytes} of row group ``g``, read from each page header
    (where Arrow starts reading the chunk: its dictionary page offset, else its first data page)."""
    sizes, group = {}, metadata.row_group(g)
    with open(path, "rb") as fh:
        for c in range(group.num_columns):
            chunk = group.column(c)
            if not chunk.has_dictionary_page:
                continue
            fh.seek(chunk.dictionary_page_offset or chunk.data_page_offset)
            try:
                kind, size = page_header_sizes(fh.read(64))
            except ValueError:
                raise DatasetError(f"{path}: not a readable Parquet file (column {chunk.path_in_schema!r}, row "
                                   f"group {g + 1}: no page header where its footer says)") from None
            if kind == DICTIONARY_PAGE:
                sizes[chunk.path_in_schema] = size
    return sizes


def batch_rows(path: str, metadata, g: int) -> int:
    """Rows per batch of row group ``g`` (rules 2 and 3); a dictionary page over MAX_BATCH_BYTES is an error."""
    group, rows = metadata.row_group(g), PARQUET_BATCH_ROWS
    if group.num_rows:
        rows = min(rows, MAX_BATCH_BYTES // max(group.total_byte_size // group.num_rows, 1))
    for column, size in dictionary_bytes(path, metadata, g).items():
        if size > MAX_BATCH_BYTES:
            raise DatasetError(f"{path}: column {column!r} (row group {g + 1}) has a dictionary page of {size:,} "
                               f"bytes, over the {size_text(MAX_BATCH_BYTES)} limit per batch "
                               "(64 x SEEDBED_MAX_VALUE_MB)")
        rows = min(rows, MAX_BATCH_BYTES // max(size, 1))
    return max(rows, 1)


def _numbers(array):
    """An Arrow integer array without nulls as numpy int64 (fill_null is the slow part of a batch: only when
    there are nulls)."""
    import numpy as np

    return array.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)


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
        indices = _numbers(array.indices.fill_null(0) if array.null_count else array.indices)
        out = sizes[indices] if len(sizes) else np.zeros(n, dtype=np.int64)
    elif (pa.types.is_string(kind) or pa.types.is_binary(kind) or pa.types.is_large_string(kind)
          or pa.types.is_large_binary(kind) or pa.types.is_fixed_size_binary(kind)):
        lengths = pc.binary_length(array)
        out = _numbers(lengths.fill_null(0) if array.null_count else lengths)
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


def _batches(path: str, parquet, groups=None):
    """The file's batches, a row group at a time, each within the rules' rows."""
    for g in range(parquet.metadata.num_row_groups) if groups is None else groups:
        yield from parquet.iter_batches(batch_size=batch_rows(path, parquet.metadata, g), row_groups=[g])


def parquet_rows(path: str):
    """Yield (where, row) for each row of a Parquet file, a bounded batch at a time (the module's four rules)."""
    parquet = parquet_file(path, checked=True)
    i = total = 0
    for batch in _batches(path, parquet):
        sizes = checked_sizes(batch, path, i)
        for start, stop in slices(sizes):
            for j, row in enumerate(batch.slice(start, stop - start).to_pylist(), start=start):
                i += 1
                total = count_decoded(int(sizes[j]), total, path)
                yield f"{path}: row {i}", row


def parquet_row_at(path: str, index: int):
    """(where, row) of row ``index`` (from 0): its row group found in the footer, the batches before it decoded
    by Arrow and skipped, the one row made Python. IndexError past the end."""
    parquet = parquet_file(path, checked=True)
    metadata, first = parquet.metadata, 0
    for g in range(metadata.num_row_groups):
        rows = metadata.row_group(g).num_rows
        if index < first + rows:
            break
        first += rows
    else:
        raise IndexError(index)
    for batch in _batches(path, parquet, [g]):
        if index < first + batch.num_rows:
            one = batch.slice(index - first, 1)
            size = int(checked_sizes(one, path, index)[0])
            count_decoded(size, 0, path)
            return f"{path}: row {index + 1}", one.to_pylist()[0]
        first += batch.num_rows
    raise IndexError(index)

