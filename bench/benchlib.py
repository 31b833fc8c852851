"""What the benchmarks share: configs, FLOPs, peers, rounds, and worker processes.

Every benchmark runs OUR path and a PEER's path on the same work and prints
their ratio from one run. Each side lives in its own worker process, started
once and kept alive, so start-up, graph building and warm-up are paid once and
never timed; the controller then asks the workers for measured rounds in turn
(ours, peer, ours, peer, ...), so a change in the machine's background load
hits both alike, and reports the median of the rounds.

A worker talks to the controller over its stdin/stdout, one JSON object per
line prefixed with "BENCH " (anything else a library prints there is
ignored); its stderr goes to a log file named in any error. Importing this
module imports neither TensorFlow nor torch: the peers may run under another
interpreter (see `find_peer_python`).
"""

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH_DIR = os.path.join(REPO, "bench")
sys.path.insert(0, REPO)
# Environment only: TensorFlow, when a bench imports it, runs as the toolkit's
# scripts configure it (oneDNN on); an ours worker's --onednn side overrides it.
from bert_toolkit import (
    fileio,  # noqa: E402  (no TensorFlow: fine under a peer's interpreter)
    tensorflow_env,  # noqa: E402,F401
)

PREFIX = "BENCH "

# The two configs the results page reports, as bert_config.json fields.
# all-MiniLM-L6-v2 uses the exact (erf) GELU; Google's BERT-base the tanh one.
CONFIGS = {
    "minilm": dict(vocab_size=30522, hidden_size=384, num_hidden_layers=6,
                   num_attention_heads=12, intermediate_size=1536, hidden_act="gelu_exact",
                   hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
                   max_position_embeddings=512, type_vocab_size=2, initializer_range=0.02),
    "base": dict(vocab_size=30522, hidden_size=768, num_hidden_layers=12,
                 num_attention_heads=12, intermediate_size=3072, hidden_act="gelu",
                 hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
                 max_position_embeddings=512, type_vocab_size=2, initializer_range=0.02),
    # The other families' published base configs (bert_toolkit/families.py): the same
    # encoder with their pieces, so a step should cost what BERT-base's does.
    "roberta-base": dict(vocab_size=50265, hidden_size=768, num_hidden_layers=12,
                         num_attention_heads=12, intermediate_size=3072,
                         hidden_act="gelu_exact", hidden_dropout_prob=0.1,
                         attention_probs_dropout_prob=0.1, max_position_embeddings=514,
                         type_vocab_size=1, initializer_range=0.02, model_family="roberta",
                         layer_norm_eps=1e-5),
    "xlm-roberta-base": dict(vocab_size=250002, hidden_size=768, num_hidden_layers=12,
                             num_attention_heads=12, intermediate_size=3072,
                             hidden_act="gelu_exact", hidden_dropout_prob=0.1,
                             attention_probs_dropout_prob=0.1, max_position_embeddings=514,
                             type_vocab_size=1, initializer_range=0.02,
                             model_family="xlm-roberta", layer_norm_eps=1e-5),
    "electra-base": dict(vocab_size=30522, hidden_size=768, num_hidden_layers=12,
                         num_attention_heads=12, intermediate_size=3072,
                         hidden_act="gelu_exact", hidden_dropout_prob=0.1,
                         attention_probs_dropout_prob=0.1, max_position_embeddings=512,
                         type_vocab_size=2, initializer_range=0.02, model_family="electra"),
    "distilbert-base": dict(vocab_size=30522, hidden_size=768, num_hidden_layers=6,
                            num_attention_heads=12, intermediate_size=3072,
                            hidden_act="gelu_exact", hidden_dropout_prob=0.1,
                            attention_probs_dropout_prob=0.1, max_position_embeddings=512,
                            type_vocab_size=0, initializer_range=0.02,
                            model_family="distilbert"),
    "albert-base": dict(vocab_size=30000, hidden_size=768, num_hidden_layers=12,
                        num_attention_heads=12, intermediate_size=3072, hidden_act="gelu",
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                        max_position_embeddings=512, type_vocab_size=2,
                        initializer_range=0.02, model_family="albert", embedding_size=128),
    # microsoft/deberta-v3-base: relative positions in 256 log buckets, no position or
    # token-type table; the 128,100-word SentencePiece vocabulary.
    "deberta-v3-base": dict(vocab_size=128100, hidden_size=768, num_hidden_layers=12,
                            num_attention_heads=12, intermediate_size=3072,
                            hidden_act="gelu_exact", hidden_dropout_prob=0.1,
                            attention_probs_dropout_prob=0.1, max_position_embeddings=512,
                            type_vocab_size=0, initializer_range=0.02,
                            model_family="deberta-v2", layer_norm_eps=1e-7,
                            position_buckets=256, max_relative_positions=-1),
    # answerdotai/ModernBERT-base: 22 pre-norm layers, every third global, the others
    # attending within 128 tokens; no dropout.
    "modernbert-base": dict(vocab_size=50368, hidden_size=768, num_hidden_layers=22,
                            num_attention_heads=12, intermediate_size=1152,
                            hidden_act="gelu_exact", hidden_dropout_prob=0.0,
                            attention_probs_dropout_prob=0.0, max_position_embeddings=8192,
                            type_vocab_size=0, initializer_range=0.02,
                            model_family="modernbert", layer_norm_eps=1e-5,
                            local_attention=128, global_attn_every_n_layers=3,
                            global_rope_theta=160000.0, local_rope_theta=10000.0,
                            classifier_pooling="mean"),
    # For the smoke test: builds and runs in a second.
    "tiny": dict(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                 intermediate_size=64, hidden_act="gelu_exact", hidden_dropout_prob=0.1,
                 attention_probs_dropout_prob=0.1, max_position_embeddings=128,
                 type_vocab_size=2, initializer_range=0.02),
}

