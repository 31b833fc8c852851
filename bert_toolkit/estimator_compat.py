"""`tf_estimator`: the Estimator API on every TensorFlow the toolkit runs on.

Every module of the toolkit reaches the Estimator through this one name
(`from bert_toolkit.estimator_compat import tf_estimator`), never through
`tf.estimator`, which TensorFlow 2.16 removed.

Why this module exists. TensorFlow 2.15.1 is the last release that ships
tf.estimator. The estimator's own package, `tensorflow-estimator==2.15.0`, is
pure Python and still installs on newer Pythons, but on TensorFlow >= 2.16 it
cannot be imported: it reaches into three things TensorFlow removed with it.
Where they are missing (and only there) this module supplies them, written here
against the contract that TensorFlow 2.15's source states, before the
estimator package is first imported:

1. `tensorflow.python.util.tf_export.ESTIMATOR_API_NAME` with its
   `API_ATTRS`/`API_ATTRS_V1` entries: the name under which the estimator's
   `@estimator_export` decorator records its public symbols.
2. The module `tensorflow.python.distribute.estimator_training`: the hooks
   through which `RunConfig`, `Estimator.train`/`evaluate` and
   `train_and_evaluate` hand a distribution strategy to TensorFlow's distribute
   coordinator (which TensorFlow still ships). Supplied for the paths the
   toolkit uses: one process (with or without MirroredStrategy) and a
   TF_CONFIG cluster trained by `train_and_evaluate` in independent-worker mode
   (MultiWorkerMirroredStrategy). The standalone-client mode is refused in one
   line, as TensorFlow 2.15 refuses Estimator.train in a cluster.
3. `tensorflow.python.tpu.{session_support, tpu_embedding,
   tpu_embedding_gradient}`: imported by the TPUEstimator only. The toolkit
   never runs on TPUs; any use of these stand-ins raises one line saying so.

Nothing is written into site-packages and nothing changes on TensorFlow 2.15.1:
there `tf_estimator` is the very module `tf.estimator` names. `SUPPLIED` lists
what this process needed; tests/test_estimator_compat.py fails when a
TensorFlow release brings one of these back or changes what they rely on.

What would make this module unnecessary: an estimator release for the
TensorFlow in use (there will be none: the project is archived), or the
toolkit leaving the Estimator. What would break it: TensorFlow removing
`tf.compat.v1` sessions and graphs (which the Estimator itself runs on), the
distribute coordinator (`tensorflow.python.distribute.distribute_coordinator`,
needed for clusters only) or `tf_export.api_export`'s `api_name` argument.
"""

import copy
import importlib
import importlib.util
import sys
import types

from bert_toolkit import tensorflow_env  # noqa: F401  (the environment before TensorFlow)

ESTIMATOR_API_MODULE = "tensorflow_estimator.python.estimator.api._v2.estimator"
EXPORT_API_NAME = "estimator"
TRAINING_HOOKS_MODULE = "tensorflow.python.distribute.estimator_training"
TPU_MODULES = ("tensorflow.python.tpu.session_support",
               "tensorflow.python.tpu.tpu_embedding",
               "tensorflow.python.tpu.tpu_embedding_gradient")

# What this process had to supply (empty on TensorFlow 2.15.1).
SUPPLIED = []


class TensorFlowRemovedError(NotImplementedError):
    """A removed TensorFlow feature that the toolkit does not supply was reached."""


# ---------------------------------------------------------------------------
# 1. The export API name.

def supply_export_api_name(tf_export):
    """Adds the estimator's API name to `tf_export` (the module) if it lacks it.

    `API_ATTRS[name]` holds the attribute names in which api_export records a
    symbol's public names and constants; the estimator's are its own, so that
    its exports never mix with TensorFlow's.
    """
    if hasattr(tf_export, "ESTIMATOR_API_NAME"):
        return False
    attributes = type(tf_export.API_ATTRS[tf_export.TENSORFLOW_API_NAME])
    tf_export.ESTIMATOR_API_NAME = EXPORT_API_NAME
    tf_export.API_ATTRS[EXPORT_API_NAME] = attributes(
        "_estimator_api_names", "_estimator_api_constants")
    tf_export.API_ATTRS_V1[EXPORT_API_NAME] = attributes(
        "_estimator_api_names_v1", "_estimator_api_constants_v1")
    return True


# ---------------------------------------------------------------------------
# 2. The distribute-coordinator hooks (tensorflow.python.distribute.estimator_training).

