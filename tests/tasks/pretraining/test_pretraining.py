"""create_pretraining_data.py and run_pretraining.py, as a user runs them.

Fast tests use tiny vocabularies and tiny BERT configs; the ones marked slow
use the 1,500 real movie reviews (converted to one sentence per line, a blank
line between reviews) and the real all-MiniLM-L6-v2.
"""

import glob
import json
import math
import os
import random
import re
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from bench.pretraining_data_bench import write_review_documents
from bert_toolkit.engine import multi_worker, tfrecord_codec
from bert_toolkit.errors import InputError
from bert_toolkit.model import modeling
from bert_toolkit.tasks.pretraining import data as pretraining_data
from bert_toolkit.tasks.pretraining import task as pretraining
from bert_toolkit.tasks.pretraining import writer as pretraining_writer
from bert_toolkit.tasks.pretraining.options import PretrainingDataConfig
from bert_toolkit.text import tokenization

import script_runs
from tiny import REPO, TINY_WORDS, free_port, tiny_config, write_tiny_model

tf1 = tf.compat.v1


def run_script(script, *args, env=None, check=True):
    full_env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    full_env.pop("TF_CONFIG", None)
    full_env.update(env or {})
    result = script_runs.run([script] + list(args), env=full_env)
    if check and result.returncode != 0:
        raise AssertionError("%s exit %d:\n%s" % (script, result.returncode,
                                                  result.stderr[-3000:]))
    return result


def make_data(input_file, output_file, vocab_file, *extra, check=True):
    return run_script("create_pretraining_data.py", "--input_file=%s" % input_file,
                      "--output_file=%s" % output_file, "--vocab_file=%s" % vocab_file,
                      *extra, check=check)


def read_records(paths, max_seq_length, max_predictions_per_seq):
    """Every record of `paths`, parsed with the reference spec: dict of numpy arrays."""
    spec = {
        "input_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "input_mask": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "masked_lm_positions": tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64),
        "masked_lm_ids": tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64),
        "masked_lm_weights": tf.io.FixedLenFeature([max_predictions_per_seq], tf.float32),
        "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
    }
    serialized = [r.numpy() for r in tf.data.TFRecordDataset(paths)]
    parsed = tf.io.parse_example(serialized, spec)
    return {name: value.numpy() for name, value in parsed.items()}


def assert_one_line_error(result, *fragments):
    assert result.returncode == 1, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert lines and lines[-1].startswith("error: "), result.stderr[-2000:]
    assert not any("Traceback" in line for line in lines), result.stderr[-2000:]
    for fragment in fragments:
        assert fragment in lines[-1], lines[-1]


@pytest.fixture(scope="module")
def tiny_corpus(tmp_path_factory):
    """A tiny vocabulary and model, and 80 documents of its words."""
    root = tmp_path_factory.mktemp("tiny_corpus")
    model = write_tiny_model(str(root / "model"), max_position_embeddings=64)
    rng = random.Random(0)
    text_path = root / "text.txt"
    with open(text_path, "w") as f:
        for _ in range(80):
            for _ in range(rng.randint(2, 8)):
                words = [rng.choice(TINY_WORDS) for _ in range(rng.randint(3, 12))]
                # some "##s" continuations, for whole-word masking
                f.write(" ".join(w + ("s" if w in ("movie", "film") else "") for w in words)
                        + "\n")
            f.write("\n")
    return model, str(text_path), root


# -- pure pieces -------------------------------------------------------------------

def test_crc32c_known_values_and_framing_read_by_tensorflow(tmp_path):
    crc = tfrecord_codec.Crc32c()
    assert int(crc.batch([b"123456789"])[0]) == 0xE3069283  # the standard check value
    assert int(crc.batch([b"\x00" * 32])[0]) == 0x8A9136AA
    payloads = [bytes(random.Random(i).getrandbits(8) for _ in range(1 + 37 * i))
                for i in range(40)]
    data, lengths = tfrecord_codec.ExampleEncoder(8, 2).records(payloads)
    assert lengths.tolist() == [len(p) + 16 for p in payloads] and len(data) == sum(lengths)
    path = str(tmp_path / "framed.tfrecord")
    with open(path, "wb") as f:
        f.write(data)
    # TensorFlow checks both CRCs of every record while reading.
    assert [r.numpy() for r in tf.data.TFRecordDataset(path)] == payloads


