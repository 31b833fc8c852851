"""Every user mistake is one "error: " line naming the file (and line) or flag.

Each case runs run_custom_classifier.py in a forked child of one process that
imported TensorFlow once (tests/bad_input.py: the exit code and stderr are the
real ones) and checks: exit code 1, stderr is exactly one non-empty line
starting with "error: " that names the file, line or flag, and output_dir is
byte-for-byte as it was before (absent or empty if it did not exist).
"""

import collections
import json
import os
import shutil

import pytest

import bad_input
import tiny

Case = collections.namedtuple("Case", ["setup", "expected"])
"""setup(world, case_dir) -> (flags dict overriding the good command, extra args);
it may also fill case_dir/out (the output_dir) to stand for an earlier run.
expected(world, case_dir) -> substrings the error line must contain."""

GOOD_TRAIN = b"label,sentence\n0,the plot was dull\n1,a great film\n0,awful acting\n"
GOOD_DEV = b"label,sentence\n1,good music\n0,a bad story\n"


def _data(case_dir, train=GOOD_TRAIN, dev=GOOD_DEV):
    """A data dir in case_dir with train.csv and dev.csv (None: the file is absent)."""
    data_dir = os.path.join(case_dir, "data")
    os.makedirs(data_dir)
    for name, content in (("train.csv", train), ("dev.csv", dev)):
        if content is not None:
            with open(os.path.join(data_dir, name), "wb") as f:
                f.write(content)
    return data_dir


def _with_data(train=GOOD_TRAIN, dev=GOOD_DEV, **flags):
    def setup(world, case_dir):
        return dict(flags, data_dir=_data(case_dir, train, dev)), []
    return setup


def _flags(*extra, **flags):
    return lambda world, case_dir: (dict(flags), list(extra))


def _train_csv(case_dir):
    return os.path.join(case_dir, "data", "train.csv")


def _dev_csv(case_dir):
    return os.path.join(case_dir, "data", "dev.csv")


def _train_is_a_directory(world, case_dir):
    data_dir = _data(case_dir, train=None)
    os.makedirs(os.path.join(data_dir, "train.csv"))
    return {"data_dir": data_dir}, []


def _train_unreadable(world, case_dir):
    data_dir = _data(case_dir)
    os.chmod(os.path.join(data_dir, "train.csv"), 0)
    return {"data_dir": data_dir}, []


def _model_copy(world, case_dir, edit):
    """A copy of the good model folder in case_dir, changed by edit(folder)."""
    folder = os.path.join(case_dir, "model")
    shutil.copytree(world.model_dir, folder)
    edit(folder)
    return folder


def _vocab_size_mismatch(world, case_dir):
    def edit(folder):
        with open(os.path.join(folder, "vocab.txt"), "a") as f:
            f.write("extra\n")
    return {"vocab_file": os.path.join(_model_copy(world, case_dir, edit), "vocab.txt")}, []


def _vocab_without_sep(world, case_dir):
    def edit(folder):
        path = os.path.join(folder, "vocab.txt")
        with open(path) as f:
            text = f.read()
        with open(path, "w") as f:
            f.write(text.replace("[SEP]\n", "sep\n"))
    return {"vocab_file": os.path.join(_model_copy(world, case_dir, edit), "vocab.txt")}, []


def _config_missing_field(world, case_dir):
    def edit(folder):
        path = os.path.join(folder, "bert_config.json")
        with open(path) as f:
            config = json.load(f)
        del config["hidden_size"]
        with open(path, "w") as f:
            json.dump(config, f)
    folder = _model_copy(world, case_dir, edit)
    return {"bert_config_file": os.path.join(folder, "bert_config.json")}, []


def _checkpoint_truncated(world, case_dir):
    def edit(folder):
        data = os.path.join(folder, "bert_model.ckpt.data-00000-of-00001")
        with open(data, "r+b") as f:
            f.truncate(1000)
    folder = _model_copy(world, case_dir, edit)
    return {"init_checkpoint": os.path.join(folder, "bert_model.ckpt")}, []


