"""One table of user mistakes for every entry script but the classifier's own
(tests/test_classifier_bad_input.py): each is one "error: " line naming the file,
line, flag or variable, exit 1, and every folder the run could write to left
byte-for-byte as it was (tests/bad_input.py runs them in forked children).

Setups build on one World of tiny, valid inputs; each case breaks one thing.
A setup returns (argv, watched paths[, stdin]); argv starts with the script.
"{case}" in an expected part stands for the case's folder, "{world}" for the
world's.
"""

import collections
import json
import os
import shutil
import subprocess
import sys

import pytest

import bad_input
import script_runs
import tiny
from tiny import make_hf_dir, tiny_hf_config, tiny_hf_state

Case = collections.namedtuple("Case", ["setup", "expected", "preamble"], defaults=(None,))
"""preamble: what stderr may say before the error (see bad_input.check_one_error_line)."""
STREAM_START = r"reading \d+ input file\(s\) with \d+ worker\(s\), writing "

NER_TRAIN = "the\tO\ngood\tB-POS\nmusic\tI-POS\n\nbad\tB-NEG\nfilm\tO\n"
NER_DEV = "a\tO\ngreat\tB-POS\n"
CORPUS = ("the movie was good .\nthe plot was not bad .\n\na very fine film .\n"
          "the acting was dull and the music awful .\n\nthe story is great .\n"
          "a good film , but the plot was dull .\n")


class World:
    """Valid inputs for every script, made once."""

    def __init__(self, root):
        self.root = root
        self.model = tiny.write_tiny_model(os.path.join(root, "model"))
        self.model_args = ["--vocab_file=" + self.model["vocab_file"],
                           "--bert_config_file=" + self.model["bert_config_file"],
                           "--init_checkpoint=" + self.model["init_checkpoint"]]
        self.cls_data = os.path.join(root, "cls")
        os.makedirs(self.cls_data)
        tiny.write_sentiment_csv(os.path.join(self.cls_data, "train.csv"), 16, seed=1)
        tiny.write_sentiment_csv(os.path.join(self.cls_data, "dev.csv"), 8, seed=2)
        self.ner_data = _files(os.path.join(root, "ner"),
                               {"train.txt": NER_TRAIN, "dev.txt": NER_DEV})
        self.rerank_data = _files(os.path.join(root, "rerank"), {
            "triples.tsv": "the film\ta good film\ta bad film\nthe plot\tgreat plot\tdull\n",
            "dev.tsv": "1\t10\tthe film\ta good film\n1\t11\tthe film\ta bad film\n",
            "qrels.txt": "1 0 10 1\n"})
        self.corpus = os.path.join(root, "corpus.txt")
        with open(self.corpus, "w") as f:
            f.write(CORPUS)
        self.records = os.path.join(root, "records.tfrecord")
        result = script_runs.run(
            ["create_pretraining_data.py", "--input_file=" + self.corpus,
             "--output_file=" + self.records, "--vocab_file=" + self.model["vocab_file"],
             "--max_seq_length=16", "--max_predictions_per_seq=3", "--dupe_factor=2",
             "--num_workers=1"])
        assert result.returncode == 0, result.stderr[-2000:]
        config = tiny_hf_config()
        self.hf_dir = os.path.join(root, "hf")
        make_hf_dir(self.hf_dir, config, tiny_hf_state(config))


def _files(folder, contents):
    """Writes name -> text (bytes as they are) into `folder`; returns it."""
    os.makedirs(folder, exist_ok=True)
    for name, content in contents.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(content if isinstance(content, bytes) else content.encode("utf-8"))
    return folder


def _copy(source, case, name, **changes):
    """A copy of the folder `source` in the case folder with files changed."""
    target = os.path.join(case, name)
    shutil.copytree(source, target)
    return _files(target, changes)


def _out(case):
    return os.path.join(case, "out")


# -- scripts and their good command lines ------------------------------------------

def classifier(script="run_classifier.py", data=None, extra=(), env=None, **flags):
    """A good run_classifier.py command on the world's data, changed by `flags`."""
    def setup(w, case):
        values = dict(task_name="custom", data_dir=data(w, case) if data else w.cls_data,
                      text_a_column="sentence", label_column="label", output_dir=_out(case),
                      max_seq_length="16", train_batch_size="4", num_train_epochs="1")
        values.update(flags)
        argv = ([script] + w.model_args
                + ["--%s=%s" % kv for kv in values.items() if kv[1] is not None]
                + ["--do_train", "--do_eval"] + list(extra))
        return argv, [_out(case)], None, env
    return setup


