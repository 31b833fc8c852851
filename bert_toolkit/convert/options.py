"""convert_hf_checkpoint.py's settings."""

import dataclasses
from typing import Optional

from bert_toolkit.options import Options, option


@dataclasses.dataclass(frozen=True)
class ConvertOptions(Options):
    hf_dir: Optional[str] = option(
        None, "A Hugging Face folder of BERT, RoBERTa, XLM-RoBERTa, ELECTRA, DistilBERT or "
        "ALBERT (config.json, model.safetensors or pytorch_model.bin, the tokenizer files); "
        "a Hub model id (owner/name), fetched or read from the Hugging Face cache; or a "
        "folder of Google's ELECTRA or ALBERT release (a TensorFlow checkpoint).",
        required=True)
    output_dir: Optional[str] = option(
        None, "Folder to create with bert_config.json, bert_model.ckpt.* and the tokenizer "
        "files (vocab.txt, tokenizer.json, ...).",
        required=True)
    overwrite: bool = option(False, "Replace an existing non-empty --output_dir.")


@dataclasses.dataclass(frozen=True)
class ExportHfOptions(Options):
    model_dir: Optional[str] = option(
        None, "A run's output_dir (its checkpoint and the records of its task), or a "
        "folder or checkpoint of Google's layout (pre-training, or the encoder).",
        required=True)
    hf_dir: Optional[str] = option(
        None, "Folder to create with config.json, model.safetensors and the tokenizer "
        "files that transformers loads.", required=True)
    checkpoint: Optional[str] = option(
        None, "Checkpoint to export (prefix or folder); default: the best one evaluation "
        "kept, else the newest in --model_dir.")
    bert_config_file: Optional[str] = option(
        None, "bert_config.json; default: the one the run recorded, else in --model_dir.")
    vocab_file: Optional[str] = option(
        None, "The tokenizer file (vocab.txt, tokenizer.json, ...); default: the one the run "
        "recorded, else the one in --model_dir.")
    do_lower_case: Optional[bool] = option(
        None, "Lower-case in the tokenizer; default: as the run recorded, else true.")
    encoder_only: bool = option(
        False, "Write the encoder alone (BertModel, RobertaModel, ...), whatever head the "
        "checkpoint has.")
    overwrite: bool = option(False, "Replace an existing non-empty --hf_dir.")
