"""Contextual embeddings of text lines: Google's extract_features.py, and sentence vectors.

Google's command line works unchanged and writes its JSON Lines layout (every
token's values in the --layers asked for). --pooling=mean|cls writes one
sentence vector per input line instead (--normalize: L2-normalised, as
sentence-transformers does), as JSON Lines or, for an --output_file ending in
.npy, one float32 array [lines, hidden]. Input: one text per line, or
`text_a ||| text_b`. Runs on one device; inputs stream in batches.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # CUDA plugin chatter on CPU machines

import collections  # noqa: E402
import itertools  # noqa: E402
import json  # noqa: E402
import tempfile  # noqa: E402

import tensorflow as tf  # noqa: E402
from absl import flags  # noqa: E402

import common_flags  # noqa: E402
import console  # noqa: E402
import feature_extraction  # noqa: E402
import fileio  # noqa: E402
import modeling  # noqa: E402
import run_setup  # noqa: E402
from errors import InputError  # noqa: E402

tf1 = tf.compat.v1
FLAGS = flags.FLAGS

common_flags.define_model_flags()
common_flags.define_tokenizer_flags()
common_flags.define_tpu_flags()
flags.DEFINE_string("input_file", None, "One text per line, or 'text_a ||| text_b'.")
flags.DEFINE_string("output_file", None, "JSON Lines (or .npy with --pooling).")
flags.DEFINE_string("layers", "-1,-2,-3,-4", "Encoder layers to write (Google's layout).")
flags.DEFINE_integer("batch_size", 32, "Lines per batch.")
flags.DEFINE_bool("use_one_hot_embeddings", False, "TPU only; accepted and ignored.")
flags.DEFINE_enum("pooling", None, list(feature_extraction.POOLINGS),
                  "Write one vector per line instead of every token's: mean (of the "
                  "last layer's token states, as sentence-transformers) or cls.")
flags.DEFINE_bool("normalize", False, "With --pooling: L2-normalise each vector.")

ModelFlags = collections.namedtuple("ModelFlags", [
    "bert_config_file", "vocab_file", "do_lower_case", "init_checkpoint", "max_seq_length"])


def check_flags():
    common_flags.require_flags("input_file", "output_file", "vocab_file", "bert_config_file",
                               "init_checkpoint")
    if FLAGS.batch_size < 1:
        raise InputError("--batch_size must be >= 1, got %d" % FLAGS.batch_size)
    if FLAGS.normalize and not FLAGS.pooling:
        raise InputError("--normalize applies to --pooling=mean|cls vectors")
    if FLAGS.output_file.endswith(".npy") and not FLAGS.pooling:
        raise InputError("--output_file=%s: .npy holds one vector per line; add "
                         "--pooling=mean|cls (or write Google's JSON Lines)"
                         % FLAGS.output_file)
    if FLAGS.use_tpu:
        console.warning("--use_tpu and the TPU flags are ignored: running on this machine")
    fileio.check_output_file(FLAGS.output_file, "output_file")


def batches(path, batch_size):
    """Lists of (text_a, text_b) of at most batch_size lines; InputError if none."""
    lines = (feature_extraction.split_line(text) for _, text in fileio.decoded_lines(path))
    empty = True
    for batch in fileio.chunks(lines, batch_size):
        empty = False
        yield batch
    if empty:
        raise InputError("--input_file=%s: the file is empty" % path)


def extract(session, inputs, outputs, tokenizer, layers, input_batches, write_line, npy):
    """Runs every batch; returns the number of lines done."""
    done = 0
    progress = console.Progress("line", None)
    for batch in input_batches:
        texts_b = [b for _, b in batch]
        arrays = tokenizer.encode_pairs([a for a, _ in batch],
                                        texts_b if any(b is not None for b in texts_b)
                                        else None, FLAGS.max_seq_length)
        # Padding is masked out: cutting the batch to its longest row changes nothing.
        length = int(arrays[1].sum(axis=1).max())
        feed = {name: value[:, :length]
                for name, value in zip(("input_ids", "input_mask", "segment_ids"), arrays)}
        values = session.run(outputs, {inputs[name]: value for name, value in feed.items()})
        if npy is not None:
            npy.write(values["vectors"])
        elif FLAGS.pooling:
            for row, vector in enumerate(values["vectors"]):
                write_line(json.dumps({"linex_index": done + row, "embedding": [
                    round(float(x), 6) for x in vector]}))
        else:
            tokens = feature_extraction.tokens_of(tokenizer, feed["input_ids"],
                                                  feed["input_mask"])
            for line in feature_extraction.google_json_lines(done, tokens, values["layers"],
                                                             layers):
                write_line(line)
        done += len(batch)
        progress.add(len(batch))
    progress.finish()
    return done


def main(_):
    check_flags()
    model_inputs = run_setup.load_model_inputs(ModelFlags(
        FLAGS.bert_config_file, FLAGS.vocab_file, FLAGS.do_lower_case, FLAGS.init_checkpoint,
        FLAGS.max_seq_length))
    bert_config = model_inputs.bert_config
    layers = feature_extraction.parse_layers(FLAGS.layers, bert_config.num_hidden_layers)
    # The first batch is read before anything is written: a missing, empty or
    # undecodable input is reported with nothing left behind.
    input_batches = batches(FLAGS.input_file, FLAGS.batch_size)
    input_batches = itertools.chain([next(input_batches)], input_batches)
    fileio.makedirs(os.path.dirname(os.path.abspath(FLAGS.output_file)))
    graph = tf.Graph()
    with graph.as_default():
        inputs, outputs = feature_extraction.build_graph(
            bert_config, layers, FLAGS.pooling, FLAGS.normalize)
        modeling.init_from_checkpoint(model_inputs.init_checkpoint)
        with tf1.Session(graph=graph) as session:
            session.run(tf1.global_variables_initializer())
            with fileio.atomic_path(FLAGS.output_file) as temporary:
                if FLAGS.output_file.endswith(".npy"):
                    # The rows wait in an anonymous file (gone whatever happens)
                    # until their count, which the .npy header states, is known.
                    with tempfile.TemporaryFile(dir=os.path.dirname(temporary)) as spill:
                        npy = feature_extraction.NpyRows(spill)
                        count = extract(session, inputs, outputs, model_inputs.tokenizer,
                                        layers, input_batches, None, npy)
                        with open(temporary, "wb") as target:
                            npy.finish(target)
                else:
                    with open(temporary, "w", encoding="utf-8") as f:
                        count = extract(session, inputs, outputs, model_inputs.tokenizer,
                                        layers, input_batches,
                                        lambda line: f.write(line + "\n"), None)
    console.info("wrote %s of %d line(s) to %s", "vectors" if FLAGS.pooling else
                 "layers %s" % FLAGS.layers, count, FLAGS.output_file)


if __name__ == "__main__":
    common_flags.run_script(main)