# Our activation names -> the Hugging Face name of the same function.
HF_ACTIVATIONS = {"gelu": "gelu_new", "gelu_new": "gelu_new", "gelu_exact": "gelu",
                  "relu": "relu", "tanh": "tanh", "linear": "linear"}


class BenchError(Exception):
    """A user mistake or a failed worker: reported as one line, exit code 1."""


def load_config(name_or_path):
    """(display name, dict of bert_config.json fields) for a name of CONFIGS or a path."""
    if name_or_path in CONFIGS:
        return name_or_path, dict(CONFIGS[name_or_path])
    if not os.path.isfile(name_or_path):
        raise BenchError("--config=%s: expected %s or a bert_config.json path"
                         % (name_or_path, ", ".join(CONFIGS)))
    try:
        with open(name_or_path) as f:
            fields = json.load(f)
    except ValueError as e:
        raise BenchError("--config=%s: not valid JSON (%s)" % (name_or_path, e))
    defaults = dict(CONFIGS["base"])
    defaults.update(fields)
    return os.path.basename(os.path.dirname(os.path.abspath(name_or_path))) or name_or_path, \
        defaults


def load_average():
    """The 1-minute load average (what the results page records beside a number)."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


def median(values):
    return statistics.median(values) if values else float("nan")


def have_modules(python, modules):
    """True if `python` can import every module in `modules`."""
    if python == sys.executable:
        import importlib.util
        return all(importlib.util.find_spec(m) is not None for m in modules)
    code = "import importlib.util, sys; sys.exit(any(importlib.util.find_spec(m) is None " \
           "for m in sys.argv[1:]))"
    try:
        return subprocess.run([python, "-c", code] + list(modules), timeout=60,
                              stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def find_peer_python(modules, explicit=None):
    """An interpreter that imports `modules` (e.g. torch, transformers), or None.

    Tried in order: `explicit` (--peer_python), $BENCH_PEER_PYTHON, this
    interpreter, then the separate bench virtualenv `.venv-bench` in the repo
    (requirements-bench.txt explains when it is needed).
    """
    candidates = [explicit, os.environ.get("BENCH_PEER_PYTHON"), sys.executable,
                  os.path.join(REPO, ".venv-bench", "bin", "python")]
    for python in candidates:
        if python and (python == sys.executable or os.path.exists(python)) \
                and have_modules(python, modules):
            return python
    if explicit:
        raise BenchError("--peer_python=%s cannot import %s" % (explicit, ", ".join(modules)))
    return None


def describe_python(python):
    return "this interpreter" if python == sys.executable else python


class Worker(object):
    """A benchmark side in its own process, driven one JSON line at a time."""

    def __init__(self, name, command, env=None, start_timeout=1800, log_dir=None):
        self.name = name
        self.python = command[0]  # the interpreter the side runs under
        self.log_path = os.path.join(log_dir or tempfile.gettempdir(),
                                     "bench-%s-%d.log" % (name.replace(" ", "_"), os.getpid()))
        self._log = open(self.log_path, "w")
        child_env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
        child_env.update(env or {})
        self._process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
            cwd=REPO, env=child_env, universal_newlines=True, bufsize=1)
        self.ready = self.receive(start_timeout)

    def receive(self, timeout=1800):
        """The next message of the worker (a dict); BenchError if it died or erred."""
        # A plain readline: the worker always answers (or exits, closing stdout).
        del timeout
        while True:
            line = self._process.stdout.readline()
            if not line:
                code = self._process.wait()
                raise BenchError("worker %r exited with code %s; its log: %s (last line: %s)"
                                 % (self.name, code, self.log_path, self._last_log_line()))
            if line.startswith(PREFIX):
                message = json.loads(line[len(PREFIX):])
                if "error" in message:
                    raise BenchError("worker %r: %s (log: %s)"
                                     % (self.name, message["error"], self.log_path))
                return message

    def _last_log_line(self):
        self._log.flush()
        with open(self.log_path) as f:
            lines = [text.strip() for text in f if text.strip()]
        return lines[-1] if lines else "empty"

    def request(self, command, **kwargs):
        self._process.stdin.write(json.dumps(dict(kwargs, command=command)) + "\n")
        self._process.stdin.flush()
        return self.receive()

    def close(self):
        if self._process.poll() is None:
            try:
                self._process.stdin.write(json.dumps({"command": "stop"}) + "\n")
                self._process.stdin.close()
                self._process.wait(timeout=120)
            except (OSError, subprocess.TimeoutExpired):
                self._process.kill()
                self._process.wait()
        self._log.close()


def send(message):
    """Worker side: one message to the controller."""
    sys.stdout.write(PREFIX + json.dumps(message) + "\n")
    sys.stdout.flush()


def commands():
    """Worker side: the controller's commands, one dict at a time, until stop or EOF."""
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        message = json.loads(line)
        if message.get("command") == "stop":
            return
        yield message


