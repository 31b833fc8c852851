"""Every setting is defined once: the flags are the options' fields, and nothing else.

For each command the absl flags made from its options class must equal the
class's fields in name, type, default, choices and help; no module defines a
flag by hand; and a parsed command line gives the same object, defaults
included, as Python code that builds the options.
"""

import dataclasses
import os
import re
import subprocess
import sys

import pytest
from absl import flags

from bert_toolkit.cli import flags as cli_flags
from bert_toolkit.cli import main
from bert_toolkit.options import value_type
from bert_toolkit.tasks import registry

from tiny import REPO

COMMANDS = {name: registry.get(name).options_class for name in registry.task_names()}
COMMANDS.update({name: registry.load(paths[0]) for name, paths in main._TOOLS.items()})

PARSERS = {int: flags.IntegerParser, float: flags.FloatParser, bool: flags.BooleanParser,
           str: flags.ArgumentParser, tuple: flags.ArgumentParser}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_the_flags_are_the_fields(command):
    options_class = COMMANDS[command]
    flag_values = flags.FlagValues()
    cli_flags.define_flags(options_class, flag_values)
    fields = {field.name: field for field in dataclasses.fields(options_class)}
    assert set(flag_values) == set(fields)
    for name, field in fields.items():
        flag = flag_values[name]
        default = tuple(flag.default) if isinstance(flag.default, list) else flag.default
        assert default == field.default, name
        choices = field.metadata["choices"]
        if choices:  # absl puts the choices first: "<adamw|lamb>: The optimizer."
            assert flag.help == "<%s>: %s" % ("|".join(choices), field.metadata["help"])
            assert tuple(flag.parser.enum_values) == choices, name
        elif value_type(field) is tuple:  # absl adds how to give several
            assert flag.help.startswith(field.metadata["help"] + ";"), name
        else:
            assert flag.help == field.metadata["help"], name
            assert type(flag.parser) is PARSERS[value_type(field)], name


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_command_line_gives_the_pythons_defaults(command):
    options_class = COMMANDS[command]
    flag_values = flags.FlagValues()
    cli_flags.define_flags(options_class, flag_values)
    flag_values(["prog"])
    parsed = {name: tuple(value) if isinstance(value, list) else value
              for name, value in ((name, flag_values[name].value) for name in flag_values)}
    defaults = {field.name: field.default for field in dataclasses.fields(options_class)}
    assert parsed == defaults


def test_task_defaults_of_shared_settings_hold_in_python_too():
    squad = COMMANDS["squad"]
    reranking = COMMANDS["reranking"]
    classifier = COMMANDS["classifier"]
    assert squad(output_dir="o", bert_config_file="c", do_train=True,
                 train_file="t.json").max_seq_length == 384
    assert reranking(output_dir="o", bert_config_file="c", do_eval=True).max_seq_length == 512
    assert classifier(output_dir="o", bert_config_file="c", task_name="cola",
                      do_eval=True).max_seq_length == 128


def test_no_flag_is_defined_by_hand():
    defining = re.compile(r"\bDEFINE_(string|integer|float|bool|boolean|enum|multi\w*)\(")
    sources = [os.path.join(REPO, name) for name in os.listdir(REPO) if name.endswith(".py")]
    for folder, _, files in os.walk(os.path.join(REPO, "bert_toolkit")):
        sources += [os.path.join(folder, name) for name in files if name.endswith(".py")]
    by_hand = []
    for path in sources:
        if path.endswith(os.path.join("cli", "flags.py")):
            continue
        with open(path, encoding="utf-8") as f:
            if defining.search(f.read()):
                by_hand.append(os.path.relpath(path, REPO))
    assert not by_hand


def test_help_lists_the_commands_flags():
    result = subprocess.run([sys.executable, "run_squad.py", "--help"], cwd=REPO,
                            capture_output=True, text=True, timeout=120)
    assert "--max_seq_length" in result.stdout and "(default: '384')" in result.stdout
    assert "--doc_stride" in result.stdout and "--train_batch_size" in result.stdout


def test_pooling_flag_offers_the_modes_modeling_builds():
    from absl import flags

    from bert_toolkit.cli import flags as cli_flags
    from bert_toolkit.engine.options import PoolingOptions
    from bert_toolkit.model import modeling
    flag_values = flags.FlagValues()
    cli_flags.define_flags(PoolingOptions, flag_values)
    assert tuple(flag_values["pooling"].parser.enum_values) == modeling.POOLING_MODES
