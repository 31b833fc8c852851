"""Devices, replicas and precision of one process."""


import pytest
import tensorflow as tf

from bert_toolkit import system
from bert_toolkit.engine import distribution
from bert_toolkit.engine.options import RunOptions
from bert_toolkit.errors import InputError

tf1 = tf.compat.v1


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


def test_the_cpu_peak_gives_each_thread_the_same_work(monkeypatch):
    sizes = {threads: distribution.peak_matmul_size(threads) for threads in (1, 2, 8, 64, 512)}
    assert sizes == {1: 2048, 2: 2560, 8: 4096, 64: 4096, 512: 4096}
    monkeypatch.setattr(system, "available_cores", lambda: 4)
    monkeypatch.setenv("TF_NUM_INTRAOP_THREADS", "1")
    assert distribution.tensorflow_cpu_threads() == 1
    monkeypatch.setenv("TF_NUM_INTRAOP_THREADS", "16")
    assert distribution.tensorflow_cpu_threads() == 4
    monkeypatch.delenv("TF_NUM_INTRAOP_THREADS")
    assert distribution.tensorflow_cpu_threads() == 4
    # A real measurement, on a small matmul to keep it short: between 0.1 GFLOP/s
    # and 100 TFLOP/s is a CPU's.
    peak = distribution.measure_matmul_peak("/cpu:0", "fp32", size=256, repeats=2)
    assert 1e8 < peak < 1e14
