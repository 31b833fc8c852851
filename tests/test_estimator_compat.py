"""bert_toolkit/estimator_compat.py: each piece it supplies on TensorFlow >= 2.16, checked
against the contract TensorFlow 2.15.1 states (and, on 2.15.1, against TensorFlow's own
code), and a failure the day a TensorFlow release brings a piece back or changes what
the pieces rely on."""

import inspect
import json
import os
import subprocess
import sys

import pytest
import tensorflow as tf
from tensorflow.python.distribute import distribute_coordinator, distribute_coordinator_context
from tensorflow.python.training import server_lib
from tensorflow.python.util import tf_export

from bert_toolkit import estimator_compat, tensorflow_env
from bert_toolkit.estimator_compat import tf_estimator

from tiny import REPO

TF_VERSION = tuple(int(part) for part in tf.__version__.split(".")[:2])
REMOVED_IN_2_16 = ["tf_export.ESTIMATOR_API_NAME",
                   "tensorflow.python.distribute.estimator_training",
                   "tensorflow.python.tpu.session_support",
                   "tensorflow.python.tpu.tpu_embedding",
                   "tensorflow.python.tpu.tpu_embedding_gradient",
                   "tf.estimator"]


def test_supplies_exactly_what_this_tensorflow_lacks():
    expected = REMOVED_IN_2_16 if TF_VERSION >= (2, 16) else []
    assert estimator_compat.SUPPLIED == expected, (
        "TensorFlow %s: a piece TensorFlow 2.16 removed is back or another is missing; "
        "update bert_toolkit/estimator_compat.py and docs/platforms.md" % tf.__version__)
    # Supplying again changes nothing.
    estimator_compat.supply_removed_pieces()
    assert estimator_compat.SUPPLIED == expected
    assert tf.estimator.Estimator is tf_estimator.Estimator


def test_the_estimator_exports_under_its_api_name():
    assert tf_export.ESTIMATOR_API_NAME == "estimator"
    assert tf_estimator.Estimator._estimator_api_names == ("estimator.Estimator",)
    assert tf_estimator.RunConfig._estimator_api_names == ("estimator.RunConfig",)
    # The attribute names are the estimator's own, apart from TensorFlow's.
    assert len({attributes.names for attributes in tf_export.API_ATTRS.values()}) == \
        len(tf_export.API_ATTRS)


def test_what_the_pieces_rely_on_is_still_there():
    """The day TensorFlow changes one of these, the stand-ins must change with it."""
    parameters = inspect.signature(distribute_coordinator.run_distribute_coordinator).parameters
    for name in ("worker_fn", "strategy", "eval_fn", "eval_strategy", "mode",
                 "session_config"):
        assert name in parameters
    assert distribute_coordinator.CoordinatorMode.INDEPENDENT_WORKER == "independent_worker"
    assert callable(distribute_coordinator_context.get_current_worker_context)
    for method in ("_init_distributed_setting_from_environment_var",
                   "_maybe_overwrite_session_config_for_distributed_training"):
        assert callable(getattr(tf_estimator.RunConfig, method))
    assert "api_name" in inspect.signature(tf_export.api_export.__init__).parameters
    assert tf_export.API_ATTRS[tf_export.TENSORFLOW_API_NAME]._fields == ("names", "constants")


CLUSTERS = [
    {},
    {"cluster": {"chief": ["h0:1"], "worker": ["h1:1", "h2:1"]}, "task": {"type": "worker",
                                                                         "index": 1}},
    {"cluster": {"worker": ["h0:1", "h1:1"]}, "task": {"type": "worker", "index": 0}},
    {"cluster": {"master": ["h0:1"], "worker": ["h1:1"]}, "task": {"type": "master",
                                                                   "index": 0}},
]


def run_config_fields(tf_config, strategy):
    """What a RunConfig says of the process under `tf_config` (TF_CONFIG as JSON)."""
    saved = os.environ.get("TF_CONFIG")
    os.environ["TF_CONFIG"] = json.dumps(tf_config)
    try:
        config = tf_estimator.RunConfig(train_distribute=strategy)
    finally:
        os.environ.pop("TF_CONFIG")
        if saved is not None:
            os.environ["TF_CONFIG"] = saved
    return dict(mode=getattr(config, "_distribute_coordinator_mode", None),
                cluster=config.cluster_spec.as_dict(),
                task=(config.task_type, config.task_id), chief=config.is_chief,
                workers=config.num_worker_replicas, master=config.master)


@pytest.mark.parametrize("tf_config", CLUSTERS)
def test_run_config_picks_the_coordinator_only_for_a_cluster(tf_config):
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    fields = run_config_fields(tf_config, strategy)
    cluster = tf_config.get("cluster", {})
    in_cluster = bool(cluster) and "master" not in cluster
    assert fields["mode"] == ("independent_worker" if in_cluster else None)
    assert fields["cluster"] == cluster
    if not cluster:
        assert fields["workers"] == 1 and fields["chief"] and fields["master"] == ""
    if "chief" in cluster or not cluster:
        # Without a strategy RunConfig never calls the hook.
        assert run_config_fields(tf_config, None)["mode"] is None


def test_global_ids_number_the_chief_first_and_parameter_servers_last():
    cluster = server_lib.ClusterSpec({"ps": ["p0:1"], "worker": ["w0:1", "w1:1"],
                                      "chief": ["c0:1"], "evaluator": ["e0:1"]})
    ids = {(job, index): estimator_compat.global_id_in_cluster(cluster, job, index)
           for job in cluster.jobs for index in range(len(cluster.job_tasks(job)))}
    assert ids == {("chief", 0): 0, ("evaluator", 0): 1, ("worker", 0): 2, ("worker", 1): 3,
                   ("ps", 0): 4}


