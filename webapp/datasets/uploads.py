"""The upload handler of dataset files (the datasets page and the API): the file is streamed, 64 KiB at a time,
into $SEEDBED_HOME/uploads (FILE_UPLOAD_TEMP_DIR: the disk its dataset will live on, so keeping it is a rename,
and never the system's temporary folder), and the size limit is checked as each chunk arrives: past it, reading
stops and the partial file is removed (Django closes it; it is a temporary file that goes when closed)."""
from __future__ import annotations

from django.core.files.uploadhandler import StopUpload, TemporaryFileUploadHandler

from training.data import MAX_DATASET_BYTES


class DatasetUpload(TemporaryFileUploadHandler):
    chunk_size = 64 * 1024

    def __init__(self, request=None, limit: int | None = None):
        super().__init__(request)
        self.limit = limit if limit is not None else MAX_DATASET_BYTES
        self.received, self.too_large = 0, False

    @property
    def message(self) -> str:
        return f"larger than the limit of {self.limit:,} bytes (SEEDBED_MAX_DATASET_MB)"

    def receive_data_chunk(self, raw_data, start):
        self.received += len(raw_data)
        if self.received > self.limit:
            self.too_large = True
            # the rest of the body (at most the edge's margin past the limit, webapp/bodylimit.py) is read and
            # dropped, so that the browser gets the page that says why
            raise StopUpload(connection_reset=False)
        return super().receive_data_chunk(raw_data, start)
