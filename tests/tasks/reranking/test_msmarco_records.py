"""dl4marco-bert's MS MARCO records in run_reranking.py, and the MS MARCO fork's run_multi_gpu.py.

Records are written from the re-ranking TSV files by msmarco_writer (in
dl4marco-bert's convert_msmarco_to_tfrecord.py layout), then read back: the
features, and a whole run's MRR@10 and ranking, equal those of the TSV files.
The slow test does so on the real movie-review ranking task with the real
all-MiniLM-L6-v2 (trained and evaluated both ways).
"""

import json
import os
import random
import re
import shutil

import numpy as np
import pytest
import tensorflow as tf
from test_reranking import (
    data_args,
    model_args,
    run_reranking,
    write_checkpoint_with_head,
    write_keyword_task,
    write_lines,
)

from bert_toolkit.errors import InputError
from bert_toolkit.tasks.reranking import (
    data,
    msmarco_records,
    msmarco_writer,
    multi_gpu_fork,
    ranking,
)
from bert_toolkit.tasks.reranking import task as reranking
from bert_toolkit.tasks.reranking.options import RerankingOptions
from bert_toolkit.text import tokenization

import script_runs
from tiny import REPO, TINY_WORDS, write_tiny_model

NUM_EVAL_DOCS = 6


def read_raw_records(path):
    """[{feature: [ints]}] of a records file, read with TensorFlow's own parser."""
    spec = {name: tf.io.VarLenFeature(tf.int64) for name in msmarco_records.FEATURES}
    rows = []
    for raw in tf.data.TFRecordDataset(path):
        parsed = tf.io.parse_single_example(raw, spec)
        rows.append({name: tf.sparse.to_dense(value).numpy().tolist()
                     for name, value in parsed.items()})
    return rows


def write_example_records(path, rows):
    """Writes [{name: [ints] or [floats]}] as tf.train.Examples (bad records too)."""
    with tf.io.TFRecordWriter(str(path)) as writer:
        for row in rows:
            feature = {}
            for name, values in row.items():
                if values and isinstance(values[0], float):
                    feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=values))
                else:
                    feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=values))
            writer.write(tf.train.Example(
                features=tf.train.Features(feature=feature)).SerializeToString())


@pytest.fixture(scope="module")
def ranking_task(tmp_path_factory):
    """A tiny model, TSV files of a task it learns (relevant passages praise), and
    those files as dl4marco-bert's records (written at lengths that cut nothing).

    Some queries have fewer candidates than NUM_EVAL_DOCS (padded with fake
    documents in the records); one query's relevant passage is missing from its
    candidates (it counts 0 in MRR@10, both ways).
    """
    root = tmp_path_factory.mktemp("dl4marco")
    model = write_tiny_model(str(root / "model"), with_classifier_labels=2)
    rng = random.Random(0)
    filler = TINY_WORDS[:9]
    praise, blame = ("good", "great", "fine"), ("bad", "awful", "dull")

    def text(key=None):
        words = [rng.choice(filler) for _ in range(5)]
        return " ".join(words[:2] + [key] + words[2:]) if key else " ".join(words)

    tsv = root / "tsv"
    tsv.mkdir()
    write_lines(tsv / "triples.tsv", ["%s\t%s\t%s" % (text(), text(rng.choice(praise)),
                                                      text(rng.choice(blame)))
                                      for _ in range(48)])
    candidates, qrels = [], []
    for qid in range(12):
        relevant, query = rng.randrange(5), text()
        for position in range(NUM_EVAL_DOCS - qid % 2):
            pid = 1000 * (qid + 1) + position
            key = rng.choice(praise if position == relevant else blame)
            candidates.append("%d\t%d\t%s\t%s" % (qid, pid, query, text(key)))
            if position == relevant:
                qrels.append("%d 0 %d 1" % (qid, pid if qid != 5 else 999999))
    write_lines(tsv / "dev.tsv", candidates)
    write_lines(tsv / "qrels.txt", qrels)
    records = root / "records"
    tokenizer = tokenization.FullTokenizer(model["vocab_file"], True)
    written = msmarco_writer.write_dataset(
        str(records), tokenizer, str(tsv / "triples.tsv"), str(tsv / "dev.tsv"),
        str(tsv / "qrels.txt"), str(tsv / "dev.tsv"), max_seq_length=64, max_query_length=16,
        num_eval_docs=NUM_EVAL_DOCS)
    assert written == {"dataset_train.tf": 96, "dataset_dev.tf": 72, "dataset_eval.tf": 72}
    return model, tsv, records, tokenizer