def test_codec_bytes_equal_tensorflows_and_read_back(tmp_path):
    """tfrecord_codec's records hold the same tf.train.Example as tf.train.Example +
    tf.io.TFRecordWriter write for the same instances (protocol buffers may order
    map entries differently, so the messages are compared, not the bytes), and
    tf.data reads them with their CRCs checked."""
    encoder = tfrecord_codec.ExampleEncoder(8, 3)
    input_ids = np.array([[2, 7, 8, 3, 9, 3, 0, 0], [2, 5, 3, 6, 6, 6, 3, 0]], np.int32)
    lengths, lengths_a = np.array([6, 7]), np.array([2, 1])
    positions = np.array([[1, 4, 0], [2, 4, 5]])
    labels = np.array([[7, 9, 0], [6, 6, 6]], np.int32)
    counts, is_random = np.array([2, 3]), np.array([0, 1])
    payloads = encoder.examples(input_ids, lengths, lengths_a, positions, labels, counts,
                                is_random)
    data, _ = encoder.records(payloads)
    ours = str(tmp_path / "ours.tfrecord")
    with open(ours, "wb") as f:
        f.write(data)
    theirs = str(tmp_path / "theirs.tfrecord")
    spec = pretraining.feature_spec(8, 3)
    with tf.io.TFRecordWriter(theirs) as writer:
        for row in range(2):
            n, n_a = lengths[row], lengths_a[row]
            values = {
                "input_ids": input_ids[row].tolist(),
                "input_mask": [1] * n + [0] * (8 - n),
                "segment_ids": [0] * (n_a + 2) + [1] * (n - n_a - 2) + [0] * (8 - n),
                "masked_lm_positions": positions[row].tolist(),
                "masked_lm_ids": labels[row].tolist(),
                "masked_lm_weights": [1.0] * counts[row] + [0.0] * (3 - counts[row]),
                "next_sentence_labels": [int(is_random[row])]}
            feature = {name: tf.train.Feature(float_list=tf.train.FloatList(value=v))
                       if name == "masked_lm_weights" else
                       tf.train.Feature(int64_list=tf.train.Int64List(value=v))
                       for name, v in values.items()}
            writer.write(tf.train.Example(features=tf.train.Features(
                feature=feature)).SerializeToString())
    ours_records = [r.numpy() for r in tf.data.TFRecordDataset(ours)]
    theirs_records = [r.numpy() for r in tf.data.TFRecordDataset(theirs)]
    assert ours_records == payloads and len(theirs_records) == 2
    for mine, reference in zip(ours_records, theirs_records):
        assert tf.train.Example.FromString(mine) == tf.train.Example.FromString(reference)
    parsed = [tf.io.parse_single_example(r, spec) for r in tf.data.TFRecordDataset(ours)]
    np.testing.assert_array_equal(parsed[1]["input_ids"].numpy(), input_ids[1])
    assert tfrecord_codec.read_first_record(ours) == payloads[0]


def test_logged_values_read_every_record_and_stop_at_a_cut_tail(tmp_path):
    """training.logged_values reads TensorBoard events through
    tfrecord_codec.read_records: every step of a tag, and a file cut inside its
    last record (a killed run's) yields the records before it."""
    from bert_toolkit.engine import training
    whole = str(tmp_path / "whole")
    with tf.Graph().as_default():  # the v1 FileWriter the training log uses
        for step in (1, 2, 3):
            training.write_summaries(whole, step,
                                     {"loss": 1.0 / step, "examples_per_second": 7.0})
        tf.compat.v1.summary.FileWriterCache.clear()
    assert training.logged_values(whole, "loss") == [
        (1, pytest.approx(1.0)), (2, pytest.approx(0.5)), (3, pytest.approx(1.0 / 3))]
    assert [step for step, _ in training.logged_values(whole, "examples_per_second")] == [1, 2, 3]
    [events] = glob.glob(os.path.join(whole, "events.out.tfevents.*"))
    with open(events, "rb") as f:
        data = f.read()
    cut = tmp_path / "cut"
    cut.mkdir()
    (cut / os.path.basename(events)).write_bytes(data[:-7])
    assert [step for step, _ in training.logged_values(str(cut), "loss")] == [1, 2]
    with open(events, "rb") as f:
        assert list(tfrecord_codec.read_records(f)) == [
            r.numpy() for r in tf.data.TFRecordDataset(events)]


def original_truncate(tokens_a, tokens_b, max_num_tokens, rng):
    """The original's loop, for comparison."""
    while len(tokens_a) + len(tokens_b) > max_num_tokens:
        trunc = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        if rng.random() < 0.5:
            del trunc[0]
        else:
            trunc.pop()


def test_truncation_keeps_the_original_lengths_and_a_fair_front_back_split():
    rng = random.Random(1)
    fronts = []
    for len_a, len_b, budget in [(100, 40, 125), (70, 70, 125), (5, 200, 60), (3, 1, 2)]:
        for _ in range(200):
            start_a, new_a, start_b, new_b = pretraining_data.truncate_spans(
                1000, len_a, 5000, len_b, budget, rng)
            ref_a, ref_b = list(range(len_a)), list(range(len_b))
            original_truncate(ref_a, ref_b, budget, rng)
            assert (new_a, new_b) == (len(ref_a), len(ref_b))
            assert 1000 <= start_a <= 1000 + len_a - new_a
            assert 5000 <= start_b <= 5000 + len_b - new_b
            if new_b < len_b:
                fronts.append((start_b - 5000) / float(len_b - new_b))
    assert 0.45 < np.mean(fronts) < 0.55


def test_segment_pairs_follow_the_original_recipe():
    rng = random.Random(3)
    # 3 documents of 5, 1 and 8 sentences, sentence lengths 3..9
    documents, offset = [], 0
    for num_sentences in (5, 1, 8):
        bounds = [offset]
        for _ in range(num_sentences):
            offset += rng.randint(3, 9)
            bounds.append(offset)
        documents.append(bounds)
    random_next = []
    for _ in range(300):
        for index, bounds in enumerate(documents):
            for start_a, len_a, start_b, len_b, is_random in pretraining_data.segment_pairs(
                    documents, index, 20, 0.1, rng):
                assert len_a >= 1 and len_b >= 1 and len_a + len_b <= 20
                assert bounds[0] <= start_a and start_a + len_a <= bounds[-1]
                inside = bounds[0] <= start_b < bounds[-1]
                assert inside != is_random  # B from another document iff random
                if not is_random:
                    assert start_b >= start_a + len_a  # the real continuation follows A
                random_next.append(is_random)
    assert 0.45 < np.mean(random_next) < 0.7


