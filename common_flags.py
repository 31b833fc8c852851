"""Command-line flags shared by the entry scripts, defined once.

Every flag of Google's run_classifier.py family keeps its name, default and
meaning; the multi-GPU fork's `use_gpu`, `num_gpu_cores`, `use_fp16` and
`save_for_serving` keep theirs. TPU flags are still accepted so old command
lines parse, but `--use_tpu` is refused with a clear message.

Entry scripts call the `define_*` functions they need at import time, then
`run_script(main)`; `main` gets the parsed FLAGS, reads them once into a
run_options.RunOptions (`read_run_options`) and may raise errors.InputError,
which is printed as one line (no traceback) with exit code 1.
"""

import logging
import sys

from absl import app, flags
from absl import logging as absl_logging

import console
import run_options
from errors import InputError, Stopped, fail

FLAGS = flags.FLAGS


def define_model_flags():
    """The pre-trained model: bert_config_file, init_checkpoint, max_seq_length."""
    flags.DEFINE_string("bert_config_file", None,
                        "bert_config.json of the pre-trained model (the architecture).")
    flags.DEFINE_string("init_checkpoint", None,
                        "Checkpoint (prefix or folder) to start from, usually the "
                        "pre-trained bert_model.ckpt. A checkpoint in output_dir wins: "
                        "re-running a command resumes it.")
    flags.DEFINE_integer("max_seq_length", 128,
                         "Tokens per sequence after WordPiece, with [CLS]/[SEP]; longer "
                         "inputs are truncated, shorter ones padded.")


def define_tokenizer_flags():
    """The WordPiece vocabulary and casing, for the scripts that tokenize text."""
    flags.DEFINE_string("vocab_file", None, "vocab.txt the model was trained with.")
    flags.DEFINE_bool("do_lower_case", True,
                      "Lower-case and strip accents (True for uncased models).")


def define_run_flags():
    """Output, devices, precision, checkpoints, logging: every training script needs them."""
    flags.DEFINE_string("output_dir", None,
                        "Where checkpoints, results and exports are written.")
    flags.DEFINE_bool("do_train", False, "Train (resumes from output_dir if it has a "
                      "checkpoint).")
    flags.DEFINE_bool("do_eval", False, "Evaluate on the dev set.")
    flags.DEFINE_integer("train_batch_size", 32,
                         "Examples per replica per micro-batch. The global batch of one "
                         "update is train_batch_size x replicas x "
                         "gradient_accumulation_steps.")
    flags.DEFINE_integer("eval_batch_size", 8, "Examples per replica in evaluation.")
    flags.DEFINE_float("learning_rate", 5e-5, "Peak learning rate of AdamW/LAMB.")
    flags.DEFINE_integer("save_checkpoints_steps", 1000,
                         "Save a checkpoint every this many optimizer steps.")
    flags.DEFINE_integer("keep_checkpoint_max", 5, "Checkpoints kept in output_dir.")
    flags.DEFINE_integer("iterations_per_loop", 1000,
                         "TPU only in the original code; accepted and ignored.")
    flags.DEFINE_integer("log_every_n_steps", 50,
                         "Log loss, learning rate and examples/s every this many steps.")
    flags.DEFINE_integer("gradient_accumulation_steps", 1,
                         "Micro-batches summed into one optimizer update.")
    flags.DEFINE_enum("optimizer", "adamw", ["adamw", "lamb"], "The optimizer.")
    flags.DEFINE_float("weight_decay_rate", 0.01,
                       "Decoupled weight decay (not applied to LayerNorm and biases).")
    flags.DEFINE_integer("seed", 12345, "Random seed of initialisation, dropout, shuffling.")

    flags.DEFINE_enum("precision", "fp32", ["fp32", "fp16", "bf16", "auto"],
                      "Training compute precision (variables stay fp32). fp16 uses dynamic "
                      "loss scaling; bf16 needs none. auto: bf16 where the hardware has "
                      "bf16 matrix units (Ampere+ GPUs, AMX/AVX512-BF16 CPUs), else fp16 "
                      "on GPUs and fp32 on CPUs.")
    flags.DEFINE_bool("use_fp16", False, "Alias of --precision=fp16 (multi-GPU fork).")
    flags.DEFINE_enum("inference_precision", "fp32", ["fp32", "fp16", "bf16", "auto"],
                      "Compute precision of evaluation, prediction and the exported "
                      "SavedModel.")
    flags.DEFINE_bool("use_xla", False, "Compile the graph with XLA (JIT).")
    flags.DEFINE_enum("cluster", "auto", ["auto", "tf_config", "slurm", "local"],
                      "Where the cluster of several workers comes from: tf_config "
                      "(TF_CONFIG, as Kubeflow's TFJob sets it), slurm (the Slurm job step "
                      "this task runs in, one worker per task), local (one process). auto: "
                      "TF_CONFIG if set, else slurm in a step of several tasks, else local.")
    flags.DEFINE_integer("cluster_port_base", 8888,
                         "--cluster=slurm: the port of a node's first task (the next task on "
                         "the node takes the next port).")
    flags.DEFINE_integer("step_timeout_seconds", 0,
                         "End with one error line when no training step finishes for this "
                         "many seconds (after the first): on a cluster, a lost worker "
                         "otherwise leaves the others waiting forever. 0: wait.")
    flags.DEFINE_float("matmul_peak_tflops", 0.0,
                       "The device's matmul peak in the training precision, in TFLOP/s, "
                       "for the MFU the training log shows (e.g. 312 for an A100 in "
                       "bf16). 0: measured at start-up with a 2048^3 matmul.")
    define_device_flags()
    define_tpu_flags()


