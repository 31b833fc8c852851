"""Fine-tune, evaluate, predict with and export a BERT token labeller.

    --task_name=ner    named entities, CoNLL files tagged BIO or BIOES
    --task_name=pos    part-of-speech (or any per-word tag), CoNLL files
    --task_name=punct  punctuation restoration, trained from plain text

Files train.txt, dev.txt and test.txt in --data_dir (or --train_file, ...).
The multi-GPU fork's tasks PUNCT, NAMED_ENTITY and NORM run as punct, ner and
pos on its train.tsv/dev.tsv/test.tsv (a sentence a line: words, a tab,
labels; see seq_labeling_data.py); task names are case-insensitive.
Long sentences are split into overlapping windows and merged back, so every
word gets a label. The flags shared with run_custom_classifier.py (devices,
precision, accumulation, resume, export) work the same; see README.md and
seq_labeling.py.
"""

import tensorflow_env  # noqa: F401  (first: TensorFlow reads its settings once)

import os

from absl import flags

import common_flags
import fine_tuning
import run_setup
import seq_labeling
import seq_labeling_data
from errors import InputError

FLAGS = flags.FLAGS

common_flags.define_fine_tuning_script_flags()
flags.DEFINE_enum("task_name", None, list(seq_labeling_data.TASK_NAMES),
                  "ner (BIO/BIOES entities), pos (per-word tags) or punct "
                  "(punctuation restoration from plain text); the multi-GPU fork's "
                  "named_entity and norm (any case).", case_sensitive=False)
flags.DEFINE_string("train_file", None, "Training file (relative to --data_dir unless "
                    "absolute; default train.txt, or train.tsv in the fork's layout).")
flags.DEFINE_string("dev_file", None, "Evaluation file (relative to --data_dir; default "
                    "dev.txt or dev.tsv).")
flags.DEFINE_string("test_file", None, "Prediction file (relative to --data_dir; default "
                    "test.txt or test.tsv); its labels may be missing.")
flags.DEFINE_string("labels", None, "Comma-separated label list (default: the labels of "
                    "the training file, O first; plain-text punct's are fixed; the fork's "
                    "PUNCT and NAMED_ENTITY have default lists).")
flags.DEFINE_string("encoding", "utf-8", "Encoding of the data files.")
flags.DEFINE_integer("window_stride", None,
                     "Sentences longer than max_seq_length - 2 sub-tokens are cut into "
                     "windows starting this many sub-tokens apart (default: half a window).")

_FILE_FLAGS = {"train": "train_file", "eval": "dev_file", "predict": "test_file"}
_FILE_STEMS = {"train": "train", "eval": "dev", "predict": "test"}


def window_stride():
    """--window_stride, or half of the sub-tokens a window holds."""
    budget = FLAGS.max_seq_length - 2
    stride = FLAGS.window_stride if FLAGS.window_stride is not None else max(1, budget // 2)
    if not 1 <= stride <= budget:
        raise InputError("--window_stride=%d: expected 1 to %d (max_seq_length - 2, the "
                         "sub-tokens of one window)" % (stride, budget))
    return stride


def labels_from_text():
    """Whether the labels come from the text itself (punct on plain text)."""
    return FLAGS.task_name == "punct" and not (
        FLAGS.data_dir and seq_labeling_data.is_sentence_lines("punct", split_path("train")))


def flag_labels():
    """The --labels list (None if not given), checked."""
    if FLAGS.labels is None:
        return None
    if labels_from_text():
        raise InputError("--labels: the punct task's labels are fixed (%s)"
                         % ",".join(seq_labeling_data.PUNCT_LABELS))
    labels = [label.strip() for label in FLAGS.labels.split(",") if label.strip()]
    if not labels or len(set(labels)) != len(labels):
        raise InputError("--labels=%s: expected distinct comma-separated labels" % FLAGS.labels)
    if seq_labeling_data.task_kind(FLAGS.task_name) == "ner":
        bad = [label for label in labels if not seq_labeling_data.is_bioes_tag(label)]
        if bad:
            raise InputError("--labels: %r is not a BIO/BIOES tag (O, or B-, I-, E-, S- and "
                             "an entity type)" % bad[0])
    return labels


def split_path(split):
    name = FLAGS[_FILE_FLAGS[split]].value
    if name:
        return os.path.join(FLAGS.data_dir, name)
    return seq_labeling_data.default_split_path(FLAGS.data_dir, FLAGS.task_name,
                                                _FILE_STEMS[split])


def read(split):
    """The sentences of one split, labels read for train and eval (ner: BIO/BIOES)."""
    path = split_path(split)
    sentences = seq_labeling_data.read_split(path, FLAGS.task_name, split, split != "predict",
                                        FLAGS.encoding)
    if seq_labeling_data.task_kind(FLAGS.task_name) == "ner" and split != "predict":
        seq_labeling_data.check_ner_tags(sentences, path)
    return sentences


def read_examples(options):
    """(label list, every split the run needs), read and checked before any write."""
    wanted = {"train": options.do_train, "eval": options.do_eval,
              "predict": options.do_predict}
    if not FLAGS.data_dir and any(wanted.values()):
        raise InputError("--data_dir is required with --do_train/--do_eval/--do_predict")
    examples = {split: read(split) for split in wanted if wanted[split]}
    saved = run_setup.read_saved_labels(options.output_dir)
    given = flag_labels()
    if saved is not None and not options.do_train:
        label_list, origin = saved, "of the model in --output_dir=%s" % options.output_dir
    elif labels_from_text():
        label_list, origin = list(seq_labeling_data.PUNCT_LABELS), "of the punct task"
    elif given is not None:
        label_list, origin = given, "given by --labels"
    elif FLAGS.task_name in seq_labeling_data.FORK_DEFAULT_LABELS:
        label_list = list(seq_labeling_data.FORK_DEFAULT_LABELS[FLAGS.task_name])
        origin = "%s has by default (give --labels for others)" % FLAGS.task_name.upper()
    else:
        if "train" not in examples:
            examples["train"] = read("train")
        label_list = seq_labeling_data.labels_of(examples["train"])
        origin = "found in %s (or give --labels)" % split_path("train")
        if not options.do_train:
            del examples["train"]
    for split in ("train", "eval"):
        if split in examples:
            seq_labeling_data.check_sentence_labels(examples[split], label_list, origin,
                                               split_path(split))
    if "train" in examples:
        found = {label for sentence in examples["train"] for label in sentence.labels}
        if len(found) == 1:
            raise InputError("%s: every word is labelled %r; training needs words of at "
                             "least two labels" % (split_path("train"), found.pop()))
    return label_list, examples


def main(_):
    common_flags.require_flags("task_name")
    options = common_flags.read_run_options()
    stride = window_stride()
    label_list, examples = read_examples(options)
    label_lines = "predict" in examples and seq_labeling_data.is_sentence_lines(
        FLAGS.task_name, split_path("predict"))
    fine_tuning.run(seq_labeling.SeqLabelingTask(
        examples, label_list, seq_labeling_data.task_kind(FLAGS.task_name), stride,
        label_lines), options)


if __name__ == "__main__":
    common_flags.run_script(main)