def test_masking_picks_distinct_non_special_positions_and_whole_words():
    np_rng = np.random.default_rng(2)
    lengths_a = np.array([10, 1, 60, 3] * 500)
    lengths = lengths_a + np.array([20, 1, 62, 9] * 500) + 3
    counts = np.array([19, 19, 19, 2] * 500)
    positions = pretraining_data.choose_random_positions(lengths, lengths_a, counts, 20,
                                                         np_rng)
    hits = np.zeros(lengths.max())
    for row, len_a, length, count in zip(positions, lengths_a, lengths, counts):
        used = row[row > 0].tolist()
        assert used == sorted(set(used)) and len(used) == min(count, length - 3)
        assert (row[len(used):] == 0).all()
        assert not {0, len_a + 1, length - 1} & set(used) and max(used) < length
        if len_a == 60:
            hits[used] += 1
    # uniform over the 122 candidates of the long rows: 19/122 each
    candidates = [p for p in range(125) if p not in (0, 61, 124)]
    assert abs(hits[candidates] / 500 - 19 / 122.0).max() < 0.06
    # tokens: [CLS] un ##aff ##able the [SEP] x ##x [SEP], "##" ids flagged
    tokens = [0, 1, 2, 3, 4, 9, 5, 6, 9]
    is_continuation = [False, False, True, True, False, False, True, False, False, False]
    groups = pretraining_data.whole_word_groups(
        tokens, pretraining_data.candidate_positions(4, 2), is_continuation)
    assert groups == [[1, 2, 3], [4], [6, 7]]
    rng = random.Random(2)
    for _ in range(50):
        chosen = pretraining_data.choose_whole_words(groups, 3, rng)
        assert len(chosen) <= 3 and any(set(g) <= set(chosen) for g in groups)
        assert all(set(g) <= set(chosen) or not set(g) & set(chosen) for g in groups)


def test_sentences_tokenized_per_document_equal_sentence_by_sentence(tiny_corpus):
    model, text_path, _ = tiny_corpus
    worker = pretraining_data.ShardWorker(PretrainingDataConfig(
        vocab_file=model["vocab_file"], max_seq_length=32, max_predictions_per_seq=5,
        random_seed=1, dupe_factor=1))
    documents = list(pretraining_writer.read_documents([text_path]))
    documents[3] = documents[3] + ["a | b", "good . but"]  # a separator in the text
    tokenizer = tokenization.FullTokenizer(model["vocab_file"], True)
    expected = [[ids for ids in tokenizer.encode_batch(doc) if ids] for doc in documents]
    tokens, bounds = worker.tokenize_documents(documents)
    got = [[tokens[b[j]:b[j + 1]].tolist() for j in range(len(b) - 1)] for b in bounds]
    assert got == [doc for doc in expected if doc]


# -- create_pretraining_data.py ------------------------------------------------------

def test_tiny_records_parse_with_the_reference_spec(tiny_corpus):
    model, text_path, root = tiny_corpus
    out = str(root / "spec.tfrecord")
    make_data(text_path, out, model["vocab_file"], "--max_seq_length=32",
              "--max_predictions_per_seq=5", "--dupe_factor=2", "--do_whole_word_mask",
              "--num_workers=2", "--documents_per_shard=16")
    records = read_records([out], 32, 5)
    vocab = tokenization.load_vocab(model["vocab_file"])
    n = len(records["input_ids"])
    assert n > 100
    lengths = records["input_mask"].sum(axis=1)
    for row in range(n):
        ids, length = records["input_ids"][row], lengths[row]
        assert ids[0] == vocab["[CLS]"] and ids[length - 1] == vocab["[SEP]"]
        assert (ids[length:] == 0).all() and (records["input_mask"][row, :length] == 1).all()
        segments = records["segment_ids"][row]
        first_sep = np.flatnonzero(segments)[0] - 1  # B starts after the first [SEP]
        assert ids[first_sep] == vocab["[SEP]"] and (segments[:first_sep + 1] == 0).all()
        assert (segments[first_sep + 1:length] == 1).all() and (segments[length:] == 0).all()
        weights = records["masked_lm_weights"][row]
        num_pred = int(weights.sum())
        assert num_pred == min(5, max(1, int(round(length * 0.15))))
        positions = records["masked_lm_positions"][row][:num_pred]
        assert (np.diff(positions) > 0).all() and (records["masked_lm_positions"][row][
            num_pred:] == 0).all()
        assert not {0, first_sep, length - 1} & set(positions.tolist())