# -- the writer: dl4marco-bert's layout ---------------------------------------------------


def test_writer_writes_dl4marco_berts_layout(ranking_task, tmp_path):
    model, tsv, _, tokenizer = ranking_task
    cls_id, sep_id = tokenizer.vocab["[CLS]"], tokenizer.vocab["[SEP]"]
    # Its converter's cuts: the query keeps max_query_length - 2 pieces, the passage
    # max_seq_length - len(query record) - 2.
    msmarco_writer.write_dataset(str(tmp_path), tokenizer, str(tsv / "triples.tsv"),
                                 str(tsv / "dev.tsv"), str(tsv / "qrels.txt"),
                                 max_seq_length=9, max_query_length=4,
                                 num_eval_docs=NUM_EVAL_DOCS)
    train = read_raw_records(str(tmp_path / "dataset_train.tf"))
    first = next(data.read_triples(str(tsv / "triples.tsv")))
    query = tokenizer.encode_batch([first[1]])[0]
    positive, negative = tokenizer.encode_batch([first[2], first[3]])
    assert train[0] == {"query_ids": [cls_id] + query[:2] + [sep_id],
                        "doc_ids": positive[:9 - 4 - 2] + [sep_id], "label": [1]}
    assert train[1]["doc_ids"] == negative[:3] + [sep_id] and train[1]["label"] == [0]
    assert len(train) == 96

    dev = read_raw_records(str(tmp_path / "dataset_dev.tf"))
    with open(str(tmp_path / "query_doc_ids_dev.txt")) as f:
        ids = [line.rstrip("\n").split("\t") for line in f]
    assert len(dev) == len(ids) == 12 * NUM_EVAL_DOCS
    # Query 1 has 5 candidates: a fake document fills its 6th record.
    assert ids[6:12] == [["1", "%d" % (2000 + i)] for i in range(5)] + [["1", "00000000"]]
    fake = tokenizer.encode_batch(["FAKE DOCUMENT"])[0]
    assert dev[11]["doc_ids"] == fake + [sep_id] and dev[11]["label"] == [0]
    qrels = data.read_qrels(str(tsv / "qrels.txt"))
    labelled = {(int(q), int(p)) for (q, p), row in zip(ids, dev) if row["label"] == [1]}
    assert labelled == {(q, p) for q, pids in qrels.items() for p in pids if q != 5}
    assert not (tmp_path / "dataset_eval.tf").exists()


