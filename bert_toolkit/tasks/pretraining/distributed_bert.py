"""Distributed_BERT's train.py command lines on run_pretraining.py's engine.

Distributed_BERT ("BERT at a University: Distributed GPU training on
Heterogeneous Systems", Ding, Botzer, Weninger 2020; a fairseq-style trainer)
pre-trains on NVIDIA's hdf5 shards with flags such as

    train.py --task bert --data preprocessing/test_128/ --dict vocab.txt
      --config_file bert_config.json --max-sentences 32 --update-freq 4
      --max-update 900000 --total-num-update 1000000 --warmup-updates 10000
      --lr 0.0001 --weight-decay 0.01 --valid-subset test --save-dir node1gpu4
      --distributed-init-method tcp://10.0.0.1:11111 --distributed-world-size 16
      --distributed-gpus 4 --distributed-rank 4

`DistributedBertOptions` has every flag of its README's usage text with its
defaults; `pretraining_options` maps them onto run_pretraining.py's
PretrainingOptions, and `run` trains with them. What maps, and how:

    --data DIR                the files of DIR whose names hold --train-subset
                              train, the --valid-subset ones evaluate (after
                              training; --disable-validation: none); sequence
                              length and predictions are read from the shards
    --dict, --config_file     the vocabulary (checked), bert_config.json
    --max-sentences N         per device: --train_batch_size (--max-tokens T:
                              T // sequence length); --max-sentences-valid
    --update-freq N           --gradient_accumulation_steps
    --lr, --warmup-updates, --total-num-update
                              --learning_rate, --num_warmup_steps,
                              --num_train_steps (the schedule: linear warmup,
                              then linear decay to 0 at --total-num-update, as
                              its PolynomialDecayScheduler with its defaults)
    --max-update, --max-epoch training stops there (--stop_at_step)
    --weight-decay            --weight_decay_rate (AdamW)
    --save-dir, --restore-file  --output_dir (a rerun resumes its latest
                              checkpoint, as checkpoint_last.pt does), and a
                              TensorFlow checkpoint to start from
    --save-interval-updates, --keep-interval-updates
                              --save_checkpoints_steps, --keep_checkpoint_max
    --cpu, --device-id        CPU replicas, or the GPU a one-GPU run uses
    --distributed-world-size, --distributed-gpus, --distributed-rank,
    --distributed-init-method tcp://HOST:PORT
                              GPUs of this node; with the address a cluster of
                              world-size / gpus workers, this node's index its
                              first rank / gpus: --cluster=tcp://HOST:PORT
                              (engine/rendezvous.py)
    --seed, --log-interval    --seed, --log_every_n_steps

Flags for what PyTorch's data loading and DistributedDataParallel need
(--num-workers, --fast-stat-sync, --ddp-backend, --bucket-cap-mb, ...) are
accepted and each says in one line that it is unneeded; a value this engine
cannot honour (another optimizer, per-epoch learning rates, --use-bmuf) is one
error line. Its checkpoints are the toolkit's (model.ckpt-N in --save-dir),
which every script loads.
"""

import ast
import collections
import dataclasses
import glob
import math
import os
from typing import Optional

from bert_toolkit import console
from bert_toolkit.engine import hdf5_shards
from bert_toolkit.errors import InputError
from bert_toolkit.options import Options, option
from bert_toolkit.tasks.pretraining import task
from bert_toolkit.tasks.pretraining.options import PretrainingOptions

_UNNEEDED = "accepted, unneeded here"


