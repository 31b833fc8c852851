"""The flow every fine-tuning script shares, driven by the common flags.

check model inputs -> plan -> Estimator -> train / evaluate / predict / export.
Everything a user can get wrong (config, vocab, checkpoint, sequence length,
devices, precision, a missing trained model) is checked before the first byte
is written to output_dir, and reported as one InputError line.
"""

import collections
import json
import os

import tensorflow as tf

import distribution
import modeling
import tokenization
import training
from errors import InputError

tf1 = tf.compat.v1

ModelInputs = collections.namedtuple("ModelInputs", [
    "bert_config", "tokenizer", "init_checkpoint"])
Runtime = collections.namedtuple("Runtime", [
    "devices", "precision", "inference_precision"])


def load_model_inputs(flags_values):
    """Reads and cross-checks bert_config, vocab, lower-casing and init_checkpoint."""
    for name in ("bert_config_file", "vocab_file", "output_dir"):
        if not flags_values[name].value:
            raise InputError("--%s is required" % name)
    bert_config = modeling.BertConfig.from_json_file(flags_values.bert_config_file)
    modeling.check_max_seq_length(bert_config, flags_values.max_seq_length)
    tokenization.validate_case_matches_checkpoint(flags_values.do_lower_case,
                                                  flags_values.init_checkpoint)
    tokenizer = tokenization.FullTokenizer(flags_values.vocab_file,
                                           flags_values.do_lower_case)
    modeling.check_vocab_matches_config(bert_config, len(tokenizer.vocab),
                                        flags_values.vocab_file)
    init_checkpoint = None
    if flags_values.init_checkpoint:
        init_checkpoint = modeling.resolve_checkpoint(flags_values.init_checkpoint)
        modeling.check_checkpoint_compatible(modeling.bert_variable_shapes(bert_config),
                                             init_checkpoint)
    return ModelInputs(bert_config, tokenizer, init_checkpoint)


def resolve_runtime(flags_values):
    """Devices and precisions from the flags; InputError if they cannot exist here."""
    devices = distribution.replica_devices(flags_values.use_gpu, flags_values.num_gpu_cores,
                                           flags_values.num_cpu_replicas)
    precision = distribution.resolve_precision(flags_values.precision,
                                               flags_values.use_fp16, flags_values.use_gpu)
    inference_precision = distribution.resolve_precision(flags_values.inference_precision,
                                                         use_gpu=flags_values.use_gpu)
    if precision == "fp16" and not flags_values.use_gpu:
        tf1.logging.warning("fp16 on a CPU is very slow (no fp16 matrix units); "
                            "bf16 or fp32 is the better choice here")
    return Runtime(devices, precision, inference_precision)


def require_trained_model(output_dir, what):
    """Raises InputError if output_dir holds no checkpoint to evaluate/predict/export."""
    if training.latest_checkpoint_or_none(output_dir) is None:
        raise InputError("--output_dir=%s has no trained checkpoint for %s (add --do_train "
                         "or point --output_dir at a trained model)" % (output_dir, what))


def make_estimator(flags_values, runtime, model_fn):
    run_config = distribution.make_run_config(
        flags_values.output_dir, runtime.devices, use_xla=flags_values.use_xla,
        save_checkpoints_steps=flags_values.save_checkpoints_steps,
        keep_checkpoint_max=flags_values.keep_checkpoint_max, seed=flags_values.seed)
    return tf.estimator.Estimator(model_fn=model_fn, config=run_config)


def train(estimator, input_fn, plan):
    """Trains up to plan.num_train_steps; a re-run resumes from the last checkpoint."""
    done = training.latest_checkpoint_or_none(estimator.model_dir)
    if done:
        step = tf.train.load_checkpoint(done).get_tensor("global_step")
        if step >= plan.num_train_steps:
            tf1.logging.info("output_dir already holds step %d of %d: nothing to train",
                             step, plan.num_train_steps)
            return
        tf1.logging.info("resuming from %s (step %d of %d)", done, step,
                         plan.num_train_steps)
    estimator.train(input_fn, max_steps=plan.num_train_steps)


def saved_labels_path(output_dir):
    return os.path.join(output_dir, "label_list.json")


def read_saved_labels(output_dir):
    """The label list a previous run in output_dir trained with, or None."""
    path = saved_labels_path(output_dir)
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as f:
        return json.load(f)


def check_and_save_labels(output_dir, label_list):
    """Refuses to continue a model trained with another label set; records ours."""
    saved = read_saved_labels(output_dir)
    if saved is not None and saved != list(label_list):
        raise InputError("%s: this output_dir was trained with labels %s, but the data has "
                         "%s (use a new --output_dir)"
                         % (saved_labels_path(output_dir), saved, list(label_list)))
    if saved is None:
        tf.io.gfile.makedirs(output_dir)
        training.write_text_atomically(saved_labels_path(output_dir),
                                       json.dumps(list(label_list)) + "\n")


def export(estimator, flags_values, serving_config):
    """Exports output_dir/serving/<version>/ with vocab and settings in assets.extra/."""
    settings_path = os.path.join(flags_values.output_dir, "serving_config.json")
    training.write_text_atomically(settings_path,
                                   json.dumps(serving_config, indent=2, sort_keys=True) + "\n")
    path = training.export_for_serving(
        estimator, os.path.join(flags_values.output_dir, "serving"),
        flags_values.max_seq_length,
        {"vocab.txt": flags_values.vocab_file, "serving_config.json": settings_path})
    tf1.logging.info("exported SavedModel for TensorFlow Serving: %s", path)
    return path
