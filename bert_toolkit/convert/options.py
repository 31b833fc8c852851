"""convert_hf_checkpoint.py's settings."""

import dataclasses
from typing import Optional

from bert_toolkit.options import Options, option


@dataclasses.dataclass(frozen=True)
class ConvertOptions(Options):
    hf_dir: Optional[str] = option(
        None, "Folder with config.json, vocab.txt and model.safetensors or "
        "pytorch_model.bin.", required=True)
    output_dir: Optional[str] = option(
        None, "Folder to create with bert_config.json, vocab.txt and bert_model.ckpt.*.",
        required=True)
    overwrite: bool = option(False, "Replace an existing non-empty --output_dir.")