def define_device_flags():
    """Where the model runs: --use_gpu, --num_gpu_cores, --num_cpu_replicas."""
    flags.DEFINE_bool("use_gpu", False, "Run on GPUs (MirroredStrategy with NCCL when "
                      "num_gpu_cores > 1).")
    flags.DEFINE_integer("num_gpu_cores", 1, "GPUs to use with --use_gpu.")
    flags.DEFINE_integer("num_cpu_replicas", 1,
                         "Without --use_gpu: replicas on the CPU (for machines without "
                         "GPUs and for testing the multi-replica path).")


def define_tpu_flags():
    """Google's TPU flags, so its command lines parse (TPUs are not supported)."""
    flags.DEFINE_bool("use_tpu", False, "Not supported; kept so old command lines parse.")
    for name in ("tpu_name", "tpu_zone", "gcp_project", "master"):
        flags.DEFINE_string(name, None, "TPU only; accepted and ignored.")
    flags.DEFINE_integer("num_tpu_cores", 8, "TPU only; accepted and ignored.")


def define_fine_tuning_flags():
    """Epoch-based training, prediction and export for the fine-tuning scripts."""
    flags.DEFINE_string("data_dir", None, "Folder with the task's input files.")
    flags.DEFINE_bool("do_predict", False, "Predict on the test set.")
    flags.DEFINE_integer("predict_batch_size", 8, "Examples per prediction batch.")
    flags.DEFINE_float("num_train_epochs", 3.0, "Passes over the training set.")
    flags.DEFINE_float("warmup_proportion", 0.1,
                       "Fraction of optimizer steps with linear learning-rate warmup.")
    flags.DEFINE_bool("save_for_serving", False,
                      "Export a SavedModel for TensorFlow Serving to "
                      "output_dir/serving/<version>/ from the latest checkpoint (after "
                      "training if --do_train, else from the existing checkpoint).")
    flags.DEFINE_string("cache_dir", None,
                        "Where converted TFRecord features are kept (default: output_dir).")
    flags.DEFINE_integer("eval_every_n_steps", 0,
                         "With --do_train --do_eval: evaluate the dev set every N optimizer "
                         "steps during training (0: only after training). Metrics go to the "
                         "console, TensorBoard and output_dir/eval_history.jsonl.")
    flags.DEFINE_bool("eval_every_epoch", False,
                      "With --do_train --do_eval: evaluate the dev set after every epoch.")
    flags.DEFINE_string("best_metric", None,
                        "With evaluation during training: the report entry that picks the "
                        "best checkpoint (e.g. accuracy, macro_f1, entity_f1, mrr@10; "
                        "higher is better, except for losses such as eval_loss). Default: "
                        "the task's first summary metric.")
    flags.DEFINE_integer("early_stopping_patience", 0,
                         "Stop training after this many evaluations without improvement of "
                         "--best_metric (0: never).")
    flags.DEFINE_bool("use_best_checkpoint", True,
                      "Evaluate, predict and export with the best checkpoint found during "
                      "training (output_dir/best/), rather than the last.")
    flags.DEFINE_bool("plot", True, "Draw output_dir/learning_curve.png (training loss and "
                      "the dev metric) after evaluation during training.")
    flags.DEFINE_bool("bucket_by_length", False,
                      "Training batches of examples of similar length (sorted within pools "
                      "of 64 batches, then shuffled): less padding, faster on short texts. "
                      "Changes which examples share a batch. Not for per-token labels.")