def _output_dir_of_an_interrupted_run(world, case_dir):
    """An output_dir an interrupted first run left: labels and features, no checkpoint."""
    out = os.path.join(case_dir, "out")
    os.makedirs(out)
    with open(os.path.join(out, "label_list.json"), "w") as f:
        f.write('["0", "1"]\n')
    with open(os.path.join(out, "train-0123456789abcdef.tf_record"), "wb") as f:
        f.write(b"\0" * 64)
    return {}, ["--nodo_train"]


def _output_dir_with_other_labels(world, case_dir):
    out = os.path.join(case_dir, "out")
    os.makedirs(out)
    with open(os.path.join(out, "label_list.json"), "w") as f:
        f.write('["neg", "pos"]\n')
    return {}, []


def _output_dir_with_other_model(extra):
    def setup(world, case_dir):
        # A run of a model with intermediate_size 48 where ours has 64, same labels.
        out = os.path.join(case_dir, "out")
        shutil.copytree(world.other_trained_dir, out)
        return {}, list(extra)
    return setup


def _resume_with_accumulation(world, case_dir):
    # A run without accumulation, interrupted at step 3 of 15.
    shutil.copytree(world.trained_dir, _out(case_dir))
    return {"num_train_epochs": "40"}, ["--gradient_accumulation_steps=2"]


def _output_dir_trained_with_mean_pooling(world, case_dir):
    shutil.copytree(world.trained_dir, _out(case_dir))
    with open(os.path.join(_out(case_dir), "head_settings.json"), "w") as f:
        f.write('{"pooling": "mean"}\n')
    return {}, ["--nodo_train"]


def _output_dir_is_a_file(world, case_dir):
    os.makedirs(case_dir, exist_ok=True)
    with open(os.path.join(case_dir, "out"), "w") as f:
        f.write("not a folder\n")
    return {}, []


def _uncased_model_cased_flag(world, case_dir):
    return {"init_checkpoint": world.uncased["init_checkpoint"],
            "vocab_file": world.uncased["vocab_file"],
            "bert_config_file": world.uncased["bert_config_file"]}, ["--do_lower_case=false"]


def _out(case_dir):
    return os.path.join(case_dir, "out")