def test_create_pretraining_data_never_loads_tensorflow(tiny_corpus):
    """Importing TensorFlow would triple the command's time on the real reviews (2.5 s ->
    8 s) and its workers would fork from a process holding TensorFlow's threads.
    A plain interpreter, not the tests' fork runner, which holds TensorFlow already."""
    model, text_path, root = tiny_corpus
    out = str(root / "no_tf.tfrecord")
    report = ("import atexit, runpy, sys\n"
              "atexit.register(lambda: print('tensorflow loaded:', 'tensorflow' in sys.modules))\n"
              "runpy.run_path(%r, run_name='__main__')"
              % os.path.join(REPO, "create_pretraining_data.py"))
    result = subprocess.run(
        [sys.executable, "-c", report, "--input_file=%s" % text_path, "--output_file=%s" % out,
         "--vocab_file=%s" % model["vocab_file"], "--max_seq_length=32",
         "--max_predictions_per_seq=5", "--dupe_factor=1", "--num_workers=2"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
        timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert os.path.getsize(out) > 0
    assert result.stdout.strip().splitlines()[-1] == "tensorflow loaded: False"


def test_same_seed_same_bytes_for_any_worker_count_and_another_seed_differs(tiny_corpus):
    model, text_path, root = tiny_corpus
    outputs = {}
    for name, extra in [("two", ["--num_workers=2"]), ("two_again", ["--num_workers=2"]),
                        ("one", ["--num_workers=1"]),
                        ("seed", ["--num_workers=2", "--random_seed=7"])]:
        out = str(root / ("det_%s.tfrecord" % name))
        make_data(text_path, out, model["vocab_file"], "--max_seq_length=32",
                  "--max_predictions_per_seq=5", "--dupe_factor=3",
                  "--documents_per_shard=10", *extra)
        with open(out, "rb") as f:
            outputs[name] = f.read()
    assert outputs["two"] == outputs["two_again"] == outputs["one"]
    assert outputs["seed"] != outputs["two"]


def test_records_are_spread_over_several_output_files(tiny_corpus):
    model, text_path, root = tiny_corpus
    one, parts = str(root / "whole.tfrecord"), [str(root / ("part%d" % i)) for i in range(3)]
    make_data(text_path, one, model["vocab_file"], "--max_seq_length=32", "--dupe_factor=1",
              "--max_predictions_per_seq=5")
    make_data(text_path, ",".join(parts), model["vocab_file"], "--max_seq_length=32",
              "--dupe_factor=1", "--max_predictions_per_seq=5")
    whole = [r.numpy() for r in tf.data.TFRecordDataset(one)]
    split = [[r.numpy() for r in tf.data.TFRecordDataset(p)] for p in parts]
    assert [len(s) for s in split] == [len(whole[i::3]) for i in range(3)]
    assert all(split[i] == whole[i::3] for i in range(3))


def test_create_pretraining_data_bad_inputs_leave_no_output(tiny_corpus, tmp_path):
    model, text_path, _ = tiny_corpus
    blank = tmp_path / "blank.txt"
    blank.write_text("\n  \n\n")
    out = tmp_path / "out" / "data.tfrecord"
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes(b"a fine sentence .\n\nun caf\xe9 .\n")
    binary = tmp_path / "binary.bin"
    binary.write_bytes(b"#!ELF header\n\x7fELF\x02\x01\x00\x00 sections\n")
    cases = [
        ([str(tmp_path / "missing.txt")], "missing.txt: no such file"),
        ([str(tmp_path / "nothing*.txt")], "nothing*.txt: matches no file"),
        ([text_path, str(blank)], "blank.txt holds no documents"),
        # Bytes are refused with their file and line, never dropped.
        ([text_path, str(latin1)], "latin1.txt:3: not valid utf-8: byte 0xe9"),
        ([str(binary)], "binary.bin:2: a NUL byte"),
    ]
    for inputs, fragment in cases:
        result = make_data(",".join(inputs), str(out), model["vocab_file"], "--num_workers=2",
                           check=False)
        assert_one_line_error(result, fragment)
        leftovers = glob.glob(str(tmp_path / "out" / "*"))
        assert leftovers == [], leftovers
    result = make_data(text_path, str(out), model["vocab_file"], "--max_seq_length=4",
                       check=False)
    assert_one_line_error(result, "--max_seq_length=4")


# -- run_pretraining.py --------------------------------------------------------------

def tf_config(ports, index):
    return json.dumps({"cluster": {"worker": ["localhost:%d" % p for p in ports]},
                       "task": {"type": "worker", "index": index}})


def start_workers(args, ports, log_prefix):
    """A run_pretraining.py worker per port (TF_CONFIG), each adding its output to
    log_prefix.workerN.log."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    logs = ["%s.worker%d.log" % (log_prefix, index) for index in range(len(ports))]
    return [script_runs.start(["run_pretraining.py"] + args,
                              env=dict(env, TF_CONFIG=tf_config(ports, index)),
                              stdout=log, stderr=log, append=True)
            for index, log in enumerate(logs)]


def wait_all(procs, timeout):
    """Exit codes of the processes; any still running at the deadline is killed
    (and the wait raises), so no worker outlives the test."""
    deadline = time.time() + timeout
    codes = []
    try:
        for proc in procs:
            codes.append(proc.wait(max(1, deadline - time.time())))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return codes


def latest_step(output_dir):
    latest = tf.train.latest_checkpoint(output_dir)
    return int(latest.rsplit("-", 1)[1]) if latest else -1


@pytest.fixture(scope="module")
def tiny_records(tiny_corpus):
    model, text_path, root = tiny_corpus
    out = str(root / "train.tfrecord")
    make_data(text_path, out, model["vocab_file"], "--max_seq_length=32",
              "--max_predictions_per_seq=5", "--dupe_factor=4")
    return model, out, root


def pretraining_args(model, records, steps, *extra, warmup=5, save_every=10, log_every=10):
    """run_pretraining.py flags of the multi-worker tests (tiny model, seq 32)."""
    return ["--input_file=%s" % records, "--bert_config_file=%s" % model["bert_config_file"],
            "--init_checkpoint=%s" % model["init_checkpoint"], "--max_seq_length=32",
            "--max_predictions_per_seq=5", "--do_train", "--train_batch_size=4",
            "--num_train_steps=%d" % steps, "--num_warmup_steps=%d" % warmup,
            "--learning_rate=1e-3", "--save_checkpoints_steps=%d" % save_every,
            "--log_every_n_steps=%d" % log_every] + list(extra)


def wait_for_text(log_path, text, procs, timeout=240):
    """Waits until `text` is in the log file (or a worker ended, or the deadline)."""
    deadline = time.time() + timeout
    while time.time() < deadline and all(p.poll() is None for p in procs):
        with open(log_path) as f:
            if text in f.read():
                return
        time.sleep(0.05)
    raise AssertionError("%r never appeared in %s" % (text, log_path))


STOPPED_LINE = re.compile(r"stopped: SIGTERM: training stopped at step (\d+) of (\d+), "
                          r"saved in (\S+); run the same command again to resume from there$")


def assert_stopped_together(logs, output_dir, steps):
    """Every worker's log ends with the same `stopped:` line naming the chief's
    checkpoint of the stop step, which is output_dir's latest; returns the step."""
    lines = [log.strip().splitlines()[-1] for log in logs]
    assert len(set(lines)) == 1, lines
    match = STOPPED_LINE.match(lines[0])
    assert match, lines[0]
    step = int(match.group(1))
    assert 0 < step < steps and int(match.group(2)) == steps
    assert match.group(3) == os.path.join(output_dir, "model.ckpt-%d" % step)
    assert latest_step(output_dir) == step
    return step


@pytest.mark.long
def test_two_workers_stop_together_on_sigterm_to_one_and_resume_like_one_process(
        tiny_records):
    """2 worker processes (TF_CONFIG, localhost) == 1 process with 2 CPU replicas.

    SIGTERM reaches only the second worker mid-run (as a node's preemption
    notice does): both stop after the same step, the chief saves that step (not
    the last periodic checkpoint), both exit 128+15 with one line. The same
    command resumes there, skips the batches trained on, and ends with the same
    weights as the uninterrupted single-process run of the same global batch.
    """
    model, records, root = tiny_records
    steps = 50
    common = pretraining_args(model, records, steps, "--gradient_accumulation_steps=2",
                              save_every=25, log_every=5)
    multi_dir = str(root / "multi")
    ports = [free_port(), free_port()]
    procs = start_workers(common + ["--output_dir=%s" % multi_dir], ports, multi_dir)
    try:
        wait_for_text(multi_dir + ".worker0.log", "step 10/%d" % steps, procs)
        procs[1].send_signal(signal.SIGTERM)
    finally:
        codes = wait_all(procs, 120)
    logs = [open("%s.worker%d.log" % (multi_dir, i)).read() for i in range(2)]
    assert codes == [128 + 15, 128 + 15], logs[0][-3000:] + logs[1][-3000:]
    stopped_at = assert_stopped_together(logs, multi_dir, steps)

    ports = [free_port(), free_port()]
    codes = wait_all(start_workers(common + ["--output_dir=%s" % multi_dir], ports,
                                   multi_dir), 300)
    chief_log = open(multi_dir + ".worker0.log").read()
    assert codes == [0, 0], chief_log[-3000:]
    assert "resuming from %s (step %d of %d)" % (
        os.path.join(multi_dir, "model.ckpt-%d" % stopped_at), stopped_at, steps) \
        in chief_log, chief_log[-3000:]
    assert "worker 0 of 2 (chief)" in chief_log
    assert "examples/s per replica" in chief_log and "step %d/%d (100%%)" % (steps, steps) \
        in chief_log
    # Only the chief prints the progress line; neither prints the distribute
    # coordinator's notes that an evaluation function and strategy are missing.
    worker_log = open(multi_dir + ".worker1.log").read()
    assert "examples/s" not in worker_log
    assert "is not passed in" not in chief_log + worker_log, chief_log[-3000:]
    assert latest_step(multi_dir) == steps
    assert not os.path.exists(os.path.join(multi_dir, "tmp_worker_1"))

    single_dir = str(root / "single")
    single_run = run_script("run_pretraining.py", *(common + [
        "--output_dir=%s" % single_dir, "--num_cpu_replicas=2", "--do_eval",
        "--max_eval_steps=5"]))
    # No framework chatter (tf.data's options warning of every multi-replica run).
    assert "Warning" not in single_run.stderr, single_run.stderr[-3000:]
    multi = tf.train.load_checkpoint(tf.train.latest_checkpoint(multi_dir))
    single = tf.train.load_checkpoint(tf.train.latest_checkpoint(single_dir))
    names = [n for n, _ in tf.train.list_variables(tf.train.latest_checkpoint(single_dir))]
    assert "cls/predictions/output_bias" in names
    for name in names:
        np.testing.assert_allclose(multi.get_tensor(name), single.get_tensor(name),
                                   atol=1e-6, err_msg=name)
    with open(os.path.join(single_dir, "eval_results.json")) as f:
        report = json.load(f)
    for key in ("masked_lm_accuracy", "masked_lm_loss", "next_sentence_accuracy",
                "next_sentence_loss"):
        assert math.isfinite(report[key])
    assert os.path.exists(os.path.join(single_dir, "eval_results.txt"))


def test_run_pretraining_bad_inputs(tiny_records, tmp_path):
    model, records, _ = tiny_records
    base = ["--input_file=%s" % records, "--bert_config_file=%s" % model["bert_config_file"],
            "--do_train", "--num_train_steps=2", "--num_warmup_steps=0"]
    ports = '["localhost:%d", "localhost:%d"]' % (free_port(), free_port())
    cases = {
        "seq": (["--max_seq_length=64", "--max_predictions_per_seq=5"], {},
                "input_ids of length 32 but --max_seq_length=64"),
        "pred": (["--max_seq_length=32", "--max_predictions_per_seq=20"], {},
                 "masked_lm_positions of length 5 but --max_predictions_per_seq=20"),
        "json": (["--max_seq_length=32", "--max_predictions_per_seq=5"],
                 {"TF_CONFIG": '{"cluster": {"worker": [}'}, "TF_CONFIG is not valid JSON"),
        "task": (["--max_seq_length=32", "--max_predictions_per_seq=5"],
                 {"TF_CONFIG": '{"cluster": {"worker": %s}, "task": {"type": "worker", '
                               '"index": 2}}' % ports}, "index 2 is not in the cluster"),
        "type": (["--max_seq_length=32", "--max_predictions_per_seq=5"],
                 {"TF_CONFIG": '{"cluster": {"worker": %s}, "task": {"type": "chief", '
                               '"index": 0}}' % ports}, "task type 'chief' is not a job"),
    }
    for name, (extra, env, message) in cases.items():
        result = run_script("run_pretraining.py", "--output_dir=%s" % (tmp_path / name),
                            *(base + extra), env=env, check=False)
        assert_one_line_error(result, message)
        assert not os.path.exists(str(tmp_path / name)), name


def test_tf_config_parsing():
    parse = multi_worker.parse_tf_config
    assert parse(None) is None and parse("") is None and parse('{"cluster": {}}') is None
    chief = parse('{"cluster": {"chief": ["a:1"], "worker": ["b:1", "c:1"]}, '
                  '"task": {"type": "worker", "index": 1}}')
    assert (chief.num_workers, chief.worker_index, chief.is_chief) == (3, 2, False)
    first = parse('{"cluster": {"worker": ["b:1", "c:1"]}, "task": {"type": "worker", '
                  '"index": 0}}')
    assert first.is_chief and first.worker_index == 0
    for bad in ('{"cluster": {"ps": ["a:1"], "worker": ["b:1"]}, "task": {"type": "worker"}}',
                '[1, 2]', '{"cluster": {"worker": []}, "task": {"type": "worker"}}',
                '{"cluster": {"worker": ["b:1"]}, "task": {"type": "worker", "index": -1}}'):
        with pytest.raises(InputError):
            parse(bad)


# -- real data -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def reviews(corpora_dir, minilm_dir, tmp_path_factory):
    """The 1,500 reviews as documents, and the bert-base-uncased vocabulary."""
    root = tmp_path_factory.mktemp("reviews")
    text_path = str(root / "reviews.txt")
    assert write_review_documents(os.path.join(corpora_dir, "polarity-en-pang&lee1.csv"),
                                  text_path) == 1500
    return text_path, os.path.join(minilm_dir, "vocab.txt"), root


@pytest.mark.slow
def test_real_records_have_the_specified_masking_statistics(reviews):
    text_path, vocab_file, root = reviews
    out = str(root / "stats.tfrecord")
    make_data(text_path, out, vocab_file, "--dupe_factor=2")
    records = read_records([out], 128, 20)
    vocab = tokenization.load_vocab(vocab_file)
    weights = records["masked_lm_weights"]
    real = weights > 0
    num_tokens = records["input_mask"].sum()
    assert len(weights) > 25000
    # min(20, round(0.15 * length)) predictions per sequence: ~15% of the tokens
    assert 0.14 < real.sum() / num_tokens < 0.16
    at_positions = np.take_along_axis(records["input_ids"], records["masked_lm_positions"],
                                      axis=1)[real]
    labels = records["masked_lm_ids"][real]
    is_mask = at_positions == vocab["[MASK]"]
    unchanged = at_positions == labels
    assert abs(is_mask.mean() - 0.8) < 0.01
    assert abs(unchanged.mean() - 0.1) < 0.01
    assert abs((~is_mask & ~unchanged).mean() - 0.1) < 0.01
    # Half random next by the recipe; A taking a whole one-sentence chunk forces
    # a random B, which lifts the share a little (the original's is 0.55 here).
    assert 0.48 < records["next_sentence_labels"].mean() < 0.58


@pytest.mark.slow
def test_real_records_whole_word_masking_masks_whole_words(reviews):
    text_path, vocab_file, root = reviews
    out = str(root / "wwm.tfrecord")
    make_data(text_path, out, vocab_file, "--dupe_factor=1", "--do_whole_word_mask",
              "--random_seed=3")
    records = read_records([out], 128, 20)
    inverse = {i: t for t, i in tokenization.load_vocab(vocab_file).items()}
    continuation = np.array([inverse[i].startswith("##") for i in range(len(inverse))])
    checked = 0
    for row in range(0, len(records["input_ids"]), 7):
        num_pred = int(records["masked_lm_weights"][row].sum())
        positions = set(records["masked_lm_positions"][row][:num_pred].tolist())
        labels = dict(zip(records["masked_lm_positions"][row][:num_pred].tolist(),
                          records["masked_lm_ids"][row][:num_pred].tolist()))
        # B starts after the first [SEP]; truncation can leave a "##" piece first
        # in A or B, without its word.
        segment_starts = {1, int(np.flatnonzero(records["segment_ids"][row])[0])}
        for p in positions:
            # a masked "##" piece has the piece before it masked too: whole words
            if continuation[labels[p]] and p not in segment_starts:
                assert p - 1 in positions
                checked += 1
    assert checked > 100


@pytest.mark.slow
def test_tiny_bert_from_scratch_lowers_the_masked_lm_loss(reviews):
    text_path, vocab_file, root = reviews
    records = str(root / "scratch.tfrecord")
    make_data(text_path, records, vocab_file, "--dupe_factor=1", "--max_seq_length=64",
              "--max_predictions_per_seq=10")
    config_file = str(root / "scratch_config.json")
    tiny_config(vocab_size=30522, hidden_size=64, intermediate_size=128,
                max_position_embeddings=64).to_json_file(config_file)
    output_dir = str(root / "scratch")
    common = ["--input_file=%s" % records, "--bert_config_file=%s" % config_file,
              "--output_dir=%s" % output_dir, "--max_seq_length=64",
              "--max_predictions_per_seq=10", "--do_train", "--do_eval",
              "--train_batch_size=32", "--eval_batch_size=32", "--max_eval_steps=10",
              "--learning_rate=2e-3", "--num_warmup_steps=1", "--precision=bf16"]
    losses = []
    for steps in (1, 60):
        run_script("run_pretraining.py", "--num_train_steps=%d" % steps, *common)
        with open(os.path.join(output_dir, "eval_results.json")) as f:
            losses.append(json.load(f)["masked_lm_loss"])
    assert losses[0] > math.log(30522) - 0.5  # a random model: ~uniform over the vocabulary
    assert losses[1] < losses[0] - 2.5, losses


@pytest.mark.slow
def test_continue_pretraining_minilm_then_load_into_bert_and_classifier(
        reviews, minilm_checkpoint):
    text_path, vocab_file, root = reviews
    converted = os.path.dirname(minilm_checkpoint["init_checkpoint"])
    small = str(root / "small_reviews.txt")
    with open(text_path) as source, open(small, "w") as target:
        target.write(source.read()[:150000])
    records = str(root / "minilm.tfrecord")
    make_data(small, records, vocab_file, "--dupe_factor=1")
    output_dir = str(root / "minilm_pretrained")
    run_script("run_pretraining.py", "--input_file=%s" % records,
               "--bert_config_file=%s/bert_config.json" % converted,
               "--init_checkpoint=%s/bert_model.ckpt" % converted,
               "--output_dir=%s" % output_dir, "--do_train", "--do_eval",
               "--train_batch_size=4", "--num_train_steps=3", "--num_warmup_steps=1",
               "--max_eval_steps=3", "--optimizer=lamb", "--precision=bf16")
    checkpoint = tf.train.latest_checkpoint(output_dir)
    assert checkpoint.endswith("-3")
    config = modeling.BertConfig.from_json_file(converted + "/bert_config.json")
    stored = dict(tf.train.list_variables(checkpoint))
    for name, shape in pretraining.head_variable_shapes(config).items():
        assert stored[name] == shape, name
    before = tf.train.load_checkpoint(converted + "/bert_model.ckpt")
    after = tf.train.load_checkpoint(checkpoint)
    name = "bert/encoder/layer_5/output/dense/kernel"
    assert not np.array_equal(before.get_tensor(name), after.get_tensor(name))

    # The continued checkpoint initialises BertModel plus a classifier head, as
    # run_custom_classifier.py does with --init_checkpoint.
    graph = tf.Graph()
    with graph.as_default():
        ids = tf.constant([[101, 2023, 3185, 2001, 2307, 102]])
        model = modeling.BertModel(config, False, ids)
        output_weights = tf1.get_variable("output_weights", [2, config.hidden_size])
        logits = tf.matmul(model.get_pooled_output(), output_weights, transpose_b=True)
        initialised = modeling.init_from_checkpoint(checkpoint)
        with tf1.Session(graph=graph) as sess:
            sess.run(tf1.global_variables_initializer())
            word_embeddings = sess.run(model.get_embedding_table())
            values = sess.run(logits)
    assert "bert/encoder/layer_5/output/dense/kernel" in initialised
    np.testing.assert_array_equal(word_embeddings,
                                  after.get_tensor("bert/embeddings/word_embeddings"))
    assert np.isfinite(values).all()


def _free_port_pair():
    """A port p with p + 1 also free (a Slurm node's two tasks listen on both)."""
    for _ in range(50):
        port = free_port()
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port + 1))
                return port
            except OSError:
                continue
    raise AssertionError("no two consecutive free ports")