@dataclasses.dataclass(frozen=True)
class DistributedBertOptions(Options):
    """train.py: Distributed_BERT's flags and defaults (its README's usage text),
    written with underscores (the command line takes its hyphens too)."""
    # -- its general flags
    no_progress_bar: bool = option(False, "%s: the progress line is one line anyway."
                                   % _UNNEEDED)
    seed: int = option(19940802, "Random seed of initialisation, dropout and shuffling.")
    cpu: bool = option(False, "Train on the CPU (one replica per node).")
    log_interval: int = option(1, "Log loss, learning rate and examples/s every N updates.",
                               minimum=1)
    log_format: str = option("simple", "%s." % _UNNEEDED, choices=("none", "simple"))
    # -- dataset and data loading
    num_workers: int = option(0, "%s: tf.data reads the shards in the training process."
                              % _UNNEEDED, minimum=0)
    max_tokens: Optional[int] = option(
        None, "Tokens per device batch: max_tokens // sequence length sentences (when "
        "--max_sentences is not given, or is more).", minimum=1)
    max_sentences: Optional[int] = option(
        None, "Sentences per device per micro-batch (alias --batch_size).", minimum=1)
    required_batch_size_multiple: int = option(
        1, "%s: batches are always full." % _UNNEEDED, minimum=1)
    train_subset: str = option("train", "The training split: the files of --data whose "
                               "names contain it.")
    valid_subset: str = option(
        "valid", "The evaluation split(s), comma-separated: the files of --data whose names "
        "contain one; evaluated after training.")
    validate_interval: int = option(1, "%s: the --valid_subset split is evaluated after "
                                    "training." % _UNNEEDED)
    disable_validation: bool = option(False, "Train only; no evaluation.")
    max_tokens_valid: Optional[int] = option(
        None, "Tokens per device batch in evaluation (default: --max_tokens).", minimum=1)
    max_sentences_valid: Optional[int] = option(
        None, "Sentences per device batch in evaluation (default: --max_sentences).",
        minimum=1)
    curriculum: int = option(0, "%s: the stream is shuffled from the start." % _UNNEEDED)
    task: str = option("bert", "The task: bert (masked LM and next sentence).")
    data: Optional[str] = option(
        None, "Folder of NVIDIA's hdf5 shards (..._training_N.hdf5, ..._test_N.hdf5), or "
        "one shard.", required=True)
    dict: Optional[str] = option(None, "vocab.txt of the model (checked to exist).")
    config_file: Optional[str] = option(None, "bert_config.json of the model to train.",
                                        required=True)
    max_pred_length: int = option(512, "%s: the predictions per sequence are read from the "
                                  "shards." % _UNNEEDED)
    num_file: int = option(0, "Use only the first N files of each split (0: all).",
                           minimum=0)
    # -- distributed training
    distributed_world_size: Optional[int] = option(
        None, "GPUs over all nodes (default: the GPUs visible here); with --cpu, replicas.",
        minimum=1)
    distributed_rank: int = option(
        0, "Global rank of this node's first GPU (0, 4, 8, ... with 4 GPUs per node).",
        minimum=0)
    distributed_gpus: int = option(4, "GPUs this node trains on.", minimum=1)
    distributed_backend: str = option("nccl", "%s: NCCL on GPUs, ring collectives on CPUs."
                                      % _UNNEEDED)
    distributed_init_method: Optional[str] = option(
        None, "tcp://HOST:PORT where the nodes meet: rank 0's node listens there.")
    device_id: int = option(0, "The GPU of a one-GPU run (alias --local_rank).", minimum=0)
    distributed_no_spawn: bool = option(False, "%s: one process mirrors its node's GPUs."
                                        % _UNNEEDED)
    ddp_backend: str = option("c10d", "%s: TensorFlow's all-reduce." % _UNNEEDED)
    bucket_cap_mb: int = option(25, "%s: TensorFlow's all-reduce." % _UNNEEDED)
    fix_batches_to_gpus: bool = option(False, "%s: every replica reads its slice of one "
                                       "stream." % _UNNEEDED)
    find_unused_parameters: bool = option(False, "%s: unused variables get no gradient."
                                          % _UNNEEDED)
    fast_stat_sync: bool = option(False, "%s: the logged statistics ride on the gradients' "
                                  "all-reduce." % _UNNEEDED)
    # -- optimization
    max_epoch: int = option(0, "Stop after this many passes over the training split "
                            "(alias --me; 0: no limit).", minimum=0)
    max_update: int = option(0, "Stop at this update (alias --mu; 0: --total_num_update).",
                             minimum=0)
    clip_norm: float = option(25.0, "Clip gradients to this global norm (--clip_norm; 0: "
                              "no clipping).", minimum=0)
    update_freq: str = option("1", "Micro-batches per update (gradient accumulation).")
    lr: str = option("0.25", "Peak learning rate (alias --learning_rate).")
    min_lr: float = option(-1.0, "%s: training stops at --max_update." % _UNNEEDED)
    use_bmuf: bool = option(False, "Not supported: every update is one synchronous "
                            "all-reduce.")
    optimizer: str = option("adam", "adam: AdamW with decoupled weight decay.")
    adam_betas: str = option("(0.9, 0.999)", "Adam's betas; (0.9, 0.999) is the one "
                             "supported.")
    adam_eps: float = option(1e-8, "Adam's epsilon (this engine's AdamW uses Google's 1e-6; "
                             "the value is said once).")
    weight_decay: float = option(0.0, "Decoupled weight decay (alias --wd).")
    lr_scheduler: str = option("PolynomialDecayScheduler", "The learning-rate schedule.")
    force_anneal: Optional[int] = option(None, "%s: the schedule is by update (alias --fa)."
                                         % _UNNEEDED)
    warmup_updates: int = option(0, "Updates of linear warmup.", minimum=0)
    end_learning_rate: float = option(0.0, "The rate at --total_num_update; 0 is the one "
                                      "supported.")
    power: float = option(1.0, "The decay's power; 1 (linear) is the one supported.")
    total_num_update: int = option(1000000, "The update at which the rate reaches 0.",
                                   minimum=1)
    # -- checkpoints
    save_dir: str = option("checkpoints", "Where checkpoints (model.ckpt-N), the training "
                           "log and eval_results.json are written.")
    restore_file: str = option(
        "checkpoint_last.pt", "A TensorFlow checkpoint to start from; the default resumes "
        "--save_dir's latest checkpoint, as Distributed_BERT's checkpoint_last.pt does.")
    reset_dataloader: bool = option(False, "%s." % _UNNEEDED)
    reset_lr_scheduler: bool = option(False, "%s." % _UNNEEDED)
    reset_meters: bool = option(False, "%s." % _UNNEEDED)
    reset_optimizer: bool = option(False, "%s." % _UNNEEDED)
    optimizer_overrides: str = option("{}", "%s." % _UNNEEDED)
    save_interval: int = option(1, "%s: checkpoints are saved every "
                                "--save_interval_updates." % _UNNEEDED)
    save_interval_updates: int = option(0, "Save a checkpoint every N updates (0: every "
                                        "1000).", minimum=0)
    keep_interval_updates: int = option(-1, "Checkpoints kept (-1: 5).")
    keep_last_epochs: int = option(-1, "%s." % _UNNEEDED)
    no_save: bool = option(False, "%s: checkpoints are always saved (a stopped run resumes "
                           "from them)." % _UNNEEDED)
    no_epoch_checkpoints: bool = option(False, "%s." % _UNNEEDED)
    no_last_checkpoints: bool = option(False, "%s." % _UNNEEDED)
    no_save_optimizer_state: bool = option(False, "%s." % _UNNEEDED)
    best_checkpoint_metric: str = option("loss", "%s." % _UNNEEDED)
    maximize_best_checkpoint_metric: bool = option(False, "%s." % _UNNEEDED)
    # -- this toolkit's own
    cluster_timeout_seconds: int = option(
        300, "With --distributed_init_method: how long the nodes wait for each other at "
        "start; then a missing node ends the others with one line.", minimum=1)

    def check(self):
        if self.task != "bert":
            raise InputError("--task=%s: train.py here pre-trains BERT (--task bert)"
                             % self.task)
        if self.max_sentences is None and self.max_tokens is None:
            raise InputError("give the batch size with --max-sentences (or --max-tokens)")