def test_writer_script_takes_the_converters_flags(ranking_task, tmp_path):
    model, tsv, records, _ = ranking_task
    result = script_runs.run(
        [os.path.join(REPO, "bench", "write_dl4marco_records.py"),
         "--output_folder=%s" % tmp_path, "--vocab_file=%s" % model["vocab_file"],
         "--train_dataset_path=%s" % (tsv / "triples.tsv"),
         "--dev_dataset_path=%s" % (tsv / "dev.tsv"), "--dev_qrels_path=%s" % (tsv / "qrels.txt"),
         "--eval_dataset_path=%s" % (tsv / "dev.tsv"), "--max_seq_length=64",
         "--max_query_length=16", "--num_eval_docs=%d" % NUM_EVAL_DOCS],
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert result.returncode == 0, result.stderr[-3000:]
    for name in os.listdir(str(records)):
        if name.endswith(".tf"):  # records: a map's serialised order may differ
            assert read_raw_records(str(tmp_path / name)) == \
                read_raw_records(str(records / name)), name
        else:
            assert (tmp_path / name).read_bytes() == (records / name).read_bytes(), name
    result = script_runs.run(
        [os.path.join(REPO, "bench", "write_dl4marco_records.py"),
         "--output_folder=%s" % tmp_path, "--vocab_file=%s" % model["vocab_file"],
         "--dev_dataset_path=%s" % (tsv / "dev.tsv")],
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "error: --dev_qrels_path is required with --dev_dataset_path: the dev records' labels "
        "come from the qrels")


def test_writer_refuses_a_query_with_more_candidates_than_num_eval_docs(ranking_task,
                                                                        tmp_path):
    _, tsv, _, tokenizer = ranking_task
    with pytest.raises(InputError, match=r"dev.tsv:6: query 0 has more than "
                                         r"--num_eval_docs=5 candidates"):
        msmarco_writer.write_dataset(str(tmp_path), tokenizer, dev_file=str(tsv / "dev.tsv"),
                                     dev_qrels_file=str(tsv / "qrels.txt"), num_eval_docs=5)
    assert not list(tmp_path.iterdir())  # atomic: nothing half-written


# -- reading: the TSV files' features ----------------------------------------------------


@pytest.mark.parametrize("max_query_length, max_seq_length", [(4, 16), (2, 10), (16, 64)])
def test_records_give_the_features_of_the_tsv_files(ranking_task, max_query_length,
                                                    max_seq_length):
    _, tsv, records, tokenizer = ranking_task
    pairs = [
        (data.scan_triples(str(tsv / "triples.tsv")),
         msmarco_records.scan_train(str(records / "dataset_train.tf"), tokenizer)),
        (data.scan_candidates(str(tsv / "dev.tsv"))[0],
         msmarco_records.scan_dev(str(records / "dataset_dev.tf"),
                                  str(records / "query_doc_ids_dev.txt"), tokenizer,
                                  NUM_EVAL_DOCS)[0])]
    for tsv_source, record_source in pairs:
        assert len(record_source) == len(tsv_source)  # fake documents left out
        expected = list(reranking.feature_rows(tsv_source, tokenizer, max_query_length,
                                               max_seq_length))
        got = list(reranking.feature_rows(record_source, tokenizer, max_query_length,
                                          max_seq_length))
        assert len(got) == len(expected)
        for row, want in zip(got, expected):
            assert sorted(row) == sorted(want)
            for name in want:
                if name != "label_ids" or tsv_source.kind == "triples":
                    np.testing.assert_array_equal(row[name], want[name], err_msg=name)


def test_dev_records_judge_every_query_as_the_qrels_do(ranking_task):
    _, tsv, records, tokenizer = ranking_task
    _, qrels = msmarco_records.scan_dev(str(records / "dataset_dev.tf"),
                                        str(records / "query_doc_ids_dev.txt"), tokenizer,
                                        NUM_EVAL_DOCS)
    assert len(qrels) == 12
    # Query 5's relevant passage is not among its candidates: it still counts 0.
    assert qrels[5] == frozenset([msmarco_records.RELEVANT_ELSEWHERE])
    ranked = {}
    for candidate in data.read_candidates(str(tsv / "dev.tsv")):
        ranked.setdefault(candidate.qid, []).append(candidate.pid)
    tsv_qrels = data.read_qrels(str(tsv / "qrels.txt"))
    report = ranking.evaluate_ranked(ranked.items(), qrels)
    assert report == ranking.evaluate_ranked(ranked.items(), tsv_qrels)
    assert report["queries_judged"] == 12 and report["mrr@10"] < 11 / 12


def test_steps_become_the_epochs_that_plan_them_exactly():
    from bert_toolkit.engine import training_plan
    for examples, batch, replicas, steps in [(96, 8, 1, 36), (96, 4, 2, 18), (7, 3, 1, 1000),
                                             (39800000, 8, 4, 400000000), (1000, 7, 3, 97),
                                             (13, 13, 1, 1)]:
        def plan_of(epochs):
            return training_plan.plan_training(examples, epochs, batch, replicas, 1, 0.0)
        epochs = msmarco_records.epochs_for_steps(steps, plan_of)
        assert plan_of(epochs).num_train_steps == steps
        for warmup in (0, 1, steps // 3, steps):
            proportion = msmarco_records.warmup_for_steps(warmup, steps)
            assert int(steps * proportion) == warmup


def test_steps_count_every_replica_of_the_cluster(tmp_path):
    options = RerankingOptions(output_dir=str(tmp_path), bert_config_file="c", do_train=True,
                               num_cpu_replicas=2)
    assert msmarco_records.cluster_workers(options, {}) == 1
    tf_config = json.dumps({"cluster": {"worker": ["a:1", "b:2", "c:3"]},
                            "task": {"type": "worker", "index": 0}})
    assert msmarco_records.cluster_workers(options, {"TF_CONFIG": tf_config}) == 3
    assert msmarco_records.cluster_workers(options.replace(cluster="local"),
                                           {"TF_CONFIG": tf_config}) == 1
    assert msmarco_records.cluster_workers(options, {"SLURM_JOB_ID": "7",
                                                     "SLURM_STEP_NUM_TASKS": "4"}) == 4
    assert msmarco_records.cluster_workers(options, {"SLURM_STEP_NUM_TASKS": "4"}) == 1


# -- bad records: one line naming the file -----------------------------------------------


def copy_records(records, tmp_path):
    folder = tmp_path / "records"
    shutil.copytree(str(records), str(folder))
    return folder


def scan(folder, tokenizer, split="eval", num_eval_docs=NUM_EVAL_DOCS):
    if split == "train":
        return msmarco_records.scan_train(str(folder / "dataset_train.tf"), tokenizer)
    return msmarco_records.scan_dev(str(folder / "dataset_dev.tf"),
                                    str(folder / "query_doc_ids_dev.txt"), tokenizer,
                                    num_eval_docs)


def test_an_ids_file_whose_lines_differ_from_the_records_is_one_line(ranking_task, tmp_path):
    _, _, records, tokenizer = ranking_task
    folder = copy_records(records, tmp_path)
    ids = folder / "query_doc_ids_dev.txt"
    lines = ids.read_text().splitlines()
    ids.write_text("\n".join(lines[:-1]) + "\n")
    with pytest.raises(InputError, match=r"query_doc_ids_dev.txt: 71 lines, but \S*"
                                         r"dataset_dev.tf holds 72 records: expected one"):
        scan(folder, tokenizer)
    ids.write_text("\n".join(lines + ["12\t77"]) + "\n")
    with pytest.raises(InputError, match=r"query_doc_ids_dev.txt: 73 lines, but"):
        scan(folder, tokenizer)
    ids.write_text("\n".join(lines[:3] + ["0 1003"] + lines[4:]) + "\n")
    with pytest.raises(InputError, match=r"query_doc_ids_dev.txt:4: expected `query_id "
                                         r"\\t doc_id`"):
        scan(folder, tokenizer)


def test_a_wrong_num_eval_docs_is_one_line(ranking_task, tmp_path):
    _, _, records, tokenizer = ranking_task
    with pytest.raises(InputError, match=r"query_doc_ids_dev.txt:7: query 1 among the "
                                         r"candidates of query 0 \(line 1\): every 12 "
                                         r"consecutive records"):
        scan(records, tokenizer, num_eval_docs=12)
    # A divisor of the group size splits queries in two: query 0 comes twice.
    with pytest.raises(InputError, match=r"query_doc_ids_dev.txt:4: query 0 again"):
        scan(records, tokenizer, num_eval_docs=3)
    # The last query cut short.
    good = {"query_ids": [2, 5, 3], "doc_ids": [7, 3], "label": [1]}
    write_example_records(tmp_path / "dataset_dev.tf", [good, good, good])
    write_lines(tmp_path / "query_doc_ids_dev.txt", ["1\t10", "1\t11", "2\t20"])
    with pytest.raises(InputError, match=r"dataset_dev.tf: 3 records, not a multiple of "
                                         r"--num_eval_docs=2"):
        scan(tmp_path, tokenizer, num_eval_docs=2)


@pytest.mark.parametrize("row, message", [
    ({"query_ids": [2, 5, 3], "doc_ids": [7, 3], "label": [2]},
     r"record 2: label 2, expected 1 \(relevant\) or 0"),
    ({"query_ids": [2, 5, 3], "doc_ids": [7, 3]},
     r"record 2: label holds 0 ids, expected one value"),
    ({"query_ids": [2, 5, 3], "doc_ids": [7, 3], "label": [1, 0]},
     r"record 2: label holds 2 ids"),
    ({"query_ids": [5, 3], "doc_ids": [7, 3], "label": [1]},
     r"record 2: query_ids starts with id 5, expected \[CLS\] \(id 2 of --vocab_file\): "
     r"records made with another vocab.txt\?"),
    ({"query_ids": [2, 5], "doc_ids": [7, 3], "label": [1]},
     r"record 2: query_ids ends with id 5, expected \[SEP\]"),
    ({"query_ids": [2, 5, 3], "doc_ids": [7, 8], "label": [1]},
     r"record 2: doc_ids ends with id 8, expected \[SEP\]"),
    ({"query_ids": [2, 5, 3], "doc_ids": [], "label": [1]},
     r"record 2: doc_ids holds 0 ids, expected passage \[SEP\]"),
    ({"query_ids": [2, 30522, 3], "doc_ids": [7, 3], "label": [1]},
     r"record 2: query_ids holds id 30522, outside --vocab_file's \d+ ids"),
    ({"query_ids": [2.0, 5.0, 3.0], "doc_ids": [7, 3], "label": [1]},
     r"record 2: not dl4marco-bert's features \(query_ids, doc_ids: int64 lists"),
])
def test_a_bad_record_is_one_line_naming_the_file_and_record(ranking_task, tmp_path, row,
                                                            message):
    _, _, _, tokenizer = ranking_task
    assert (tokenizer.vocab["[CLS]"], tokenizer.vocab["[SEP]"]) == (2, 3)
    good = {"query_ids": [2, 5, 3], "doc_ids": [7, 3], "label": [0]}
    path = tmp_path / "dataset_train.tf"
    write_example_records(path, [good, row, good])
    with pytest.raises(InputError, match=r"^\S*dataset_train.tf: " + message):
        scan(tmp_path, tokenizer, "train")


def test_a_damaged_or_foreign_file_is_one_line(ranking_task, tmp_path):
    _, _, records, tokenizer = ranking_task
    folder = copy_records(records, tmp_path)
    path = folder / "dataset_train.tf"
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(InputError, match=r"dataset_train.tf: not a TFRecord file, or damaged "
                                         r"after record \d+"):
        scan(folder, tokenizer, "train")
    path.write_text("query\tpositive\tnegative\n")
    with pytest.raises(InputError, match=r"dataset_train.tf: not a TFRecord file"):
        scan(folder, tokenizer, "train")
    path.write_bytes(b"")
    with pytest.raises(InputError, match=r"dataset_train.tf: holds no records"):
        scan(folder, tokenizer, "train")


def test_eval_records_given_as_dev_are_one_line(ranking_task, tmp_path):
    _, tsv, _, tokenizer = ranking_task
    msmarco_writer.write_dataset(str(tmp_path), tokenizer, eval_file=str(tsv / "dev.tsv"),
                                 num_eval_docs=NUM_EVAL_DOCS)
    os.rename(str(tmp_path / "dataset_eval.tf"), str(tmp_path / "dataset_dev.tf"))
    os.rename(str(tmp_path / "query_doc_ids_eval.txt"), str(tmp_path / "query_doc_ids_dev.txt"))
    with pytest.raises(InputError, match=r"dataset_dev.tf: no record is labelled 1"):
        scan(tmp_path, tokenizer)


def test_records_need_a_vocab_and_a_bert_layout(ranking_task, tmp_path):
    model, _, records, _ = ranking_task
    lonely = tmp_path / "config"
    lonely.mkdir()
    shutil.copy(model["bert_config_file"], str(lonely))
    options = RerankingOptions(output_dir=str(tmp_path / "out"), data_dir=str(records),
                               bert_config_file=str(lonely / "bert_config.json"),
                               do_train=True)
    with pytest.raises(InputError, match=r"--vocab_file is required: \S*dataset_train.tf "
                                         r"holds WordPiece ids of a vocab.txt, and there is "
                                         r"none beside --bert_config_file="):
        msmarco_records.settle(options)
    # A TSV file named on the command line is read (or missed) as such.
    assert msmarco_records.record_splits(options.replace(train_file="mine.tsv")) == {}
    # The TSV file wins where both are there; records need no vocab_file then.
    shutil.copy(str(records / "dataset_train.tf"), str(tmp_path / "dataset_train.tf"))
    write_lines(tmp_path / "triples.train.small.tsv", ["q\tp\tn"])
    assert msmarco_records.record_splits(options.replace(data_dir=str(tmp_path))) == {}


# -- run_reranking.py end to end: the TSV files' run, from records ----------------------------


def run_args(model, output_dir):
    return model_args(model, output_dir)[1:] + [  # no --vocab_file: dl4marco-bert has none
        "--do_train", "--do_eval", "--max_seq_length=16", "--max_query_length=4",
        "--train_batch_size=8", "--num_train_steps=36", "--num_warmup_steps=4",
        "--learning_rate=3e-3", "--eval_batch_size=5", "--num_cpu_replicas=2"]


def test_records_train_and_evaluate_to_the_tsv_files_mrr(ranking_task, tmp_path):
    model, tsv, records, _ = ranking_task
    # dl4marco-bert's run_msmarco.py spelling of the flags.
    result = run_reranking(*(run_args(model, tmp_path / "records")[:-10] + [
        "--do_train=True", "--do_eval=True", "--msmarco_output=True", "--max_seq_length=16",
        "--max_query_length=4", "--train_batch_size=8", "--num_train_steps=36",
        "--num_warmup_steps=4", "--learning_rate=3e-3", "--eval_batch_size=5",
        "--num_cpu_replicas=2", "--data_dir=%s" % records,
        "--num_eval_docs=%d" % NUM_EVAL_DOCS, "--do_predict"]))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "train: dl4marco-bert's records %s" % (records / "dataset_train.tf") in result.stderr
    assert "96 examples x 6 epochs = 36 optimizer steps (4 warmup)" in result.stderr
    tsv_result = run_reranking(*(run_args(model, tmp_path / "tsv") + [
        "--vocab_file=%s" % model["vocab_file"], "--data_dir=%s" % tsv,
        "--train_file=triples.tsv", "--dev_file=dev.tsv", "--dev_qrels_file=qrels.txt",
        "--test_file=dev.tsv", "--do_predict"]))
    assert tsv_result.returncode == 0, tsv_result.stderr[-3000:]
    reports = []
    for side in ("records", "tsv"):
        with open(str(tmp_path / side / "eval_results.json")) as f:
            reports.append(json.load(f))
    assert reports[0]["queries_judged"] == 12 and reports[0]["global_step"] == 36
    assert reports[0]["mrr@10"] == pytest.approx(reports[1]["mrr@10"], abs=1e-4)
    assert reports[0] == pytest.approx(reports[1], abs=1e-4)
    assert reports[0]["mrr@10"] > 0.6  # it learned (chance is about 0.4)
    for run_file in ("dev_run.tsv", "test_run.tsv"):
        runs = [np.loadtxt(str(tmp_path / side / run_file)) for side in ("records", "tsv")]
        np.testing.assert_allclose(runs[0], runs[1], atol=1e-5)
    # dl4marco-bert's run files, by default with its records only.
    with open(str(tmp_path / "records" / "msmarco_predictions_dev.tsv")) as f:
        lines = [line.rstrip("\n").split("\t") for line in f]
    with open(str(tmp_path / "records" / "dev_run.tsv")) as f:
        assert lines == [line.split("\t")[:3] for line in f.read().splitlines()]
    assert len(lines) == 66  # no fake document ranked
    assert (tmp_path / "records" / "msmarco_predictions_eval.tsv").exists()
    assert not (tmp_path / "tsv" / "msmarco_predictions_dev.tsv").exists()


def test_a_bad_records_folder_stops_the_script_in_one_line_writing_nothing(ranking_task,
                                                                           tmp_path):
    model, _, records, _ = ranking_task
    folder = copy_records(records, tmp_path)
    ids = folder / "query_doc_ids_dev.txt"
    ids.write_text("\n".join(ids.read_text().splitlines()[:-1]) + "\n")
    output_dir = tmp_path / "out"
    result = run_reranking(*(run_args(model, output_dir) + [
        "--data_dir=%s" % folder, "--num_eval_docs=%d" % NUM_EVAL_DOCS]))
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "error: %s: 71 lines, but %s holds 72 records: expected one `query_id \\t doc_id` "
        "line per record, in record order" % (ids, folder / "dataset_dev.tf"))
    assert not output_dir.exists()


# -- run_multi_gpu.py, its settings edited ---------------------------------------------------


def edited_fork_script(folder, **settings):
    """run_multi_gpu.py copied into `folder` with `settings` edited, as its README says."""
    with open(os.path.join(REPO, "run_multi_gpu.py"), encoding="utf-8") as f:
        text = f.read()
    for name, value in settings.items():
        text, count = re.subn(r"^%s = [^#\n]*" % name, "%s = %r  " % (name, value), text,
                              count=1, flags=re.M)
        assert count == 1, name
    path = os.path.join(str(folder), "run_multi_gpu.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def fork_settings(model, records, output_dir, **overrides):
    """Edits of run_multi_gpu.py's settings for the tiny model and records."""
    settings = dict(data_dir=str(records), bert_config_file_large=model["bert_config_file"],
                    init_checkpoint_large=model["init_checkpoint"],
                    output_dir=str(output_dir) + "/", num_gpu=2, max_seq_length=16,
                    query_length=4, train_batch_size=8, learning_rate=3e-3, num_train_steps=4,
                    iterations_per_loop=3, save_checkpoints_steps=4, do_eval=True,
                    num_eval_docs=NUM_EVAL_DOCS)
    settings.update(overrides)
    return settings


def test_run_multi_gpu_runs_with_its_settings_edited(ranking_task, tmp_path):
    model, _, records, _ = ranking_task
    output_dir = tmp_path / "model_dense_multi_GPU"
    script = edited_fork_script(tmp_path, **fork_settings(model, records, output_dir))
    result = script_runs.run([script], env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert result.returncode == 0, result.stderr[-3000:]
    # The fork's arithmetic: 4 x iterations_per_loop 3 = 12 steps; the global batch of
    # 8 over num_gpu = 2 replicas (CPU replicas: no GPU here).
    assert ("run_multi_gpu.py: %s on 2 CPU replica(s) (no GPU), global batch 8 = 4 per "
            "replica, 12 steps then MRR@10" % model["bert_config_file"]) in result.stderr
    assert "= 12 optimizer steps (0 warmup)" in result.stderr
    with open(str(output_dir / "loss.txt")) as f:
        lines = f.read().splitlines()
    assert [line.split(" ")[2] for line in lines] == ["4", "8", "12"]
    for line in lines:
        assert re.match(r"^\d\d/\d\d/\d{4}, \d\d:\d\d:\d\d \d+ step loss: \d+\.\d{4}$", line)
    reader = tf.train.load_checkpoint(str(output_dir / "bert-model.ckpt"))
    assert reader.get_tensor("global_step") == 12
    assert reader.get_variable_to_shape_map()["output_weights"] == [2, 32]
    assert (output_dir / "eval_results.json").exists()
    assert (output_dir / "msmarco_predictions_dev.tsv").exists()

    # Edited again and run again: it resumes, and loss.txt goes on (its last line at the
    # last step, 18, not a multiple of save_checkpoints_steps).
    script = edited_fork_script(tmp_path, **fork_settings(model, records, output_dir,
                                                          num_train_steps=6))
    result = script_runs.run([script], env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert result.returncode == 0, result.stderr[-3000:]
    with open(str(output_dir / "loss.txt")) as f:
        assert [line.split(" ")[2] for line in f.read().splitlines()] == [
            "4", "8", "12", "16", "18"]
    assert tf.train.load_checkpoint(str(output_dir / "bert-model.ckpt")).get_tensor(
        "global_step") == 18

    # is_training = False: the trained model ranks the dev records.
    os.remove(str(output_dir / "eval_results.json"))
    script = edited_fork_script(tmp_path, **fork_settings(model, records, output_dir,
                                                          is_training=False, do_eval=False))
    result = script_runs.run([script], env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "run_multi_gpu.py: is_training = False: " in result.stderr
    with open(str(output_dir / "eval_results.json")) as f:
        assert json.load(f)["global_step"] == 18


def script_settings(model, records, output_dir, **overrides):
    """run_multi_gpu.py's settings (name -> value, as its globals()), edited."""
    settings = {}
    with open(os.path.join(REPO, "run_multi_gpu.py"), encoding="utf-8") as f:
        exec(f.read(), settings)  # noqa: S102 - the repository's own script, not run
    settings.update(fork_settings(model, records, output_dir, **overrides))
    return settings


@pytest.mark.parametrize("overrides, message", [
    (dict(train_batch_size=7), r"run_multi_gpu.py: train_batch_size = 7 is the GLOBAL batch, "
                               r"split over num_gpu = 2 replicas: expected a multiple of 2"),
    (dict(num_labels=3), r"run_multi_gpu.py: num_labels = 3, expected 2"),
    (dict(num_gpu=0), r"run_multi_gpu.py: num_gpu = 0, expected a whole number >= 1"),
    (dict(data_dir="/nowhere"), r"run_multi_gpu.py: data_dir = '/nowhere' holds no "
                                r"dataset_train.tf \(dl4marco-bert's records\)"),
])
def test_run_multi_gpu_settings_are_checked_in_one_line(ranking_task, tmp_path, overrides,
                                                        message):
    model, _, records, _ = ranking_task
    settings = script_settings(model, records, tmp_path / "out", **overrides)
    with pytest.raises(InputError, match="^" + message):
        multi_gpu_fork.reranking_options(settings, num_gpus=0)
    del settings["query_length"]
    with pytest.raises(InputError, match=r"^run_multi_gpu.py: the setting `query_length` is "
                                         r"missing"):
        multi_gpu_fork.reranking_options(settings, num_gpus=0)


def test_run_multi_gpu_refuses_more_gpus_than_there_are(ranking_task, tmp_path):
    model, _, records, _ = ranking_task
    settings = script_settings(model, records, tmp_path / "out", num_gpu=4)
    with pytest.raises(InputError, match=r"num_gpu = 4, but 2 GPU\(s\) are visible"):
        multi_gpu_fork.reranking_options(settings, num_gpus=2)
    options = multi_gpu_fork.reranking_options(dict(settings, num_gpu=2), num_gpus=2)
    assert (options.use_gpu, options.num_gpu_cores, options.train_batch_size) == (True, 2, 4)


def test_loss_lines_are_the_forks_means_since_the_last_line():
    losses = [(2, 1.0, 0.0), (4, 3.0, 60.0), (6, 0.5, 120.0), (8, 0.25, 180.0), (9, 1.5, 200.0)]
    lines, last = multi_gpu_fork.loss_lines(losses, 4, 0)
    assert [line.split(" ", 2)[2] for line in lines] == ["4 step loss: 2.0000",
                                                        "8 step loss: 0.3750"]
    assert last == 8
    lines, last = multi_gpu_fork.loss_lines(losses, 4, 8, final=True)
    assert [line.split(" ", 2)[2] for line in lines] == ["9 step loss: 1.5000"] and last == 9


# -- the bench ------------------------------------------------------------------------------


@pytest.mark.bench
def test_records_bench_runs(tmp_path):
    result = script_runs.run([os.path.join(REPO, "bench", "dl4marco_records_bench.py"),
                              "--triples=64", "--queries=8", "--candidates=10", "--rounds=1",
                              "--max_seq_length=64", "--json=%s" % (tmp_path / "r.json")],
                             env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"), timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "dl4marco-bert records" in result.stdout and "TSV files" in result.stdout
    assert "features equal: yes" in result.stdout


# -- the real task, the real model ------------------------------------------------------------


@pytest.mark.slow
def test_real_records_train_and_evaluate_to_the_tsv_files_mrr(minilm_checkpoint, corpora_dir,
                                                              tmp_path):
    """The movie-review ranking task of test_reranking.py (512 triples, 32 dev queries
    of 10 candidates), as TSV files and as dl4marco-bert's records written from them:
    all-MiniLM-L6-v2 trained 16 steps and evaluated each way reaches the same MRR@10."""
    converted = os.path.dirname(minilm_checkpoint["init_checkpoint"])
    tsv = str(tmp_path / "tsv")
    os.makedirs(tsv)
    assert write_keyword_task(corpora_dir, tsv) == (512, 32)
    tokenizer = tokenization.FullTokenizer(os.path.join(converted, "vocab.txt"), True)
    records = str(tmp_path / "records")
    # At the converter's defaults (512 / 64) nothing of these pairs is cut.
    assert msmarco_writer.write_dataset(
        records, tokenizer, os.path.join(tsv, "triples.tsv"), os.path.join(tsv, "dev.tsv"),
        os.path.join(tsv, "qrels.txt"), num_eval_docs=10) == {
            "dataset_train.tf": 1024, "dataset_dev.tf": 320}
    init = write_checkpoint_with_head(os.path.join(converted, "bert_model.ckpt"),
                                      str(tmp_path / "init" / "model.ckpt-0"))
    model = {"vocab_file": os.path.join(converted, "vocab.txt"),
             "bert_config_file": os.path.join(converted, "bert_config.json"),
             "init_checkpoint": init}
    common = ["--max_seq_length=64", "--max_query_length=16", "--eval_batch_size=32",
              "--pooling=mean", "--do_train", "--do_eval", "--train_batch_size=16",
              "--num_train_steps=16", "--num_warmup_steps=1", "--learning_rate=5e-5",
              "--log_every_n_steps=8"]
    reports = {}
    for side, args in (("tsv", data_args(tsv)[:-2]),
                       ("records", ["--data_dir=%s" % records, "--num_eval_docs=10"])):
        result = run_reranking(*(model_args(model, tmp_path / side) + common + args))
        assert result.returncode == 0, result.stderr[-3000:]
        with open(str(tmp_path / side / "eval_results.json")) as f:
            reports[side] = json.load(f)
    print("MRR@10 TSV %.6f, records %.6f" % (reports["tsv"]["mrr@10"],
                                              reports["records"]["mrr@10"]))
    assert reports["records"]["global_step"] == reports["tsv"]["global_step"] == 16
    assert reports["records"]["queries_judged"] == 32
    assert reports["records"]["mrr@10"] == pytest.approx(reports["tsv"]["mrr@10"], abs=1e-4)
    assert reports["tsv"]["mrr@10"] > 0.6  # trained (0.33 before training)
    runs = [np.loadtxt(str(tmp_path / side / "dev_run.tsv")) for side in ("tsv", "records")]
    np.testing.assert_allclose(runs[0], runs[1], atol=1e-4)

