"""The serving commands' settings: serving_server.py (tensorflow_model_server's REST
options of the same names) and serving_client.py."""

import dataclasses
import os
from typing import Optional, Tuple

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


DEFAULT_SIGNATURE = "serving_default"
TEXT_SIGNATURE = "text"


@dataclasses.dataclass(frozen=True)
class ClientOptions(Options):
    """serving_client.py; the texts themselves come as the command's arguments."""
    url: Optional[str] = option(
        None, "The model's REST address, e.g. "
        "http://127.0.0.1:8501/v1/models/sentiment[/versions/N].", required=True)
    export_dir: Optional[str] = option(
        None, "The exported model: its base path (output_dir/serving) or one version "
        "folder; its assets.extra/ supplies the vocab and tokenizer settings.")
    vocab_file: Optional[str] = option(None, "vocab.txt (instead of the export's).")
    serving_config: Optional[str] = option(
        None, "serving_config.json (instead of the export's).")
    input_file: Optional[str] = option(
        None, "One text (pairs: two, tab-separated) per line; '-' is standard input.")
    text_b: Tuple[str, ...] = option(
        (), "The second text of a pair, once per text given as an argument.")
    batch_size: int = option(32, "Texts per request.", minimum=1)
    output_format: str = option(
        "tsv", "tsv: label, then one probability per label; jsonl: one JSON object per input "
        "with its text(s).", choices=("tsv", "jsonl"))
    request_format: str = option(
        "row", "TensorFlow Serving's 'instances' (row) or 'inputs' (columnar) request body.",
        choices=("row", "columnar"))
    timeout: float = option(60.0, "Seconds to wait for each answer.")
    signature_name: str = option(
        DEFAULT_SIGNATURE, "serving_default: send token ids (tokenized here); text: send the "
        "raw text to the export's text signature (tokenized in the model's graph).",
        choices=(DEFAULT_SIGNATURE, TEXT_SIGNATURE))
    null_score_diff_threshold: Optional[float] = option(
        None, "Question answering, SQuAD 2.0: answer \"\" when the null score beats the best "
        "span by more than this (default: the export's, from its training run).")

    def check(self):
        if self.timeout <= 0:
            raise InputError("--timeout must be > 0, got %g" % self.timeout)
