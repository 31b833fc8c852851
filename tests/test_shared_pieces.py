"""metrics, distribution and input_pipeline: the pieces every script shares."""

import os

import numpy as np
import pytest
import tensorflow as tf

from bert_toolkit.engine import distribution
from bert_toolkit.engine import training_plan
from bert_toolkit import system
from bert_toolkit.engine import input_pipeline
from bert_toolkit.engine import metrics
from bert_toolkit.engine.options import RunOptions
from bert_toolkit.engine import run_folder
from bert_toolkit.engine import scores
from bert_toolkit.errors import InputError
from tiny import cpu_session, cpu_strategy

tf1 = tf.compat.v1


def test_classification_report_binary_by_hand():
    # rows true, columns predicted; labels (neg, pos): 40 TN, 10 FP, 5 FN, 45 TP
    report = scores.classification_report([[40, 10], [5, 45]], ["neg", "pos"])
    assert report["accuracy"] == pytest.approx(0.85)
    assert report["precision"] == pytest.approx(45 / 55)
    assert report["recall"] == pytest.approx(45 / 50)
    assert report["f1"] == pytest.approx(2 * (45 / 55) * 0.9 / (45 / 55 + 0.9))
    mcc = (45 * 40 - 10 * 5) / np.sqrt(55 * 50 * 50 * 45)
    assert report["matthews_corrcoef"] == pytest.approx(mcc)
    assert report["num_examples"] == 100
    assert report["macro_f1"] == pytest.approx((report["f1[neg]"] + report["f1[pos]"]) / 2)


def test_matthews_is_zero_when_one_class_is_always_predicted():
    assert scores.matthews_correlation([[0, 10], [0, 20]]) == 0.0
    assert scores.matthews_correlation([[3, 0, 0], [0, 4, 0], [0, 0, 5]]) == pytest.approx(1)


def test_multi_label_report_micro_and_macro():
    # per label: tp, fp, fn
    report = scores.multi_label_report([[8, 2, 0], [1, 0, 3]], ["a", "b"])
    assert report["micro_precision"] == pytest.approx(9 / 11)
    assert report["micro_recall"] == pytest.approx(9 / 12)
    assert report["f1[b]"] == pytest.approx(2 * 1.0 * 0.25 / 1.25)


def test_streamed_confusion_matrix_merges_replicas_exactly():
    """Counts summed over two CPU replicas equal the counts of the whole batch."""
    labels = np.array([0, 1, 2, 1, 0, 2, 2, 1])
    predicted = np.array([0, 2, 2, 1, 1, 2, 0, 1])
    graph = tf.Graph()
    with graph.as_default():
        strategy = cpu_strategy(2)

        def replica_fn():
            start = tf.distribute.get_replica_context().replica_id_in_sync_group * 4
            return metrics.confusion_matrix_metric(
                tf.constant(labels)[start:start + 4], tf.constant(predicted)[start:start + 4],
                num_labels=3)

        with strategy.scope():
            value, update = strategy.extended.call_for_each_replica(replica_fn)
            update = strategy.group(update)
        init = tf1.local_variables_initializer()
    with cpu_session(graph) as sess:
        sess.run(init)
        sess.run(update)
        sess.run(update)
        got = sess.run(strategy.experimental_local_results(value)[0])
    expected = 2 * np.array([[1, 1, 0], [0, 2, 1], [1, 0, 2]])
    np.testing.assert_array_equal(got, expected)


def test_plan_counts_optimizer_steps_from_the_global_batch():
    one = training_plan.plan_training(3200, 3, 32, 1, 1, 0.1)
    four = training_plan.plan_training(3200, 3, 32, 4, 1, 0.1)
    accumulated = training_plan.plan_training(3200, 3, 32, 2, 2, 0.1)
    assert (one.num_train_steps, one.num_warmup_steps) == (300, 30)
    assert four.global_batch_size == 128 and four.num_train_steps == 75
    assert accumulated.global_batch_size == 128 and accumulated.num_train_steps == 75
    assert "= global batch 128; 3200 examples x 3 epochs = 75 optimizer steps" in \
        training_plan.describe_plan(accumulated)


def test_one_device_plan_is_googles_arithmetic_and_several_round_up():
    # Google: int(num_examples / train_batch_size * num_train_epochs), warmup
    # int(steps * proportion); MRPC's 3,668 examples at batch 32 for 3 epochs.
    one = training_plan.plan_training(3668, 3.0, 32, 1, 1, 0.1)
    assert (one.num_train_steps, one.num_warmup_steps) == (343, 34)
    assert training_plan.plan_training(10, 1.0, 4, 1, 1, 0.1).num_train_steps == 2
    assert training_plan.plan_training(10, 1.0, 32, 1, 1, 0.1).num_train_steps == 1  # not 0
    # The same global batch of 4 from two replicas sees the last partial batch.
    assert training_plan.plan_training(10, 1.0, 2, 2, 1, 0.1).num_train_steps == 3
    assert training_plan.plan_training(10, 1.0, 2, 1, 2, 0.1).num_train_steps == 3