CASES = {
    # data files
    "train_file_missing": Case(
        _with_data(train=None),
        lambda w, d: [os.path.join(d, "data") + ": no train.tsv or train.csv", "--train_file"]),
    "train_file_option_not_found": Case(
        _with_data(train_file="absent.csv"),
        lambda w, d: [os.path.join(d, "data", "absent.csv") + ": file not found"]),
    "train_file_is_a_directory": Case(
        _train_is_a_directory, lambda w, d: [_train_csv(d) + ": is a directory"]),
    "train_file_unreadable": Case(
        _train_unreadable, lambda w, d: [_train_csv(d) + ": cannot read the file"]),
    "missing_column": Case(
        _with_data(text_a_column="review"),
        lambda w, d: [_train_csv(d) + ":1: no column 'review' (--text_a_column)"]),
    "label_not_in_label_set": Case(
        _with_data(train=GOOD_TRAIN + b"2,the story\n", labels="0,1"),
        lambda w, d: [_train_csv(d) + ":5: label '2' is not one of", "--labels"]),
    "empty_train_file": Case(
        _with_data(train=b""), lambda w, d: [_train_csv(d) + ": no examples"]),
    "non_utf8_bytes": Case(
        _with_data(train=b"label,sentence\n0,the plot\n1,a gr\xe9at film\n"),
        lambda w, d: [_train_csv(d) + ":3: not valid utf-8: byte 0xe9"]),
    "wrong_number_of_fields": Case(
        _with_data(train=GOOD_TRAIN + b"1,good,great\n"),
        lambda w, d: [_train_csv(d) + ":5: expected 2 fields (as on line 1), got 3"]),
    "dev_label_not_in_training_labels": Case(
        _with_data(dev=GOOD_DEV + b"7,the film\n"),
        lambda w, d: [_dev_csv(d) + ":4: label '7' is not one of the 2 labels found in "
                      + _train_csv(d)]),
    # model files and flags
    "max_seq_length_longer_than_positions": Case(
        _flags(max_seq_length="128"),
        lambda w, d: ["--max_seq_length=128", "max_position_embeddings 64"]),
    "max_seq_length_too_short": Case(
        _flags(max_seq_length="1"), lambda w, d: ["--max_seq_length", "got 1"]),
    "checkpoint_of_another_config": Case(
        lambda w, d: ({"init_checkpoint": w.other["init_checkpoint"]}, []),
        lambda w, d: [w.other["init_checkpoint"] + ": variable", "[32, 48]", "[32, 64]"]),
    "checkpoint_truncated": Case(
        _checkpoint_truncated,
        lambda w, d: [os.path.join(d, "model", "bert_model.ckpt") + ": cannot read"]),
    "vocab_size_does_not_match_config": Case(
        _vocab_size_mismatch,
        lambda w, d: [os.path.join(d, "model", "vocab.txt") + ": has 29 tokens",
                      "vocab_size is 28"]),
    "vocab_without_sep_token": Case(
        _vocab_without_sep,
        lambda w, d: [os.path.join(d, "model", "vocab.txt"), "missing [SEP]"]),
    "config_missing_field": Case(
        _config_missing_field,
        lambda w, d: [os.path.join(d, "model", "bert_config.json")
                      + ": missing required field(s) 'hidden_size'"]),
    "uncased_checkpoint_with_do_lower_case_false": Case(
        _uncased_model_cased_flag,
        lambda w, d: ["--do_lower_case=False", w.uncased["init_checkpoint"],
                      "--do_lower_case=True"]),
    "more_gpus_than_visible": Case(
        _flags("--use_gpu", "--num_gpu_cores=2"),
        lambda w, d: ["--num_gpu_cores=2 but 0 GPU(s) are visible"]),
    "use_tpu": Case(_flags("--use_tpu"), lambda w, d: ["--use_tpu"]),
    "unknown_task": Case(
        _flags(task_name="nosuchtask"), lambda w, d: ["--task_name", "'nosuchtask'"]),
    "zero_epochs": Case(_flags(num_train_epochs="0"), lambda w, d: ["--num_train_epochs"]),
    "malformed_flag_value": Case(
        _flags(max_seq_length="abc"), lambda w, d: ["--max_seq_length=abc"]),
    "stray_positional_argument": Case(
        _flags("--do_lower_case", "false"), lambda w, d: ["unexpected argument", "false"]),
    # output_dir
    "eval_without_trained_checkpoint": Case(
        _flags("--nodo_train"), lambda w, d: ["--output_dir=" + _out(d), "--do_train"]),
    "eval_in_output_dir_of_an_interrupted_run": Case(
        _output_dir_of_an_interrupted_run,
        lambda w, d: ["--output_dir=" + _out(d), "no trained checkpoint"]),
    "output_dir_trained_with_other_labels": Case(
        _output_dir_with_other_labels,
        lambda w, d: [os.path.join(_out(d), "label_list.json") + ":", "'neg', 'pos'"]),
    "output_dir_checkpoint_of_another_config": Case(
        _output_dir_with_other_model([]),
        lambda w, d: [os.path.join(_out(d), "model.ckpt-3") + ": variable", "[32, 48]",
                      "--output_dir=" + _out(d)]),
    "output_dir_checkpoint_of_another_config_eval_only": Case(
        _output_dir_with_other_model(["--nodo_train"]),
        lambda w, d: [os.path.join(_out(d), "model.ckpt-3") + ": variable", "[32, 48]",
                      "--output_dir=" + _out(d)]),
    "resume_with_other_gradient_accumulation": Case(
        _resume_with_accumulation,
        lambda w, d: ["--gradient_accumulation_steps=2",
                      os.path.join(_out(d), "model.ckpt-3") + " was trained without"]),
    "output_dir_trained_with_other_pooling": Case(
        _output_dir_trained_with_mean_pooling,
        lambda w, d: [os.path.join(_out(d), "head_settings.json") + ":", "--pooling=mean"]),
    "output_dir_is_a_file": Case(
        _output_dir_is_a_file, lambda w, d: ["--output_dir=" + _out(d), "is a file"]),
}

SKIPS = {"train_file_unreadable": (hasattr(os, "geteuid") and os.geteuid() == 0,
                                   "root reads files whatever their permissions")}