# Its flags that only PyTorch's machinery needed: name -> value that says nothing.
UNNEEDED_DEFAULTS = {
    field.name: field.default for field in dataclasses.fields(DistributedBertOptions)
    if field.metadata["help"].startswith(_UNNEEDED)}

Layout = collections.namedtuple("Layout", ["use_gpu", "num_gpu_cores", "num_cpu_replicas",
                                           "cluster", "world_size", "rank", "replicas"])
"""Where the replicas run: the device settings, the cluster (local, or the
tcp:// address with this worker's world size and rank), and the replicas of
the whole run."""


def split_files(data, split, num_file=0):
    """The files of `data` (a folder, or one file) whose names contain `split`,
    sorted; the first `num_file` with num_file > 0."""
    if os.path.isdir(data):
        names = sorted(n for n in os.listdir(data) if split in n
                       and os.path.isfile(os.path.join(data, n)))
        files = [os.path.join(data, n) for n in names]
    else:
        files = [data] if split in os.path.basename(data) else []
    return files[:num_file] if num_file else files


def data_splits(options):
    """(training shards, evaluation shards) of --data; InputError naming the split
    that has no file."""
    if not os.path.exists(options.data):
        raise InputError("--data=%s: no such folder or file" % options.data)
    train = split_files(options.data, options.train_subset, options.num_file)
    if not train:
        raise InputError("--data=%s: no file whose name contains %r (the --train-subset "
                         "split)" % (options.data, options.train_subset))
    valid = []
    if not options.disable_validation:
        for split in [s.strip() for s in options.valid_subset.split(",") if s.strip()]:
            files = split_files(options.data, split, options.num_file)
            if not files:
                raise InputError("--data=%s: no file whose name contains %r (the "
                                 "--valid-subset split; --disable-validation trains without "
                                 "one)" % (options.data, split))
            valid.extend(f for f in files if f not in valid)
    for path in train + valid:
        if not hdf5_shards.is_hdf5(path):
            raise InputError("%s: not an hdf5 shard (--data holds NVIDIA's hdf5 shards)"
                             % path)
    return train, valid


