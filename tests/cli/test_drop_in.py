"""The command lines, data layouts and clients of the READMEs this toolkit replaces.

google-research/bert's README (run_classifier.py on MRPC, the predict recipe
with a fine-tuned --init_checkpoint, create_pretraining_data.py and
run_pretraining.py) and bert-multi-gpu's (run_custom_classifier.py on QQP and
its curl request to TensorFlow Serving; its sequence tasks, multi-label script
and wrapper are test_fork_tasks.py's) run here
as written, in bash, on tiny data in the layouts they expect. Only the paths
move into the test's folder, and the fork's GPU flags (--use_gpu,
--num_gpu_cores, --use_fp16) are dropped. Outputs are parsed the way the
originals' users parsed them.
"""

import json
import os
import random
import subprocess
import sys
import urllib.request

import numpy as np
import pytest
import tensorflow as tf

from bert_toolkit import errors
from bert_toolkit.engine import checkpoints
from bert_toolkit.model import optimization
from bert_toolkit.tasks.seq_labeling import readers as seq_labeling_readers

from servers import server_url, start_server, stop
from tiny import REPO, TINY_WORDS, write_tiny_model

tf1 = tf.compat.v1


# -- the READMEs' commands, verbatim ------------------------------------------------

GOOGLE_MRPC_TRAIN = r"""
python run_classifier.py \
  --task_name=MRPC \
  --do_train=true \
  --do_eval=true \
  --data_dir=$GLUE_DIR/MRPC \
  --vocab_file=$BERT_BASE_DIR/vocab.txt \
  --bert_config_file=$BERT_BASE_DIR/bert_config.json \
  --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt \
  --max_seq_length=128 \
  --train_batch_size=32 \
  --learning_rate=2e-5 \
  --num_train_epochs=3.0 \
  --output_dir=/tmp/mrpc_output/
"""

GOOGLE_MRPC_PREDICT = r"""
python run_classifier.py \
  --task_name=MRPC \
  --do_predict=true \
  --data_dir=$GLUE_DIR/MRPC \
  --vocab_file=$BERT_BASE_DIR/vocab.txt \
  --bert_config_file=$BERT_BASE_DIR/bert_config.json \
  --init_checkpoint=$TRAINED_CLASSIFIER \
  --max_seq_length=128 \
  --output_dir=/tmp/mrpc_output/
"""

GOOGLE_PRETRAINING = r"""
python create_pretraining_data.py \
  --input_file=./sample_text.txt \
  --output_file=/tmp/tf_examples.tfrecord \
  --vocab_file=$BERT_BASE_DIR/vocab.txt \
  --do_lower_case=True \
  --max_seq_length=128 \
  --max_predictions_per_seq=20 \
  --masked_lm_prob=0.15 \
  --random_seed=12345 \
  --dupe_factor=5

python run_pretraining.py \
  --input_file=/tmp/tf_examples.tfrecord \
  --output_dir=/tmp/pretraining_output \
  --do_train=True \
  --do_eval=True \
  --bert_config_file=$BERT_BASE_DIR/bert_config.json \
  --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt \
  --train_batch_size=32 \
  --max_seq_length=128 \
  --max_predictions_per_seq=20 \
  --num_train_steps=20 \
  --num_warmup_steps=10 \
  --learning_rate=2e-5
"""

FORK_QQP = r"""
python run_custom_classifier.py \
  --task_name=QQP \
  --do_lower_case=true \
  --do_train=true \
  --do_eval=true \
  --do_predict=true \
  --save_for_serving=true \
  --data_dir=/cfs/data/glue/QQP \
  --vocab_file=/cfs/models/bert-large-uncased/vocab.txt \
  --bert_config_file=/cfs/models/bert-large-uncased/bert_config.json \
  --init_checkpoint=/cfs/models/bert-large-uncased/bert_model.ckpt \
  --max_seq_length=128 \
  --train_batch_size=32 \
  --learning_rate=2e-5 \
  --num_train_epochs=3.0 \
  --use_gpu=true \
  --num_gpu_cores=4 \
  --use_fp16=true \
  --output_dir=/cfs/outputs/bert-large-uncased-qqp
"""

FORK_PUNCT = r"""
python run_seq_labeling.py \
  --task_name=PUNCT \
  --do_lower_case=true \
  --do_train=true \
  --do_eval=true \
  --do_predict=true \
  --save_for_serving=true \
  --data_dir=/cfs/data/PUNCT \
  --vocab_file=/cfs/models/bert-large-uncased/vocab.txt \
  --bert_config_file=/cfs/models/bert-large-uncased/bert_config.json \
  --init_checkpoint=/cfs/models/bert-large-uncased/bert_model.ckpt \
  --max_seq_length=128 \
  --train_batch_size=32 \
  --learning_rate=5e-5 \
  --num_train_epochs=10.0 \
  --use_gpu=true \
  --num_gpu_cores=4 \
  --use_fp16=true \
  --output_dir=/cfs/outputs/bert-large-uncased-punct
"""