@pytest.mark.long
def test_two_slurm_tasks_stop_on_sigterm_resume_and_train_like_tf_config(tiny_records):
    """Two workers started with Slurm's step variables only (one node, two tasks,
    as `srun --ntasks=2` sets them) form the cluster TF_CONFIG describes by hand.
    SIGTERM to both mid-run (Slurm's time limit with --signal=TERM@120): both
    exit 128+15 after saving the same step; the same command (a requeued job)
    resumes there and ends with the weights of an uninterrupted TF_CONFIG run."""
    model, records, root = tiny_records
    steps = 60
    common = pretraining_args(model, records, steps, warmup=2, save_every=100, log_every=5)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("TF_CONFIG", None)
    slurm_dir = str(root / "slurm")
    port = _free_port_pair()

    def start_tasks(run):
        logs = ["%s.run%d.task%d.log" % (slurm_dir, run, rank) for rank in range(2)]
        return [script_runs.start(
            ["run_pretraining.py", "--output_dir=%s" % slurm_dir,
             "--cluster_port_base=%d" % port] + common, stdout=log, stderr=log, env=dict(
                env, SLURM_JOB_ID="42", SLURM_PROCID=str(rank), SLURM_STEP_NUM_TASKS="2",
                SLURM_STEP_NODELIST="localhost", SLURM_STEP_TASKS_PER_NODE="2"))
            for rank, log in enumerate(logs)]

    procs = start_tasks(0)
    try:
        wait_for_text(slurm_dir + ".run0.task0.log", "step 10/%d" % steps, procs)
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
    finally:
        codes = wait_all(procs, 120)
    logs = [open("%s.run0.task%d.log" % (slurm_dir, rank)).read() for rank in range(2)]
    assert codes == [128 + 15, 128 + 15], logs[0][-3000:] + logs[1][-3000:]
    assert ("cluster: Slurm, task 0 of 2 (localhost:%d, localhost:%d)" % (port, port + 1)
            in logs[0])
    stopped_at = assert_stopped_together(logs, slurm_dir, steps)

    codes = wait_all(start_tasks(1), 300)
    chief_log = open(slurm_dir + ".run1.task0.log").read()
    assert codes == [0, 0], chief_log[-3000:]
    assert "(step %d of %d)" % (stopped_at, steps) in chief_log

    config_dir = str(root / "tf_config")
    ports = [free_port(), free_port()]
    assert wait_all(start_workers(common + ["--output_dir=%s" % config_dir], ports,
                                  config_dir), 300) == [0, 0]
    slurm = tf.train.load_checkpoint(tf.train.latest_checkpoint(slurm_dir))
    by_hand = tf.train.load_checkpoint(tf.train.latest_checkpoint(config_dir))
    assert latest_step(slurm_dir) == latest_step(config_dir) == steps
    for name, _ in tf.train.list_variables(tf.train.latest_checkpoint(config_dir)):
        np.testing.assert_allclose(slurm.get_tensor(name), by_hand.get_tensor(name),
                                   atol=1e-6, err_msg=name)