def seq_labeling(files=None, extra=(), **flags):
    def setup(w, case):
        data = _copy(w.ner_data, case, "data", **(files or {}))
        values = dict(task_name="ner", data_dir=data, output_dir=_out(case),
                      max_seq_length="16", train_batch_size="4")
        values.update(flags)
        argv = (["run_seq_labeling.py"] + w.model_args
                + ["--%s=%s" % kv for kv in values.items()] + ["--do_train", "--do_eval"]
                + list(extra))
        return argv, [_out(case), data]
    return setup


def reranking(files=None, extra=("--do_train", "--do_eval"), **flags):
    def setup(w, case):
        data = _copy(w.rerank_data, case, "data", **(files or {}))
        values = dict(data_dir=data, train_file="triples.tsv", dev_file="dev.tsv",
                      dev_qrels_file="qrels.txt", test_file="dev.tsv", max_seq_length="16",
                      max_query_length="4", output_dir=_out(case), train_batch_size="2")
        values.update(flags)
        argv = (["run_reranking.py"] + w.model_args
                + ["--%s=%s" % kv for kv in values.items()] + list(extra))
        return argv, [_out(case), data]
    return setup


def pretraining(extra=("--do_train",), records=None, env=None, **flags):
    def setup(w, case):
        values = dict(input_file=records(w, case) if records else w.records,
                      output_dir=_out(case), max_seq_length="16", max_predictions_per_seq="3",
                      train_batch_size="2", num_train_steps="2", num_warmup_steps="1")
        values.update(flags)
        argv = (["run_pretraining.py"] + w.model_args[1:]  # no vocab: records are ids
                + ["--%s=%s" % kv for kv in values.items()] + list(extra))
        return argv, [_out(case)], None, env
    return setup


def pretraining_data(corpus=None, output=None, **flags):
    def setup(w, case):
        values = dict(input_file=corpus(w, case) if corpus else w.corpus,
                      output_file=output(case) if output else os.path.join(case, "out", "x.tf"),
                      vocab_file=w.model["vocab_file"], max_seq_length="16",
                      max_predictions_per_seq="3", num_workers="1")
        values.update(flags)
        argv = (["create_pretraining_data.py"] + ["--%s=%s" % kv for kv in values.items()])
        return argv, [os.path.join(case, "out")]
    return setup


def extractor(lines="the movie was good .\n", output="out/x.jsonl", **flags):
    def setup(w, case):
        path = _files(case, {"in.txt": lines})
        values = dict(input_file=os.path.join(path, "in.txt"),
                      output_file=os.path.join(case, output), max_seq_length="16",
                      layers="-1,-2")  # the tiny model has 2 layers
        values.update(flags)
        argv = (["extract_features.py"] + w.model_args
                + ["--%s=%s" % kv for kv in values.items() if kv[1] is not None])
        return argv, [os.path.join(case, "out")]
    return setup


def converter(hf=None, output=None, extra=()):
    def setup(w, case):
        argv = ["convert_hf_checkpoint.py", "--hf_dir=" + (hf(w, case) if hf else w.hf_dir),
                "--output_dir=" + (output(case) if output else _out(case))] + list(extra)
        return argv, [_out(case)]
    return setup


def exporter(run=None, target=None, extra=()):
    """export_hf.py on `run(w, case)` (default: an empty folder) into case/hf."""
    def setup(w, case):
        model_dir = run(w, case) if run else os.path.join(case, "run")
        hf_dir = target(case) if target else os.path.join(case, "hf")
        argv = ["export_hf.py", "--model_dir=" + model_dir, "--hf_dir=" + hf_dir] + [
            flag.format(world=w.root, case=case) for flag in extra]
        return argv, [case]
    return setup


def _trained(serving_config=None, head_labels=None):
    """A tiny model folder standing for a run's output_dir, with its records."""
    def make(w, case):
        run = os.path.join(case, "run")
        tiny.write_tiny_model(run, with_classifier_labels=head_labels)
        if serving_config is not None:
            with open(os.path.join(run, "serving_config.json"), "w") as f:
                json.dump(serving_config, f)
        return run
    return make


def _empty_run(w, case):
    os.makedirs(os.path.join(case, "run"))
    with open(os.path.join(case, "run", "serving_config.json"), "w") as f:
        json.dump({"task": "classification", "labels": ["0", "1"]}, f)
    return os.path.join(case, "run")


def _non_empty_target(case):
    os.makedirs(os.path.join(case, "hf"))
    with open(os.path.join(case, "hf", "README.md"), "w") as f:
        f.write("a model card\n")
    return os.path.join(case, "hf")


def server(base=None, extra=()):
    def setup(w, case):
        argv = ["serving_server.py", "--model_base_path=" + (base(w, case) if base
                                                             else os.path.join(case, "none")),
                "--port=0"] + list(extra)
        return argv, [case]
    return setup


