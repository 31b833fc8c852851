"""train.py: Distributed_BERT's command lines, unchanged, and its one-address launch.

Its README's commands map onto run_pretraining.py's settings; train.py trains
on hdf5 shards, evaluates the --valid-subset split and saves in --save-dir; two
workers launched with only tcp://127.0.0.1:PORT train as one process with two
replicas, stop together on SIGTERM to one, and a partner that never starts ends
the other in one line.
"""

import dataclasses
import json
import os
import re
import signal
import time

import numpy as np
import pytest
import tensorflow as tf
from absl import flags as absl_flags
from test_hdf5_shards import PRED, SEQ, assert_one_line_error, make_data, write_corpus
from test_pretraining import wait_all

from bert_toolkit.cli import distributed_bert as cli
from bert_toolkit.cli import flags as cli_flags
from bert_toolkit.engine import hdf5_shards
from bert_toolkit.errors import InputError
from bert_toolkit.tasks.pretraining import distributed_bert
from bert_toolkit.tasks.pretraining.distributed_bert import DistributedBertOptions

import script_runs
from tiny import free_port, write_tiny_model

# The README's multi-node command (the second node), as its users type it.
README_NODE = (
    "--task bert --data {data} --dict {vocab} --config_file {config} --max-sentences 32 "
    "--fast-stat-sync --max-update 900000 --update-freq 4 --valid-subset test "
    "--num-workers 4 --warmup-updates 10000 --total-num-update 1000000 --lr 0.0001 "
    "--weight-decay 0.01 --save-dir node1gpu4 --distributed-init-method tcp://10.0.0.1:11111 "
    "--distributed-world-size 16 --distributed-gpus 4 --distributed-rank 4")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A tiny model and a Distributed_BERT data folder of hdf5 shards: two
    training shards and a test one."""
    root = tmp_path_factory.mktemp("dbert")
    model = write_tiny_model(str(root / "model"), max_position_embeddings=64)
    write_corpus(str(root / "train.txt"), 80, seed=0)
    write_corpus(str(root / "test.txt"), 20, seed=1)
    data = root / "preprocessing" / "tiny_32"
    make_data(str(root / "train.txt"), [str(data / ("tiny_seq_len_32_training_%d.hdf5" % i))
                                        for i in range(2)], model["vocab_file"])
    make_data(str(root / "test.txt"), [str(data / "tiny_seq_len_32_test_0.hdf5")],
              model["vocab_file"])
    return model, str(data), root


def parse(argv):
    """The options train.py builds from `argv` (Distributed_BERT's spelling)."""
    flag_values = absl_flags.FlagValues()
    cli_flags.define_flags(DistributedBertOptions, flag_values)
    flag_values(cli.normalize_argv(["train.py"] + argv))
    return cli_flags.read_options(DistributedBertOptions, flag_values)


def readme_argv(corpus, template=README_NODE, **changes):
    model, data, _ = corpus
    return template.format(data=data, vocab=model["vocab_file"],
                           config=model["bert_config_file"], **changes).split()


def test_the_flags_are_the_fields_and_hyphens_and_aliases_are_read():
    flag_values = absl_flags.FlagValues()
    cli_flags.define_flags(DistributedBertOptions, flag_values)
    assert set(flag_values) == {f.name for f in dataclasses.fields(DistributedBertOptions)}
    assert cli.normalize_argv(["t", "--max-sentences", "32", "--batch-size=8", "--wd", "0.1",
                               "--mu", "5", "--local_rank", "1", "--lr", "1e-4", "x-y",
                               "--cpu"]) == [
        "t", "--max_sentences", "32", "--max_sentences=8", "--weight_decay", "0.1",
        "--max_update", "5", "--device_id", "1", "--lr", "1e-4", "x-y", "--cpu"]


# Its README's "Parameter explanation": the usage text of its train.py.
USAGE = """
usage:  [-h] [--no-progress-bar] [--seed N] [--cpu] [--log-interval N][--log-format {none,simple}]
    [--num-workers N] [--max-tokens N] [--max-sentences N] [--required-batch-size-multiple N]
    [--train-subset SPLIT] [--valid-subset SPLIT] [--validate-interval N] [--disable-validation]
    [--max-tokens-valid N] [--max-sentences-valid N] [--curriculum N] [--task TASK] [--data DATA]
    [--dict PATH of a file] [--config_file PATH of a file] [--max_pred_length MAX_PRED_LENGTH]
    [--num_file NUM_FILE] [--distributed-world-size N] [--distributed-rank DISTRIBUTED_RANK]
    [--distributed-gpus DISTRIBUTED_GPUS] [--distributed-backend DISTRIBUTED_BACKEND]
    [--distributed-init-method DISTRIBUTED_INIT_METHOD] [--device-id DEVICE_ID]
    [--distributed-no-spawn] [--ddp-backend {c10d}] [--bucket-cap-mb MB] [--fix-batches-to-gpus]
    [--find-unused-parameters] [--fast-stat-sync] [--max-epoch N] [--max-update N]
    [--clip-norm NORM] [--update-freq N1,N2,...,N_K] [--lr LR_1,LR_2,...,LR_N] [--min-lr LR]
    [--use-bmuf] [--optimizer OPTIMIZER] [--adam-betas B] [--adam-eps D] [--weight-decay WD]
    [--lr_scheduler LR_SCHEDULER] [--force-anneal N] [--warmup-updates N]
    [--end-learning-rate END_LEARNING_RATE] [--power POWER] [--total-num-update TOTAL_NUM_UPDATE]
    [--save-dir DIR] [--restore-file RESTORE_FILE] [--reset-dataloader] [--reset-lr-scheduler]
    [--reset-meters] [--reset-optimizer] [--optimizer-overrides DICT] [--save-interval N]
    [--save-interval-updates N] [--keep-interval-updates N] [--keep-last-epochs N] [--no-save]
    [--no-epoch-checkpoints] [--no-last-checkpoints] [--no-save-optimizer-state]
    [--best-checkpoint-metric BEST_CHECKPOINT_METRIC] [--maximize-best-checkpoint-metric]
"""


def test_every_flag_of_its_usage_text_is_defined():
    names = {cli.normalize_argv(["t", "--" + n])[1][2:]
             for n in re.findall(r"\[--([\w-]+)", USAGE)}
    fields = {f.name for f in dataclasses.fields(DistributedBertOptions)}
    assert len(names) == 68 and names <= fields, sorted(names - fields)


def test_the_readme_commands_map_onto_run_pretraining(corpus):
    model, data, _ = corpus
    options = parse(readme_argv(corpus))
    settings, notes = distributed_bert.pretraining_options(options, lambda: 0)
    expected = dict(
        bert_config_file=model["bert_config_file"], max_seq_length=SEQ,
        max_predictions_per_seq=PRED, output_dir="node1gpu4", do_train=True, do_eval=True,
        train_batch_size=32, eval_batch_size=32, gradient_accumulation_steps=4,
        learning_rate=1e-4, num_train_steps=1000000, stop_at_step=900000,
        num_warmup_steps=10000, weight_decay_rate=0.01, seed=19940802, log_every_n_steps=1,
        use_gpu=True, num_gpu_cores=4, cluster="tcp://10.0.0.1:11111", cluster_world_size=4,
        cluster_rank=1, init_checkpoint=None, clip_norm=25.0)
    assert {name: getattr(settings, name) for name in expected} == expected
    assert settings.input_file.split(",") == [
        os.path.join(data, "tiny_seq_len_32_training_%d.hdf5" % i) for i in range(2)]
    assert settings.eval_input_file == os.path.join(data, "tiny_seq_len_32_test_0.hdf5")
    assert "--num-workers=4: accepted, unneeded here" in notes
    assert "--fast-stat-sync: accepted, unneeded here" in notes
    assert not any(n.startswith("--clip-norm") for n in notes)  # it maps onto ours

    single_gpu = readme_argv(corpus).copy()
    cut = single_gpu.index("--distributed-init-method")
    single_gpu = single_gpu[:cut] + ["--distributed-world-size", "1", "--device-id", "1"]
    settings, _ = distributed_bert.pretraining_options(parse(single_gpu), lambda: 1)
    assert (settings.use_gpu, settings.num_gpu_cores, settings.cluster) == (True, 1, "local")
    # One node, all its GPUs (the README's second example): the GPUs visible.
    settings, _ = distributed_bert.pretraining_options(parse(readme_argv(corpus)[:cut]),
                                                       lambda: 4)
    assert (settings.num_gpu_cores, settings.cluster_world_size) == (4, 0)
    settings, _ = distributed_bert.pretraining_options(
        parse(readme_argv(corpus)[:cut] + ["--cpu", "--max-epoch", "1", "--max-tokens",
                                           "64", "--restore-file", "init.ckpt"]), lambda: 0)
    # 2 sequences of 32 tokens per batch, 4 micro-batches: an epoch of the
    # training split's rows is rows // 8 updates.
    assert (settings.use_gpu, settings.num_cpu_replicas, settings.train_batch_size) == (
        False, 1, 2)
    rows = sum(hdf5_shards.describe_shard(path).num_examples
               for path in distributed_bert.split_files(data, "train"))
    assert settings.stop_at_step == rows // 8 and settings.init_checkpoint == "init.ckpt"


@pytest.mark.parametrize("change, message", [
    (["--update-freq", "4,8"], "--update-freq=4,8: a value per epoch is not supported here"),
    (["--lr", "fast"], "--lr=fast: expected a number"),
    (["--restore-file", "checkpoint_best.pt"], "a PyTorch checkpoint cannot be read here"),
    (["--valid-subset", "valid"], "no file whose name contains 'valid' (the --valid-subset"),
    (["--train-subset", "valid"], "no file whose name contains 'valid' (the --train-subset"),
    (["--optimizer", "sgd"], "--optimizer=sgd: train.py here trains with adam"),
    (["--adam-betas", "(0.9, 0.98)"], "--adam-betas=(0.9, 0.98): AdamW here has betas"),
    (["--power", "2"], "the schedule here decays linearly to 0"),
    (["--use-bmuf"], "--use-bmuf: not supported"),
    (["--distributed-rank", "3"], "expected a world size that is nodes x GPUs per node"),
    (["--dict", "/no/vocab.txt"], "--dict=/no/vocab.txt: no such file"),
])
def test_what_cannot_be_honoured_is_one_line(corpus, change, message):
    argv = readme_argv(corpus) + change
    with pytest.raises(InputError) as raised:
        distributed_bert.pretraining_options(parse(argv), lambda: 0)
    assert message in str(raised.value)


def test_a_task_or_a_batch_it_lacks_is_one_line(corpus):
    with pytest.raises(InputError, match="--task=mnist: train.py here pre-trains BERT"):
        parse(readme_argv(corpus) + ["--task", "mnist"])
    argv = readme_argv(corpus)
    cut = argv.index("--max-sentences")
    with pytest.raises(InputError, match="give the batch size with --max-sentences"):
        parse(argv[:cut] + argv[cut + 2:])


def run_train_py(argv, check=True):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("TF_CONFIG", None)
    result = script_runs.run(["train.py"] + argv, env=env)
    if check and result.returncode != 0:
        raise AssertionError("train.py exit %d:\n%s" % (result.returncode,
                                                        result.stderr[-3000:]))
    return result


# The README's single-GPU command on CPUs: a tiny batch and few updates.
SINGLE = (
    "--task bert --data {data} --dict {vocab} --config_file {config} --max-sentences 4 "
    "--fast-stat-sync --max-update {updates} --update-freq 2 --valid-subset test "
    "--num-workers 4 --warmup-updates 2 --total-num-update 40 --lr 0.001 --weight-decay 0.01 "
    "--save-dir {save} --cpu --restore-file {init} --log-interval 2 --seed 7")


def test_train_py_trains_evaluates_the_valid_subset_and_saves_in_save_dir(corpus, tmp_path):
    model, data, _ = corpus
    save = str(tmp_path / "sing_cpu_test")
    argv = readme_argv(corpus, SINGLE, updates=6, save=save, init=model["init_checkpoint"])
    result = run_train_py(argv)
    assert "--num-workers=4: accepted, unneeded here" in result.stderr
    assert "train.py runs run_pretraining.py on 2 hdf5 shard(s)" in result.stderr
    assert "training stops at step 6; the learning-rate schedule runs to step 40" \
        in result.stderr
    assert tf.train.latest_checkpoint(save).endswith("model.ckpt-6")
    with open(os.path.join(save, "eval_results.json")) as f:
        report = json.load(f)
    assert report["global_step"] == 6 and np.isfinite(report["masked_lm_loss"])
    test_rows = len(distributed_bert.split_files(data, "test"))
    assert test_rows == 1 and report["num_sequences"] > 16
    # The same command again resumes --save-dir and goes on to a larger --max-update.
    argv[argv.index("--max-update") + 1] = "8"
    result = run_train_py(argv)
    assert "resuming from %s" % os.path.join(save, "model.ckpt-6") in result.stderr
    assert tf.train.latest_checkpoint(save).endswith("model.ckpt-8")


# -- several workers from one address ---------------------------------------------

NODE = SINGLE + (" --distributed-init-method tcp://127.0.0.1:{port} --distributed-world-size 2"
                 " --distributed-gpus 1 --distributed-rank {rank}"
                 " --cluster-timeout-seconds {timeout}")


def node_argv(corpus, rank, port, save, updates=12, timeout=120):
    model = corpus[0]
    return readme_argv(corpus, NODE, updates=updates, save=save, rank=rank, port=port,
                       timeout=timeout, init=model["init_checkpoint"])


def start_nodes(corpus, ranks, port, save, log_prefix, **kwargs):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("TF_CONFIG", None)
    logs = ["%s.rank%d.log" % (log_prefix, rank) for rank in ranks]
    return [script_runs.start(["train.py"] + node_argv(corpus, rank, port, save, **kwargs),
                              env=env, stdout=log, stderr=log, append=True)
            for rank, log in zip(ranks, logs)], logs



def test_a_partner_that_never_starts_ends_the_other_in_one_line(corpus, tmp_path):
    """Rank 0 alone waits the timeout for rank 1, then ends with one line; rank 1
    alone waits for a rank 0 that never listens, and ends the same way."""
    for rank, fragment in ((0, "rank(s) 1 never arrived in 3 s"),
                           (1, "rank 0 did not listen there in 3 s")):
        port = free_port()
        start = time.time()
        result = run_train_py(node_argv(corpus, rank, port, str(tmp_path / "out"),
                                        timeout=3), check=False)
        assert time.time() - start < 60
        assert_one_line_error(result, "--cluster=tcp://127.0.0.1:%d: " % port, fragment)
        assert not os.path.exists(str(tmp_path / "out" / "checkpoint"))


def latest_step(folder):
    latest = tf.train.latest_checkpoint(folder)
    return int(latest.rsplit("-", 1)[1]) if latest else -1


@pytest.mark.long
def test_two_workers_from_one_address_train_as_one_process_with_two_replicas(
        corpus, tmp_path):
    save = str(tmp_path / "node2")
    procs, logs = start_nodes(corpus, [0, 1], free_port(), save, save)
    codes = wait_all(procs, 400)
    texts = [open(log).read() for log in logs]
    assert codes == [0, 0], texts[0][-3000:] + texts[1][-3000:]
    assert "cluster: met at tcp://127.0.0.1:" in texts[0]
    assert "worker 0 of 2 (chief)" in texts[0] and "worker 1 of 2 (not chief)" in texts[1]
    assert "step 12/40" in texts[0] and latest_step(save) == 12
    single = str(tmp_path / "single")
    argv = readme_argv(corpus, SINGLE, updates=12, save=single,
                       init=corpus[0]["init_checkpoint"]) + ["--distributed-world-size", "2"]
    run_train_py(argv)
    both = tf.train.load_checkpoint(tf.train.latest_checkpoint(save))
    one = tf.train.load_checkpoint(tf.train.latest_checkpoint(single))
    for name, _ in tf.train.list_variables(tf.train.latest_checkpoint(single)):
        np.testing.assert_allclose(both.get_tensor(name), one.get_tensor(name), atol=1e-6,
                                   err_msg=name)
    # The chief evaluates the whole --valid-subset split on its own device.
    with open(os.path.join(save, "eval_results.json")) as f:
        report = json.load(f)
    test_rows = sum(hdf5_shards.describe_shard(path).num_examples
                    for path in distributed_bert.split_files(corpus[1], "test"))
    assert report["num_sequences"] == test_rows and report["global_step"] == 12


STOPPED = re.compile(r"stopped: SIGTERM: training stopped at step (\d+) of 40, saved in "
                     r"(\S+); run the same command again to resume from there$")


@pytest.mark.long
def test_sigterm_to_one_worker_stops_both_at_one_saved_step_and_the_rerun_finishes(
        corpus, tmp_path):
    save = str(tmp_path / "node2")
    procs, logs = start_nodes(corpus, [0, 1], free_port(), save, save, updates=40)
    try:
        deadline = time.time() + 300
        while time.time() < deadline and all(p.poll() is None for p in procs):
            if "step 6/40" in open(logs[0]).read():
                break
            time.sleep(0.05)
        procs[1].send_signal(signal.SIGTERM)
    finally:
        codes = wait_all(procs, 200)
    texts = [open(log).read() for log in logs]
    assert codes == [143, 143], texts[0][-3000:] + texts[1][-3000:]
    lines = [text.strip().splitlines()[-1] for text in texts]
    assert lines[0] == lines[1], lines
    match = STOPPED.match(lines[0])
    assert match, lines[0]
    step = int(match.group(1))
    assert 6 <= step < 40 and latest_step(save) == step
    assert match.group(2) == os.path.join(save, "model.ckpt-%d" % step)
    # The same commands again (a requeue) resume there and reach the planned step.
    procs, logs = start_nodes(corpus, [0, 1], free_port(), save, save, updates=40)
    codes = wait_all(procs, 400)
    chief = open(logs[0]).read()
    assert codes == [0, 0], chief[-3000:]
    assert "resuming from %s" % os.path.join(save, "model.ckpt-%d" % step) in chief
    assert latest_step(save) == 40