def test_devices_and_their_errors():
    assert distribution.replica_devices(False, 1, 2) == ["/cpu:0", "/cpu:1"]
    with pytest.raises(InputError, match="--num_gpu_cores=2 but 0 GPU"):
        distribution.replica_devices(True, 2, 1)
    with pytest.raises(InputError, match="--num_cpu_replicas must be a whole number >= 1"):
        RunOptions(output_dir="out", bert_config_file="c.json", num_cpu_replicas=0)
    assert distribution.make_strategy(["/cpu:0"]) is None
    config = distribution.make_session_config(["/cpu:0", "/cpu:1"], use_xla=True)
    assert config.device_count["CPU"] == 2
    assert config.graph_options.optimizer_options.global_jit_level == \
        tf1.OptimizerOptions.ON_1


def test_precision_resolution():
    options = RunOptions(output_dir="out", bert_config_file="c.json",
                                     use_fp16=True)
    assert distribution.resolve_runtime(options).precision == "fp16"
    assert distribution.resolve_precision("bf16") == "bf16"
    auto = distribution.resolve_precision("auto")
    assert auto == ("bf16" if system.cpu_supports_bf16() else "fp32")
    with pytest.raises(InputError, match="--use_fp16 contradicts --precision=bf16"):
        options.replace(precision="bf16")


def test_tfrecord_cache_reuses_until_the_key_changes(tmp_path):
    calls = []

    def rows():
        calls.append(1)
        for i in range(5):
            yield {"input_ids": [i, i + 1, 0], "label_ids": i % 2}

    key = {"examples": "abc", "max_seq_length": 3}
    path, count = input_pipeline.cached_tfrecord(str(tmp_path), "train", key, rows)
    again, count_again = input_pipeline.cached_tfrecord(str(tmp_path), "train", key, rows)
    assert (again, count_again, count, len(calls)) == (path, 5, 5, 1)
    other, _ = input_pipeline.cached_tfrecord(str(tmp_path), "train",
                                              dict(key, max_seq_length=4), rows)
    assert other != path and len(calls) == 2
    assert not [n for n in os.listdir(str(tmp_path)) if n.endswith(".partial")]

    spec = input_pipeline.fixed_length_spec({"input_ids": 3, "label_ids": 1})
    dataset = input_pipeline.make_input_fn(path, spec, batch_size=2, is_training=False)()
    batches = list(dataset.as_numpy_iterator())
    assert [b["input_ids"].shape for b in batches] == [(2, 3), (2, 3), (1, 3)]
    assert batches[0]["input_ids"].dtype == np.int32
    np.testing.assert_array_equal(batches[2]["input_ids"], [[4, 5, 0]])


def test_interrupted_write_leaves_no_file(tmp_path):
    def broken_rows():
        yield {"input_ids": [1]}
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        input_pipeline.cached_tfrecord(str(tmp_path), "train", {"k": 1}, broken_rows)
    assert os.listdir(str(tmp_path)) == []


def test_eval_input_is_padded_to_full_batches_on_every_replica(tmp_path):
    rows = ({"input_ids": [i, i], "label_ids": 1} for i in range(1, 6))
    path, count = input_pipeline.cached_tfrecord(str(tmp_path), "eval", {"k": 2},
                                                 lambda: rows)
    spec = input_pipeline.fixed_length_spec({"input_ids": 2, "label_ids": 1})
    batches = list(input_pipeline.make_eval_input_fn(
        path, spec, batch_size=2, num_records=count, num_replicas=2)().as_numpy_iterator())
    # 5 records + 3 padding = 2 steps of 2 replicas x 2 examples.
    assert [len(b["is_real_example"]) for b in batches] == [2, 2, 2, 2]
    weights = np.concatenate([b["is_real_example"] for b in batches])
    np.testing.assert_array_equal(weights, [1, 1, 1, 1, 1, 0, 0, 0])
    np.testing.assert_array_equal(batches[-1]["input_ids"], [[0, 0], [0, 0]])


def test_input_fingerprint(tmp_path):
    def write(directory, name, text):
        path = os.path.join(str(directory), name)
        with open(path, "w") as f:
            f.write(text)
        return path

    first = write(tmp_path, "a.tsv", "one\n")
    second = write(tmp_path, "b.tsv", "two\n")
    missing = os.path.join(str(tmp_path), "c.tsv")
    base = input_pipeline.input_fingerprint([first, second, missing])
    assert base == input_pipeline.input_fingerprint([first, second, missing])
    assert base != input_pipeline.input_fingerprint([second, first, missing])
    assert input_pipeline.input_fingerprint(first) == input_pipeline.input_fingerprint([first])

    stat = os.stat(first)
    write(tmp_path, "a.tsv", "won\n")  # same size; mtime put back below
    os.utime(first, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    changed = input_pipeline.input_fingerprint([first, second, missing])
    assert changed != base
    os.utime(first, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10 ** 9))
    assert input_pipeline.input_fingerprint([first, second, missing]) != changed
    write(tmp_path, "c.tsv", "")
    assert input_pipeline.input_fingerprint([first, second, missing]) not in (base, changed)