def client(*args, stdin=None):
    def setup(w, case):
        export = _export_stub(case, w.model["vocab_file"])
        argv = ["serving_client.py", "--export_dir=" + export] + [
            a.format(case=case) for a in args]
        return argv, [case], stdin
    return setup


def _export_stub(case, vocab_file):
    """An export's assets.extra as serving_client reads them (no model needed)."""
    assets = os.path.join(case, "export", "1", "assets.extra")
    os.makedirs(assets)
    with open(os.path.join(assets, "serving_config.json"), "w") as f:
        json.dump({"task": "classification", "labels": ["0", "1"], "max_seq_length": 16,
                   "do_lower_case": True}, f)
    shutil.copy(vocab_file, assets)
    _files(os.path.dirname(assets), {"saved_model.pb": b""})
    return os.path.join(case, "export")


# -- setups of particular mistakes -----------------------------------------------

def _file_under_parent_file(case):
    with open(os.path.join(case, "parent"), "w") as f:
        f.write("a file\n")
    return os.path.join(case, "parent", "out")


def _held_lock(w, case):
    """An output_dir another live process holds (the flock a run takes)."""
    out = _out(case)
    os.makedirs(out)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, sys, time\n"
         "f = open(sys.argv[1], 'a+'); fcntl.flock(f, fcntl.LOCK_EX)\n"
         "f.write('process %d on testhost: run_classifier.py\\n' % __import__('os').getpid())\n"
         "f.flush(); print('held', flush=True); time.sleep(600)",
         os.path.join(out, ".lock")], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    HOLDERS.append(holder)
    return w.cls_data


HOLDERS = []


def _single_label_data(w, case):
    return _files(os.path.join(case, "data"), {
        "train.csv": "label,sentence\npos,a good film\npos,great music\npos,fine\n",
        "dev.csv": "label,sentence\npos,good\n"})


def _binary_corpus(w, case):
    _files(case, {"corpus.bin": b"\x7fELF\x02\x01\x01\x00" + bytes(range(256))})
    return os.path.join(case, "corpus.bin")


def _latin1_corpus(w, case):
    _files(case, {"corpus.txt": b"the movie was good .\nthe caf\xe9 was dull .\n"})
    return os.path.join(case, "corpus.txt")


def _empty_corpus(w, case):
    _files(case, {"corpus.txt": b"\n\n"})
    return os.path.join(case, "corpus.txt")


def _records_of_length_32(w, case):
    path = os.path.join(case, "long.tfrecord")
    result = script_runs.run(
        ["create_pretraining_data.py", "--input_file=" + w.corpus,
         "--output_file=" + path, "--vocab_file=" + w.model["vocab_file"],
         "--max_seq_length=32", "--max_predictions_per_seq=3", "--dupe_factor=1",
         "--num_workers=1"])
    assert result.returncode == 0, result.stderr
    return path


def _text_as_records(w, case):
    _files(case, {"records.tfrecord": CORPUS})
    return os.path.join(case, "records.tfrecord")


def _hf_without_weights(w, case):
    folder = _copy(w.hf_dir, case, "hf")
    for name in os.listdir(folder):
        if name.endswith((".safetensors", ".bin")):
            os.remove(os.path.join(folder, name))
    return folder


def _hf_bad_config(w, case):
    return _copy(w.hf_dir, case, "hf", **{"config.json": "{\"hidden_size\": 32,"})


def _server_base_without_versions(w, case):
    os.makedirs(os.path.join(case, "serving", "latest"))
    return os.path.join(case, "serving")


def _server_version_without_model(w, case):
    _files(os.path.join(case, "serving", "7"), {"notes.txt": "no model here\n"})
    return os.path.join(case, "serving")


def _server_saved_model_unreadable(w, case):
    _files(os.path.join(case, "serving", "7"), {"saved_model.pb": "not a protocol buffer\n"})
    return os.path.join(case, "serving")


def _server_base_is_a_file(w, case):
    _files(case, {"serving": "not a folder\n"})
    return os.path.join(case, "serving")


def _mlabel_data(train):
    """A data folder of the fork's Mlabel layout whose train.tsv is `train`."""
    def data(w, case):
        header = "id\ttext\t" + "\t".join("label_%d" % i for i in range(3)) + "\n"
        return _files(os.path.join(case, "data"), {
            "train.tsv": train, "dev.tsv": header + "d1\tthe plot\t0\t1\t0\n"})
    return data


