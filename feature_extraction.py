"""Contextual embeddings of text lines from a BERT checkpoint (extract_features.py).

Two outputs:
- Google's layout (extract_features.py of google-research/bert): a JSON line per
  input line, {"linex_index": i, "features": [{"token": t, "layers": [{"index":
  k, "values": [...]}]}]} for every token of the sequence ([CLS] and [SEP]
  included), values rounded to 6 decimals;
- one sentence vector per line (`pooling` "mean" or "cls"), optionally
  L2-normalised: mean pooling + normalisation is what sentence-transformers
  computes for models such as all-MiniLM-L6-v2.

Input lines are one text, or a pair written `text_a ||| text_b`, as Google's
script reads them. Everything streams: a batch of lines in, its results out.
"""

import json
import re

import numpy as np
import tensorflow as tf

import modeling
from errors import InputError

tf1 = tf.compat.v1

POOLINGS = ("mean", "cls")
_PAIR = re.compile(r"^(.*) \|\|\| (.*)$")


def split_line(line):
    """(text_a, text_b or None) of an input line, Google's way (' ||| ' splits)."""
    line = line.strip()
    match = _PAIR.match(line)
    return (match.group(1), match.group(2)) if match else (line, None)


def parse_layers(text, num_hidden_layers):
    """The layer indexes of --layers ("-1,-2"): Python-style indexes of the
    encoder layers, checked against the model's `num_hidden_layers`."""
    try:
        layers = [int(part) for part in text.split(",")]
    except ValueError:
        raise InputError("--layers=%s: expected comma-separated integers such as -1,-2,-3,-4"
                         % text)
    for layer in layers:
        if not -num_hidden_layers <= layer < num_hidden_layers:
            raise InputError("--layers=%s: the model has %d layers, so an index is from %d "
                             "to %d" % (text, num_hidden_layers, -num_hidden_layers,
                                        num_hidden_layers - 1))
    return layers


def build_graph(bert_config, layers, pooling=None, normalize=False):
    """Placeholders and outputs of the extraction graph (call in a fresh tf.Graph).

    Returns (inputs, outputs): inputs name -> int32 placeholder [batch, seq];
    outputs: "layers" float32 [len(layers), batch, seq, hidden], or with
    `pooling` "vectors" float32 [batch, hidden].
    """
    # [batch, seq]: a batch may be cut to its longest row (seq <= max_seq_length).
    inputs = {name: tf1.placeholder(tf.int32, [None, None], name)
              for name in ("input_ids", "input_mask", "segment_ids")}
    model = modeling.BertModel(bert_config, False, inputs["input_ids"], inputs["input_mask"],
                               inputs["segment_ids"], compute_dtype=tf.float32)
    if pooling is None:
        encoder = model.get_all_encoder_layers()
        return inputs, {"layers": tf.stack([encoder[index] for index in layers])}
    if pooling == "mean":
        vectors = modeling.sentence_vector(model, inputs["input_mask"], "mean")
    else:
        vectors = model.get_sequence_output()[:, 0]  # the [CLS] token's state
    if normalize:
        vectors = tf.math.l2_normalize(vectors, axis=-1, epsilon=1e-12)
    return inputs, {"vectors": vectors}


def google_json_lines(first_index, tokens, layer_values, layers):
    """Google's JSON line per text.

    tokens: per text, its tokens ([CLS] ... [SEP]); layer_values: float32
    [len(layers), batch, seq, hidden] for the same texts; layers: the indexes
    as given on the command line (written as "index").
    """
    for row, text_tokens in enumerate(tokens):
        features = []
        for position, token in enumerate(text_tokens):
            features.append({"token": token, "layers": [
                {"index": layer, "values": [round(float(x), 6)
                                            for x in layer_values[k, row, position]]}
                for k, layer in enumerate(layers)]})
        yield json.dumps({"linex_index": first_index + row, "features": features})


def tokens_of(tokenizer, input_ids, input_mask):
    """Each row's token strings (its real positions), from the ids fed to the model."""
    return [tokenizer.convert_ids_to_tokens([int(i) for i in ids[:int(mask.sum())]])
            for ids, mask in zip(input_ids, input_mask)]


class NpyRows:
    """A .npy file of float32 rows [n, width] written as rows come, n unknown
    until the end: rows go to the binary file `stream` raw, then `finish`
    writes the header and copies them after it."""

    def __init__(self, stream):
        self._stream = stream
        self._rows = 0
        self._width = None
        self._raw = []

    def write(self, rows):
        rows = np.asarray(rows, dtype="<f4")
        self._width = rows.shape[1]
        self._rows += rows.shape[0]
        self._raw.append(rows.tobytes())
        if len(self._raw) >= 64:  # keep memory bounded: flush to the spill file
            self._spill()

    def _spill(self):
        self._stream.write(b"".join(self._raw))
        self._raw = []

    def finish(self, target):
        """Writes the finished .npy to the binary file object `target`."""
        self._spill()
        header = {"descr": "<f4", "fortran_order": False,
                  "shape": (self._rows, self._width or 0)}
        np.lib.format.write_array_header_1_0(target, header)
        self._stream.seek(0)
        while True:
            chunk = self._stream.read(1 << 20)
            if not chunk:
                return self._rows
            target.write(chunk)
