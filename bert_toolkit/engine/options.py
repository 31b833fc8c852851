"""The settings the entry scripts share, one class per concern.

    ModelOptions      the pre-trained model: config, checkpoint, sequence length
    TokenizerOptions  the WordPiece vocabulary and casing
    DeviceOptions     GPUs or CPU replicas
    TpuOptions        Google's TPU flags, accepted so old command lines parse
    RunOptions        a training run: output, batches, optimizer, precision, cluster
    FineTuningOptions a fine-tuning run: data, epochs, prediction, export, model selection
    PoolingOptions    what a one-vector-per-example head reads
    ServingCompatOptions  an export that answers another project's clients

A task's options class inherits the concerns it uses and adds its own
(bert_toolkit/tasks/*/options.py); the scripts' flags are made from those
fields (bert_toolkit/cli/flags.py). Field names are Google's and the
multi-GPU fork's flag names. Checks that need the file system (does
output_dir exist as a file?) live in engine/output_dir.py. Batch sizes are
per replica (see engine/distribution.py).
"""

import dataclasses
import os
from typing import Optional

from bert_toolkit.errors import InputError
from bert_toolkit.model import POOLING_MODES
from bert_toolkit.options import Options, option

PRECISIONS = ("fp32", "fp16", "bf16", "auto")
MIXED_PRECISION_MODES = ("casts", "graph_rewrite")
OPTIMIZERS = ("adamw", "lamb")
CLUSTER_MODES = ("auto", "tf_config", "slurm", "local")
SERVING_COMPAT = ("bert_multi_gpu",)


@dataclasses.dataclass(frozen=True)
class ModelOptions(Options):
    bert_config_file: Optional[str] = option(
        None, "bert_config.json of the pre-trained model (the architecture).")
    init_checkpoint: Optional[str] = option(
        None, "Checkpoint (prefix or folder) to start from, usually the pre-trained "
        "bert_model.ckpt. A checkpoint in output_dir wins: re-running a command resumes it.")
    max_seq_length: int = option(
        128, "Tokens per sequence after WordPiece, with [CLS]/[SEP]; longer inputs are "
        "truncated, shorter ones padded.", minimum=1)

    def check(self):
        if self.max_seq_length < 2:
            raise InputError("--max_seq_length must be >= 2 (it holds [CLS] and [SEP]), "
                             "got %d" % self.max_seq_length)


@dataclasses.dataclass(frozen=True)
class TokenizerOptions(Options):
    vocab_file: Optional[str] = option(None, "vocab.txt the model was trained with.")
    do_lower_case: bool = option(True, "Lower-case and strip accents (True for uncased "
                                 "models).")


@dataclasses.dataclass(frozen=True)
class DeviceOptions(Options):
    use_gpu: bool = option(False, "Run on GPUs (MirroredStrategy with NCCL when "
                           "num_gpu_cores > 1).")
    num_gpu_cores: int = option(1, "GPUs to use with --use_gpu.", minimum=1)
    num_cpu_replicas: int = option(1, "Without --use_gpu: replicas on the CPU (for machines "
                                   "without GPUs and for testing the multi-replica path).",
                                   minimum=1)


@dataclasses.dataclass(frozen=True)
class TpuOptions(Options):
    """Google's TPU flags: accepted so its command lines parse; TPUs are not supported."""
    use_tpu: bool = option(False, "Not supported; kept so old command lines parse.")
    tpu_name: Optional[str] = option(None, "TPU only; accepted and ignored.")
    tpu_zone: Optional[str] = option(None, "TPU only; accepted and ignored.")
    gcp_project: Optional[str] = option(None, "TPU only; accepted and ignored.")
    master: Optional[str] = option(None, "TPU only; accepted and ignored.")
    num_tpu_cores: int = option(8, "TPU only; accepted and ignored.")

    def tpu_settings_given(self):
        """The TPU settings that differ from their defaults (names)."""
        return [field.name for field in dataclasses.fields(TpuOptions)
                if getattr(self, field.name) != field.default]


