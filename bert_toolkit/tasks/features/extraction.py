"""Contextual embeddings of text lines from a BERT checkpoint (extract_features.py).

Two outputs:
- Google's layout (extract_features.py of google-research/bert): a JSON line per
  input line, {"linex_index": i, "features": [{"token": t, "layers": [{"index":
  k, "values": [...]}]}]} for every token of the sequence (the special
  tokens, [CLS] and [SEP] or <s> and </s>, included), values rounded as
  Google's script rounds them, round(x, 6);
- one sentence vector per line (`pooling` "mean" or "cls"), optionally
  L2-normalised: mean pooling + normalisation is what sentence-transformers
  computes for models such as all-MiniLM-L6-v2.

Input lines are one text, or a pair written `text_a ||| text_b`, as Google's
script reads them. Everything streams: lines are read a batch at a time, each
batch goes to one replica (several replicas run a batch each per step, with
one copy of the weights per device), and its results are written before the
next lines are read.
"""

import contextlib
import itertools
import json
import os
import re
import tempfile

import numpy as np
import tensorflow as tf

from bert_toolkit import console, fileio
from bert_toolkit.engine import distribution, model_files
from bert_toolkit.errors import InputError
from bert_toolkit.model import modeling
from bert_toolkit.tasks.features.options import GOOGLE_LAYERS
from bert_toolkit.text import tokenization

tf1 = tf.compat.v1

FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids")
_PAIR = re.compile(r"^(.*) \|\|\| (.*)$")


# -- input ----------------------------------------------------------------------------

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


def read_batches(path, batch_size):
    """Yields (index of the first line, [(text_a, text_b or None)]) for every
    `batch_size` lines of the file, reading lazily.

    Every line is an example, a blank one too, as in Google's script, so
    `linex_index` is the 0-based line number. InputError (naming the file and
    line) for a missing or undecodable file, or one without any line.
    """
    lines = (split_line(text) for _, text in fileio.decoded_lines(path))
    first_index = 0
    for batch in fileio.chunks(lines, batch_size):
        yield first_index, batch
        first_index += len(batch)
    if first_index == 0:
        raise InputError("--input_file=%s: the file is empty; expected one text per line "
                         "(or text_a ||| text_b)" % path)


def encode_lines(tokenizer, pairs, max_seq_length):
    """The model's inputs for one batch, each int32 [len(pairs), longest row].

    pairs: [(text_a, text_b or None)]. Rows are Google's, in the tokenizer's
    layout: [CLS] a [SEP], or [CLS] a [SEP] b [SEP] when b has tokens left
    after truncation (so a b that tokenizes to nothing gives a single-text
    row, and one truncated away leaves a cut to its share of the pair). Columns
    past the longest row are only padding, which the attention mask hides, so
    they are cut off.
    """
    layout = tokenizer.layout
    ids_a = tokenizer.encode_batch([a for a, _ in pairs])
    present_b = [b for _, b in pairs if b is not None]
    encoded_b = iter(tokenizer.encode_batch(present_b) if present_b else [])
    rows_a, rows_b = [], []
    for a, (_, text_b) in zip(ids_a, pairs):
        b = next(encoded_b) if text_b is not None else None
        if b:
            len_a, len_b = tokenization.truncated_pair_lengths(
                len(a), len(b), max_seq_length - layout.pair_specials)
            if not len_b:
                a, b = a[:len_a], None
        rows_a.append(a)
        rows_b.append(b or None)
    arrays = tokenization.pack_rows(rows_a, rows_b, max_seq_length, layout)
    longest = int(arrays[1].sum(axis=1).max()) if len(pairs) else 0
    return {name: array[:, :longest] for name, array in zip(FEATURE_NAMES, arrays)}


# -- the graph ------------------------------------------------------------------------

def input_placeholders():
    """int32 placeholders input_ids, input_mask, segment_ids of shape [batch, seq]
    (seq: any length up to max_seq_length; batches are cut to their longest row)."""
    return {name: tf1.placeholder(tf.int32, [None, None], name) for name in FEATURE_NAMES}