# Well above a tiny step or checkpoint save on a loaded 2-core machine.
LOST_WORKER_TIMEOUT = 15


@pytest.mark.long
def test_a_lost_worker_stops_the_other_and_one_worker_resumes(tiny_records):
    """SIGKILL one of two TF_CONFIG workers: the other, which would wait in the
    all-reduce forever, ends within its --step_timeout_seconds with one error
    line and exit 1; the same command on one worker then resumes from the last
    checkpoint and reaches the planned step. (The default timeout, max(60 s, 10x
    the longest step), is the same watchdog with a derived number: test_training
    checks that number and its line, so this test need not wait a minute.)"""
    model, records, root = tiny_records
    steps = 300
    out = str(root / "lost")
    common = pretraining_args(model, records, steps, "--output_dir=%s" % out,
                              warmup=10, log_every=100)
    procs = start_workers(common + ["--step_timeout_seconds=%d" % LOST_WORKER_TIMEOUT],
                          [free_port(), free_port()], out)
    try:
        deadline = time.time() + 240
        while latest_step(out) < 10 and time.time() < deadline \
                and all(p.poll() is None for p in procs):
            time.sleep(0.1)
        procs[1].send_signal(signal.SIGKILL)
        killed = time.time()
        code = procs[0].wait(timeout=180)
        waited = time.time() - killed
    finally:
        wait_all(procs, 30)
    log = open(out + ".worker0.log").read()
    assert ("a lost worker ends this one after %d s without a step (--step_timeout_seconds)"
            % LOST_WORKER_TIMEOUT) in log
    last = log.strip().splitlines()[-1]
    assert code == 1, log[-3000:]
    assert last.startswith("error: no training step finished in %d s (--step_timeout_seconds)"
                           ": a worker of the cluster is probably gone" % LOST_WORKER_TIMEOUT), \
        last
    assert "resume from the last checkpoint in %s" % out in last
    assert waited < LOST_WORKER_TIMEOUT + 15, waited
    stopped_at = latest_step(out)
    assert 10 <= stopped_at < steps

    resumed = run_script("run_pretraining.py", *(common + ["--cluster=local"]))
    assert "resuming from" in resumed.stderr
    assert latest_step(out) == steps
