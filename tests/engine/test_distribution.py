"""Devices, replicas and precision of one process."""


import dataclasses
import json

import pytest
import tensorflow as tf

from bert_toolkit import system
from bert_toolkit.engine import distribution, launch
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
    with pytest.raises(InputError, match="--use_fp16 contradicts --precision=bf16"):
        options.replace(precision="bf16")


def rates(fp32, bf16, fresh=False):
    """CpuRates from GFLOP/s."""
    return distribution.CpuRates(fp32 * 1e9, bf16 * 1e9, fresh)


def test_auto_on_a_cpu_is_a_pure_function_of_the_measured_rates(monkeypatch):
    choose = distribution.choose_cpu_precision
    training, inference = distribution.TRAINING_BF16_MARGIN, distribution.INFERENCE_BF16_MARGIN
    # Issue 61's Xeon (avx512_bf16 without AMX) and the AVX512-BF16 EPYC.
    assert choose(rates(285, 170), training) == "fp32"
    assert choose(rates(220, 420), training) == "bf16"
    assert choose(rates(220, 420), inference) == "bf16"
    # A near tie keeps fp32; inference asks for a wider lead than training.
    assert choose(rates(300, 315), training) == "fp32"
    assert choose(rates(300, 300 * training), training) == "bf16"
    assert choose(rates(300, 360), training) == "bf16"
    assert choose(rates(300, 360), inference) == "fp32"
    # Not timed (no bf16 units): fp32.
    assert choose(distribution.NOT_TIMED, training) == "fp32"
    assert distribution.resolve_precision("auto", rates=rates(285, 170)) == "fp32"
    assert distribution.resolve_precision("auto", rates=rates(220, 420)) == "bf16"
    assert distribution.resolve_precision(
        "auto", rates=rates(300, 360), margin=inference) == "fp32"
    # Explicit precisions are taken as given, whatever was measured.
    assert distribution.resolve_precision("bf16", rates=rates(285, 170)) == "bf16"
    assert distribution.resolve_precision("fp32", rates=rates(220, 420)) == "fp32"
    # GPUs keep their rule, with nothing measured.
    monkeypatch.setattr(distribution, "cpu_rates", lambda: pytest.fail("measured on a GPU"))
    for supports, expected in ((True, "bf16"), (False, "fp16")):
        monkeypatch.setattr(distribution, "gpu_supports_bf16", lambda s=supports: s)
        assert distribution.resolve_precision("auto", use_gpu=True) == expected


@pytest.fixture
def rates_cache(monkeypatch, tmp_path):
    """A cache folder of the test's own, a CPU with bf16 units, and a fake
    measurement whose calls are counted (list of the calls' results)."""
    monkeypatch.setenv("BERT_TOOLKIT_CACHE", str(tmp_path))
    monkeypatch.setattr(system, "cpu_supports_bf16", lambda: True)
    calls = []

    def measure():
        calls.append({"fp32": 285e9 + len(calls), "bf16": 170e9})
        return calls[-1]
    return tmp_path, calls, lambda: distribution.cpu_rates(measure)


def test_the_rates_are_cached_per_machine_and_tensorflow(rates_cache, monkeypatch):
    folder, calls, cpu_rates = rates_cache
    first = cpu_rates()
    assert first == distribution.CpuRates(285e9, 170e9, True) and len(calls) == 1
    # A second run reads them: same figures, nothing timed.
    assert cpu_rates() == distribution.CpuRates(285e9, 170e9, False) and len(calls) == 1
    (path,) = (folder / "machine").iterdir()
    record = json.loads(path.read_text())
    key = distribution.rates_key()
    assert record["key"] == key and record["values"]["fp32"] == 285e9
    assert key["tensorflow"] == tf.__version__ and key["cores"] == system.available_cores()
    assert set(key) >= {"cpu", "cpu_flags", "threads", "onednn"}

    def changed(target, name, value):
        """Measures again under a changed key, then not again once it is back."""
        before = len(calls)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(target, name, value)
            assert cpu_rates().fresh and len(calls) == before + 1
            assert not cpu_rates().fresh and len(calls) == before + 1
        assert not cpu_rates().fresh and len(calls) == before + 1

    cores = system.available_cores()
    changed(tf, "__version__", "2.99.0")
    changed(system, "cpu_description", lambda: ("Another CPU", ["avx512_bf16"]))
    changed(system, "available_cores", lambda: cores + 8)
    monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", "0")
    assert cpu_rates().fresh and len(calls) == 5
    monkeypatch.delenv("TF_ENABLE_ONEDNN_OPTS")
    # The cache folder cannot be written: measured, and the run goes on.
    monkeypatch.setenv("BERT_TOOLKIT_CACHE", str(path))  # a file, not a folder
    assert cpu_rates().fresh and cpu_rates().fresh and len(calls) == 7


def test_a_corrupt_or_foreign_cache_file_is_measured_over_and_rewritten(rates_cache):
    folder, calls, cpu_rates = rates_cache
    cpu_rates()
    (path,) = (folder / "machine").iterdir()
    key = distribution.rates_key()
    for bad in ("{not json", "\xff\xfe", "[]", json.dumps({"key": key, "values": [1]}),
                json.dumps({"key": key, "values": {"fp32": -1, "bf16": 170e9}}),
                json.dumps({"key": key, "values": {"fp32": "fast", "bf16": 170e9}}),
                json.dumps({"key": dict(key, cpu="elsewhere"), "values": {"fp32": 1,
                                                                          "bf16": 1}})):
        path.write_text(bad)
        before = len(calls)
        assert cpu_rates().fresh and len(calls) == before + 1, bad
        assert json.loads(path.read_text())["values"]["fp32"] == calls[-1]["fp32"]
        assert not cpu_rates().fresh and len(calls) == before + 1


