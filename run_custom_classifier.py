"""Fine-tune, evaluate, predict with and export a BERT sentence (pair) classifier.

GLUE tasks (cola, mnli, mnli-mm, mrpc, xnli, qqp, sst-2, rte, qnli) in their
file layouts, or `--task_name=custom` for your own TSV/CSV/JSON Lines files
(columns named by flags), single- or multi-label. One command line of Google's
run_classifier.py works unchanged; see README.md for the new flags.
"""

import importlib
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
from absl import flags  # noqa: E402

import classifier  # noqa: E402
import classifier_data  # noqa: E402
import common_flags  # noqa: E402
import distribution  # noqa: E402
import fine_tuning  # noqa: E402
import input_pipeline  # noqa: E402
import modeling  # noqa: E402
import training  # noqa: E402
from errors import InputError  # noqa: E402

tf1 = tf.compat.v1
FLAGS = flags.FLAGS

common_flags.define_model_flags()
common_flags.define_run_flags()
common_flags.define_fine_tuning_flags()
flags.DEFINE_string("task_name", None, "Task: %s." % ", ".join(sorted(classifier_data.PROCESSORS)))
flags.DEFINE_string("processor_module", None,
                    "Python module to import first (it registers your own DataProcessor "
                    "with classifier_data.register_processor).")
flags.DEFINE_float("multi_label_threshold", 0.5,
                   "Multi-label: a label is predicted when its probability reaches this.")
# The custom task's options; None means "the processor's default".
_CUSTOM_OPTIONS = {
    "text_a_column": "Column (header name or 0-based index; JSON key) of the text.",
    "text_b_column": "Column of the second text of a sentence pair (optional).",
    "label_column": "Column of the label(s).",
    "id_column": "Column of an example id, copied to test_results.tsv (optional).",
    "train_file": "Training file in data_dir (default train.<format>).",
    "dev_file": "Dev file in data_dir (default dev.<format>).",
    "test_file": "Test file in data_dir (default test.<format>).",
    "file_format": "tsv, csv or jsonl (default: from the file extension).",
    "labels": "Comma-separated label list (default: the labels of the training file).",
    "label_separator": "Multi-label: separator of the labels in one field (default |).",
    "encoding": "Encoding of the data files (default utf-8).",
}
for _name, _help in _CUSTOM_OPTIONS.items():
    flags.DEFINE_string(_name, None, "custom task: " + _help)
flags.DEFINE_bool("has_header", None, "custom task: the tsv/csv files have a header row "
                  "(default true).")
flags.DEFINE_bool("multi_label", None, "custom task: several labels per example.")


def make_processor():
    if FLAGS.processor_module:
        try:
            importlib.import_module(FLAGS.processor_module)
        except ImportError as e:
            raise InputError("--processor_module=%s: cannot import it (%s)"
                             % (FLAGS.processor_module, e))
    if not FLAGS.task_name:
        raise InputError("--task_name is required")
    options = {name: FLAGS[name].value
               for name in list(_CUSTOM_OPTIONS) + ["has_header", "multi_label"]}
    return classifier_data.get_processor(FLAGS.task_name, **options)


def read_examples(processor, label_list):
    """Every split the run needs, read (and so validated) before anything is written."""
    if not FLAGS.data_dir and (FLAGS.do_train or FLAGS.do_eval or FLAGS.do_predict):
        raise InputError("--data_dir is required with --do_train/--do_eval/--do_predict")
    readers = {"train": processor.get_train_examples, "eval": processor.get_dev_examples,
               "predict": processor.get_test_examples}
    wanted = {"train": FLAGS.do_train, "eval": FLAGS.do_eval, "predict": FLAGS.do_predict}
    examples = {split: readers[split](FLAGS.data_dir) for split in readers if wanted[split]}
    for split, split_examples in examples.items():
        if not split_examples:
            raise InputError("--data_dir=%s: the %s file holds no examples"
                             % (FLAGS.data_dir, split))
        if split != "predict":
            unknown = {label for e in split_examples
                       for label in (e.label if processor.is_multi_label else (e.label,))
                       if label not in label_list}
            if unknown:
                raise InputError("--data_dir=%s: %s labels %s are not in the label list %s"
                                 % (FLAGS.data_dir, split, sorted(unknown), label_list))
    return examples


def head_variable_shapes(num_labels, hidden_size):
    """The variables classifier.make_head_fn adds on top of BERT."""
    return {"output_weights": [num_labels, hidden_size], "output_bias": [num_labels]}