def test_head_settings_are_recorded_and_a_change_refused(tmp_path):
    out = str(tmp_path)
    path = os.path.join(out, run_folder.HEAD_SETTINGS_FILE)
    run_folder.check_head_settings(out, {"pooling": "mean"})  # nothing recorded yet
    assert not os.path.exists(path)
    run_folder.save_records(out, ["a", "b"], {"pooling": "mean"})
    run_folder.check_head_settings(out, {"pooling": "mean"})
    assert run_folder.read_saved_labels(out) == ["a", "b"]
    with pytest.raises(InputError, match="trained with --pooling=mean"):
        run_folder.check_head_settings(out, {"pooling": "pooler"})
    with open(path, "w") as f:
        f.write('["mean"]\n')
    with pytest.raises(InputError, match="expected a JSON object"):
        run_folder.check_head_settings(out, {"pooling": "mean"})


def test_pooling_flag_offers_the_modes_modeling_builds():
    from absl import flags

    from bert_toolkit.cli import flags as cli_flags
    from bert_toolkit.engine.options import PoolingOptions
    from bert_toolkit.model import modeling
    flag_values = flags.FlagValues()
    cli_flags.define_flags(PoolingOptions, flag_values)
    assert tuple(flag_values["pooling"].parser.enum_values) == modeling.POOLING_MODES


def test_count_lines_counts_a_last_line_without_newline(tmp_path):
    from bert_toolkit import fileio
    path = str(tmp_path / "lines.txt")
    for content, expected in ((b"", 0), (b"a\n", 1), (b"a\nb", 2), (b"\n\n", 2),
                              (b"x" * 10 + b"\n" + b"y" * 5, 2)):
        with open(path, "wb") as f:
            f.write(content)
        # A block size of 3 puts newlines on block edges.
        assert fileio.count_lines(path, block_size=3) == expected, content


def test_a_failed_block_removes_only_the_folders_it_made(tmp_path):
    from bert_toolkit import fileio
    kept = tmp_path / "kept"
    kept.mkdir()
    target = kept / "new" / "deeper"
    with pytest.raises(RuntimeError):
        with fileio.new_folders_removed_on_failure(str(target)):
            assert target.is_dir()
            raise RuntimeError("a bad line")
    assert os.listdir(str(kept)) == []
    with pytest.raises(RuntimeError):
        with fileio.new_folders_removed_on_failure(str(target)):
            (kept / "new" / "other.txt").write_text("not ours")
            raise RuntimeError("a bad line")
    assert sorted(os.listdir(str(kept / "new"))) == ["other.txt"]  # "deeper" went
    with fileio.new_folders_removed_on_failure(str(target)):
        pass
    assert target.is_dir()


def test_training_log_line_shows_mfu_and_the_numbers_of_the_last_update(monkeypatch):
    """Two calls make one accumulated update: the line counts both calls' FLOPs
    (each at its own sequence length) and shows the gradient norm of the call
    that updated, not the NaN of the call that only accumulated."""
    import collections
    from bert_toolkit.engine import training
    lines = []
    monkeypatch.setattr(training.console, "info",
                        lambda message, *a: lines.append(message % a if a else message))
    clock = iter([100.0, 101.0, 103.0])
    monkeypatch.setattr(training.time, "time", lambda: next(clock))
    with tf.Graph().as_default():
        tf1.train.get_or_create_global_step()
        hook = training.TrainingLogHook(
            {}, examples_per_call=4, every_n_steps=1, total_steps=10,
            flops_per_example=lambda length: 1e9 * length, matmul_peak_flops=1e12)
        hook.begin()
    Values = collections.namedtuple("Values", ["results"])
    for step, closed, norm, length in [(0, True, 1.0, 16), (0, False, np.nan, 10),
                                       (1, True, 2.5, 20)]:
        hook.after_run(None, Values({"global_step": step, "loss": 0.5, "gradient_norm": norm,
                                     training.CYCLE_CLOSED: closed,
                                     training.SEQUENCE_LENGTH: length}))
    # 4 examples x 1e9 x (10 + 20) FLOPs in the 3 s since the first call, peak 1e12.
    assert len(lines) == 1 and lines[0].startswith("step 1/10 (10%), 2.7 examples/s")
    assert "gradient norm 2.5" in lines[0] and lines[0].endswith("MFU 4.0%")
