"""Contextual embeddings of text lines: Google's extract_features.py, and sentence vectors.

Google's command line works unchanged and writes its JSON Lines layout (every
token's values in the --layers asked for). --pooling=mean|cls writes one
sentence vector per input line instead (--normalize: L2-normalised, as
sentence-transformers does), as JSON Lines or, for an --output_file ending in
.npy, one float32 array [lines, hidden]. Input: one text per line, or
`text_a ||| text_b`. Lines stream in batches of --batch_size; with several
replicas (--num_cpu_replicas, --use_gpu --num_gpu_cores) each takes a batch
per step, and the output is the same as with one.
"""

import tensorflow_env  # noqa: F401  (first: TensorFlow reads its settings once)

import collections
import itertools

import tensorflow as tf
from absl import flags

import common_flags
import console
import distribution
import feature_extraction
import fileio
import run_options
import run_setup
from errors import InputError

tf1 = tf.compat.v1
FLAGS = flags.FLAGS

common_flags.define_model_flags()
common_flags.define_tokenizer_flags()
common_flags.define_device_flags()
common_flags.define_tpu_flags()
flags.DEFINE_string("input_file", None, "One text per line, or 'text_a ||| text_b'.")
flags.DEFINE_string("output_file", None, "JSON Lines (or .npy with --pooling).")
flags.DEFINE_string("layers", "-1,-2,-3,-4",
                    "Encoder layers written in Google's layout (-1 is the last).")
flags.DEFINE_integer("batch_size", 32, "Lines per batch (per replica).")
flags.DEFINE_bool("use_one_hot_embeddings", False, "TPU only; accepted and ignored.")
flags.DEFINE_enum("pooling", None, list(feature_extraction.POOLINGS),
                  "Write one vector per line instead of every token's: mean (of the "
                  "last layer's token states, as sentence-transformers) or cls.")
flags.DEFINE_bool("normalize", False, "With --pooling: L2-normalise each vector.")

TPU_FLAGS = ("use_tpu", "tpu_name", "tpu_zone", "gcp_project", "master", "num_tpu_cores",
             "use_one_hot_embeddings")

ModelFlags = collections.namedtuple("ModelFlags", [
    "bert_config_file", "vocab_file", "do_lower_case", "init_checkpoint", "max_seq_length"])


def check_flags():
    """InputError for a missing or contradictory flag; the TPU flags' warning."""
    common_flags.require_flags("input_file", "output_file", "vocab_file", "bert_config_file",
                               "init_checkpoint")
    run_options.check_whole_numbers({name: FLAGS[name].value for name in (
        "batch_size", "num_gpu_cores", "num_cpu_replicas")})
    # [CLS] and [SEP] need two positions.
    run_options.check_whole_numbers({"max_seq_length": FLAGS.max_seq_length}, minimum=2)
    if FLAGS.normalize and not FLAGS.pooling:
        raise InputError("--normalize applies to --pooling=mean|cls vectors")
    if FLAGS.pooling and FLAGS["layers"].present:
        raise InputError("--layers=%s applies to Google's token layout; --pooling=%s reads "
                         "the last layer" % (FLAGS.layers, FLAGS.pooling))
    if FLAGS.output_file.endswith(".npy") and not FLAGS.pooling:
        raise InputError("--output_file=%s: .npy holds one vector per line; add "
                         "--pooling=mean|cls (or write Google's JSON Lines)"
                         % FLAGS.output_file)
    given = [name for name in TPU_FLAGS if FLAGS[name].present]
    if given:
        console.warning("%s: TPU flags are ignored; running on this machine's %s",
                        ", ".join("--" + name for name in given),
                        "GPUs" if FLAGS.use_gpu else "CPU")
    fileio.check_output_file(FLAGS.output_file, "output_file")


def line_batches():
    """Batches of input lines (feature_extraction.read_batches); the first is read
    here, so a missing, empty or undecodable start fails before anything is written."""
    batches = feature_extraction.read_batches(FLAGS.input_file, FLAGS.batch_size)
    return itertools.chain([next(batches)], batches)


def batch_writer(tokenizer, layers):
    """to_lines of feature_extraction.open_output for the flags' output."""
    if FLAGS.output_file.endswith(".npy"):
        return None
    if FLAGS.pooling:
        return lambda first, feed, outputs: feature_extraction.vector_json_lines(
            first, outputs["vectors"])
    return lambda first, feed, outputs: feature_extraction.google_json_lines(
        first, feature_extraction.tokens_of(tokenizer, feed["input_ids"], feed["input_mask"]),
        outputs["layers"], layers)


def extract(session, replicas, tokenizer, batches, write, progress):
    """Runs every batch, len(replicas) at a time, and writes its results in order;
    returns the number of lines done."""
    done = 0
    for step in fileio.chunks(batches, len(replicas)):
        feeds = [feature_extraction.encode_lines(tokenizer, pairs, FLAGS.max_seq_length)
                 for _, pairs in step]
        for (first, pairs), feed, outputs in zip(
                step, feeds, feature_extraction.run_step(session, replicas, feeds)):
            write(first, feed, outputs)
            done += len(pairs)
        progress.add(sum(len(pairs) for _, pairs in step))
    progress.finish()
    return done


def main(_):
    check_flags()
    model_inputs = run_setup.load_model_inputs(ModelFlags(
        FLAGS.bert_config_file, FLAGS.vocab_file, FLAGS.do_lower_case, FLAGS.init_checkpoint,
        FLAGS.max_seq_length))
    layers = None if FLAGS.pooling else feature_extraction.parse_layers(
        FLAGS.layers, model_inputs.bert_config.num_hidden_layers)
    devices = distribution.replica_devices(FLAGS.use_gpu, FLAGS.num_gpu_cores,
                                           FLAGS.num_cpu_replicas)
    batches = line_batches()
    total = fileio.count_lines(FLAGS.input_file)
    what = ("%s%s vectors" % ("normalized " if FLAGS.normalize else "", FLAGS.pooling)
            if FLAGS.pooling else "layers %s" % FLAGS.layers)
    console.info("extracting %s of %s line(s) on %d replica(s) (%s), batches of %d line(s), "
                 "to %s", what, total if total is not None else "the", len(devices),
                 ", ".join(devices), FLAGS.batch_size, FLAGS.output_file)
    graph = tf.Graph()
    with graph.as_default():
        replicas = feature_extraction.build_replicas(
            model_inputs.bert_config, model_inputs.init_checkpoint, devices, layers,
            FLAGS.pooling, FLAGS.normalize)
        with tf1.Session(graph=graph, config=distribution.make_session_config(devices)) \
                as session, feature_extraction.open_output(
                    FLAGS.output_file, batch_writer(model_inputs.tokenizer, layers)) as write:
            session.run(tf1.global_variables_initializer())
            count = extract(session, replicas, model_inputs.tokenizer, batches, write,
                            console.Progress("line", total))
    console.info("wrote %s of %d line(s) to %s", what, count, FLAGS.output_file)


if __name__ == "__main__":
    common_flags.run_script(main)
