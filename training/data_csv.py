"""Where a CSV file's records start, found from its bytes alone: no value is decoded and no record parsed, so
counting the rows of a 200 MB file, or finding the one row the run page shows, costs a scan of its bytes.

A quoted value may span lines, so newlines alone do not count records. The csv module (its ``excel`` dialect,
``strict=True``, as ``training.data_files`` reads a file) ends a record at a line end (``\\r\\n``, ``\\r`` or
``\\n``) outside a quoted value; a value is quoted only when ``"`` is its first character (at a record's start
or just after a ``,``), a quote elsewhere in an unquoted value is a plain character; inside a quoted value ``""``
stands for one quote, and its closing quote is followed by ``,``, a line end or the end of the file (anything
else is strict mode's error, as the end of the file inside a quoted value is). ``"``, ``,``, ``\\r`` and
``\\n`` are single bytes that never occur inside a multi-byte UTF-8 character, so the rules hold on the bytes.

The scan walks a read-only memory map of the file at C speed: whole lines that are a record each (no quote,
every ``\\r`` in a ``\\r\\n``, none empty) are counted a piece at a time by their ``\\n``; around the others a
record is walked with ``find``, each find's next position kept until the scan passes it. A record that is a
line end only is empty (the csv module's ``[]``), skipped as ``csv.DictReader`` skips it; the first record is the
header, whether or not it is empty.
"""
from __future__ import annotations

import mmap
import re

from training.data_limits import DatasetError

QUOTE, COMMA, CR, LF = 0x22, 0x2C, 0x0D, 0x0A
SCAN_BYTES = 1 << 20  # what a line count copies out of the map at a time


LONE_CR = re.compile(rb"\r(?!\n)")
MIN_PIECE = 4096


def _plain_prefix(piece: bytes) -> int:
    """The length of the lines at the start of ``piece`` (whole lines, no quote in them) that are a record
    each: up to the line before the first empty one or the line ending in a \r that is not in a \r\n."""
    whole = len(piece)
    crs = piece.count(b"\r")  # none (a file of \n line ends): the \r searches are skipped
    for empty in (b"\n\n", b"\n\r\n") if crs else (b"\n\n",):
        at = piece.find(empty, 0, whole)
        if at >= 0:
            whole = at + 1
    if crs and piece.count(b"\r", 0, whole) != piece.count(b"\r\n", 0, whole):
        lone = LONE_CR.search(piece, 0, whole)
        whole = piece.rfind(b"\n", 0, lone.start()) + 1
    return whole


class _Finder:
    """The next position of a byte at or after a position, each ``find`` kept until the scan passes it: the
    whole scan finds each byte's occurrences once, however far apart they are (len(map) when none is left)."""

    def __init__(self, data, byte: bytes):
        self.data, self.byte, self.at = data, byte, -1

    def next(self, start: int) -> int:
        if self.at < start:
            found = self.data.find(self.byte, start)
            self.at = len(self.data) if found < 0 else found
        return self.at


def lines_before(data, offset: int) -> int:
    """Line ends (``\\r\\n``, ``\\r``, ``\\n``) in data[:offset], as the csv reader's ``line_num`` counts lines:
    the counts of ``\\n`` and ``\\r`` less each ``\\r\\n``, taken a piece at a time (C speed, no decoding)."""
    lines, at, cr_ended = 0, 0, False
    while at < offset:
        piece = data[at:min(offset, at + SCAN_BYTES)]
        lines += piece.count(b"\n") + piece.count(b"\r") - piece.count(b"\r\n")
        if cr_ended and piece[:1] == b"\n":  # a \r\n cut between two pieces is one line end
            lines -= 1
        cr_ended, at = piece[-1:] == b"\r", at + len(piece)
    return lines


def _error(path: str, data, at: int, message: str) -> DatasetError:
    """The csv reader's error at byte ``at`` (len(data): the end of the file), its line_num the lines it has
    read, this one too."""
    if at < len(data):
        line = lines_before(data, at) + 1
    else:
        line = lines_before(data, at) + (data[at - 1] not in (CR, LF))
    return DatasetError(f"{path}:{line}: not valid CSV ({message})")