def one_value(text, flag, kind):
    """The one number of a Distributed_BERT list flag ("4", "4,4", "[0.0001]");
    InputError for a list of several values (they change per epoch there)."""
    try:
        values = [kind(v) for v in str(text).strip("[]() ").split(",") if v.strip()]
    except ValueError:
        values = []
    if not values:
        raise InputError("--%s=%s: expected a number" % (flag, text))
    if len(set(values)) > 1:
        raise InputError("--%s=%s: a value per epoch is not supported here; give one number"
                         % (flag, text))
    return values[0]


def device_layout(options, visible_gpus):
    """Where the replicas run: a Layout (`visible_gpus`: a callable counting the
    GPUs TensorFlow sees, called only when the default world size needs it)."""
    if options.distributed_init_method:
        size, gpus, rank = (options.distributed_world_size or options.distributed_gpus,
                            options.distributed_gpus, options.distributed_rank)
        if size % gpus or rank % gpus or rank >= size:
            raise InputError("--distributed-world-size=%d --distributed-gpus=%d "
                             "--distributed-rank=%d: expected a world size that is nodes x "
                             "GPUs per node, and this node's first rank (0, %d, ...)"
                             % (size, gpus, rank, gpus))
        workers = size // gpus
        per_node = 1 if options.cpu else gpus
        return Layout(not options.cpu, gpus, 1, options.distributed_init_method, workers,
                      rank // gpus, per_node * workers)
    if options.cpu:
        replicas = options.distributed_world_size or 1
        return Layout(False, 1, replicas, "local", 1, 0, replicas)
    available = visible_gpus()
    if not available:
        raise InputError("no GPU is visible to TensorFlow: add --cpu to train on the CPU "
                         "(or install tensorflow[and-cuda] and check CUDA_VISIBLE_DEVICES)")
    gpus = options.distributed_world_size or available
    return Layout(True, gpus, 1, "local", 1, 0, gpus)


def batch_sizes(options, max_seq_length):
    """(train, eval) sentences per device batch: --max-sentences, or what
    --max-tokens holds of rows of `max_seq_length` tokens (the fewer of the two);
    evaluation's from their -valid flags, which default to them."""
    def sentences(count, tokens, flag):
        by_tokens = tokens // max_seq_length if tokens else None
        if by_tokens == 0:
            raise InputError("--%s=%d holds no row of %d tokens" % (flag, tokens,
                                                                    max_seq_length))
        return min(v for v in (count, by_tokens) if v is not None)
    train = sentences(options.max_sentences, options.max_tokens, "max-tokens")
    return train, sentences(options.max_sentences_valid or options.max_sentences,
                            options.max_tokens_valid or options.max_tokens, "max-tokens-valid")


def check_optimizer(options):
    """InputError for optimizer settings this engine cannot honour; returns the
    lines saying what differs but still trains."""
    if options.optimizer != "adam":
        raise InputError("--optimizer=%s: train.py here trains with adam (AdamW)"
                         % options.optimizer)
    if options.lr_scheduler != "PolynomialDecayScheduler":
        raise InputError("--lr-scheduler=%s: train.py here has PolynomialDecayScheduler"
                         % options.lr_scheduler)
    if options.end_learning_rate != 0.0 or options.power != 1.0:
        raise InputError("--end-learning-rate=%g --power=%g: the schedule here decays "
                         "linearly to 0 (--end-learning-rate 0 --power 1)"
                         % (options.end_learning_rate, options.power))
    if options.use_bmuf:
        raise InputError("--use-bmuf: not supported; every update here is one synchronous "
                         "all-reduce")
    try:
        betas = tuple(float(b) for b in ast.literal_eval(options.adam_betas))
    except (ValueError, SyntaxError, TypeError):
        betas = None
    if betas != (0.9, 0.999):
        raise InputError("--adam-betas=%s: AdamW here has betas (0.9, 0.999)"
                         % options.adam_betas)
    notes = []
    if options.adam_eps != 1e-6:
        notes.append("--adam-eps=%g: AdamW here uses epsilon 1e-6 (Google's BERT)"
                     % options.adam_eps)
    return notes


def restore_checkpoint(options):
    """--restore-file as an init_checkpoint (None: resume --save-dir's own)."""
    if options.restore_file in ("", "checkpoint_last.pt"):
        return None
    if options.restore_file.endswith(".pt"):
        raise InputError("--restore-file=%s: a PyTorch checkpoint cannot be read here; give "
                         "a TensorFlow checkpoint (a bert_model.ckpt prefix or its folder; "
                         "convert_hf_checkpoint.py converts a Hugging Face folder), or leave "
                         "the default to resume --save-dir" % options.restore_file)
    return options.restore_file


def stop_step(options, num_train_examples, global_batch):
    """The update training stops at: --max-update, --max-epoch's updates, and
    --total-num-update (after which the rate is 0), whichever comes first."""
    stops = [options.total_num_update]
    if options.max_update:
        stops.append(options.max_update)
    if options.max_epoch:
        stops.append(max(1, options.max_epoch * num_train_examples // global_batch))
    return min(stops)


def pretraining_options(options, visible_gpus):
    """(PretrainingOptions, notes): run_pretraining.py's settings for these flags,
    and the lines to print about flags accepted without effect."""
    train, valid = data_splits(options)
    if options.dict and not os.path.isfile(options.dict):
        raise InputError("--dict=%s: no such file" % options.dict)
    infos = [hdf5_shards.describe_shard(path) for path in train]
    first = infos[0]
    valid_infos = [hdf5_shards.describe_shard(path) for path in valid]
    for info in infos[1:] + valid_infos:
        if (info.max_seq_length, info.max_predictions_per_seq) != (
                first.max_seq_length, first.max_predictions_per_seq):
            raise InputError("%s: rows of %d tokens and %d predictions, but %s has %d and %d: "
                             "give --data one phase's shards" % (
                                 info.path, info.max_seq_length, info.max_predictions_per_seq,
                                 first.path, first.max_seq_length,
                                 first.max_predictions_per_seq))
    layout = device_layout(options, visible_gpus)
    train_batch, eval_batch = batch_sizes(options, first.max_seq_length)
    accumulation = one_value(options.update_freq, "update-freq", int)
    learning_rate = one_value(options.lr, "lr", float)
    notes = check_optimizer(options)
    num_examples = sum(info.num_examples for info in infos)
    stop = stop_step(options, num_examples, train_batch * layout.replicas * accumulation)
    eval_examples = sum(info.num_examples for info in valid_infos)
    settings = dict(
        input_file=",".join(glob.escape(p) for p in train),
        eval_input_file=",".join(glob.escape(p) for p in valid) or None,
        bert_config_file=options.config_file, init_checkpoint=restore_checkpoint(options),
        max_seq_length=first.max_seq_length,
        max_predictions_per_seq=first.max_predictions_per_seq,
        output_dir=options.save_dir, do_train=True, do_eval=bool(valid),
        train_batch_size=train_batch, eval_batch_size=eval_batch,
        max_eval_steps=max(1, math.ceil(eval_examples / eval_batch)),
        gradient_accumulation_steps=accumulation, learning_rate=learning_rate,
        num_train_steps=options.total_num_update, stop_at_step=stop,
        num_warmup_steps=options.warmup_updates, weight_decay_rate=options.weight_decay,
        clip_norm=options.clip_norm,
        seed=options.seed, log_every_n_steps=options.log_interval,
        save_checkpoints_steps=options.save_interval_updates or 1000,
        use_gpu=layout.use_gpu, num_gpu_cores=layout.num_gpu_cores,
        num_cpu_replicas=layout.num_cpu_replicas, cluster=layout.cluster,
        cluster_world_size=layout.world_size if layout.cluster != "local" else 0,
        cluster_rank=layout.rank if layout.cluster != "local" else 0,
        cluster_timeout_seconds=options.cluster_timeout_seconds)
    if options.keep_interval_updates > 0:
        settings["keep_checkpoint_max"] = options.keep_interval_updates
    notes += ["%s: %s" % (as_given(name, getattr(options, name)), _UNNEEDED)
              for name, default in UNNEEDED_DEFAULTS.items()
              if getattr(options, name) != default]
    return PretrainingOptions(**settings), notes


def as_given(name, value):
    """A Distributed_BERT flag as its users write it: --fast-stat-sync, --num-workers=4."""
    flag = "--" + name.replace("_", "-")
    return flag if value is True else "%s=%s" % (flag, value)


def describe(pretraining, num_shards):
    """The line saying what train.py runs: run_pretraining.py's flags."""
    shown = ["output_dir", "train_batch_size", "gradient_accumulation_steps", "learning_rate",
             "num_warmup_steps", "num_train_steps", "stop_at_step", "weight_decay_rate",
             "max_seq_length", "max_predictions_per_seq", "seed"]
    shown += (["use_gpu", "num_gpu_cores"] if pretraining.use_gpu else ["num_cpu_replicas"])
    if pretraining.cluster != "local":
        shown += ["cluster", "cluster_world_size", "cluster_rank"]
    flags = " ".join("--%s=%s" % (name, getattr(pretraining, name)) for name in shown)
    return "train.py runs run_pretraining.py on %d hdf5 shard(s) (evaluating %s) with %s" % (
        num_shards, "its --valid-subset split" if pretraining.do_eval else "nothing", flags)


def run(options, visible_gpus=None):
    """train.py: Distributed_BERT's flags mapped (pretraining_options), then
    run_pretraining.py's run; returns its launch.Report."""
    if visible_gpus is None:
        def visible_gpus():
            from bert_toolkit.engine import distribution
            return distribution.visible_gpu_count()
    if options.device_id and not options.cpu and not options.distributed_init_method \
            and options.distributed_world_size == 1 and "CUDA_VISIBLE_DEVICES" not in os.environ:
        # The one GPU of a one-GPU run (read when TensorFlow first lists its GPUs).
        os.environ["CUDA_VISIBLE_DEVICES"] = str(options.device_id)
    pretraining, notes = pretraining_options(options, visible_gpus)
    for note in notes:
        console.info(note)
    console.info(describe(pretraining, len(pretraining.input_file.split(","))))
    return task.run(pretraining)