_GPU_FLAGS = ("--use_gpu", "--num_gpu_cores", "--use_fp16")


def fork_request_body():
    """The body of the fork's README curl request, byte for byte (a QQP pair of
    bert-base-uncased ids padded to 128, and its label_ids input)."""
    ids = [101, 2054, 2064, 2028, 2079, 2044, 16914, 5910, 1029, 102, 2054, 2079, 1045, 2079,
           2044, 2026, 16914, 5910, 1029, 102] + [0] * 108
    mask = [1] * 20 + [0] * 108
    segments = [0] * 10 + [1] * 10 + [0] * 108

    def join(values):
        return ",".join(str(v) for v in values)
    return ('{"instances": [{"input_ids": [%s], "input_mask": [%s], "segment_ids": [%s], '
            '"label_ids":[0]}]}' % (join(ids), join(mask), join(segments)))


def run_readme(command, env=None, drop=(), replace=()):
    """Runs a README command in bash from the repository, with `python` this
    interpreter; `replace`: (old, new) path substitutions. Returns stderr."""
    lines = [line for line in command.strip().split("\n")
             if not line.strip().startswith(tuple(drop))]
    script = "\n".join(lines)
    for old, new in replace:
        script = script.replace(old, new)
    full_env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", **(env or {}))
    full_env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + full_env["PATH"]
    result = subprocess.run(["bash", "-e", "-c", script], cwd=REPO, env=full_env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            universal_newlines=True)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stderr


def read_eval_results(path):
    """eval_results.txt as Google's users read it: `key = value` lines."""
    with open(path) as f:
        return {key: float(value) for key, value in
                (line.rstrip("\n").split(" = ") for line in f if " = " in line)}


def sentence(rng, low=3, high=7):
    return " ".join(rng.choice(TINY_WORDS[:15]) for _ in range(rng.randint(low, high)))


def write_pairs(path, header, count, rng, row):
    """A GLUE-style TSV: `header`, then `count` rows row(i, text_a, text_b, label)."""
    with open(path, "w") as f:
        f.write("\t".join(header) + "\n")
        for i in range(count):
            a = sentence(rng)
            b = a if rng.random() < 0.5 else sentence(rng)
            f.write("\t".join(row(i, a, b, str(int(a == b)))) + "\n")


@pytest.fixture(scope="module")
def cfs(tmp_path_factory):
    """The fork's /cfs/ tree: a tiny model with bert-base's vocab size (so the curl
    request's ids are in range) and 128 positions, and QQP in GLUE's layout (its
    sequence and multi-label tasks: test_fork_tasks.py)."""
    root = tmp_path_factory.mktemp("cfs")
    write_tiny_model(str(root / "models" / "bert-large-uncased"), vocab_size=30522,
                     max_position_embeddings=128)
    rng = random.Random(7)
    qqp = root / "data" / "glue" / "QQP"
    qqp.mkdir(parents=True)
    for split, count in (("train", 24), ("dev", 8)):
        write_pairs(str(qqp / (split + ".tsv")),
                    ["id", "qid1", "qid2", "question1", "question2", "is_duplicate"], count,
                    rng, lambda i, a, b, label: [str(i), str(2 * i), str(2 * i + 1), a, b,
                                                 label])
    write_pairs(str(qqp / "test.tsv"), ["id", "question1", "question2"], 5, rng,
                lambda i, a, b, label: [str(i), a, b])
    return str(root)