class World:
    """The shared model folders; each case makes its own data and output dirs."""

    def __init__(self, root):
        self.root = root
        self.model = tiny.write_tiny_model(os.path.join(root, "model"))
        self.model_dir = os.path.join(root, "model")
        self.other = tiny.write_tiny_model(os.path.join(root, "other"), intermediate_size=48)
        self.uncased = tiny.write_tiny_model(os.path.join(root, "uncased_L-12_H-768_A-12"))
        # What runs of our model and of the `other` model leave in their output_dir.
        self.trained_dir = os.path.join(root, "trained")
        _write_trained_checkpoint(self.trained_dir, self.model["vocab_file"], step=3)
        self.other_trained_dir = os.path.join(root, "other_trained")
        _write_trained_checkpoint(self.other_trained_dir, self.model["vocab_file"], step=3,
                                  intermediate_size=48)
        self.data_dir = os.path.join(root, "data")
        os.makedirs(self.data_dir)
        with open(os.path.join(self.data_dir, "train.csv"), "wb") as f:
            f.write(GOOD_TRAIN)
        with open(os.path.join(self.data_dir, "dev.csv"), "wb") as f:
            f.write(GOOD_DEV)


def _write_trained_checkpoint(folder, vocab_file, step, **config_overrides):
    """output_dir of a classifier run with labels 0, 1 saved at `step` (no optimizer
    slots): BERT, the head, global_step, label_list.json."""
    import tensorflow as tf

    from bert_toolkit.model import modeling
    tf1 = tf.compat.v1
    with open(vocab_file) as f:
        vocab_size = len(f.read().split())
    config = tiny.tiny_config(vocab_size=vocab_size, **config_overrides)
    os.makedirs(folder)
    graph = tf.Graph()
    with graph.as_default():
        modeling.BertModel(config, False, tf1.placeholder(tf.int32, [None, 8]))
        tf1.get_variable("output_weights", [2, config.hidden_size])
        tf1.get_variable("output_bias", [2])
        tf1.train.get_or_create_global_step()
        with tf1.Session(graph=graph) as session:
            session.run(tf1.global_variables_initializer())
            tf1.train.Saver(save_relative_paths=True).save(
                session, os.path.join(folder, "model.ckpt"), global_step=step,
                write_meta_graph=False)
    with open(os.path.join(folder, "label_list.json"), "w") as f:
        f.write('["0", "1"]\n')


def _command(world, name):
    """(case dir, command line) of one case, its files made."""
    case = CASES[name]
    case_dir = os.path.join(world.root, "cases", name)
    os.makedirs(case_dir)
    flags, extra = case.setup(world, case_dir)
    values = dict(task_name="custom", data_dir=world.data_dir, text_a_column="sentence",
                  label_column="label", vocab_file=world.model["vocab_file"],
                  bert_config_file=world.model["bert_config_file"],
                  init_checkpoint=world.model["init_checkpoint"],
                  output_dir=_out(case_dir), max_seq_length="16", train_batch_size="4",
                  num_train_epochs="1", save_checkpoints_steps="5")
    values.update(flags)
    return case_dir, (["run_custom_classifier.py"]
                      + ["--%s=%s" % item for item in values.items()]
                      + ["--do_train", "--do_eval"] + extra)


@pytest.fixture(scope="module")
def results(request):
    """(world, name -> (case dir, Result)) of every selected case, run once per
    session (bad_input.run_once); world holds the World's attributes."""
    selected = [item.callspec.params["name"] for item in request.session.items
                if getattr(item, "originalname", None) == "test_bad_input_is_one_error_line"
                and item.path == request.node.path
                and not SKIPS.get(item.callspec.params["name"], (False,))[0]]

    def run_cases(root):
        world = World(root)
        case_dirs, commands = zip(*[_command(world, name) for name in selected]) \
            if selected else ((), ())
        ran = bad_input.run_commands(list(commands), [[_out(d)] for d in case_dirs])
        return vars(world), dict(zip(selected, zip(case_dirs, ran)))

    return bad_input.run_once(request, "classifier_bad_input", run_cases)


@pytest.mark.parametrize("name", [
    pytest.param(name, marks=pytest.mark.skipif(SKIPS[name][0], reason=SKIPS[name][1]))
    if name in SKIPS else name
    for name in CASES])
def test_bad_input_is_one_error_line(results, name):
    world, by_name = results
    case_dir, result = by_name[name]
    bad_input.check_one_error_line(result, CASES[name].expected(world, case_dir))