def _coordinator():
    from tensorflow.python.distribute import distribute_coordinator
    return distribute_coordinator


def init_run_config(config, tf_config):
    """RunConfig's hook when it is given a distribution strategy.

    Decides whether the Estimator runs the distribute coordinator: only for a
    TF_CONFIG cluster (without a "master" job) and a train_distribute strategy,
    in independent-worker mode (every worker runs the same program). Otherwise
    the config describes one process as RunConfig would without a strategy.
    Sets config._distribute_coordinator_mode (None: no coordinator).
    """
    from tensorflow.python.training import server_lib
    # pylint: disable=protected-access
    if config._experimental_distribute is not None:
        raise TensorFlowRemovedError(
            "RunConfig(experimental_distribute=...) is not supported on TensorFlow >= 2.16 "
            "(pass train_distribute/eval_distribute)")
    cluster = server_lib.ClusterSpec(tf_config.get("cluster", {}))
    # The one-process settings first; the coordinator fills in the task's later.
    config._init_distributed_setting_from_environment_var({})
    if not cluster.jobs or "master" in cluster.jobs or config._train_distribute is None:
        config._distribute_coordinator_mode = None
        config._init_distributed_setting_from_environment_var(tf_config)
        config._maybe_overwrite_session_config_for_distributed_training()
        return
    config._cluster_spec = cluster
    config._distribute_coordinator_mode = _coordinator().CoordinatorMode.INDEPENDENT_WORKER


def should_run_distribute_coordinator(config):
    """True if train_and_evaluate should hand this config to the coordinator."""
    mode = getattr(config, "_distribute_coordinator_mode", None)
    return (mode == _coordinator().CoordinatorMode.INDEPENDENT_WORKER
            and bool(config.cluster_spec))


def global_id_in_cluster(cluster, task_type, task_id):
    """This task's number in the whole cluster: the chief first, then the other
    jobs by name, parameter servers last (RunConfig.global_id_in_cluster's order).

    cluster: a ClusterSpec.
    """
    jobs = sorted(cluster.jobs, key=lambda job: (job == "ps", job != "chief", job))
    first_id = 0
    for job in jobs:
        if job == task_type:
            return first_id + task_id
        first_id += len(cluster.job_tasks(job))
    raise ValueError("task %r is not a job of the cluster %s" % (task_type, cluster.as_dict()))


def describe_this_task(config, worker_context):
    """Points a RunConfig at the task the coordinator runs in this thread."""
    from tensorflow.python.training import server_lib
    # pylint: disable=protected-access
    config._service = None
    config._cluster_spec = worker_context.cluster_spec
    config._task_type = worker_context.task_type
    config._task_id = worker_context.task_id
    config._master = config._evaluation_master = worker_context.master_target
    config._is_chief = worker_context.is_chief
    cluster = config._cluster_spec
    if not cluster:
        config._global_id_in_cluster, config._num_ps_replicas = 0, 0
        config._num_worker_replicas = 1
    elif config._task_type == "evaluator":
        # An evaluator takes no part in training: it sees a cluster of itself.
        config._cluster_spec = server_lib.ClusterSpec({})
        config._global_id_in_cluster = None
        config._num_ps_replicas = config._num_worker_replicas = 0
    else:
        jobs = cluster.as_dict()
        config._num_ps_replicas = len(jobs.get("ps", []))
        config._num_worker_replicas = len(jobs.get("chief", [])) + len(jobs.get("worker", []))
        config._global_id_in_cluster = global_id_in_cluster(
            cluster, config._task_type, config._task_id)


def estimator_for_this_task(estimator, strategy, training):
    """A copy of `estimator` that runs this coordinator thread's part with
    `strategy` (the coordinator's copy, configured for this task)."""
    from tensorflow.python.distribute import distribute_coordinator_context
    # pylint: disable=protected-access
    local = copy.deepcopy(estimator)
    if training:
        local._config._train_distribute = local._train_distribution = strategy
    else:
        local._config._eval_distribute = local._eval_distribution = strategy
    describe_this_task(local._config, distribute_coordinator_context.get_current_worker_context())
    # Its own train()/evaluate() must not come back to the coordinator.
    local._config._distribute_coordinator_mode = None
    return local