def _quoted_end(path: str, data, quotes: _Finder, at: int) -> int:
    """The position just past the quoted value opened at ``at``, checked as strict mode checks it."""
    size = len(data)
    while True:
        close = quotes.next(at + 1)
        if close >= size:
            raise _error(path, data, size, "unexpected end of data")
        if close + 1 < size and data[close + 1] == QUOTE:  # "" inside a quoted value: one quote
            at = close + 1
            continue
        if close + 1 < size and data[close + 1] not in (COMMA, CR, LF):
            raise _error(path, data, close + 1, "',' expected after '\"'")
        return close + 1


def _walk(path: str, stop: int | None = None) -> tuple[int, int | None]:
    """(the number of non-empty records after the header, the offset of record ``stop`` among them, None when
    there are fewer), stopping there; raises DatasetError (naming the line, as the csv module's strict mode
    does) for a quote closing a value that is not followed by ``,`` or a line end, and for a file ending inside a
    quoted value."""
    with open(path, "rb") as fh:
        if not fh.seek(0, 2):
            return 0, None
        data = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    with data:
        return _Walk(path, data).run(stop)


def count_records(path: str) -> int:
    """The rows ``csv.DictReader`` yields from the file, counted from its bytes."""
    return _walk(path)[0]


def record_start(path: str, index: int) -> int:
    """The byte offset where row ``index`` (from 0, after the header) starts; IndexError past the end."""
    start = _walk(path, index)[1]
    if start is None:
        raise IndexError(index)
    return start


class _Walk:
    """One scan of a mapped file: its finders, and the record it has reached."""

    def __init__(self, path: str, data):
        self.path, self.data, self.size = path, data, len(data)
        self.quotes, self.lfs, self.crs = _Finder(data, b'"'), _Finder(data, b"\n"), _Finder(data, b"\r")
        self.piece = MIN_PIECE

    def run(self, stop: int | None) -> tuple[int, int | None]:
        data, size = self.data, self.size
        end = self._record_end(0)
        if end == 0:  # an empty header: csv.DictReader yields no rows
            return 0, None
        count, start = 0, self._after(end)
        while start < size:
            lines = self._plain_lines(start)
            if lines:  # whole lines without a quote, a \r or an empty line: a record each
                if stop is not None and count + lines > stop:
                    for _ in range(stop - count):
                        start = data.find(b"\n", start) + 1
                    return stop, start
                count, start = count + lines, self._plain_end
                continue
            end = self._record_end(start)
            if end > start:
                if count == stop:
                    return count, start
                count += 1
            start = self._after(end)
        return count, None

    def _plain_lines(self, start: int) -> int:
        """How many whole lines from ``start`` are a record each (no quote, every \r in a \r\n, none empty), in
        a piece of at most ``self.piece`` bytes, counted by their ``\n`` at C speed; 0 when the first is not
        such a line (the record walk takes it). The piece ends at ``self._plain_end``. The piece grows to
        SCAN_BYTES while pieces hold only such lines and drops to MIN_PIECE after one that does not, so what a
        search reads stays within a constant times what it passes: the scan is linear."""
        data = self.data
        if data[start] in (CR, LF):
            return 0
        cut = data.rfind(b"\n", start, min(self.quotes.next(start), start + self.piece, self.size))
        if cut < 0:
            return 0
        piece = data[start:cut + 1]
        whole = _plain_prefix(piece)
        self.piece = min(2 * self.piece, SCAN_BYTES) if whole == len(piece) else MIN_PIECE
        self._plain_end = start + whole
        return piece.count(b"\n", 0, whole)

    def _after(self, end: int) -> int:
        """The start of the next record after the line end at ``end``."""
        data = self.data
        return end + (2 if end + 1 < self.size and data[end] == CR and data[end + 1] == LF else 1)

    def _record_end(self, start: int) -> int:
        """The position of the line end closing the record at ``start`` (the file's size at its end)."""
        data, quotes = self.data, self.quotes
        at = start  # scanning unquoted text of this record from here
        while True:
            end, quote = min(self.lfs.next(at), self.crs.next(at)), quotes.next(at)
            if quote >= end:
                return end
            if quote == start or data[quote - 1] == COMMA:  # a quoted value: its line ends are in it
                at = _quoted_end(self.path, data, quotes, quote)
            else:  # a quote inside an unquoted value is a character
                at = quote + 1