def run_worker(serve):
    """Worker side: `serve()` with any exception reported as an error message."""
    try:
        serve()
    except Exception as e:  # noqa: BLE001 - reported to the controller, then re-raised
        send({"error": "%s: %s" % (type(e).__name__, " ".join(str(e).split())[:500])})
        raise


def serve_steps(step, batch, warmup_steps, ready):
    """A worker's loop for a side that runs `step()` (one batch of `batch` examples).

    Warms up, sends `ready` (a dict), then answers each round request with
    the examples/s, wall and CPU seconds of its steps.
    """
    for _ in range(warmup_steps):
        step()
    send(dict(ready, ready=True))
    for command in commands():
        steps = int(command.get("steps", 1))
        started, cpu_started = time.perf_counter(), time.process_time()
        for _ in range(steps):
            step()
        seconds = time.perf_counter() - started
        send({"examples_per_second": steps * batch / seconds, "seconds": seconds,
              "cpu_seconds": time.process_time() - cpu_started})


def runnable_others(samples=10, interval=0.05):
    """Mean number of runnable threads on the machine, besides the one asking.

    From /proc/stat's procs_running, which counts the threads running or
    waiting for a core right now; sampled a few times. NaN where unknown.
    """
    counts = []
    for _ in range(samples):
        try:
            with open("/proc/stat") as f:
                line = next(text for text in f if text.startswith("procs_running"))
            counts.append(int(line.split()[1]) - 1)
        except (OSError, StopIteration, ValueError):
            return float("nan")
        time.sleep(interval)
    return sum(counts) / float(len(counts))