@dataclasses.dataclass(frozen=True)
class RunOptions(ModelOptions, DeviceOptions, TpuOptions):
    """What every training run needs besides the model and the devices."""
    output_dir: Optional[str] = option(
        None, "Where checkpoints, results and exports are written.", required=True)
    do_train: bool = option(False, "Train (resumes from output_dir if it has a checkpoint).")
    do_eval: bool = option(False, "Evaluate on the dev set.")
    train_batch_size: int = option(
        32, "Examples per replica per micro-batch. The global batch of one update is "
        "train_batch_size x replicas x gradient_accumulation_steps.", minimum=1)
    eval_batch_size: int = option(8, "Examples per replica in evaluation.", minimum=1)
    learning_rate: float = option(5e-5, "Peak learning rate of AdamW/LAMB.")
    save_checkpoints_steps: int = option(
        1000, "Save a checkpoint every this many optimizer steps.", minimum=1)
    keep_checkpoint_max: int = option(5, "Checkpoints kept in output_dir.", minimum=1)
    iterations_per_loop: int = option(1000, "TPU only in the original code; accepted and "
                                      "ignored.")
    log_every_n_steps: int = option(
        50, "Log loss, learning rate and examples/s every this many steps.", minimum=1)
    gradient_accumulation_steps: int = option(
        1, "Micro-batches summed into one optimizer update.", minimum=1)
    optimizer: str = option("adamw", "The optimizer.", choices=OPTIMIZERS)
    weight_decay_rate: float = option(
        0.01, "Decoupled weight decay (not applied to LayerNorm and biases).")
    clip_norm: float = option(
        1.0, "Gradients are scaled down to this global norm when above it (Google's 1.0); "
        "0: no clipping.", minimum=0)
    seed: int = option(12345, "Random seed of initialisation, dropout, shuffling.")
    precision: str = option(
        "fp32", "Training compute precision (variables stay fp32). fp16 uses dynamic loss "
        "scaling; bf16 needs none. auto: on GPUs bf16 on Ampere and newer, else fp16; on a "
        "CPU whichever runs faster here: bf16 if its matmuls measure at least 1.1x fp32's "
        "(timed at start-up once per machine and TensorFlow, then cached; a CPU without "
        "bf16 units is not timed and runs fp32). The devices line shows the figures.",
        choices=PRECISIONS)
    use_fp16: bool = option(False, "Alias of --precision=fp16 (multi-GPU fork).")
    mixed_precision: str = option(
        "casts", "How training runs in --precision=fp16/bf16: casts (the model casts "
        "each matmul's inputs; softmax, layer norm and the losses stay fp32) or "
        "graph_rewrite (the fp32 graph is rewritten by TensorFlow's automatic mixed "
        "precision pass when the training session starts: fp16 on GPUs, the oneDNN "
        "bf16 pass on CPUs; fp16 keeps dynamic loss scaling). Evaluation, prediction and "
        "the export use --inference_precision either way.", choices=MIXED_PRECISION_MODES)
    inference_precision: str = option(
        "fp32", "Compute precision of evaluation, prediction and the exported SavedModel. "
        "auto: as --precision=auto, but on a CPU bf16 must measure at least 1.3x fp32 "
        "(inference gains less from faster matmuls than training).",
        choices=PRECISIONS)
    use_xla: bool = option(False, "Compile the graph with XLA (JIT).")
    cluster: str = option(
        "auto", "Where the cluster of several workers comes from: tf_config (TF_CONFIG, as "
        "Kubeflow's TFJob sets it), slurm (the Slurm job step this task runs in, one worker "
        "per task), tcp://HOST:PORT (one address: worker 0 listens there, the others report "
        "to it; with --cluster_world_size and --cluster_rank), local (one process). auto: "
        "TF_CONFIG if set, else slurm in a step of several tasks, else local.")
    cluster_port_base: int = option(
        8888, "--cluster=slurm: the port of a node's first task (the next task on the node "
        "takes the next port).")
    cluster_world_size: int = option(
        0, "--cluster=tcp://HOST:PORT: the number of workers (processes: one per node, each "
        "mirroring its --num_gpu_cores GPUs), the same on every worker.", minimum=0)
    cluster_rank: int = option(
        0, "--cluster=tcp://HOST:PORT: this worker's rank, 0..cluster_world_size-1; rank 0 "
        "runs on the machine HOST names and listens there.", minimum=0)
    cluster_timeout_seconds: int = option(
        300, "--cluster=tcp://HOST:PORT: how long the workers wait for each other at start; "
        "after it a missing worker ends the others with one line.", minimum=1)
    step_timeout_seconds: Optional[int] = option(
        None, "End with one error line when no training step finishes for this many "
        "seconds (the first step: at least 600 s): a lost worker otherwise leaves the "
        "others of a cluster waiting forever. Default: on a cluster of 2+ workers, "
        "max(60 s, 10x the longest step so far), 600 s for the first step; in one "
        "process, wait. 0: wait.",
        minimum=0)
    matmul_peak_tflops: float = option(
        0.0, "The device's matmul peak in the training precision, in TFLOP/s, for the MFU "
        "the training log shows (e.g. 312 for an A100 in bf16). 0: measured at start-up "
        "with a matmul sized to TensorFlow's threads (1024^3 on one, 2048^3 on eight).")

    def check(self):
        if not self.bert_config_file:
            raise InputError("--bert_config_file is required")
        if self.use_tpu:
            raise InputError("--use_tpu: TPUs are not supported by this toolkit; use "
                             "--use_gpu or CPUs")
        if self.learning_rate <= 0:
            raise InputError("--learning_rate must be > 0, got %g" % self.learning_rate)
        if self.matmul_peak_tflops < 0:
            raise InputError("--matmul_peak_tflops must be >= 0 (0: measure it), got %g"
                             % self.matmul_peak_tflops)
        if self.weight_decay_rate < 0:
            raise InputError("--weight_decay_rate must be >= 0, got %g"
                             % self.weight_decay_rate)
        if self.use_fp16 and self.precision not in ("fp32", "fp16"):
            raise InputError("--use_fp16 contradicts --precision=%s (use_fp16 is an alias of "
                             "--precision=fp16)" % self.precision)
        self.check_cluster()

    def check_cluster(self):
        """--cluster is one of CLUSTER_MODES or tcp://HOST:PORT, the latter with its
        world size and rank (and they only with it)."""
        if self.cluster.startswith("tcp://"):
            if self.cluster_world_size < 1:
                raise InputError("--cluster=%s needs --cluster_world_size=N, the number of "
                                 "workers" % self.cluster)
            if self.cluster_rank >= self.cluster_world_size:
                raise InputError("--cluster_rank=%d is not in 0..%d (--cluster_world_size=%d)"
                                 % (self.cluster_rank, self.cluster_world_size - 1,
                                    self.cluster_world_size))
        elif self.cluster not in CLUSTER_MODES:
            raise InputError("--cluster=%s: expected one of %s, or tcp://HOST:PORT"
                             % (self.cluster, ", ".join(CLUSTER_MODES)))
        elif self.cluster_world_size or self.cluster_rank:
            raise InputError("--cluster_world_size and --cluster_rank go with "
                             "--cluster=tcp://HOST:PORT (got --cluster=%s)" % self.cluster)

    @property
    def training_precision(self):
        """The precision flag with the fork's --use_fp16 alias folded in."""
        return "fp16" if self.use_fp16 else self.precision

    @property
    def evaluates_during_training(self):
        return False

    def require_an_action(self, *actions):
        """InputError unless one of the boolean settings `actions` is on."""
        if not any(getattr(self, name) for name in actions):
            raise InputError("nothing to do: give %s" % " and/or ".join(
                ", ".join("--" + name for name in actions).rsplit(", ", 1)))