def define_fine_tuning_script_flags(pooling_modes=None):
    """Every flag a fine-tuning script shares: model, tokenizer, run and fine-tuning
    flags, and --pooling when the script's head reads one vector per example
    (`pooling_modes`: modeling.POOLING_MODES)."""
    define_model_flags()
    define_tokenizer_flags()
    define_run_flags()
    define_fine_tuning_flags()
    if pooling_modes:
        define_pooling_flag(pooling_modes)


def define_pooling_flag(choices, flag_values=FLAGS):
    """--pooling, for the scripts whose head reads one vector per example.

    choices: modeling.POOLING_MODES, passed by the script (this module stays
    free of TensorFlow for the scripts that do not train).
    """
    flags.DEFINE_enum("pooling", "pooler", list(choices),
                      "How the head sees an example: pooler = Google's pooled [CLS] "
                      "output; mean = the mean of the tokens' final states (for "
                      "sentence-transformers models such as all-MiniLM-L6-v2, whose "
                      "pooler was never trained).", flag_values=flag_values)


def require_flags(*names):
    """Raises InputError naming the first of `names` that was not given."""
    for name in names:
        if FLAGS[name].value in (None, ""):
            raise InputError("--%s is required" % name)


def read_run_options(flag_values=FLAGS, **overrides):
    """The RunOptions of the parsed flags (those this script defines), validated.

    overrides: field -> value for settings a script fixes itself.
    """
    values = {name: flag_values[name].value for name in run_options.field_names()
              if name in flag_values}
    values.update(overrides)
    actions = [name for name in ("do_train", "do_eval", "do_predict", "save_for_serving")
               if name in values]
    if not any(values[name] for name in actions):
        raise InputError("nothing to do: give %s" % " and/or ".join(
            ", ".join("--" + name for name in actions).rsplit(", ", 1)))
    return run_options.RunOptions(**values)


def quiet_logging():
    """Our lines only (console.py): TensorFlow's INFO chatter and per-call
    deprecation notices hidden, unless --verbosity=1 or BERT_TOOLKIT_VERBOSE=1.

    Deprecations are switched off only for a script that has imported
    TensorFlow: importing it here would cost seconds and make forking worker
    processes unsafe.
    """
    verbose = FLAGS["verbosity"].value >= 1 if "verbosity" in FLAGS else False
    console.setup(verbose=verbose)
    if not (verbose or console.verbose_by_environment()):
        # Libraries that log through absl directly (TensorFlow's SavedModel
        # loader, say) would print INFO lines between ours.
        absl_logging.set_verbosity(absl_logging.WARNING)
    if "tensorflow" not in sys.modules:
        return
    from tensorflow.python.util import deprecation

    # TensorFlow's logger has its own handler; propagating to absl's root
    # handler would print every line twice.
    logging.getLogger("tensorflow").propagate = False
    # The tf.compat.v1 API we build on is deprecated by design; repeating so on
    # every call buries the log.
    deprecation._PRINT_DEPRECATION_WARNINGS = False


def _parse_flags(argv):
    """absl's flag parsing, reporting a bad flag (unknown name, malformed value) as
    one "error:" line like every other mistake, instead of absl's two-line FATAL."""
    try:
        return FLAGS(argv)
    except flags.Error as e:
        fail(e)


def run_script(main):
    """absl's app.run, printing InputError as one line and exiting with code 1."""
    def guarded_main(argv):
        quiet_logging()
        try:
            if len(argv) > 1:
                raise InputError("unexpected argument(s) %s: flags are written --name=value "
                                 "(booleans --name or --noname)" % " ".join(argv[1:]))
            main(FLAGS)
        except InputError as e:
            fail(e)
        except Stopped as e:
            sys.stderr.write("stopped: %s\n" % e)
            sys.exit(e.exit_code)
        except KeyboardInterrupt:
            # Ctrl-C outside training (which saves a checkpoint first): writes
            # are atomic, so nothing is left half-written.
            sys.stderr.write("stopped: interrupted (Ctrl-C)\n")
            sys.exit(130)
    app.run(guarded_main, flags_parser=_parse_flags)
