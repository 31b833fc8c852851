"""The multi-GPU fork's own tasks as its code has them, its multi-label script, its wrapper.

bert-multi-gpu's run_seq_labeling.py tasks PUNCT, NAMED_ENTITY and NORM with
their label lists (in its label-id order) on its train.tsv/dev.tsv/test.tsv
layout; its README's run_custom_classifier_mlabel.py command on its Mlabel
layout; its run_custom_classifier.sh options; and its sequence export's REST
request. The commands run in bash as its README prints them (the PUNCT one
with the task swapped for the other two), paths moved into the test's folder
and the GPU flags dropped; the outputs are read as its users read them.
"""

import json
import os
import random
import subprocess
import sys
import urllib.request

import numpy as np
import pytest
from test_drop_in import _GPU_FLAGS, FORK_PUNCT, read_eval_results, run_readme

from bert_toolkit.tasks.seq_labeling import readers

import script_runs
from servers import server_url, start_server, stop
from tiny import REPO, TINY_WORDS, write_tiny_model

FORK_MLABEL = r"""
python run_custom_classifier_mlabel.py \
  --num_labels=10 \
  --task_name=Mlabel \
  --do_lower_case=true \
  --do_train=true \
  --do_eval=true \
  --do_predict=true \
  --save_for_serving=true \
  --data_dir=/cfs/data/Mlabel \
  --vocab_file=/cfs/models/bert-large-uncased/vocab.txt \
  --bert_config_file=/cfs/models/bert-large-uncased/bert_config.json \
  --init_checkpoint=/cfs/models/bert-large-uncased/bert_model.ckpt \
  --max_seq_length=128 \
  --train_batch_size=32 \
  --learning_rate=2e-5 \
  --num_train_epochs=3.0 \
  --use_gpu=true \
  --num_gpu_cores=4 \
  --use_fp16=false \
  --output_dir=/cfs/outputs/bert-large-uncased-mlabel
"""

TASKS = ("PUNCT", "NAMED_ENTITY", "NORM")


def words(rng, low=3, high=9):
    return [rng.choice(TINY_WORDS[:15]) for _ in range(rng.randint(low, high))]


def labels_for(task, count, rng):
    """A plausible label sequence of the task's own label set."""
    if task == "PUNCT":  # what follows each character: mostly nothing, an end mark last
        return [rng.choice("OOOOC") for _ in range(count - 1)] + [rng.choice("EQ")]
    if task == "NAMED_ENTITY":  # BMES spans of the one type "o"
        labels = []
        while len(labels) < count:
            size = min(rng.randint(1, 3), count - len(labels))
            labels += ["S-o"] if size == 1 else ["B-o"] + ["M-o"] * (size - 2) + ["E-o"]
        return labels
    tags = readers.FORK_LABELS["norm"]
    return [rng.choice(("O", "O", "O") + tags[1:6]) for _ in range(count)]


@pytest.fixture(scope="module")
def cfs(tmp_path_factory):
    """The fork's /cfs/ tree: a tiny model, its three sequence tasks and Mlabel."""
    root = tmp_path_factory.mktemp("cfs")
    write_tiny_model(str(root / "models" / "bert-large-uncased"), vocab_size=30522,
                     max_position_embeddings=128)
    rng = random.Random(11)
    for task in TASKS:
        folder = root / "data" / task
        folder.mkdir(parents=True)
        for split, count in (("train", 40), ("dev", 8), ("test", 5)):
            with open(str(folder / (split + ".tsv")), "w") as f:
                for _ in range(count):
                    sentence = words(rng)
                    labels = "" if split == "test" else "\t" + " ".join(
                        labels_for(task, len(sentence), rng))
                    f.write(" ".join(sentence) + labels + "\n")
    mlabel = root / "data" / "Mlabel"
    mlabel.mkdir()
    header = ["id", "text"] + ["label_%d" % i for i in range(10)]
    for split, count in (("train", 40), ("dev", 8), ("test", 6)):
        with open(str(mlabel / (split + ".tsv")), "w") as f:
            f.write("\t".join(header) + "\n")
            for i in range(count):
                text = " ".join(words(rng))
                flags = [str(int(rng.random() < 0.3)) for _ in range(10)]
                f.write("\t".join(["%s-%d" % (split, i), text] + flags) + "\n")
    return str(root)