@dataclasses.dataclass(frozen=True)
class FineTuningOptions(RunOptions, TokenizerOptions):
    """A fine-tuning run: epochs over a task's data, prediction, export, model selection."""
    data_dir: Optional[str] = option(None, "Folder with the task's input files.")
    do_predict: bool = option(False, "Predict on the test set.")
    predict_batch_size: int = option(8, "Examples per prediction batch.", minimum=1)
    num_train_epochs: float = option(3.0, "Passes over the training set.")
    warmup_proportion: float = option(
        0.1, "Fraction of optimizer steps with linear learning-rate warmup.")
    save_for_serving: bool = option(
        False, "Export a SavedModel for TensorFlow Serving to output_dir/serving/<version>/ "
        "from the latest checkpoint (after training if --do_train, else from the existing "
        "checkpoint).")
    cache_dir: Optional[str] = option(
        None, "Where converted TFRecord features are kept (default: output_dir).")
    eval_every_n_steps: int = option(
        0, "With --do_train --do_eval: evaluate the dev set every N optimizer steps during "
        "training (0: only after training). Metrics go to the console, TensorBoard and "
        "output_dir/eval_history.jsonl.", minimum=0)
    eval_every_epoch: bool = option(
        False, "With --do_train --do_eval: evaluate the dev set after every epoch.")
    best_metric: Optional[str] = option(
        None, "With evaluation during training: the report entry that picks the best "
        "checkpoint (e.g. accuracy, macro_f1, entity_f1, mrr@10; higher is better, except "
        "for losses such as eval_loss). Default: the task's first summary metric.")
    early_stopping_patience: int = option(
        0, "Stop training after this many evaluations without improvement of --best_metric "
        "(0: never).", minimum=0)
    use_best_checkpoint: bool = option(
        True, "Evaluate, predict and export with the best checkpoint found during training "
        "(output_dir/best/), rather than the last.")
    plot: bool = option(True, "Draw output_dir/learning_curve.png (training loss and the dev "
                        "metric) after evaluation during training.")
    bucket_by_length: bool = option(
        False, "Training batches of examples of similar length (sorted within pools of 64 "
        "batches, then shuffled): less padding, faster on short texts. Changes which "
        "examples share a batch.")

    def check(self):
        if self.do_train and self.num_train_epochs <= 0:
            raise InputError("--num_train_epochs must be > 0 with --do_train, got %g"
                             % self.num_train_epochs)
        if not 0 <= self.warmup_proportion <= 1:
            raise InputError("--warmup_proportion must be between 0 and 1, got %g"
                             % self.warmup_proportion)
        if self.eval_every_n_steps and self.eval_every_epoch:
            raise InputError("give --eval_every_n_steps or --eval_every_epoch, not both")
        if self.evaluates_during_training and not (self.do_train and self.do_eval):
            raise InputError("--eval_every_%s evaluates the dev set during training: it "
                             "needs --do_train and --do_eval"
                             % ("n_steps" if self.eval_every_n_steps else "epoch"))
        for name in ("best_metric", "early_stopping_patience"):
            if getattr(self, name) and not self.evaluates_during_training:
                raise InputError("--%s needs evaluation during training: add "
                                 "--eval_every_n_steps=N or --eval_every_epoch" % name)
        self.require_an_action("do_train", "do_eval", "do_predict", "save_for_serving")

    @property
    def evaluates_during_training(self):
        return bool(self.eval_every_n_steps or self.eval_every_epoch)

    def data_path(self, name):
        """The file the setting `name` gives, relative to --data_dir unless absolute."""
        return os.path.join(self.data_dir or "", getattr(self, name))


@dataclasses.dataclass(frozen=True)
class PoolingOptions(Options):
    pooling: str = option(
        "pooler", "How the head sees an example: pooler = Google's pooled [CLS] output; "
        "mean = the mean of the tokens' final states (for sentence-transformers models such "
        "as all-MiniLM-L6-v2, whose pooler was never trained).", choices=POOLING_MODES)


@dataclasses.dataclass(frozen=True)
class ServingCompatOptions(Options):
    serving_compat: Optional[str] = option(
        None, "With --save_for_serving: a serving_default signature for another project's "
        "clients. bert_multi_gpu: the multi-GPU fork's request body and answer (classifier: "
        "its label_ids input, ignored, answered with the probabilities alone; token "
        "labelling: its label_ids, output_mask and seq_len inputs, answered with predictions "
        "and seq_len). Default: this toolkit's signature.", choices=SERVING_COMPAT,
        case_sensitive=False)
