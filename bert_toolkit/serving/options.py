"""serving_server.py's settings: tensorflow_model_server's REST options of the same names."""

import dataclasses
import os
from typing import Optional

from bert_toolkit.errors import InputError
from bert_toolkit.options import Options, option


@dataclasses.dataclass(frozen=True)
class ServerOptions(Options):
    host: str = option("127.0.0.1", "Address to listen on (0.0.0.0 for every interface; the "
                       "default is this machine only).")
    port: int = option(8501, "REST port (0: any free port, printed at start).")
    model_name: str = option("default", "The <name> in /v1/models/<name>.")
    model_base_path: Optional[str] = option(
        None, "Folder of integer version folders, each a SavedModel (run_custom_classifier.py "
        "--save_for_serving writes output_dir/serving); the highest version is served. A "
        "version folder itself is accepted too.", required=True)
    max_request_bytes: int = option(8 << 20, "Larger request bodies get 413.")
    max_rows_per_request: int = option(
        1024, "Requests of more rows get 413, so that one request cannot hold the model for "
        "minutes.")
    enable_batching: bool = option(
        False, "Gather the rows of concurrent requests into one model call (off by default, "
        "as in tensorflow_model_server).")
    max_batch_size: int = option(
        64, "Batching: most rows in one model call (a larger request runs alone).")
    batch_timeout_micros: int = option(
        2000, "Batching: how long a batch waits for more rows after its first request "
        "arrived, in microseconds.")
    num_batch_threads: int = option(
        os.cpu_count() or 1, "Batching: model calls that may run at once (default: one per "
        "CPU).")
    rest_api_num_threads: int = option(
        os.cpu_count() or 1, "Without batching: model calls that may run at once.")

    def check(self):
        if not 0 <= self.port <= 65535:
            raise InputError("--port must be between 0 and 65535, got %d" % self.port)
        for name in ("max_request_bytes", "max_rows_per_request", "max_batch_size",
                     "num_batch_threads", "rest_api_num_threads"):
            if getattr(self, name) < 1:
                raise InputError("--%s must be >= 1, got %d" % (name, getattr(self, name)))
        if self.batch_timeout_micros < 0:
            raise InputError("--batch_timeout_micros must be >= 0, got %d"
                             % self.batch_timeout_micros)
