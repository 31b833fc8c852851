"""train.py (console command bert-train): Distributed_BERT's command lines, unchanged.

Its flags are written with hyphens and take their value as the next word
(`--max-sentences 32`), some with aliases (`--batch-size`, `--learning-rate`,
`--wd`, `--mu`, `--local_rank`, ...). `normalize_argv` turns them into the
underscore names of tasks/pretraining/distributed_bert.py's options class
(absl takes a value as the next word by itself); the flags are then made
from that class like every script's (cli/flags.py).
"""

import sys

from bert_toolkit.cli import flags
from bert_toolkit.tasks.pretraining import distributed_bert

# Distributed_BERT's other names of the same flags (argparse aliases).
ALIASES = {"batch_size": "max_sentences", "learning_rate": "lr", "wd": "weight_decay",
           "me": "max_epoch", "mu": "max_update", "fa": "force_anneal",
           "local_rank": "device_id"}


def normalize_argv(argv):
    """argv with every --flag-name (or alias) written --flag_name as the options
    class names it; values, and words that are not flags, untouched."""
    normalized = list(argv[:1])
    for argument in argv[1:]:
        if argument.startswith("--") and len(argument) > 2:
            name, equals, value = argument[2:].partition("=")
            name = name.replace("-", "_")
            name = ALIASES.get(name, name)
            argument = "--" + name + equals + value
        normalized.append(argument)
    return normalized


def main():
    """Runs train.py's flags as Distributed_BERT's (exit 1 with one line on a mistake)."""
    sys.argv = normalize_argv(sys.argv)
    flags.run(distributed_bert.DistributedBertOptions, distributed_bert.run)