def test_googles_mrpc_commands_train_then_predict_from_the_fine_tuned_checkpoint(cfs, tmp_path):
    bert_base = os.path.join(cfs, "models", "bert-large-uncased")
    glue = tmp_path / "glue"
    (glue / "MRPC").mkdir(parents=True)
    rng = random.Random(3)
    columns = ["#1 ID", "#2 ID", "#1 String", "#2 String"]
    for split, count in (("train", 24), ("dev", 8)):
        write_pairs(str(glue / "MRPC" / (split + ".tsv")), ["Quality"] + columns, count, rng,
                    lambda i, a, b, label: [label, str(i), str(i + 100), a, b])
    write_pairs(str(glue / "MRPC" / "test.tsv"), ["index"] + columns, 6, rng,
                lambda i, a, b, label: [str(i), str(i), str(i + 100), a, b])
    env = {"BERT_BASE_DIR": bert_base, "GLUE_DIR": str(glue)}
    trained = str(tmp_path / "mrpc_output") + "/"
    run_readme(GOOGLE_MRPC_TRAIN, env, replace=[("/tmp/mrpc_output/", trained)])
    report = read_eval_results(os.path.join(trained, "eval_results.txt"))
    assert {"eval_accuracy", "eval_loss", "global_step", "loss"} <= set(report)
    assert report["global_step"] == int(24 / 32 * 3.0) == 2  # Google's arithmetic
    assert report["eval_precision"] == report["precision"]  # and the fork's keys

    # The recipe: a fine-tuned checkpoint, an empty output_dir (--do_eval as well,
    # which the same recipe allows, to show which weights answered).
    env["TRAINED_CLASSIFIER"] = tf.train.latest_checkpoint(trained)
    predicted = str(tmp_path / "mrpc_predict") + "/"
    stderr = run_readme(GOOGLE_MRPC_PREDICT, env,
                        replace=[("/tmp/mrpc_output/", predicted + " --do_eval=true")])
    assert "using the fine-tuned model in --init_checkpoint=%s" % env["TRAINED_CLASSIFIER"] \
        in stderr
    probabilities = np.loadtxt(os.path.join(predicted, "test_results.tsv"))
    assert probabilities.shape == (6, 2)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-5)
    again = read_eval_results(os.path.join(predicted, "eval_results.txt"))
    assert again["global_step"] == 2
    np.testing.assert_allclose(again["eval_loss"], report["eval_loss"], rtol=1e-6)
    with open(os.path.join(predicted, "test_predictions.tsv")) as f:
        assert f.readline().split("\t")[:2] == ["id", "prediction"]


def test_the_init_checkpoint_recipe_needs_the_task_head(tmp_path):
    head = {"output_weights": [2, 32], "output_bias": [2]}
    pretrained = write_tiny_model(str(tmp_path / "bert"))["init_checkpoint"]
    fine_tuned = write_tiny_model(str(tmp_path / "tuned"), with_classifier_labels=2)
    graph = tf.Graph()  # a fine-tuned checkpoint also holds the global step
    with graph.as_default(), tf1.Session(graph=graph) as sess:
        step = tf1.train.get_or_create_global_step()
        saver = tf1.train.Saver([step] + [
            tf1.get_variable(name, shape) for name, shape in
            tf.train.list_variables(fine_tuned["init_checkpoint"])])
        sess.run(tf1.global_variables_initializer())
        tuned = saver.save(sess, str(tmp_path / "tuned" / "model.ckpt"), global_step=7)
    shapes = dict(tf.train.list_variables(pretrained), **head)
    empty = str(tmp_path / "empty")
    assert checkpoints.checkpoint_to_use(empty, tuned, shapes, "prediction") == tuned
    with pytest.raises(errors.InputError, match="has no trained checkpoint for prediction"):
        checkpoints.checkpoint_to_use(empty, pretrained, shapes, "prediction")
    other = dict(shapes, output_weights=[3, 32], output_bias=[3])
    with pytest.raises(errors.InputError, match=r"output_\w+ has shape \[2.*needs \[3"):
        checkpoints.checkpoint_to_use(empty, tuned, other, "prediction")
    # A checkpoint in output_dir wins over --init_checkpoint.
    assert checkpoints.checkpoint_to_use(str(tmp_path / "tuned"), tuned, shapes, "x") is None