def mlabel(train, **flags):
    """run_custom_classifier_mlabel.py, the fork's multi-label script, on `train`."""
    settings = dict(task_name="Mlabel", num_labels="3", text_a_column=None, label_column=None)
    settings.update(flags)
    return classifier(script="run_custom_classifier_mlabel.py", data=_mlabel_data(train),
                      **settings)


_MLABEL_HEADER = "id\ttext\tlabel_0\tlabel_1\tlabel_2\n"


# -- the table ----------------------------------------------------------------------

CASES = {
    # run_custom_classifier_mlabel.py (the fork's multi-label layout)
    "mlabel_label_not_binary": Case(
        mlabel(_MLABEL_HEADER + "a\tthe movie\t1\t0\t0\nb\tthe film\t0\t2\t1\n"),
        ["{case}/data/train.tsv:3: a label column holds '2'; expected 0 or 1"]),
    "mlabel_row_without_its_labels": Case(
        mlabel(_MLABEL_HEADER + "a\tthe movie\t1\t0\n"),
        ["{case}/data/train.tsv:2: expected 5 fields (id, text, 3 labels), got 4"]),
    "mlabel_num_labels_other_than_the_header": Case(
        mlabel(_MLABEL_HEADER + "a\tthe movie\t1\t0\t0\n", num_labels="10"),
        ["{case}/data/train.tsv:1: the header has 3 label column(s) after id and text; "
         "--num_labels=10"]),

    # run_classifier.py (Google's name; the custom task's data through its flags)
    "classifier_learning_rate_nan": Case(
        classifier(learning_rate="nan"), ["--learning_rate must be a finite number"]),
    "classifier_epochs_inf": Case(
        classifier(num_train_epochs="inf"), ["--num_train_epochs must be a finite number"]),
    "classifier_warmup_above_one": Case(
        classifier(warmup_proportion="1.5"), ["--warmup_proportion must be between 0 and 1"]),
    "classifier_batch_zero": Case(
        classifier(train_batch_size="0"), ["--train_batch_size must be a whole number >= 1"]),
    "classifier_accumulation_zero": Case(
        classifier(gradient_accumulation_steps="0"), ["--gradient_accumulation_steps"]),
    "classifier_unknown_precision": Case(
        classifier(precision="fp8"), ["--precision"]),
    "classifier_unknown_flag": Case(
        classifier(nosuchflag="1"), ["nosuchflag"]),
    "classifier_output_dir_under_a_file": Case(
        lambda w, case: classifier(output_dir=_file_under_parent_file(case))(w, case),
        ["--output_dir={case}/parent/out cannot be created: {case}/parent is a file"]),
    "classifier_output_dir_under_proc": Case(
        classifier(output_dir="/proc/bert_out"),
        ["--output_dir=/proc/bert_out cannot be created"]),
    "classifier_cache_dir_is_a_file": Case(
        lambda w, case: classifier(cache_dir=os.path.join(
            _files(case, {"cache": "x"}), "cache"))(w, case),
        ["--cache_dir={case}/cache is a file"]),
    "classifier_single_label_training_set": Case(
        classifier(data=_single_label_data),
        ["--data_dir={case}/data: every training example has the label 'pos'",
         "at least two labels"]),
    "classifier_output_dir_in_use": Case(
        lambda w, case: classifier(data=_held_lock)(w, case),
        ["--output_dir={case}/out is in use by process", "on testhost"]),
    "classifier_init_checkpoint_missing": Case(
        classifier(init_checkpoint="/nonexistent/bert_model.ckpt"),
        ["/nonexistent/bert_model.ckpt"]),
    "classifier_config_not_json": Case(
        lambda w, case: classifier(bert_config_file=os.path.join(
            _files(case, {"c.json": "{nope"}), "c.json"))(w, case),
        ["{case}/c.json"]),
    "classifier_vocab_missing": Case(
        classifier(vocab_file="/nonexistent/vocab.txt"), ["/nonexistent/vocab.txt"]),
    "classifier_glue_task_without_files": Case(
        lambda w, case: classifier(task_name="mrpc", text_a_column=None, label_column=None,
                                   data_dir=_files(os.path.join(case, "glue"), {}))(w, case),
        ["{case}/glue/train.tsv"]),
    "classifier_cola_row_with_too_few_fields": Case(
        lambda w, case: classifier(task_name="cola", text_a_column=None, label_column=None,
                                   data_dir=_files(
            os.path.join(case, "glue"), {"train.tsv": "gj04\t1\t\tthe film is good .\nx\t0\n",
                                         "dev.tsv": "gj04\t1\t\tgood .\n"}))(w, case),
        ["{case}/glue/train.tsv:2"]),

    "classifier_eval_during_training_without_do_eval": Case(
        lambda w, case: (lambda argv, watched, *_: ([a for a in argv if a != "--do_eval"],
                                                    watched))(
            *classifier(eval_every_n_steps="10")(w, case)),
        ["--eval_every_n_steps evaluates the dev set during training", "--do_eval"]),
    "classifier_eval_every_negative": Case(
        classifier(eval_every_n_steps="-5"), ["--eval_every_n_steps must be a whole number"]),
    "classifier_best_metric_without_evaluation": Case(
        classifier(best_metric="accuracy"), ["--best_metric needs evaluation during training"]),
    "classifier_patience_without_evaluation": Case(
        classifier(early_stopping_patience="3"),
        ["--early_stopping_patience needs evaluation during training"]),
    "classifier_eval_every_steps_and_epoch": Case(
        classifier(eval_every_n_steps="10", extra=["--eval_every_epoch"]),
        ["--eval_every_n_steps or --eval_every_epoch, not both"]),

    "classifier_class_weights_wrong_count": Case(
        classifier(class_weights="1,2,3"),
        ["--class_weights=1,2,3: expected 2 positive numbers, one per label"]),
    "classifier_class_weights_without_training": Case(
        lambda w, case: (lambda argv, watched, *_: ([a for a in argv if a != "--do_train"],
                                                    watched))(
            *classifier(class_weights="balanced")(w, case)),
        ["--class_weights", "it needs --do_train"]),
    "classifier_class_weights_multi_label": Case(
        classifier(class_weights="balanced", extra=["--multi_label"]),
        ["--class_weights", "multi-label"]),

    "classifier_tf_config_not_json": Case(
        classifier(env={"TF_CONFIG": "{cluster"}), ["TF_CONFIG is not valid JSON"]),
    "classifier_tf_config_task_not_in_cluster": Case(
        classifier(env={"TF_CONFIG": json.dumps({
            "cluster": {"worker": ["localhost:1", "localhost:2"]},
            "task": {"type": "chief", "index": 0}})}),
        ["TF_CONFIG: task type 'chief' is not a job of the cluster"]),
    "classifier_cluster_slurm_outside_slurm": Case(
        classifier(cluster="slurm"), ["--cluster=slurm: SLURM_PROCID", "not set"]),
    "classifier_doc_stride_zero": Case(
        classifier(long_text="windows", doc_stride="0"), ["--doc_stride=0: expected 1 to 14"]),
    "classifier_doc_stride_without_windows": Case(
        classifier(doc_stride="8"), ["--doc_stride applies to --long_text=windows"]),
    "classifier_windows_multi_label": Case(
        classifier(long_text="windows", extra=["--multi_label"]),
        ["--long_text=windows: single-label tasks only"]),

    # run_seq_labeling.py
    "ner_line_without_label": Case(
        seq_labeling({"train.txt": "the\tO\ngood\nmusic\tI-POS\n"}),
        ["{case}/data/train.txt:2: expected 2 tab-separated columns (as on line 1), got 1",
         "without its label"]),
    "ner_file_without_labels": Case(
        seq_labeling({"train.txt": "the\ngood\n"}), ["{case}/data/train.txt:1: no label"]),
    "ner_dev_label_not_in_label_set": Case(
        seq_labeling({"dev.txt": "a\tO\ngreat\tB-MOVIE\n"}),
        ["{case}/data/dev.txt:2: label 'B-MOVIE' is not one of the 4 labels found in "
         "{case}/data/train.txt"]),
    "ner_label_not_in_labels_flag": Case(
        seq_labeling(labels="O,B-POS,I-POS"),
        ["{case}/data/train.txt:5: label 'B-NEG' is not one of the 3 labels given by --labels"]),
    "ner_empty_sentence_file": Case(
        seq_labeling({"train.txt": "\n\n-DOCSTART- O\n\n"}),
        ["{case}/data/train.txt: no sentences"]),
    "ner_tab_file_with_a_space_separated_line": Case(
        seq_labeling({"train.txt": "the\tO\ngood B-POS\n"}),
        ["{case}/data/train.txt:2: expected 2 tab-separated columns (as on line 1), got 1",
         "separates columns with spaces"]),
    "ner_space_file_with_a_tab": Case(
        seq_labeling({"train.txt": "the O\ngood\tB-POS\n"}),
        ["{case}/data/train.txt:2: a tab, but the columns of this file are separated by "
         "spaces"]),
    "ner_not_a_bio_tag": Case(
        seq_labeling({"train.txt": "the\tO\nBob\tPER\n"}),
        ["{case}/data/train.txt:2: label 'PER' is not a BIO/BIOES tag"]),
    "ner_stride_longer_than_a_window": Case(
        seq_labeling(window_stride="15"), ["--window_stride=15", "1 to 14"]),
    "ner_all_words_one_label": Case(
        seq_labeling({"train.txt": "the\tO\nfilm\tO\n\ngood\tO\n", "dev.txt": "a\tO\n"}),
        ["{case}/data/train.txt: every word is labelled 'O'", "at least two labels"]),
    "ner_non_utf8_bytes": Case(
        seq_labeling({"train.txt": b"the\tO\ncaf\xe9\tB-POS\n"}),
        ["{case}/data/train.txt:2: not valid utf-8"]),
    "ner_unknown_task": Case(seq_labeling(task_name="chunking"), ["--task_name"]),
    "ner_missing_dev_file": Case(
        seq_labeling(dev_file="absent.txt"), ["{case}/data/absent.txt"]),
    "ner_learning_rate_negative": Case(
        seq_labeling(learning_rate="-1"), ["--learning_rate must be > 0"]),
    "ner_output_dir_is_a_file": Case(
        lambda w, case: seq_labeling(output_dir=os.path.join(
            _files(case, {"outfile": "x"}), "outfile"))(w, case),
        ["--output_dir={case}/outfile is a file"]),

    # run_reranking.py
    "rerank_triple_with_two_fields": Case(
        reranking({"triples.tsv": "good\ta good film\tbad\ngood\tonly two\n"}),
        ["{case}/data/triples.tsv:2: expected 3 tab-separated fields"]),
    "rerank_qid_not_an_integer": Case(
        reranking({"dev.tsv": "1\t10\tgood\ta film\nq2\t10\tbad\ta film\n"}),
        ["{case}/data/dev.tsv:2: qid 'q2' is not an integer"]),
    "rerank_qrels_line_of_three_fields": Case(
        reranking({"qrels.txt": "1 0 10 1\n1 0 ten\n"}),
        ["{case}/data/qrels.txt:2: expected 4 fields (qid 0 pid relevance)"]),
    "rerank_relevance_not_an_integer": Case(
        reranking({"qrels.txt": "1 0 10 yes\n"}),
        ["{case}/data/qrels.txt:1: relevance 'yes' is not an integer"]),
    "rerank_missing_train_file": Case(
        reranking(train_file="absent.tsv"), ["{case}/data/absent.tsv"]),
    "rerank_non_utf8_triples": Case(
        reranking({"triples.tsv": b"the film\ta g\xf6od film\tbad\n"}),
        ["{case}/data/triples.tsv:1: not valid utf-8"]),
    "rerank_query_length_over_sequence": Case(
        reranking(max_query_length="20"), ["--max_query_length"]),
    "rerank_nothing_to_do": Case(reranking(extra=()), ["nothing to do"]),

    # run_pretraining.py
    "pretraining_input_glob_matches_nothing": Case(
        pretraining(input_file="/nonexistent/*.tfrecord"), ["--input_file", "/nonexistent"]),
    "pretraining_records_of_another_length": Case(
        pretraining(records=_records_of_length_32), ["{case}/long.tfrecord", "32", "16"]),
    "pretraining_text_file_as_records": Case(
        pretraining(records=_text_as_records), ["{case}/records.tfrecord"]),
    "pretraining_zero_steps": Case(
        pretraining(num_train_steps="0"), ["--num_train_steps"]),
    "pretraining_warmup_beyond_steps": Case(
        pretraining(num_warmup_steps="-1"), ["--num_warmup_steps"]),
    "pretraining_learning_rate_inf": Case(
        pretraining(learning_rate="inf"), ["--learning_rate must be a finite number"]),
    "pretraining_output_dir_is_a_file": Case(
        lambda w, case: pretraining(output_dir=os.path.join(
            _files(case, {"outfile": "x"}), "outfile"))(w, case),
        ["--output_dir={case}/outfile is a file"]),
    "pretraining_tf_config_not_json": Case(
        pretraining(env={"TF_CONFIG": "{cluster: nope"}), ["TF_CONFIG is not valid JSON"]),
    "pretraining_tf_config_task_not_in_cluster": Case(
        pretraining(env={"TF_CONFIG": json.dumps({
            "cluster": {"worker": ["localhost:1", "localhost:2"]},
            "task": {"type": "worker", "index": 5}})}),
        ["TF_CONFIG: task worker index 5 is not in the cluster"]),
    "pretraining_tf_config_parameter_servers": Case(
        pretraining(env={"TF_CONFIG": json.dumps({
            "cluster": {"worker": ["localhost:1"], "ps": ["localhost:2"]},
            "task": {"type": "worker", "index": 0}})}),
        ["TF_CONFIG: cluster job(s) ['ps'] are not supported"]),
    "pretraining_max_predictions_mismatch": Case(
        pretraining(max_predictions_per_seq="5"), ["{world}/records.tfrecord", "5"]),

    # create_pretraining_data.py
    "data_non_utf8_input": Case(
        pretraining_data(corpus=_latin1_corpus), ["{case}/corpus.txt:2: not valid utf-8"],
        STREAM_START),
    "data_binary_input": Case(
        pretraining_data(corpus=_binary_corpus), ["{case}/corpus.bin:1"]),
    "data_empty_input": Case(
        pretraining_data(corpus=_empty_corpus), ["{case}/corpus.txt"]),
    "data_input_glob_matches_nothing": Case(
        pretraining_data(input_file="/nonexistent/*.txt"), ["--input_file", "/nonexistent"]),
    "data_masked_lm_prob_nan": Case(
        pretraining_data(masked_lm_prob="nan"), ["--masked_lm_prob"]),
    "data_masked_lm_prob_above_one": Case(
        pretraining_data(masked_lm_prob="1.5"), ["--masked_lm_prob"]),
    "data_short_seq_prob_negative": Case(
        pretraining_data(short_seq_prob="-0.1"), ["--short_seq_prob"]),
    "data_dupe_factor_zero": Case(
        pretraining_data(dupe_factor="0"), ["--dupe_factor"]),
    "data_max_seq_length_too_short": Case(
        pretraining_data(max_seq_length="3"), ["--max_seq_length"]),
    "data_vocab_missing": Case(
        pretraining_data(vocab_file="/nonexistent/vocab.txt"), ["/nonexistent/vocab.txt"]),
    "data_output_under_a_file": Case(
        pretraining_data(output=lambda case: os.path.join(_file_under_parent_file(case),
                                                          "x.tf")),
        ["{case}/parent"]),
    "data_output_under_proc": Case(
        pretraining_data(output=lambda case: "/proc/bert_records.tf"), ["/proc/bert_records.tf"]),
    "data_missing_required_flag": Case(
        lambda w, case: (["create_pretraining_data.py", "--input_file=" + w.corpus],
                         [case]), ["--output_file"]),

    # convert_hf_checkpoint.py
    "convert_missing_folder": Case(
        converter(hf=lambda w, case: os.path.join(case, "absent")), ["{case}/absent"]),
    "convert_folder_without_weights": Case(
        converter(hf=_hf_without_weights), ["{case}/hf"]),
    "convert_config_not_json": Case(
        converter(hf=_hf_bad_config), ["{case}/hf/config.json"]),
    "convert_output_under_a_file": Case(
        converter(output=_file_under_parent_file), ["{case}/parent"]),
    "convert_missing_flag": Case(
        lambda w, case: (["convert_hf_checkpoint.py", "--hf_dir=" + w.hf_dir], [case]),
        ["--output_dir"]),

    # export_hf.py
    "export_run_without_checkpoint": Case(
        exporter(run=_empty_run), ["--model_dir={case}/run: no checkpoint to export"]),
    "export_model_dir_absent": Case(exporter(), ["--model_dir={case}/run: no such folder"]),
    "export_windows_head": Case(
        exporter(run=_trained({"task": "classification", "labels": ["0", "1"],
                               "long_text": "windows"}, 2)),
        ["--long_text=windows", "--encoder_only"]),
    "export_head_without_record": Case(
        exporter(run=_trained(head_labels=2)), ["no record of the task", "--encoder_only"]),
    "export_target_not_empty": Case(
        exporter(run=_trained(), target=_non_empty_target),
        ["--hf_dir {case}/hf: exists and is not empty; pass --overwrite"]),
    "export_target_under_a_file": Case(
        exporter(run=_trained(), target=lambda case: os.path.join(
            _file_under_parent_file(case), "hf")), ["{case}/parent"]),
    "export_vocab_of_another_model": Case(
        exporter(run=_trained(), extra=["--vocab_file={world}/ner/train.txt"]),
        ["{world}/ner/train.txt", "vocab_size"]),
    "export_missing_flag": Case(
        lambda w, case: (["export_hf.py", "--model_dir=" + case], [case]), ["--hf_dir"]),

    # extract_features.py
    "extract_input_missing": Case(
        extractor(input_file="/nonexistent/in.txt"), ["/nonexistent/in.txt"]),
    "extract_input_empty": Case(extractor(lines=""), ["{case}/in.txt: the file is empty"]),
    "extract_input_not_utf8": Case(
        extractor(lines=b"good\nthe caf\xe9\n"), ["{case}/in.txt:2: not valid utf-8"]),
    "extract_layers_not_integers": Case(
        extractor(layers="-1,last"), ["--layers=-1,last: expected comma-separated integers"]),
    "extract_layer_out_of_range": Case(
        extractor(layers="-3"), ["--layers=-3: the model has 2 layers"]),
    "extract_output_under_a_file": Case(
        lambda w, case: extractor(output_file=os.path.join(_file_under_parent_file(case),
                                                           "x.jsonl"))(w, case),
        ["--output_file={case}/parent/out/x.jsonl cannot be written: {case}/parent is a file"]),
    "extract_npy_without_pooling": Case(
        extractor(output="out/x.npy"), ["add --pooling=mean|cls"]),
    "extract_normalize_without_pooling": Case(
        extractor(normalize="true"), ["--normalize applies to --pooling"]),
    "extract_batch_size_zero": Case(extractor(batch_size="0"),
                                    ["--batch_size must be a whole number >= 1, got 0"]),
    "extract_unknown_pooling": Case(extractor(pooling="max"), ["--pooling"]),
    "extract_sequence_longer_than_positions": Case(
        extractor(max_seq_length="100"), ["--max_seq_length=100"]),

    # serving_server.py (start-up)
    "server_base_path_missing": Case(server(), ["{case}/none"]),
    "server_base_path_without_versions": Case(
        server(base=_server_base_without_versions), ["{case}/serving"]),
    "server_version_without_saved_model": Case(
        server(base=_server_version_without_model), ["{case}/serving: no SavedModel"]),
    "server_saved_model_unreadable": Case(
        server(base=_server_saved_model_unreadable),
        ["--model_base_path: {case}/serving/7: cannot load the SavedModel"]),
    "server_base_path_is_a_file": Case(
        server(base=_server_base_is_a_file), ["{case}/serving"]),
    "server_port_out_of_range": Case(
        server(extra=["--port=70000"]), ["--port must be between 0 and 65535"]),
    "server_row_limit_zero": Case(
        server(extra=["--max_rows_per_request=0"]), ["--max_rows_per_request must be >= 1"]),

    # serving_client.py
    "client_nothing_listening": Case(
        client("--url=http://127.0.0.1:9/v1/models/x", "good film"), ["127.0.0.1:9"]),
    "client_url_without_model_path": Case(
        client("--url=http://127.0.0.1:9", "good film"), ["--url=http://127.0.0.1:9"]),
    "client_input_file_missing": Case(
        client("--url=http://127.0.0.1:9/v1/models/x", "--input_file={case}/absent.txt"),
        ["{case}/absent.txt"]),
    "client_texts_and_input_file": Case(
        client("--url=http://127.0.0.1:9/v1/models/x", "--input_file=x", "good"),
        ["not both"]),
    "client_text_b_without_texts": Case(
        client("--url=http://127.0.0.1:9/v1/models/x", "--text_b=good"),
        ["--text_b needs the first texts"]),
}


