"""extract_features.py's settings: Google's flags, and sentence vectors."""

import dataclasses
from typing import Optional

from bert_toolkit.engine.options import DeviceOptions, ModelOptions, TokenizerOptions, TpuOptions
from bert_toolkit.errors import InputError
from bert_toolkit.options import option

POOLINGS = ("mean", "cls")
GOOGLE_LAYERS = "-1,-2,-3,-4"


@dataclasses.dataclass(frozen=True)
class FeatureExtractionOptions(ModelOptions, TokenizerOptions, DeviceOptions, TpuOptions):
    input_file: Optional[str] = option(None, "One text per line, or 'text_a ||| text_b'.")
    output_file: Optional[str] = option(None, "JSON Lines (or .npy with --pooling).")
    layers: Optional[str] = option(
        None, "Encoder layers written in Google's layout, comma-separated (-1 is the last; "
        "default %s)." % GOOGLE_LAYERS)
    batch_size: int = option(32, "Lines per batch (per replica).", minimum=1)
    use_one_hot_embeddings: bool = option(False, "TPU only; accepted and ignored.")
    pooling: Optional[str] = option(
        None, "Write one vector per line instead of every token's: mean (of the last "
        "layer's token states, as sentence-transformers) or cls.", choices=POOLINGS)
    normalize: bool = option(False, "With --pooling: L2-normalise each vector.")

    def check(self):
        for name in ("input_file", "output_file", "vocab_file", "bert_config_file",
                     "init_checkpoint"):
            if not getattr(self, name):
                raise InputError("--%s is required" % name)
        if self.normalize and not self.pooling:
            raise InputError("--normalize applies to --pooling=mean|cls vectors")
        if self.pooling and self.layers is not None:
            raise InputError("--layers=%s applies to Google's token layout; --pooling=%s reads "
                             "the last layer" % (self.layers, self.pooling))
        if self.output_file.endswith(".npy") and not self.pooling:
            raise InputError("--output_file=%s: .npy holds one vector per line; add "
                             "--pooling=mean|cls (or write Google's JSON Lines)"
                             % self.output_file)
