"""One run's settings: a frozen object, validated once, that the shared flow takes.

Entry scripts read their flags into `RunOptions` (common_flags.read_run_options)
and pass it on; tests build one directly. Every value check lives in
`RunOptions.__post_init__`, so a bad value is refused with one line naming its
flag before anything is read or written. Checks that need the file system
(does output_dir exist as a file?) live in run_setup.py.
"""

import dataclasses
import math
from typing import Optional

from errors import InputError

PRECISIONS = ("fp32", "fp16", "bf16", "auto")
OPTIMIZERS = ("adamw", "lamb")

# Fields that must be whole numbers >= 1.
_POSITIVE_INTEGERS = (
    "max_seq_length", "train_batch_size", "eval_batch_size", "predict_batch_size",
    "save_checkpoints_steps", "keep_checkpoint_max", "log_every_n_steps",
    "gradient_accumulation_steps", "num_gpu_cores", "num_cpu_replicas")
_FINITE_FLOATS = ("learning_rate", "num_train_epochs", "warmup_proportion",
                  "weight_decay_rate", "matmul_peak_tflops")


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """The settings every training script shares; field names are the flag names.

    Batch sizes are per replica (see distribution.py); `num_train_epochs` and
    `warmup_proportion` plan epoch-based runs (pre-training plans in steps).
    """
    output_dir: Optional[str] = None
    bert_config_file: Optional[str] = None
    vocab_file: Optional[str] = None
    init_checkpoint: Optional[str] = None
    do_lower_case: bool = True
    max_seq_length: int = 128

    do_train: bool = False
    do_eval: bool = False
    do_predict: bool = False
    save_for_serving: bool = False
    train_batch_size: int = 32
    eval_batch_size: int = 8
    predict_batch_size: int = 8
    learning_rate: float = 5e-5
    num_train_epochs: float = 3.0
    warmup_proportion: float = 0.1
    gradient_accumulation_steps: int = 1
    optimizer: str = "adamw"
    weight_decay_rate: float = 0.01
    seed: int = 12345

    save_checkpoints_steps: int = 1000
    keep_checkpoint_max: int = 5
    log_every_n_steps: int = 50
    cache_dir: Optional[str] = None
    bucket_by_length: bool = False
    eval_every_n_steps: int = 0
    eval_every_epoch: bool = False
    best_metric: Optional[str] = None
    early_stopping_patience: int = 0
    use_best_checkpoint: bool = True
    plot: bool = True

    precision: str = "fp32"
    use_fp16: bool = False
    inference_precision: str = "fp32"
    use_xla: bool = False
    use_gpu: bool = False
    num_gpu_cores: int = 1
    num_cpu_replicas: int = 1
    use_tpu: bool = False
    cluster: str = "auto"
    cluster_port_base: int = 8888
    step_timeout_seconds: int = 0
    matmul_peak_tflops: float = 0.0

    def __post_init__(self):
        for name in ("output_dir", "bert_config_file"):
            if not getattr(self, name):
                raise InputError("--%s is required" % name)
        check_whole_numbers({name: getattr(self, name) for name in _POSITIVE_INTEGERS})
        for name in _FINITE_FLOATS:
            if not math.isfinite(getattr(self, name)):
                raise InputError("--%s must be a finite number, got %s"
                                 % (name, getattr(self, name)))
        if self.max_seq_length < 2:
            raise InputError("--max_seq_length must be >= 2 (it holds [CLS] and [SEP]), "
                             "got %d" % self.max_seq_length)
        if self.learning_rate <= 0:
            raise InputError("--learning_rate must be > 0, got %g" % self.learning_rate)
        if self.do_train and self.num_train_epochs <= 0:
            raise InputError("--num_train_epochs must be > 0 with --do_train, got %g"
                             % self.num_train_epochs)
        if not 0 <= self.warmup_proportion <= 1:
            raise InputError("--warmup_proportion must be between 0 and 1, got %g"
                             % self.warmup_proportion)
        if self.matmul_peak_tflops < 0:
            raise InputError("--matmul_peak_tflops must be >= 0 (0: measure it), got %g"
                             % self.matmul_peak_tflops)
        if self.weight_decay_rate < 0:
            raise InputError("--weight_decay_rate must be >= 0, got %g"
                             % self.weight_decay_rate)
        self._check_choices()
        self._check_evaluation_during_training()

    @property
    def evaluates_during_training(self):
        return bool(self.eval_every_n_steps or self.eval_every_epoch)

    def _check_evaluation_during_training(self):
        check_whole_numbers({"eval_every_n_steps": self.eval_every_n_steps,
                             "early_stopping_patience": self.early_stopping_patience,
                             "step_timeout_seconds": self.step_timeout_seconds},
                            minimum=0)
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

    def _check_choices(self):
        for name, choices in (("precision", PRECISIONS), ("inference_precision", PRECISIONS),
                              ("optimizer", OPTIMIZERS)):
            if getattr(self, name) not in choices:
                raise InputError("--%s must be one of %s, got %r"
                                 % (name, ", ".join(choices), getattr(self, name)))
        if self.use_fp16 and self.precision not in ("fp32", "fp16"):
            raise InputError("--use_fp16 contradicts --precision=%s (use_fp16 is an alias of "
                             "--precision=fp16)" % self.precision)
        if self.use_tpu:
            raise InputError("--use_tpu: TPUs are not supported by this toolkit; use "
                             "--use_gpu or CPUs")

    @property
    def training_precision(self):
        """The precision flag with the fork's --use_fp16 alias folded in."""
        return "fp16" if self.use_fp16 else self.precision

    def replace(self, **changes):
        """A copy with `changes` applied (and validated again)."""
        return dataclasses.replace(self, **changes)


def check_whole_numbers(values, minimum=1):
    """InputError naming the first flag of `values` (name -> value) that is not a
    whole number >= minimum."""
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise InputError("--%s must be a whole number >= %d, got %s"
                             % (name, minimum, value))


def field_names():
    return [field.name for field in dataclasses.fields(RunOptions)]
