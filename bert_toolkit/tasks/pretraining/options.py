"""Pre-training settings: the data recipe (create_pretraining_data.py) and the run
(run_pretraining.py), with Google's flag names and defaults."""

import dataclasses
from typing import Optional

from bert_toolkit import families
from bert_toolkit.engine.options import RunOptions, TokenizerOptions
from bert_toolkit.errors import InputError
from bert_toolkit.options import inherit, option


@dataclasses.dataclass(frozen=True)
class PretrainingDataConfig(TokenizerOptions):
    """Everything that decides the instances of a shard (data.py's recipe)."""
    vocab_file: Optional[str] = inherit(
        TokenizerOptions, "vocab_file",
        help="The tokenizer file of the model to pre-train: vocab.txt (WordPiece), "
        "vocab.json or merges.txt (RoBERTa), sentencepiece.bpe.model (XLM-R), spiece.model "
        "(ALBERT) or tokenizer.json.")
    model_family: Optional[str] = option(
        None, "The model's family, which decides the tokenizer, its special tokens and the "
        "instances (RoBERTa and XLM-R: masked LM on full sentences, no sentence pairs). "
        "Default: the model folder's bert_config.json or config.json, else the tokenizer "
        "file's kind.", choices=tuple(families.FAMILIES))
    do_whole_word_mask: bool = option(
        False, "Mask whole words (all the pieces of a word together: a WordPiece word and "
        "its ## pieces; a BPE or SentencePiece word, which starts with a space mark) instead "
        "of single tokens.")
    max_seq_length: int = option(128, "Tokens per instance, with the special tokens "
                                 "([CLS] and [SEP]s, or <s> and </s>).")
    max_predictions_per_seq: int = option(20, "Most masked-LM predictions per instance.")
    random_seed: int = option(12345, "Random seed of the data generation.")
    dupe_factor: int = option(10, "Passes over the input, each with different masks and "
                              "pairs.")
    masked_lm_prob: float = option(0.15, "Fraction of the tokens to predict.")
    short_seq_prob: float = option(
        0.1, "Probability of an instance shorter than max_seq_length (random length).")

    def check(self):
        if not self.vocab_file:
            raise InputError("--vocab_file is required")
        checks = (
            ("max_seq_length", self.max_seq_length >= 5,
             "must be >= 5 ([CLS], [SEP], [SEP] and a token on each side)"),
            ("max_predictions_per_seq", self.max_predictions_per_seq >= 1, "must be >= 1"),
            ("dupe_factor", self.dupe_factor >= 1, "must be >= 1"),
            ("masked_lm_prob", 0.0 < self.masked_lm_prob <= 1.0, "must be in (0, 1]"),
            ("short_seq_prob", 0.0 <= self.short_seq_prob <= 1.0, "must be in [0, 1]"),
        )
        for name, ok, expected in checks:
            if not ok:
                raise InputError("--%s=%s %s" % (name, getattr(self, name), expected))


@dataclasses.dataclass(frozen=True)
class PretrainingDataOptions(PretrainingDataConfig):
    """create_pretraining_data.py: the recipe, its files and its worker processes."""
    input_file: Optional[str] = option(
        None, "Input text file(s): comma-separated files or globs. One sentence per line, "
        "a blank line between documents.", required=True)
    output_file: Optional[str] = option(
        None, "Output TFRecord file(s), comma-separated; records are spread round-robin "
        "over them.", required=True)
    output_format: str = option(
        "auto", "What to write: tfrecord (Google's tf.train.Example records) or hdf5 "
        "(NVIDIA's hdf5 shards, as DeepLearningExamples' PyTorch BERT and Distributed_BERT "
        "read them: the same instances). auto: hdf5 for output files named *.hdf5 or *.h5, "
        "else tfrecord.", choices=("auto", "tfrecord", "hdf5"))
    num_workers: Optional[int] = option(
        None, "Worker processes (default: the cores available to this process). The "
        "output does not depend on it.", minimum=1)
    documents_per_shard: int = option(
        256, "Documents per unit of work. Random next sentences are drawn from the other "
        "documents of the same shard, and instances are shuffled within it.")

    def check(self):
        if self.documents_per_shard < 2:
            raise InputError("--documents_per_shard must be >= 2, got %d"
                             % self.documents_per_shard)

    def recipe(self):
        """The PretrainingDataConfig part (what the worker processes need)."""
        return PretrainingDataConfig(**{field.name: getattr(self, field.name)
                                        for field in dataclasses.fields(PretrainingDataConfig)})


@dataclasses.dataclass(frozen=True)
class PretrainingOptions(RunOptions):
    """run_pretraining.py: masked LM + next sentence on create_pretraining_data.py's records."""
    input_file: Optional[str] = option(
        None, "TFRecord files from create_pretraining_data.py, or NVIDIA's hdf5 shards "
        "(told by their extension .hdf5/.h5 or their content): comma-separated files or "
        "globs.", required=True)
    eval_input_file: Optional[str] = option(
        None, "Records to evaluate on (default: --input_file, as in the original).")
    max_predictions_per_seq: int = option(
        20, "Masked-LM predictions per sequence; must match the data.", minimum=1)
    num_train_steps: int = option(100000, "Optimizer steps to train.", minimum=1)
    stop_at_step: int = option(
        0, "Stop training at this optimizer step, the learning-rate schedule still running "
        "to --num_train_steps (as fairseq's --max-update below --total-num-update); a later "
        "run with a larger value continues. 0: --num_train_steps.", minimum=0)
    num_warmup_steps: int = option(10000, "Optimizer steps of learning-rate warmup.",
                                   minimum=0)
    max_eval_steps: int = option(100, "Most evaluation batches (per replica).", minimum=1)
    shuffle_buffer_size: int = option(
        10000, "Records in the training shuffle buffer (the data are only shuffled locally "
        "when written).", minimum=1)

    def check(self):
        if self.max_seq_length < 5:
            raise InputError("--max_seq_length must be >= 5, got %d" % self.max_seq_length)
        self.require_an_action("do_train", "do_eval")