def train_and_evaluate(estimator, train_spec, eval_spec, executor_cls):
    """tf.estimator.train_and_evaluate on a cluster: this worker trains its
    replicas with the others (an "evaluator" task evaluates checkpoints)."""
    config = estimator.config

    def train(strategy):
        local = estimator_for_this_task(estimator, strategy, training=True)
        local.train(input_fn=train_spec.input_fn, max_steps=train_spec.max_steps,
                    hooks=list(train_spec.hooks))

    def evaluate(strategy):
        local = estimator_for_this_task(estimator, strategy, training=False)
        executor_cls(local, train_spec, eval_spec)._start_continuous_evaluation()

    coordinator = _coordinator()
    return coordinator.run_distribute_coordinator(
        train, config.train_distribute, evaluate, config.eval_distribute,
        mode=coordinator.CoordinatorMode.INDEPENDENT_WORKER,
        session_config=config.session_config)


def _refuse_outside_train_and_evaluate(method):
    def refuse(estimator, distributed_fn, hooks):
        raise ValueError(
            "Estimator.%s with a distribution strategy in a TF_CONFIG cluster: only "
            "tf_estimator.train_and_evaluate runs every worker" % method)
    refuse.__name__ = "estimator_%s" % method
    refuse.__doc__ = ("Estimator.%s's hook in a cluster: refused, as TensorFlow 2.15 refuses "
                      "it outside its standalone-client mode." % method)
    return refuse


def training_hooks_module():
    """The stand-in for tensorflow.python.distribute.estimator_training."""
    module = types.ModuleType(TRAINING_HOOKS_MODULE, "Supplied by %s (TensorFlow >= 2.16 "
                              "removed it with tf.estimator)." % __name__)
    module.CHIEF, module.EVALUATOR, module.PS, module.WORKER = (
        "chief", "evaluator", "ps", "worker")
    module.init_run_config = init_run_config
    module.should_run_distribute_coordinator = should_run_distribute_coordinator
    module.train_and_evaluate = train_and_evaluate
    module.estimator_train = _refuse_outside_train_and_evaluate("train")
    module.estimator_evaluate = _refuse_outside_train_and_evaluate("evaluate")
    return module


# ---------------------------------------------------------------------------
# 3. The TPU pieces.

class _RemovedTpuPiece:
    """Stands for a name of a removed TPU module: importing it works (the
    TPUEstimator's modules import it), using it raises one line."""

    def __init__(self, qualified_name):
        self._qualified_name = qualified_name

    def _refuse(self, *args, **kwargs):
        raise TensorFlowRemovedError(
            "%s was removed in TensorFlow 2.16 and the toolkit does not supply it: the "
            "TPUEstimator needs TensorFlow 2.15.1 (Python 3.9-3.11)" % self._qualified_name)

    __call__ = _refuse

    def __getattr__(self, name):
        self._refuse()


def tpu_module(name):
    """A stand-in module whose every public name is a _RemovedTpuPiece."""
    module = types.ModuleType(name, "Supplied by %s: removed in TensorFlow 2.16, used by "
                              "the TPUEstimator only." % __name__)

    def removed_piece(attribute):
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        return _RemovedTpuPiece("%s.%s" % (name, attribute))

    module.__getattr__ = removed_piece
    return module


# ---------------------------------------------------------------------------

def _missing(module_name):
    if module_name in sys.modules:
        return False
    try:
        return importlib.util.find_spec(module_name) is None
    except ModuleNotFoundError:
        return True


def _install_module(module):
    """Registers `module` under its dotted name and as its package's attribute."""
    package_name, _, attribute = module.__name__.rpartition(".")
    sys.modules[module.__name__] = module
    setattr(importlib.import_module(package_name), attribute, module)


def supply_removed_pieces():
    """Supplies, before the estimator package is imported, each piece TensorFlow
    lacks; appends what it supplied to SUPPLIED. Idempotent."""
    from tensorflow.python.util import tf_export
    if supply_export_api_name(tf_export):
        SUPPLIED.append("tf_export.ESTIMATOR_API_NAME")
    if _missing(TRAINING_HOOKS_MODULE):
        _install_module(training_hooks_module())
        SUPPLIED.append(TRAINING_HOOKS_MODULE)
    for name in TPU_MODULES:
        if _missing(name):
            _install_module(tpu_module(name))
            SUPPLIED.append(name)


supply_removed_pieces()
tf_estimator = importlib.import_module(ESTIMATOR_API_MODULE)


def _supply_tf_estimator_name():
    """`tf.estimator` for code written against TensorFlow 1.x and 2.15 (a user's
    model_fn, Google's run_classifier-style code): the same module."""
    import tensorflow as tf
    if not hasattr(tf, "estimator"):
        tf.estimator = tf_estimator
        SUPPLIED.append("tf.estimator")


_supply_tf_estimator_name()
