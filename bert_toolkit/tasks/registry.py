"""Tasks by name, the built-in ones and yours, for the command line and the Python API.

A task is an options class (bert_toolkit/options.py) and a function that runs
it and returns a report. Register your own in a module of yours:

    from bert_toolkit.tasks import registry

    @registry.register_task("regression", RegressionOptions)
    def run(options):
        return fine_tuning.run(RegressionTask(...), options)

then `bert-toolkit regression --task_module=my_tasks --output_dir=... ...` runs it
from a shell and `bert_toolkit.run(RegressionOptions(...))` from Python, with
the same settings and checks. The built-in tasks are found by module path, so
naming them imports nothing heavy.
"""

import collections
import importlib
import os
import sys

from bert_toolkit.errors import InputError

Entry = collections.namedtuple("Entry", ["name", "options_class", "run"])

# name -> (options class, run function) of the toolkit's own tasks, as "module:name".
_BUILT_IN = {
    "classifier": ("bert_toolkit.tasks.classification.options:ClassifierOptions",
                   "bert_toolkit.tasks.classification.task:run"),
    "classifier_mlabel": ("bert_toolkit.tasks.classification.options:MlabelOptions",
                          "bert_toolkit.tasks.classification.task:run"),
    "seq_labeling": ("bert_toolkit.tasks.seq_labeling.options:SeqLabelingOptions",
                     "bert_toolkit.tasks.seq_labeling.task:run"),
    "squad": ("bert_toolkit.tasks.squad.options:SquadOptions",
              "bert_toolkit.tasks.squad.task:run"),
    "reranking": ("bert_toolkit.tasks.reranking.options:RerankingOptions",
                  "bert_toolkit.tasks.reranking.task:run"),
    "pretraining": ("bert_toolkit.tasks.pretraining.options:PretrainingOptions",
                    "bert_toolkit.tasks.pretraining.task:run"),
    "pretraining_data": ("bert_toolkit.tasks.pretraining.options:PretrainingDataOptions",
                         "bert_toolkit.tasks.pretraining.writer:run"),
    "extract_features": ("bert_toolkit.tasks.features.options:FeatureExtractionOptions",
                         "bert_toolkit.tasks.features.extraction:run"),
}
_registered = {}


def register_task(name, options_class):
    """Decorator: makes `run(options) -> report` the task `name` (letters, digits, _)."""
    if not name.replace("_", "").isalnum() or name in _BUILT_IN:
        raise ValueError("task name %r: expected letters, digits and _, and not one of the "
                         "toolkit's (%s)" % (name, ", ".join(sorted(_BUILT_IN))))

    def register(run):
        _registered[name] = Entry(name, options_class, run)
        return run
    return register


def task_names():
    return sorted(set(_BUILT_IN) | set(_registered))


def get(name):
    """The Entry of task `name`; InputError for an unknown one."""
    if name in _registered:
        return _registered[name]
    if name not in _BUILT_IN:
        raise InputError("unknown task %r; tasks: %s (yours: register it with "
                         "bert_toolkit.tasks.registry.register_task and give its module "
                         "with --task_module)" % (name, ", ".join(task_names())))
    options_path, run_path = _BUILT_IN[name]
    return Entry(name, load(options_path), load(run_path))


def load(path):
    """The object a "module:name" path names."""
    module_name, _, attribute = path.partition(":")
    return getattr(importlib.import_module(module_name), attribute)


def entry_for(options):
    """The Entry whose options class is the class of `options`."""
    for name in task_names():
        entry = get(name)
        if type(options) is entry.options_class:
            return entry
    raise TypeError("%s is not the options class of a registered task (tasks: %s)"
                    % (type(options).__name__, ", ".join(task_names())))


def import_user_module(name, flag):
    """Imports a module of the user's (from the current folder too, as `python -m`
    would); InputError naming `flag` if it cannot be imported."""
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    try:
        return importlib.import_module(name)
    except ImportError as e:
        raise InputError("--%s=%s: cannot import it (%s)" % (flag, name, e))
