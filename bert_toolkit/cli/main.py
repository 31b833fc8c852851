"""The commands: each entry script (and console command) is one options class and one run.

    script                       console command               task (registry.py)
    run_classifier.py            bert-run-classifier           classifier
    run_custom_classifier.py     bert-run-custom-classifier    classifier
    run_custom_classifier_mlabel.py  bert-run-custom-classifier-mlabel  classifier_mlabel
    run_seq_labeling.py          bert-run-seq-labeling         seq_labeling
    run_squad.py                 bert-run-squad                squad
    run_reranking.py             bert-run-reranking            reranking
    run_pretraining.py           bert-run-pretraining          pretraining
    create_pretraining_data.py   bert-create-pretraining-data  pretraining_data
    extract_features.py          bert-extract-features         extract_features
    convert_hf_checkpoint.py     bert-convert-hf-checkpoint
    serving_server.py            bert-serving-server
    serving_client.py            bert-serving-client
    train.py                     bert-train                    Distributed_BERT's command line
                                                               (cli/distributed_bert.py)
    run_multi_gpu.py             (none: its settings are edited in the file)
    bert-toolkit TASK [--task_module=yours] --flags...   any task, yours included

The flags of a command are the fields of its options class (cli/flags.py).
"""

import sys

from bert_toolkit.cli import flags
from bert_toolkit.errors import fail
from bert_toolkit.tasks import registry

# Commands that are not tasks: (options class, run function) as "module:name", and
# whether the command takes words besides its flags (the client's texts).
_TOOLS = {
    "convert_hf_checkpoint": ("bert_toolkit.convert.options:ConvertOptions",
                              "bert_toolkit.convert.hf_checkpoint:run", False),
    "export_hf": ("bert_toolkit.convert.options:ExportHfOptions",
                  "bert_toolkit.convert.hf_export:run", False),
    "serving_server": ("bert_toolkit.serving.options:ServerOptions",
                       "bert_toolkit.serving.server:run", False),
    "serving_client": ("bert_toolkit.serving.options:ClientOptions",
                       "bert_toolkit.serving.client:run_guarded", True),
}


def run_task(name):
    """Parses the flags of task `name` and runs it (exit 1 with one line on a mistake)."""
    entry = flags.run_guarded(registry.get, name)
    flags.run(entry.options_class, entry.run)


def run_tool(name):
    options_path, run_path, positional_arguments = _TOOLS[name]
    flags.run(registry.load(options_path), registry.load(run_path), positional_arguments)


def run_classifier():
    run_task("classifier")


def run_classifier_mlabel():
    run_task("classifier_mlabel")


def run_seq_labeling():
    run_task("seq_labeling")


def run_squad():
    run_task("squad")


def run_reranking():
    run_task("reranking")


def run_pretraining():
    run_task("pretraining")


def create_pretraining_data():
    run_task("pretraining_data")


def extract_features():
    run_task("extract_features")


def convert_hf_checkpoint():
    run_tool("convert_hf_checkpoint")


def export_hf():
    run_tool("export_hf")


def serving_server():
    run_tool("serving_server")


def serving_client():
    run_tool("serving_client")


def toolkit():
    """bert-toolkit TASK [--task_module=MODULE] [--flags]: any registered task, a task
    of yours included (MODULE registers it; see tasks/registry.py)."""
    usage = ("usage: bert-toolkit TASK [--task_module=MODULE] --flag=value ...; tasks: %s"
             % ", ".join(registry.task_names()))
    if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
        if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help", "--helpshort"):
            print(usage)
            return
        fail(usage)
    name = sys.argv.pop(1)
    for argument in list(sys.argv[1:]):
        if argument.startswith("--task_module="):
            sys.argv.remove(argument)
            flags.run_guarded(registry.import_user_module,
                              argument.split("=", 1)[1], "task_module")
    run_task(name)