def extraction_outputs(bert_config, inputs, layers, pooling=None, normalize=False):
    """What BERT gives for `inputs` (see input_placeholders).

    Returns {"layers": float32 [len(layers), batch, seq, hidden]} (the encoder
    layers `layers` index), or with `pooling` {"vectors": float32 [batch,
    hidden]}: the mean of the last layer over the real tokens, or its [CLS]
    state; L2-normalised with `normalize`.
    """
    model = modeling.BertModel(bert_config, False, inputs["input_ids"], inputs["input_mask"],
                               inputs["segment_ids"], compute_dtype=tf.float32)
    if pooling is None:
        encoder = model.get_all_encoder_layers()
        return {"layers": tf.stack([encoder[index] for index in layers])}
    if pooling == "mean":
        vectors = modeling.sentence_vector(model, inputs["input_mask"], "mean")
    else:
        vectors = model.get_sequence_output()[:, 0]  # the [CLS] token's state
    if normalize:
        vectors = tf.math.l2_normalize(vectors, axis=-1, epsilon=1e-12)
    return {"vectors": vectors}


def build_replicas(bert_config, init_checkpoint, devices, layers, pooling=None,
                   normalize=False):
    """One extraction graph per device, weights from `init_checkpoint` (call in a
    fresh tf.Graph, then run tf1.global_variables_initializer()).

    Several devices: a MirroredStrategy keeps one copy of the weights on each
    and builds the model once per replica, as it does in training. Returns
    [(inputs, outputs)] in device order (see input_placeholders and
    extraction_outputs); a replica's outputs depend on its own inputs only.
    """
    def replica_graph(inputs):
        outputs = extraction_outputs(bert_config, inputs, layers, pooling, normalize)
        modeling.init_from_checkpoint(init_checkpoint)
        return outputs

    strategy = distribution.make_strategy(devices)
    if strategy is None:
        inputs = input_placeholders()
        return [(inputs, replica_graph(inputs))]
    replica_inputs = []

    def placeholders_of(context):
        with tf.device(devices[context.replica_id_in_sync_group]):
            replica_inputs.append(input_placeholders())
        return replica_inputs[-1]

    with strategy.scope():
        per_replica = strategy.experimental_distribute_values_from_function(placeholders_of)
        outputs = strategy.run(replica_graph, args=(per_replica,))
    per_device = {name: strategy.experimental_local_results(value)
                  for name, value in outputs.items()}
    return [(inputs, {name: values[index] for name, values in per_device.items()})
            for index, inputs in enumerate(replica_inputs)]


def run_step(session, replicas, feeds):
    """Runs batch i of `feeds` on replica i (len(feeds) <= len(replicas)), all at
    once; returns each batch's outputs as numpy arrays, in order.

    Replica i computes exactly what one replica alone computes for the same
    batch, so the output does not depend on the number of replicas.
    """
    feed_dict, fetches = {}, []
    for (inputs, outputs), feed in zip(replicas, feeds):
        feed_dict.update({inputs[name]: feed[name] for name in FEATURE_NAMES})
        fetches.append(outputs)
    return session.run(fetches, feed_dict)


# -- output ---------------------------------------------------------------------------

def tokens_of(tokenizer, input_ids, input_mask):
    """Each row's token strings (its real positions), from the ids fed to the model."""
    return [tokenizer.convert_ids_to_tokens([int(i) for i in ids[:int(mask.sum())]])
            for ids, mask in zip(input_ids, input_mask)]


def google_json_lines(first_index, tokens, layer_values, layers):
    """Google's JSON line per text, formatted as its script formats it.

    tokens: per text, its tokens ([CLS] ... [SEP]); layer_values: float32
    [len(layers), batch, seq, hidden] for the same texts; layers: the indexes
    as given on the command line (written as "index").
    """
    for row, text_tokens in enumerate(tokens):
        # tolist() gives the same Python floats as float(x), without a numpy
        # scalar per value; round(x, 6) is Google's rounding.
        per_layer = [layer_values[k, row, :len(text_tokens)].tolist()
                     for k in range(len(layers))]
        features = [{"token": token, "layers": [
            {"index": layer, "values": [round(x, 6) for x in per_layer[k][position]]}
            for k, layer in enumerate(layers)]} for position, token in enumerate(text_tokens)]
        yield json.dumps({"linex_index": first_index + row, "features": features})


def vector_json_lines(first_index, vectors):
    """{"linex_index": i, "embedding": [...]} per row of float32 [batch, hidden],
    values rounded as in Google's layout."""
    for row, vector in enumerate(vectors.tolist()):
        yield json.dumps({"linex_index": first_index + row,
                          "embedding": [round(x, 6) for x in vector]})


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