def main(_):
    common_flags.check_run_flags()
    common_flags.check_fine_tuning_flags()
    if not (FLAGS.do_train or FLAGS.do_eval or FLAGS.do_predict or FLAGS.save_for_serving):
        raise InputError("nothing to do: give at least one of --do_train, --do_eval, "
                         "--do_predict, --save_for_serving")
    model_inputs = fine_tuning.load_model_inputs(FLAGS)
    runtime = fine_tuning.resolve_runtime(FLAGS)
    processor = make_processor()
    saved_labels = fine_tuning.read_saved_labels(FLAGS.output_dir)
    if saved_labels is not None and not FLAGS.do_train:
        label_list = saved_labels  # the labels the model in output_dir was trained with
    else:
        label_list = list(processor.get_labels(FLAGS.data_dir))
    multi_label = processor.is_multi_label
    examples = read_examples(processor, label_list)
    if not FLAGS.do_train:
        fine_tuning.require_trained_model(FLAGS.output_dir, "evaluation, prediction or export")
    fine_tuning.check_saved_labels(FLAGS.output_dir, label_list)
    num_train = len(examples["train"]) if FLAGS.do_train else 0
    plan = distribution.plan_training(
        num_train, FLAGS.num_train_epochs, FLAGS.train_batch_size, len(runtime.devices),
        FLAGS.gradient_accumulation_steps, FLAGS.warmup_proportion)
    bert_config = model_inputs.bert_config
    fine_tuning.check_resumable(FLAGS.output_dir, dict(
        modeling.bert_variable_shapes(bert_config),
        **head_variable_shapes(len(label_list), bert_config.hidden_size)),
        plan if FLAGS.do_train else None)

    # Convert every split to features now, so a tokenizer complaint (a vocab
    # without [SEP], a sequence length too short for a pair) also comes before
    # anything is written; a split whose TFRecord is cached is not converted.
    cache_dir = FLAGS.cache_dir or FLAGS.output_dir
    spec = classifier.feature_spec(FLAGS.max_seq_length, len(label_list), multi_label)
    converted = {}
    for split, split_examples in examples.items():
        key = {"examples": classifier.examples_digest(split_examples),
               "vocab": classifier_data.input_fingerprint([FLAGS.vocab_file]),
               "do_lower_case": FLAGS.do_lower_case, "max_seq_length": FLAGS.max_seq_length,
               "labels": label_list, "multi_label": multi_label, "format": 1}
        path, count = input_pipeline.find_cached_tfrecord(cache_dir, split, key)
        rows = None if count is not None else list(classifier.feature_rows(
            split_examples, model_inputs.tokenizer, FLAGS.max_seq_length, label_list,
            multi_label))
        converted[split] = (key, rows)

    # Nothing has been written so far; from here on output_dir is ours.
    fine_tuning.check_and_save_labels(FLAGS.output_dir, label_list)
    records = {}
    for split, (key, rows) in converted.items():
        path, count = input_pipeline.cached_tfrecord(cache_dir, split, key, lambda: rows)
        tf1.logging.info("%s: %d examples in %s", split, count, path)
        records[split] = (path, count)
    del converted

    def features(split, batch_size, skip_batches=0):
        path, count = records[split]
        if split == "eval":
            return input_pipeline.make_eval_input_fn(path, spec, batch_size, count,
                                                     len(runtime.devices))
        return input_pipeline.make_input_fn(path, spec, batch_size, split == "train",
                                            seed=FLAGS.seed, skip_batches=skip_batches)

    model_fn = training.build_model_fn(
        model_inputs.bert_config,
        classifier.make_head_fn(len(label_list), model_inputs.bert_config.hidden_dropout_prob,
                                multi_label, FLAGS.multi_label_threshold),
        plan, init_checkpoint=model_inputs.init_checkpoint,
        learning_rate=FLAGS.learning_rate, precision=runtime.precision,
        inference_precision=runtime.inference_precision, optimizer=FLAGS.optimizer,
        weight_decay_rate=FLAGS.weight_decay_rate,
        log_every_n_steps=FLAGS.log_every_n_steps, output_dir=FLAGS.output_dir)
    estimator = fine_tuning.make_estimator(FLAGS, runtime, model_fn)
    tf1.logging.info("devices %s, precision %s (inference %s)", ",".join(runtime.devices),
                     runtime.precision, runtime.inference_precision)

    if FLAGS.do_train:
        tf1.logging.info(distribution.describe_plan(plan))
        fine_tuning.train(
            estimator,
            lambda skip_batches: features("train", FLAGS.train_batch_size, skip_batches),
            plan)
    if FLAGS.do_eval:
        results = estimator.evaluate(features("eval", FLAGS.eval_batch_size))
        report = classifier.eval_report(results, label_list, multi_label)
        training.write_json_and_text(report,
                                     os.path.join(FLAGS.output_dir, "eval_results.json"),
                                     os.path.join(FLAGS.output_dir, "eval_results.txt"))
        tf1.logging.info("eval: %s", ", ".join("%s %.4f" % (k, report[k]) for k in (
            "accuracy", "eval_loss") if k in report))
    if FLAGS.do_predict:
        predictions = estimator.predict(features("predict", FLAGS.predict_batch_size),
                                        yield_single_examples=True)
        lines = classifier.prediction_lines(examples["predict"], predictions, label_list,
                                            multi_label, FLAGS.label_separator or "|")
        out_path = os.path.join(FLAGS.output_dir, "test_results.tsv")
        training.write_text_atomically(out_path, "".join(line + "\n" for line in lines))
        tf1.logging.info("predictions for %d examples written to %s",
                         len(examples["predict"]), out_path)
    if FLAGS.save_for_serving:
        fine_tuning.export(estimator, FLAGS, {
            "task": "classification", "task_name": FLAGS.task_name,
            "labels": label_list, "multi_label": multi_label,
            "multi_label_threshold": FLAGS.multi_label_threshold,
            "do_lower_case": FLAGS.do_lower_case, "max_seq_length": FLAGS.max_seq_length,
            "sentence_pairs": any(e.text_b is not None
                                  for split_examples in examples.values()
                                  for e in split_examples)})


if __name__ == "__main__":
    common_flags.run_script(main)
