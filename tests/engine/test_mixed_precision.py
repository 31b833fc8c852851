"""--mixed_precision: today's explicit casts against TensorFlow's automatic mixed
precision graph rewrite (engine/distribution.py, model_fn_builder.py)."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from bert_toolkit.engine import distribution, fine_tuning, model_fn_builder, training_plan
from bert_toolkit.engine.options import FineTuningOptions
from bert_toolkit.errors import InputError
from bert_toolkit.estimator_compat import tf_estimator
from bert_toolkit.tasks.classification import head as classifier_head
from bert_toolkit.tasks.classification import task as classifier

from tiny import tiny_config, write_sentiment_csv, write_tiny_model

tf1 = tf.compat.v1


def cpu_has_bf16_units():
    with open("/proc/cpuinfo") as f:
        flags = f.read()
    return "avx512_bf16" in flags or "amx_bf16" in flags


def test_the_rewrite_config_turns_on_the_pass_of_its_precision_only():
    plain = tf1.ConfigProto(allow_soft_placement=True)
    bf16 = distribution.with_mixed_precision_rewrite(plain, "bf16").graph_options.rewrite_options
    fp16 = distribution.with_mixed_precision_rewrite(plain, "fp16").graph_options.rewrite_options
    on = type(bf16).ON
    assert bf16.auto_mixed_precision_onednn_bfloat16 == on and bf16.auto_mixed_precision != on
    assert fp16.auto_mixed_precision == on and fp16.auto_mixed_precision_onednn_bfloat16 != on
    assert plain.graph_options.rewrite_options.auto_mixed_precision_onednn_bfloat16 != on
    assert distribution.with_mixed_precision_rewrite(plain, "bf16").allow_soft_placement


@pytest.mark.skipif(not cpu_has_bf16_units(), reason="no bf16 units on this CPU")
def test_the_bf16_pass_runs_the_matmuls_of_an_fp32_graph_in_bf16():
    graph = tf.Graph()
    with graph.as_default():
        a, b = tf1.random_normal([64, 64]), tf1.random_normal([64, 64])
        out = tf.reduce_mean(tf.nn.softmax(tf.matmul(a, b)))
    config = distribution.with_mixed_precision_rewrite(tf1.ConfigProto(), "bf16")
    metadata = tf1.RunMetadata()
    with tf1.Session(graph=graph, config=config) as session:
        value = session.run(out, options=tf1.RunOptions(output_partition_graphs=True),
                            run_metadata=metadata)
    matmul_types = [node.attr["T"].type for g in metadata.partition_graphs for node in g.node
                    if "MatMul" in node.op]
    assert matmul_types and set(matmul_types) == {tf.bfloat16.as_datatype_enum}
    assert value == pytest.approx(1 / 64, rel=1e-2)


def test_under_the_rewrite_the_training_graph_is_fp32_and_fp16_keeps_loss_scaling():
    config = tiny_config()
    plan = training_plan.plan_steps(10, 1, 2, 1, 1)
    for graph_rewrite, expect_half in ((False, True), (True, False)):
        model_fn = model_fn_builder.build_model_fn(
            config, classifier_head.make_head_fn(2, 0.0), plan, precision="fp16",
            graph_rewrite=graph_rewrite, log_every_n_steps=100)
        with tf.Graph().as_default() as graph:
            features = {"input_ids": tf.ones([2, 8], tf.int32),
                        "input_mask": tf.ones([2, 8], tf.int32),
                        "segment_ids": tf.zeros([2, 8], tf.int32),
                        "label_ids": tf.zeros([2], tf.int32)}
            model_fn(features, None, tf_estimator.ModeKeys.TRAIN)
            half = any(t.dtype == tf.float16 for op in graph.get_operations()
                       for t in op.outputs if not op.name.startswith("loss_scale"))
            names = [v.name for v in tf1.global_variables()]
        assert half == expect_half, graph_rewrite
        assert any("loss_scale" in n for n in names), names


def test_fp16_by_graph_rewrite_on_a_cpu_is_refused_in_one_line(tmp_path):
    options = FineTuningOptions(output_dir=str(tmp_path), bert_config_file="c.json",
                                do_train=True, precision="fp16",
                                mixed_precision="graph_rewrite")
    with pytest.raises(InputError, match="--mixed_precision=graph_rewrite with "
                                         "--precision=fp16: .* bf16 on CPUs only"):
        distribution.resolve_runtime(options)
    fp32 = FineTuningOptions(output_dir=str(tmp_path), bert_config_file="c.json",
                             do_train=True, mixed_precision="graph_rewrite")
    assert not distribution.resolve_runtime(fp32).graph_rewrite


def test_bf16_casts_and_graph_rewrite_train_as_fp32_does(tmp_path):
    """The same tiny classifier, data and seed trained 16 steps in fp32, in bf16 by
    casts and in bf16 by the graph rewrite: every eval loss (fp32 inference) is
    finite and within 5% of fp32's, and the two bf16 modes end near each other."""
    model = write_tiny_model(str(tmp_path / "model"))
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    write_sentiment_csv(str(data_dir / "train.csv"), 64, seed=1)
    write_sentiment_csv(str(data_dir / "dev.csv"), 24, seed=2)
    from bert_toolkit.tasks.classification import data as classifier_data
    processor = classifier_data.get_processor("custom", text_a_column="sentence",
                                              label_column="label")
    examples = {"train": processor.get_train_examples(str(data_dir)),
                "eval": processor.get_dev_examples(str(data_dir))}
    losses, kernels = {}, {}
    for name, precision, mode in (("fp32", "fp32", "casts"), ("casts", "bf16", "casts"),
                                  ("rewrite", "bf16", "graph_rewrite")):
        out = str(tmp_path / name)
        options = FineTuningOptions(
            output_dir=out, max_seq_length=16, do_train=True, do_eval=True,
            train_batch_size=8, eval_batch_size=8, learning_rate=1e-3, num_train_epochs=2.0,
            precision=precision, mixed_precision=mode, **model)
        fine_tuning.run(classifier.ClassifierTask(examples, ["0", "1"]), options)
        with open(os.path.join(out, "eval_results.json")) as f:
            losses[name] = json.load(f)["eval_loss"]
        kernels[name] = tf.train.load_checkpoint(out).get_tensor(
            "bert/encoder/layer_0/attention/self/query/kernel")
    assert all(np.isfinite(v) for v in losses.values()), losses
    for name in ("casts", "rewrite"):
        assert losses[name] == pytest.approx(losses["fp32"], rel=0.05), losses
        assert np.abs(kernels[name] - kernels["fp32"]).max() < 5e-3, name
    if cpu_has_bf16_units():  # the pass ran: its numbers are not fp32's
        assert losses["rewrite"] != losses["fp32"]