def wait_for_quiet(max_wait_seconds, threshold=0.5):
    """Waits (at most max_wait_seconds) until almost nothing else is runnable.

    On a machine shared with other work, a round measured while another
    process holds a core says more about that process than about the side
    measured; PyTorch's OpenMP threads in particular slow down several-fold
    when a core is taken from them, TensorFlow's thread pool much less. So
    each round starts when the others' runnable threads average at most
    `threshold`, or after the wait. Returns (runnable others, seconds waited).
    """
    started = time.time()
    while True:
        others = runnable_others()
        waited = time.time() - started
        if not others > threshold or waited >= max_wait_seconds:
            return others, waited
        time.sleep(1.0)


def alternate_rounds(workers, rounds, max_wait_seconds=0, **request):
    """name -> list of per-round results, the workers taking turns each round.

    With max_wait_seconds, each round waits for a quiet machine first (see
    wait_for_quiet); the others' runnable threads before the round and the
    load average after it are recorded with the round.
    """
    results = {name: [] for name in workers}
    for _ in range(rounds):
        for name, worker in workers.items():
            others, waited = (wait_for_quiet(max_wait_seconds) if max_wait_seconds
                              else (float("nan"), 0.0))
            message = worker.request("round", **request)
            message["load_average"] = load_average()
            message["others_runnable_before"] = others
            message["waited_seconds"] = waited
            results[name].append(message)
    return results