class WorkerContext:
    def __init__(self, cluster, task_type, task_id, is_chief):
        self.cluster_spec = server_lib.ClusterSpec(cluster) if cluster else None
        self.task_type, self.task_id, self.is_chief = task_type, task_id, is_chief
        self.master_target = "grpc://%s" % cluster[task_type][task_id] if cluster else ""


@pytest.mark.parametrize("context", [
    WorkerContext({"chief": ["h0:1"], "worker": ["h1:1", "h2:1"]}, "worker", 1, False),
    WorkerContext({"chief": ["h0:1"], "worker": ["h1:1"], "evaluator": ["h2:1"]},
                  "evaluator", 0, False),
    WorkerContext({}, None, None, True),
])
def test_a_coordinator_thread_describes_its_task(context):
    config = tf_estimator.RunConfig()
    estimator_compat.describe_this_task(config, context)
    assert (config.task_type, config.task_id, config.is_chief) == (
        context.task_type, context.task_id, context.is_chief)
    assert config.master == config.evaluation_master == context.master_target
    if context.task_type == "worker":
        assert (config.num_worker_replicas, config.num_ps_replicas,
                config.global_id_in_cluster) == (3, 0, 2)
    elif context.task_type == "evaluator":
        assert config.cluster_spec.as_dict() == {} and config.global_id_in_cluster is None
    else:
        assert (config.num_worker_replicas, config.global_id_in_cluster) == (1, 0)
    if TF_VERSION < (2, 16):
        # TensorFlow's own hook agrees, field by field.
        from tensorflow.python.distribute import estimator_training
        theirs = tf_estimator.RunConfig()
        estimator_training._init_run_config_from_worker_context(theirs, context)
        assert vars(theirs) == vars(config)


@pytest.mark.skipif(TF_VERSION >= (2, 16), reason="TensorFlow's own hooks are gone")
@pytest.mark.parametrize("tf_config", CLUSTERS)
def test_init_run_config_sets_what_tensorflow_2_15_sets(tf_config):
    from tensorflow.python.distribute import estimator_training
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    ours, theirs = (tf_estimator.RunConfig(), tf_estimator.RunConfig())
    for config, hook in ((ours, estimator_compat.init_run_config),
                         (theirs, estimator_training.init_run_config)):
        config._train_distribute = strategy
        hook(config, tf_config)
    assert vars(ours) == vars(theirs)
    assert estimator_compat.should_run_distribute_coordinator(ours) == \
        estimator_training.should_run_distribute_coordinator(theirs)


def test_estimator_train_and_evaluate_in_a_cluster_are_refused_in_one_line():
    hooks = estimator_compat.training_hooks_module()
    for method in (hooks.estimator_train, hooks.estimator_evaluate):
        with pytest.raises(ValueError, match="only tf_estimator.train_and_evaluate") as error:
            method(None, None, [])
        assert "\n" not in str(error.value)


def test_a_removed_tpu_piece_imports_and_refuses_when_used():
    module = estimator_compat.tpu_module("tensorflow.python.tpu.tpu_embedding")
    piece = module.AdagradParameters
    with pytest.raises(estimator_compat.TensorFlowRemovedError,
                       match="tpu_embedding.AdagradParameters was removed in TensorFlow "
                             "2.16 .* needs TensorFlow 2.15.1") as error:
        piece(learning_rate=0.1)
    assert "\n" not in str(error.value)
    with pytest.raises(estimator_compat.TensorFlowRemovedError):
        piece.TRAINING
    with pytest.raises(AttributeError):
        module.__path__
    if TF_VERSION >= (2, 16):
        # The TPUEstimator's module imports with the stand-ins in place.
        from tensorflow_estimator.python.estimator.tpu import tpu_estimator
        assert tpu_estimator.TPUEstimator


def test_startup_noise_is_dropped_and_everything_else_kept():
    printed = (
        "WARNING: All log messages before absl::InitializeLog() is called are written to "
        "STDERR\n"
        "I0000 00:00:1795703618.040226    2610 cudart_stub.cc:31] Could not find cuda drivers "
        "on your machine, GPU will not be used.\n"
        "I0000 00:00:1795703506.796041    2393 port.cc:153] oneDNN custom operations are on.\n"
        "I0000 00:00:1795703604.175995    2587 cpu_feature_guard.cc:227] This TensorFlow "
        "binary is optimized to use available CPU instructions.\n"
        "To enable the following instructions: AVX2 FMA, in other operations, rebuild "
        "TensorFlow with the appropriate compiler flags.\n"
        "E0000 00:00:1795703604.175995    2587 some_kernel.cc:12] a real error\n"
        "Traceback (most recent call last):\n")
    assert tensorflow_env.without_startup_noise(printed) == (
        "E0000 00:00:1795703604.175995    2587 some_kernel.cc:12] a real error\n"
        "Traceback (most recent call last):\n")


def test_importing_tensorflow_through_the_toolkit_prints_nothing():
    environment = {name: value for name, value in os.environ.items()
                   if not name.startswith("TF_")}
    result = subprocess.run(
        [sys.executable, "-c", "import bert_toolkit, sys; import tensorflow as tf; "
         "from bert_toolkit.estimator_compat import tf_estimator; "
         "tf.constant(1.0).numpy(); print(tf.__version__); sys.stderr.write('mine\\n')"],
        cwd=REPO, env=environment, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == tf.__version__
    assert result.stderr == "mine\n"
