"""Fine-tune, evaluate, predict with and export a BERT sentence (pair) classifier.

GLUE tasks (cola, mnli, mnli-mm, mrpc, xnli, qqp, sst-2, rte, qnli) in their
file layouts, or `--task_name=custom` for your own TSV/CSV/JSON Lines files
(columns named by flags), single- or multi-label. One command line of Google's
run_classifier.py works unchanged; see README.md for the new flags.
"""

import importlib
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # CUDA plugin chatter on CPU machines

from absl import flags  # noqa: E402

import classifier  # noqa: E402
import classifier_data  # noqa: E402
import common_flags  # noqa: E402
import fine_tuning  # noqa: E402
import modeling  # noqa: E402
import run_setup  # noqa: E402
from errors import InputError  # noqa: E402

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


def main(_):
    options = common_flags.read_run_options()
    processor = make_processor()
    label_list = run_setup.choose_label_list(options.output_dir, options.do_train,
                                             lambda: processor.get_labels(FLAGS.data_dir))
    task = classifier.ClassifierTask(
        read_examples(processor, label_list, options), label_list,
        multi_label=processor.is_multi_label, threshold=FLAGS.multi_label_threshold,
        pooling=FLAGS.pooling, label_separator=FLAGS.label_separator or "|",
        task_name=FLAGS.task_name, serving_compat=FLAGS.serving_compat)
    fine_tuning.run(task, options)


if __name__ == "__main__":
    common_flags.run_script(main)