def final_peaks(precisions, peer_python=None, size=2048, max_wait_seconds=0,
                tf_pythons=None):
    """precision -> best matmul GFLOP/s of TensorFlow (and the peer's torch), re-measured.

    Runs bench/matmul_peak.py after the rounds (waiting for a quiet machine
    first when asked), TensorFlow's under each of `tf_pythons` (default: this
    interpreter); the benches combine it with the peaks their workers
    measured at start-up and keep the highest.
    """
    best = {}
    frameworks = [("tf", python) for python in (tf_pythons or [sys.executable])]
    if peer_python and have_modules(peer_python, ("torch",)):
        frameworks.append(("torch", peer_python))
    for framework, python in frameworks:
        if max_wait_seconds:
            wait_for_quiet(max_wait_seconds)
        try:
            out = subprocess.run(
                [python, os.path.join(BENCH_DIR, "matmul_peak.py"), "--framework=" + framework,
                 "--precision=" + ",".join(precisions), "--size=%d" % size],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, universal_newlines=True,
                timeout=600, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")).stdout
            peaks = json.loads(out.strip().splitlines()[-1])
        except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
            continue
        for precision, value in peaks.items():
            best[precision] = max(best.get(precision, 0.0), value)
    return best


def measure_sides(workers, args, precisions, peer_python, example_flops, replicas=None):
    """Runs args.rounds alternating rounds of the started `workers`, closes them,
    re-measures the peaks and returns side_results (see there)."""
    try:
        rounds = alternate_rounds(workers, args.rounds, args.max_wait,
                                  steps=args.steps_per_round)
        print_compile_times(workers)
    finally:
        close_all(workers)
    peaks = final_peaks(precisions, peer_python, args.peak_size, args.max_wait,
                        tf_pythons(getattr(args, "tf_python", None)))
    return side_results(rounds, workers, peaks, example_flops, replicas)


def side_results(rounds, workers, peaks, example_flops, replicas=None):
    """One result dict per side from alternate_rounds' rounds: the median
    examples/s, its rounds, the load they ran under, GFLOP/s and MFU.

    The MFU's peak is the machine's at the side's precision: the best either
    framework reached, at start-up (workers' ready messages) or re-measured
    after the rounds (`peaks`, see final_peaks). `example_flops`: model FLOPs
    of one example; `replicas`: side name -> replica count (default 1).
    """
    results = []
    for name, side_rounds in rounds.items():
        precision = "bf16" if "bf16" in name else "fp32"
        peak = max([w.ready.get("peak_gflops", 0.0) for n, w in workers.items()
                    if ("bf16" in n) == (precision == "bf16")] + [peaks.get(precision, 0.0)])
        rate = median([r["examples_per_second"] for r in side_rounds])
        results.append({
            "side": name, "precision": precision, "examples_per_second": rate,
            "rounds": [r["examples_per_second"] for r in side_rounds],
            "load_averages": [r["load_average"] for r in side_rounds],
            "others_runnable": [r["others_runnable_before"] for r in side_rounds],
            # Busy share of the cores while the side ran (1.0 = all of them).
            "cpu_utilisation": median([r["cpu_seconds"] / (r["seconds"] * (os.cpu_count() or 1))
                                       for r in side_rounds]),
            "gflops_per_example": example_flops / 1e9,
            "achieved_gflops": rate * example_flops / 1e9, "peak_gflops": peak,
            "mfu": rate * example_flops / 1e9 / peak if peak else float("nan"),
            "peak_by_side": workers[name].ready.get("peak_gflops"),
            "replicas": (replicas or {}).get(name, 1), "python": workers[name].python,
            "input_examples_per_second": workers[name].ready.get("input_examples_per_second")})
    return results


def mean_forward_flops(config, features, batch, multiple=None, skip_padding=False):
    """Forward matmul FLOPs per example over `features` in batches of `batch`
    consecutive examples: each batch cut to its longest text rounded up to
    `multiple` (None: not cut), and with skip_padding the dense layers on its real
    tokens only, as our encoder runs them (modeling.token_packing)."""
    from bert_toolkit.model import flops, modeling
    seq_length = features["input_mask"].shape[1]
    lengths = features["input_mask"].sum(axis=1)
    per_batch = []
    for rows in lengths[:len(lengths) // batch * batch].reshape(-1, batch):
        length = seq_length if multiple is None else \
            min(-(-int(rows.max()) // multiple) * multiple, seq_length)
        real = float(rows.mean())
        packed = skip_padding and real <= (1.0 - modeling.PACKING_MIN_PADDING) * length
        per_batch.append(flops.forward_flops_per_example(config, length,
                                                         real if packed else None))
    return float(np.mean(per_batch))


def count_work(result, example_flops):
    """Sets a side_results entry's GFLOP/s and MFU from `example_flops`, the
    matmul FLOPs the side runs per example."""
    rate, peak = result["examples_per_second"], result["peak_gflops"]
    result.update(gflops_per_example=example_flops / 1e9,
                  achieved_gflops=rate * example_flops / 1e9,
                  mfu=rate * example_flops / 1e9 / peak if peak else float("nan"))


def split_choices(value, allowed, flag):
    """A comma-separated flag value as a list, each item one of `allowed`."""
    items = [v.strip() for v in value.split(",") if v.strip()]
    if not items or set(items) - set(allowed):
        raise BenchError("%s=%s: expected %s" % (flag, value, " and/or ".join(allowed)))
    return items


def torch_peer_sides(precisions, torch_compile):
    """[(side name, precision, extra torch_peer.py flags)] of the torch peer:
    eager (fp32) or autocast (bf16), and each under torch.compile when asked."""
    sides = [("torch %s" % ("fp32 eager" if p == "fp32" else "bf16 autocast"), p, [])
             for p in precisions]
    if torch_compile == "on":
        sides += [("torch %s compile" % p, p, ["--compile"]) for p in precisions]
    return sides


def print_compile_times(workers):
    """One line per side that compiled before its rounds."""
    for name, worker in workers.items():
        if worker.ready.get("compile_seconds") is not None:
            print("%s: compiled in %.0f s (first step, not in the rounds)"
                  % (name, worker.ready["compile_seconds"]))


def close_all(workers):
    for worker in workers.values():
        worker.close()


def format_table(header, rows):
    """Fixed-width text table; rows are lists of already formatted cells."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows)]
    lines = ["  ".join(str(cell).rjust(width) if i else str(cell).ljust(width)
                       for i, (cell, width) in enumerate(zip(row, widths)))
             for row in [header] + rows]
    return "\n".join(lines)


def machine_line():
    """CPU model, core count, bf16 units and load: printed on top of every result."""
    model, flags = "unknown CPU", []
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and model == "unknown CPU":
                    model = line.split(":", 1)[1].strip()
                elif line.startswith("flags") and not flags:
                    flags = line.split(":", 1)[1].split()
    except OSError:
        pass
    bf16 = [flag for flag in ("amx_bf16", "avx512_bf16") if flag in flags]
    return "%s, %d CPUs, bf16 units: %s, load average %.2f" % (
        model, os.cpu_count() or 0, ",".join(bf16) or "none", load_average())


def write_json(path, payload):
    if path:
        fileio.write_text_atomically(path, json.dumps(payload, indent=1, sort_keys=True))


def seconds_since(start):
    return time.perf_counter() - start


def ratio(ours, peer):
    return ours / peer if peer and not math.isnan(peer) else float("nan")


def scratch_dir(prefix):
    """A temporary folder, removed by the caller with remove_tree."""
    return tempfile.mkdtemp(prefix=prefix)


def remove_tree(path):
    shutil.rmtree(path, ignore_errors=True)


def add_model_args(parser, batch_help=None):
    """--config, --seq_length, --batch: the work a model bench measures."""
    parser.add_argument("--config", default="minilm",
                        help="%s or a path to a bert_config.json." % ", ".join(CONFIGS))
    parser.add_argument("--seq_length", type=int, default=128)
    parser.add_argument("--batch", type=int, default=32, help=batch_help)


def add_round_args(parser, steps_per_round, peer_help):
    """The options of a bench that alternates ours and a peer in timed rounds."""
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max_wait", type=float, default=0,
                        help="Seconds each round may wait for a quiet machine (nothing "
                             "else runnable) before it starts; 0: no wait.")
    parser.add_argument("--steps_per_round", type=int, default=steps_per_round)
    parser.add_argument("--warmup_steps", type=int, default=3)
    parser.add_argument("--peak_size", type=int, default=2048,
                        help="n of the n^3 matmul that measures the peak.")
    parser.add_argument("--peer", choices=["auto", "none"], default="auto",
                        help="none: measure ours only.")
    parser.add_argument("--peer_python", help=peer_help)
    parser.add_argument("--torch_compile", choices=["on", "off"], default="on",
                        help="on: the torch peer also runs under torch.compile (inductor); "
                             "its compile time is left out of the rounds and printed.")
    parser.add_argument("--onednn", default="on",
                        help="Comma-separated, one ours side each: 'on' (what the toolkit "
                             "does: TF_ENABLE_ONEDNN_OPTS=1, oneDNN kernels and fusions on "
                             "every x86 CPU), 'off' (Eigen kernels: TensorFlow's own default "
                             "on CPUs without AVX-512).")
    parser.add_argument("--tf_python", default="",
                        help="Comma-separated interpreters with TensorFlow, each running "
                             "every ours side once; with several, each side's name ends "
                             "with its TensorFlow version, e.g. 'TF 2.21.0' (default: this "
                             "interpreter only).")
    parser.add_argument("--json", help="Also write the results here.")
    # Set by the controller when it starts a worker.
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--features", help=argparse.SUPPRESS)
    parser.add_argument("--workdir", help=argparse.SUPPRESS)


def onednn_sides(value):
    """--onednn -> [(side name suffix, environment of that ours worker)]."""
    choices = [v.strip() for v in value.split(",") if v.strip()]
    if not choices or set(choices) - {"on", "off"} or len(set(choices)) < len(choices):
        raise BenchError("--onednn=%s: expected on and/or off" % value)
    return [("" if choices == ["on"] else " oneDNN %s" % choice,
             {"TF_ENABLE_ONEDNN_OPTS": "1" if choice == "on" else "0"}) for choice in choices]


def tf_pythons(value):
    """--tf_python -> the interpreters that run our side (default: this one)."""
    pythons = [v.strip() for v in (value or "").split(",") if v.strip()]
    if not pythons:
        return [sys.executable]
    found = []
    for python in pythons:
        # A path, or a name on $PATH; a virtualenv's symlink is kept as it is.
        path = shutil.which(python)
        if path is None:
            raise BenchError("--tf_python=%s: %s is not an executable file" % (value, python))
        found.append(os.path.abspath(path))
    if len(set(found)) < len(found):
        raise BenchError("--tf_python=%s: an interpreter is given twice" % value)
    return found


def tensorflow_version(python):
    """The TensorFlow version `python` imports; BenchError if it imports none."""
    try:
        result = subprocess.run(
            [python, "-c", "import tensorflow as tf; print(tf.__version__)"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
            timeout=300, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    except (OSError, subprocess.TimeoutExpired) as e:
        raise BenchError("--tf_python: %s failed to report its TensorFlow version (%s)"
                         % (python, e))
    lines = result.stdout.strip().splitlines()
    if result.returncode or not lines:
        errors = [line for line in result.stderr.strip().splitlines() if line.strip()]
        raise BenchError("--tf_python: %s cannot import tensorflow (%s)"
                         % (python, errors[-1] if errors else "exit code %d" % result.returncode))
    return lines[-1].strip()


def tf_python_sides(value):
    """--tf_python -> [(side name suffix, interpreter)], as onednn_sides does for --onednn.

    One interpreter (the default): no suffix. Several: each side is suffixed
    with its interpreter's TensorFlow version (" TF 2.15.1"), and with its
    place in the list (" #2") where two interpreters have the same version.
    """
    pythons = tf_pythons(value)
    if len(pythons) == 1:
        return [("", pythons[0])]
    versions = [tensorflow_version(python) for python in pythons]
    sides = []
    for i, (python, version) in enumerate(zip(pythons, versions)):
        suffix = " TF %s" % version
        if versions.count(version) > 1:
            suffix += " #%d" % (i + 1)
        sides.append((suffix, python))
    return sides


def describe_tf_pythons(sides):
    """One line naming the interpreter behind each --tf_python side suffix, or None
    when our side runs under this interpreter alone."""
    if len(sides) == 1 and sides[0][1] == sys.executable:
        return None
    return "ours ran under " + ", ".join(
        "%s%s" % (python, " (%s)" % suffix.strip() if suffix else "") for suffix, python in sides)


def bench_main(parser, run, serve_ours=None):
    """A bench's entry point: its worker with --worker=ours, else the controller.

    run(args) -> exit code; serve_ours(args) serves our side in a worker.
    A BenchError (or the toolkit's InputError) is one `error:` line, exit 1.
    """
    args = parser.parse_args()
    if serve_ours is not None and getattr(args, "worker", None) == "ours":
        run_worker(lambda: serve_ours(args))
        return
    sys.path.insert(0, REPO)
    from bert_toolkit.errors import InputError
    try:
        sys.exit(run(args))
    except (BenchError, InputError) as e:
        sys.stderr.write("error: %s\n" % " ".join(str(e).split()))
        sys.exit(1)