def test_the_forks_qqp_command_and_its_rest_request(cfs):
    output_dir = os.path.join(cfs, "outputs", "bert-large-uncased-qqp")
    # The one flag a user of the fork's clients adds: the signature they call.
    run_readme(FORK_QQP, drop=_GPU_FLAGS, replace=[
        ("/cfs/", cfs + "/"), ("--save_for_serving=true", "--save_for_serving=true "
                                                          "--serving_compat=bert_multi_gpu")])
    assert np.loadtxt(os.path.join(output_dir, "test_results.tsv")).shape == (5, 2)
    assert {"eval_accuracy", "eval_precision", "eval_recall", "eval_f1score"} <= set(
        read_eval_results(os.path.join(output_dir, "eval_results.txt")))
    serving = os.path.join(output_dir, "serving")
    (version,) = os.listdir(serving)
    signature = tf.saved_model.load(os.path.join(serving, version)).signatures[
        "serving_default"]
    assert sorted(signature.structured_input_signature[1]) == [
        "input_ids", "input_mask", "label_ids", "segment_ids"]
    assert list(signature.structured_outputs) == ["probabilities"]

    server = start_server(serving)
    try:
        request = urllib.request.Request(server_url(server) + ":predict",
                                         data=fork_request_body().encode("utf-8"),
                                         headers={"Content-type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            answer = json.loads(response.read())
    finally:
        stop(server)
        server.stdout.close()
        server.stderr.close()
    assert list(answer) == ["predictions"]
    (row,) = answer["predictions"]  # {"predictions": [[p0, p1]]}
    assert len(row) == 2 and abs(sum(row) - 1.0) < 1e-5


def test_the_forks_sequence_layout_and_tasks(tmp_path):
    path = tmp_path / "train.tsv"
    path.write_text("EU rejects German call\tB-ORG O B-MISC O\n\nPeter Blackburn\tB-PER I-PER\n")
    sentences = seq_labeling_readers.read_split(str(path), "named_entity", "train", True)
    assert [s.words for s in sentences] == [("EU", "rejects", "German", "call"),
                                            ("Peter", "Blackburn")]
    assert sentences[1].labels == ("B-PER", "I-PER")
    assert seq_labeling_readers.task_kind("named_entity") == "ner"
    assert seq_labeling_readers.task_kind("norm") == "pos"
    assert seq_labeling_readers.is_sentence_lines("punct", "d/train.tsv")
    assert not seq_labeling_readers.is_sentence_lines("punct", "d/train.txt")
    assert not seq_labeling_readers.is_sentence_lines("ner", "d/train.tsv")  # CoNLL in .tsv
    (tmp_path / "dev.tsv").write_text("a b\tO O\n")
    assert seq_labeling_readers.default_split_path(str(tmp_path), "NORM".lower(), "dev") == str(
        tmp_path / "dev.tsv")
    for text, message in (("a b\tO\n", ":1: 2 words but 1 labels"),
                          ("ok\tO\na b\n", ":2: expected the words, a tab, then one label"),
                          ("\tO\n", ":1: no words before the tab")):
        path.write_text(text)
        with pytest.raises(errors.InputError, match=message):
            seq_labeling_readers.read_split(str(path), "norm", "train", True)
    # Test files: the words only.
    path.write_text("a b c\n")
    (test_sentence,) = seq_labeling_readers.read_split(str(path), "norm", "predict", False)
    assert test_sentence.words == ("a", "b", "c") and test_sentence.labels is None


def test_googles_pretraining_commands_and_a_warmup_longer_than_training(tmp_path):
    bert_base = write_tiny_model(str(tmp_path / "bert"), max_position_embeddings=128)
    rng = random.Random(5)
    with open(str(tmp_path / "sample_text.txt"), "w") as f:
        for _ in range(6):  # documents: a sentence a line, a blank line after each
            f.write("\n".join(sentence(rng, 6, 12) for _ in range(6)) + "\n\n")
    records = str(tmp_path / "tf_examples.tfrecord")
    output_dir = str(tmp_path / "pretraining_output")
    moved = [("./sample_text.txt", str(tmp_path / "sample_text.txt")),
             ("/tmp/tf_examples.tfrecord", records), ("/tmp/pretraining_output", output_dir)]
    run_readme(GOOGLE_PRETRAINING, {"BERT_BASE_DIR": os.path.dirname(bert_base["init_checkpoint"])},
               replace=moved)
    report = read_eval_results(os.path.join(output_dir, "eval_results.txt"))
    assert report["global_step"] == 20
    assert {"masked_lm_accuracy", "masked_lm_loss", "next_sentence_accuracy",
            "next_sentence_loss", "loss"} <= set(report)

    # Google's script accepted more warmup than training steps; so does ours, saying so.
    stderr = run_readme(
        "python run_pretraining.py --input_file=%s --output_dir=%s --do_train=True "
        "--bert_config_file=%s --train_batch_size=32 --max_seq_length=128 "
        "--num_train_steps=21 --num_warmup_steps=100" % (
            records, output_dir, bert_base["bert_config_file"]))
    assert "--num_warmup_steps=100 is more than --num_train_steps=21" in stderr
    assert tf.train.latest_checkpoint(output_dir).endswith("-21")
    graph = tf.Graph()
    with graph.as_default(), tf1.Session(graph=graph) as sess:
        # Still warming up at step 20 of 21: 20/100 of the peak, as in Google's schedule.
        rate = sess.run(optimization.learning_rate_schedule(
            tf.constant(20, tf.int64), 2e-5, 21, 100))
    np.testing.assert_allclose(rate, 2e-5 * 20 / 100, rtol=1e-6)