@contextlib.contextmanager
def open_output(path, to_lines=None):
    """Yields write(first_index, feed, outputs), which writes one batch's results.

    to_lines(first_index, feed, outputs) -> JSON lines: a JSON Lines file;
    None: outputs["vectors"] rows into a .npy file. Everything goes to a
    temporary file renamed to `path` only when the block ends without an
    exception, so a failed run leaves nothing behind (nor a folder it made).
    """
    with fileio.new_folders_removed_on_failure(os.path.dirname(os.path.abspath(path))), \
            fileio.atomic_path(path) as temporary:
        if to_lines is not None:
            with open(temporary, "w", encoding="utf-8") as f:
                yield lambda first, feed, outputs: f.writelines(
                    line + "\n" for line in to_lines(first, feed, outputs))
            return
        # The rows wait in an anonymous file (gone whatever happens) until
        # their count, which the .npy header states, is known.
        with tempfile.TemporaryFile(dir=os.path.dirname(temporary)) as spill:
            npy = NpyRows(spill)
            yield lambda first, feed, outputs: npy.write(outputs["vectors"])
            with open(temporary, "wb") as target:
                npy.finish(target)


# -- the run --------------------------------------------------------------------------

def run(options):
    """extract_features.py: the vectors FeatureExtractionOptions ask for written to
    --output_file; returns the number of lines."""
    given = options.tpu_settings_given() + (
        ["use_one_hot_embeddings"] if options.use_one_hot_embeddings else [])
    if given:
        console.warning("%s: TPU flags are ignored; running on this machine's %s",
                        ", ".join("--" + name for name in given),
                        "GPUs" if options.use_gpu else "CPU")
    fileio.check_output_file(options.output_file, "output_file")
    model_inputs = model_files.load_model_inputs(options)
    layers = None if options.pooling else parse_layers(
        options.layers or GOOGLE_LAYERS, model_inputs.bert_config.num_hidden_layers)
    devices = distribution.replica_devices(options.use_gpu, options.num_gpu_cores,
                                           options.num_cpu_replicas)
    batches = line_batches(options)
    total = fileio.count_lines(options.input_file)
    what = ("%s%s vectors" % ("normalized " if options.normalize else "", options.pooling)
            if options.pooling else "layers %s" % (options.layers or GOOGLE_LAYERS))
    console.info("extracting %s of %s line(s) on %d replica(s) (%s), batches of %d line(s), "
                 "to %s", what, total if total is not None else "the", len(devices),
                 ", ".join(devices), options.batch_size, options.output_file)
    graph = tf.Graph()
    with graph.as_default():
        replicas = build_replicas(model_inputs.bert_config, model_inputs.init_checkpoint,
                                  devices, layers, options.pooling, options.normalize)
        with tf1.Session(graph=graph, config=distribution.make_session_config(devices)) \
                as session, open_output(options.output_file,
                                        batch_writer(options, model_inputs.tokenizer,
                                                     layers)) as write:
            session.run(tf1.global_variables_initializer())
            count = extract(session, replicas, model_inputs.tokenizer, batches, write,
                            console.Progress("line", total), options.max_seq_length)
    console.info("wrote %s of %d line(s) to %s", what, count, options.output_file)
    return count


def line_batches(options):
    """Batches of input lines (read_batches); the first is read here, so a missing,
    empty or undecodable start fails before anything is written."""
    batches = read_batches(options.input_file, options.batch_size)
    return itertools.chain([next(batches)], batches)


def batch_writer(options, tokenizer, layers):
    """to_lines of open_output for the options' output."""
    if options.output_file.endswith(".npy"):
        return None
    if options.pooling:
        return lambda first, feed, outputs: vector_json_lines(first, outputs["vectors"])
    return lambda first, feed, outputs: google_json_lines(
        first, tokens_of(tokenizer, feed["input_ids"], feed["input_mask"]),
        outputs["layers"], layers)


def extract(session, replicas, tokenizer, batches, write, progress, max_seq_length):
    """Runs every batch, len(replicas) at a time, and writes its results in order;
    returns the number of lines done."""
    done = 0
    for step in fileio.chunks(batches, len(replicas)):
        feeds = [encode_lines(tokenizer, pairs, max_seq_length) for _, pairs in step]
        for (first, pairs), feed, outputs in zip(step, feeds, run_step(session, replicas,
                                                                          feeds)):
            write(first, feed, outputs)
            done += len(pairs)
        progress.add(sum(len(pairs) for _, pairs in step))
    progress.finish()
    return done