@pytest.mark.parametrize("task", TASKS)
def test_the_forks_sequence_tasks_with_its_labels_and_files(cfs, task):
    name = task.lower()
    output_dir = os.path.join(cfs, "outputs", "bert-large-uncased-" + name)
    run_readme(FORK_PUNCT, drop=_GPU_FLAGS, replace=[
        ("/cfs/", cfs + "/"), ("PUNCT", task), ("-punct", "-" + name)])
    with open(os.path.join(output_dir, "label_list.json")) as f:
        assert json.load(f) == list(readers.FORK_LABELS[name])  # the fork's ids
    with open(os.path.join(cfs, "data", task, "test.tsv")) as f:
        test_words = [line.split() for line in f]
    with open(os.path.join(output_dir, "test_results.tsv")) as f:  # the fork's file
        predicted = [line.rstrip("\n").split(" ") for line in f]
    assert [len(labels) for labels in predicted] == [len(w) for w in test_words]
    assert {label for labels in predicted for label in labels} <= set(
        readers.FORK_LABELS[name])
    report = read_eval_results(os.path.join(output_dir, "eval_results.txt"))
    assert {"eval_accuracy", "eval_loss", "global_step", "loss"} <= set(report)
    assert 0.0 <= report["eval_accuracy"] <= 1.0
    assert report["global_step"] == int(40 / 32 * 10.0)
    if task == "NAMED_ENTITY":  # BMES spans scored as entities too
        assert "entity_f1" in report and "entity_f1[o]" in report


def test_a_label_outside_the_forks_set_is_refused(cfs, tmp_path):
    data = tmp_path / "PUNCT"
    data.mkdir()
    (data / "train.tsv").write_text("the movie was good\tO O O E\nthe plot\tO X\n")
    result = script_runs.run(
        ["run_seq_labeling.py", "--task_name=PUNCT", "--do_train",
         "--data_dir=%s" % data, "--output_dir=%s" % (tmp_path / "out"),
         "--vocab_file=%s/models/bert-large-uncased/vocab.txt" % cfs,
         "--bert_config_file=%s/models/bert-large-uncased/bert_config.json" % cfs],
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"), timeout=300)
    assert result.returncode == 1
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: %s:2: " % (data / "train.tsv")) and "'X'" in line
    assert not (tmp_path / "out").exists()


def test_the_forks_sequence_request_to_the_export(cfs):
    output_dir = os.path.join(cfs, "outputs", "bert-large-uncased-compat")
    run_readme(FORK_PUNCT, drop=_GPU_FLAGS, replace=[
        ("/cfs/", cfs + "/"), ("PUNCT", "NAMED_ENTITY"), ("-punct", "-compat"),
        ("--do_eval=true", "--do_eval=false"), ("--do_predict=true", "--do_predict=false"),
        ("--num_train_epochs=10.0", "--num_train_epochs=1.0"),
        ("--save_for_serving=true", "--save_for_serving=true --serving_compat=bert_multi_gpu")])
    # The fork's client: a sentence's ids as its converter makes them, its masks,
    # placeholder labels and the number of its words.
    ids = [101, 1996, 3185, 2001, 2204, 102] + [0] * 122
    instance = {"input_ids": ids, "input_mask": [1] * 6 + [0] * 122,
                "segment_ids": [0] * 128, "label_ids": [0] * 128,
                "output_mask": [0, 1, 1, 1, 1] + [0] * 123, "seq_len": 4}
    server = start_server(os.path.join(output_dir, "serving"))
    try:
        request = urllib.request.Request(
            server_url(server) + ":predict", headers={"Content-type": "application/json"},
            data=json.dumps({"instances": [instance, instance]}).encode("utf-8"))
        with urllib.request.urlopen(request, timeout=60) as response:
            answer = json.loads(response.read())
    finally:
        stop(server)
        server.stdout.close()
        server.stderr.close()
    first, second = answer["predictions"]
    assert sorted(first) == ["predictions", "seq_len"] and first["seq_len"] == 4
    assert len(first["predictions"]) == 128 and first == second
    assert all(0 <= label < 4 for label in first["predictions"])


def test_the_forks_multi_label_command(cfs):
    output_dir = os.path.join(cfs, "outputs", "bert-large-uncased-mlabel")
    run_readme(FORK_MLABEL, drop=_GPU_FLAGS, replace=[("/cfs/", cfs + "/")])
    probabilities = np.loadtxt(os.path.join(output_dir, "test_results.tsv"))
    assert probabilities.shape == (6, 10)  # one sigmoid per label, not a softmax
    assert ((probabilities > 0) & (probabilities < 1)).all()
    report = read_eval_results(os.path.join(output_dir, "eval_results.txt"))
    for index in range(10):
        for key in ("accuracy", "precision", "recall", "f1score"):
            assert "eval_%s_%d" % (key, index) in report
    assert {"eval_loss", "global_step", "loss"} <= set(report)
    with open(os.path.join(output_dir, "label_list.json")) as f:
        assert json.load(f) == ["label_%d" % i for i in range(10)]


def _wrapper(*options, env=None):
    return subprocess.run(["bash", "scripts/run_custom_classifier.sh"] + list(options),
                          cwd=REPO, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3",
                                             PYTHON=sys.executable, **(env or {})),
                          capture_output=True, text=True, timeout=900)