def test_a_cpu_without_bf16_units_is_not_timed(monkeypatch):
    monkeypatch.setattr(system, "cpu_supports_bf16", lambda: False)
    assert distribution.cpu_rates(lambda: pytest.fail("timed")) == distribution.NOT_TIMED


def test_the_start_up_line_names_the_figures(monkeypatch):
    said = []
    monkeypatch.setattr(distribution.console, "warning", said.append)

    def line(measured, **flags):
        monkeypatch.setattr(distribution, "cpu_rates", lambda: measured)
        options = RunOptions(output_dir="out", bert_config_file="c.json", **flags)
        runtime = distribution.resolve_runtime(options)
        return runtime, distribution.describe_precisions(options, runtime)

    runtime, text = line(rates(285.2, 170), precision="auto", inference_precision="auto")
    assert (runtime.precision, runtime.inference_precision) == ("fp32", "fp32")
    assert text == "precision fp32 (auto: fp32 285, bf16 170 GFLOP/s), inference fp32 (auto)"
    runtime, text = line(rates(220, 420), precision="auto", inference_precision="auto")
    assert text == "precision bf16 (auto: fp32 220, bf16 420 GFLOP/s), inference bf16 (auto)"
    _, text = line(rates(300, 360), precision="auto", inference_precision="auto")
    assert text == ("precision bf16 (auto: fp32 300, bf16 360 GFLOP/s), "
                    "inference fp32 (auto, bf16 not 1.3x faster)")
    _, text = line(rates(300, 315), precision="auto")
    assert text == ("precision fp32 (auto: fp32 300, bf16 315 GFLOP/s, bf16 not 1.1x "
                    "faster), inference fp32")
    _, text = line(rates(285, 170), inference_precision="auto")
    assert text == "precision fp32, inference fp32 (auto: fp32 285, bf16 170 GFLOP/s)"
    _, text = line(distribution.NOT_TIMED, precision="auto")
    assert text == ("precision fp32 (auto: no bf16 units on this CPU, emulated bf16 is "
                    "slower), inference fp32")
    assert said == []
    # bf16 by name runs bf16, in one line saying fp32 measured faster.
    runtime, text = line(rates(285, 170), precision="bf16", inference_precision="bf16")
    assert (runtime.precision, runtime.inference_precision) == ("bf16", "bf16")
    assert text == "precision bf16, inference bf16"
    assert said == ["--precision=bf16 and --inference_precision=bf16: fp32 measured faster "
                    "on this CPU (fp32 285, bf16 170 GFLOP/s); running bf16 as asked"]
    del said[:]
    line(distribution.NOT_TIMED, precision="bf16")
    assert said == ["--precision=bf16: this CPU has no bf16 units, so bf16 is emulated and "
                    "slower than fp32; running bf16 as asked"]
    del said[:]
    line(rates(220, 420), precision="bf16")
    assert said == []
    # fp32 alone measures nothing.
    runtime, text = line(None, precision="fp32")
    assert runtime.cpu_rates is None and text == "precision fp32, inference fp32"
    # The whole devices line.
    runtime, _ = line(rates(285, 170), precision="auto")
    options = RunOptions(output_dir="out", bert_config_file="c.json", precision="auto")
    placement = launch.Placement(runtime, None, None, 285e9)
    assert launch.describe(options, placement).startswith(
        "one process; devices /cpu:0, precision fp32 (auto: fp32 285, bf16 170 GFLOP/s), "
        "inference fp32, matmul peak 0.285 TFLOP/s; output in out")


def test_gpus_say_their_rule(monkeypatch):
    options = RunOptions(output_dir="out", bert_config_file="c.json", precision="auto",
                         inference_precision="auto", use_gpu=True)
    for supports, expected in ((True, "bf16"), (False, "fp16")):
        runtime = distribution.Runtime(["/gpu:0"], expected, expected)
        rule = "Ampere or newer GPUs" if supports else "GPUs before Ampere"
        assert distribution.describe_precisions(options, runtime) == (
            "precision %s (auto: %s), inference %s (auto)" % (expected, rule, expected))


def test_the_mfu_peak_reuses_rates_measured_now_only(monkeypatch):
    options = RunOptions(output_dir="out", bert_config_file="c.json")
    measured = []
    monkeypatch.setattr(distribution, "measure_matmul_peak",
                        lambda device, precision: measured.append(precision) or 1e11)
    fresh = distribution.Runtime(["/cpu:0"], "bf16", "fp32", cpu_rates=rates(220, 420, True))
    assert distribution.matmul_peak(options, fresh) == 420e9 and measured == []
    cached = fresh._replace(cpu_rates=rates(220, 420))
    assert distribution.matmul_peak(options, cached) == 1e11 and measured == ["bf16"]
    assert distribution.matmul_peak(options.replace(matmul_peak_tflops=2.0), fresh) == 2e12


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
    both = distribution.time_matmuls("/cpu:0", ("fp32", "bf16"), 128, 2)
    assert sorted(both) == ["bf16", "fp32"] and all(1e7 < r < 1e14 for r in both.values())


def test_the_flags_help_states_the_margins():
    """options.py cannot import this module (it would load TensorFlow): its help
    text names the margins, and this keeps them equal."""
    helps = {field.name: field.metadata["help"] for field in dataclasses.fields(RunOptions)}
    assert "%.1fx fp32" % distribution.TRAINING_BF16_MARGIN in helps["precision"]
    assert "%.1fx fp32" % distribution.INFERENCE_BF16_MARGIN in helps["inference_precision"]
