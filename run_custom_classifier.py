"""Fine-tune, evaluate, predict with and export a BERT sentence (pair) classifier.

GLUE tasks (cola, mnli, mnli-mm, mrpc, xnli, qqp, sst-2, rte, qnli) in their
file layouts, or `--task_name=custom` for your own TSV/CSV/JSON Lines files
(columns named by flags), single- or multi-label. One command line of Google's
run_classifier.py works unchanged; see README.md for the new flags.
"""

import tensorflow_env  # noqa: F401  (first: TensorFlow reads its settings once)

import importlib

from absl import flags

import classifier
import classifier_data
import common_flags
import console
import fine_tuning
import modeling
import run_setup
import text_windows
from errors import InputError

FLAGS = flags.FLAGS

common_flags.define_fine_tuning_script_flags(modeling.POOLING_MODES)
flags.DEFINE_string("task_name", None, "Task: %s." % ", ".join(sorted(classifier_data.PROCESSORS)))
flags.DEFINE_string("processor_module", None,
                    "Python module to import first (it registers your own DataProcessor "
                    "with classifier_data.register_processor).")
flags.DEFINE_enum("serving_compat", None, sorted(classifier.SERVING_COMPAT),
                  "With --save_for_serving: a serving_default signature for another "
                  "project's clients. bert_multi_gpu: the multi-GPU fork's request body "
                  "(input_ids, input_mask, segment_ids and label_ids, ignored) answered "
                  "with the probabilities alone. Default: this toolkit's signature.",
                  case_sensitive=False)
flags.DEFINE_string("class_weights", None,
                    "Training loss weight per label: 'balanced' (inverse frequency in the "
                    "training file) or one number per label in label-list order, comma-"
                    "separated. Single-label tasks.")
flags.DEFINE_enum("long_text", "truncate", ["truncate", "windows"],
                  "Texts longer than max_seq_length: truncate (Google's), or windows: "
                  "overlapping windows, each trained with the text's label, answered per "
                  "text by aggregating its windows (metrics count texts).")
flags.DEFINE_integer("doc_stride", None, "--long_text=windows: tokens between the starts "
                     "of a text's windows (default: half a window).")
flags.DEFINE_enum("window_aggregation", "mean", list(text_windows.AGGREGATIONS),
                  "--long_text=windows: mean or max of the windows' probabilities.")
flags.DEFINE_float("multi_label_threshold", 0.5,
                   "Multi-label: a label is predicted when its probability reaches this.")
# The custom task's options; None means "the processor's default".
_CUSTOM_OPTIONS = {
    "text_a_column": "Column (header name or 0-based index; JSON key) of the text.",
    "text_b_column": "Column of the second text of a sentence pair (optional).",
    "label_column": "Column of the label(s).",
    "id_column": "Column of an example id, copied to test_predictions.tsv (optional).",
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
flags.DEFINE_string("language", None, "xnli task: the language of the translated training "
                    "file and of the dev/test rows (default zh, as Google's code).")


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
               for name in list(_CUSTOM_OPTIONS) + ["has_header", "multi_label", "language"]}
    return classifier_data.get_processor(FLAGS.task_name, **options)


def read_examples(processor, label_list, options):
    """Every split the run needs, read (and so validated) before anything is written."""
    wanted = {"train": options.do_train, "eval": options.do_eval,
              "predict": options.do_predict}
    if not FLAGS.data_dir and any(wanted.values()):
        raise InputError("--data_dir is required with --do_train/--do_eval/--do_predict")
    readers = {"train": processor.get_train_examples, "eval": processor.get_dev_examples,
               "predict": processor.get_test_examples}
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
    if "train" in examples and not processor.is_multi_label:
        check_labels_vary(examples["train"])
    return examples


def check_labels_vary(train_examples):
    """InputError if every training example has one label: the classifier would
    learn to answer it always, and report accuracy 1.0 on a dev set like it."""
    found = {example.label for example in train_examples}
    if len(found) == 1:
        raise InputError("--data_dir=%s: every training example has the label %r; a "
                         "classifier needs examples of at least two labels (check "
                         "--label_column)" % (FLAGS.data_dir, found.pop()))


def label_weights(examples, label_list, options, multi_label):
    """The --class_weights of a training run (None: unweighted), logged."""
    if not FLAGS.class_weights:
        return None
    if not options.do_train or multi_label:
        raise InputError("--class_weights weighs the training loss of a single-label "
                         "task: %s" % ("it needs --do_train" if not options.do_train
                                       else "this task is multi-label"))
    weights = classifier.class_weights(FLAGS.class_weights,
                                       [e.label for e in examples["train"]], label_list)
    console.info("class weights: %s", ", ".join(
        "%s %.4g" % (label, weight) for label, weight in zip(label_list, weights)))
    return weights


def main(_):
    options = common_flags.read_run_options()
    processor = make_processor()
    label_list = run_setup.choose_label_list(options.output_dir, options.do_train,
                                             lambda: processor.get_labels(FLAGS.data_dir))
    examples = read_examples(processor, label_list, options)
    task = classifier.ClassifierTask(
        examples, label_list,
        multi_label=processor.is_multi_label, threshold=FLAGS.multi_label_threshold,
        pooling=FLAGS.pooling, label_separator=FLAGS.label_separator or "|",
        task_name=FLAGS.task_name, serving_compat=FLAGS.serving_compat,
        label_weights=label_weights(examples, label_list, options, processor.is_multi_label),
        **window_settings(options))
    fine_tuning.run(task, options)


def window_settings(options):
    """The ClassifierTask arguments of --long_text, --doc_stride, --window_aggregation."""
    stride = FLAGS.doc_stride
    if FLAGS.long_text != "windows":
        if stride is not None:
            raise InputError("--doc_stride applies to --long_text=windows")
        return {}
    if stride is None:
        stride = max(1, (options.max_seq_length - 2) // 2)
    text_windows.check_stride(stride, options.max_seq_length)
    return {"long_text": "windows", "doc_stride": stride,
            "window_aggregation": FLAGS.window_aggregation}


if __name__ == "__main__":
    common_flags.run_script(main)