def test_the_forks_wrapper_script(cfs, tmp_path):
    shown = _wrapper("-h")
    assert shown.returncode == 1
    assert shown.stdout.splitlines() == [
        "current params setting:",
        "-s max_seq_length,        default val is: 128",
        "-g num_gpu_cores,         default val is: 4",
        "-b train_batch_size,      default val is: 32",
        "-l learning_rate,         default val is: 2e-5",
        "-e num_train_epochs,      default val is: 3.0",
        "-c CUDA_VISIBLE_DEVICES,  default val is: 0,1,2,3"]
    mismatch = _wrapper("-g", "2", "-c", "0")
    assert mismatch.returncode == 1 and "-g 2 but -c 0 names 1 device(s)" in mismatch.stderr

    model = os.path.join(cfs, "models", "bert-large-uncased")
    qqp = tmp_path / "QQP"
    qqp.mkdir()
    rng = random.Random(5)
    for split, count in (("train", 16), ("dev", 6), ("test", 4)):
        with open(str(qqp / (split + ".tsv")), "w") as f:
            f.write("id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n"
                    if split != "test" else "id\tquestion1\tquestion2\n")
            for i in range(count):
                a, b = " ".join(words(rng)), " ".join(words(rng))
                f.write("\t".join([str(i), "1", "2", a, b, str(i % 2)] if split != "test"
                                  else [str(i), a, b]) + "\n")
    output_dir = str(tmp_path / "out")
    # -g 2 -c 2,3 as the fork's README runs it, the 2 devices being CPU replicas here.
    result = _wrapper("-s", "64", "-b", "8", "-l", "3e-5", "-e", "1", "-g", "2", "-c", "2,3",
                      env={"USE_GPU": "false", "DATA_DIR": str(qqp), "BERT_DIR": model,
                           "OUTPUT_DIR": output_dir})
    assert result.returncode == 0, result.stderr[-3000:]
    assert "max_seq_length is: 64, default val is: 128" in result.stdout
    assert "cuda devices and gpu cores matched" in result.stdout
    assert "task is done..." in result.stdout
    assert "2 replicas x 8 examples per replica" in result.stderr
    assert np.loadtxt(os.path.join(output_dir, "test_results.tsv")).shape == (4, 2)
    assert "eval_accuracy" in read_eval_results(os.path.join(output_dir, "eval_results.txt"))