@pytest.fixture(scope="module")
def results(request):
    """(world, name -> (case folder, Result)) of every case, run once per session
    (bad_input.run_once); world holds the World's attributes."""
    return bad_input.run_once(request, "bad_input", _run_cases)


def _run_cases(root):
    """(the World's attributes, name -> (case folder, Result)) of every case, run in
    forked children on a World made in `root`."""
    world = World(root)
    cases_root = os.path.join(world.root, "cases")
    setups = {}
    for name, case in CASES.items():
        case_dir = os.path.join(cases_root, name)
        os.makedirs(case_dir)
        setups[name] = (case_dir,) + tuple(case.setup(world, case_dir)) + (None, None)
    names = list(CASES)
    try:
        ran = dict(zip(names, bad_input.run_commands(
            [setups[n][1] for n in names], [setups[n][2] for n in names],
            stdin=[setups[n][3] for n in names], envs=[setups[n][4] for n in names])))
    finally:
        for holder in HOLDERS:
            holder.kill()
            holder.wait()
    return vars(world), {name: (setups[name][0], ran[name]) for name in CASES}


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_is_one_error_line(results, name):
    world, by_name = results
    case_dir, result = by_name[name]
    expected = [part.format(case=case_dir, world=world.root) for part in CASES[name].expected]
    bad_input.check_one_error_line(result, expected, preamble=CASES[name].preamble)


def test_the_table_covers_every_script_with_over_a_hundred_cases():
    from test_classifier_bad_input import CASES as CLASSIFIER_CASES
    scripts = {name.split("_")[0] for name in CASES}
    assert scripts >= {"classifier", "mlabel", "ner", "rerank", "pretraining", "data",
                       "convert", "export", "extract", "server", "client"}
    assert len(CASES) + len(CLASSIFIER_CASES) >= 100
