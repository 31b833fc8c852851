"""The command line: absl flags made from the options classes, and the one error line.

Every flag is a field of an options class (bert_toolkit/options.py): its
name, type, default, choices and help come from the field, so the command
line and Python code that builds the same object cannot disagree. A script
calls `run(options_class, main)`; the flags are defined then (importing a
script defines nothing, so several can share a process), parsed, read into
one options object (every value checked), and `main(options)` runs. A user
mistake (errors.InputError) is printed as one "error:" line with exit code 1;
a stopped run (errors.Stopped) as one "stopped:" line with 128 + the signal.
"""

import dataclasses
import sys

from absl import app, flags
from absl import logging as absl_logging

from bert_toolkit import console
from bert_toolkit.errors import InputError, LostWorker, Stopped, fail
from bert_toolkit.options import value_type

FLAGS = flags.FLAGS


def define_flags(options_class, flag_values=FLAGS, key_module=None):
    """Defines one flag per field of `options_class`; `key_module`: the module whose
    --help lists them. A field named like a flag already defined (one of absl's
    own, say) is a mistake in the class: ValueError."""
    for field in dataclasses.fields(options_class):
        if field.name in flag_values:
            raise ValueError("%s.%s: a flag --%s is already defined"
                             % (options_class.__name__, field.name, field.name))
        define_flag(field, flag_values)
        if key_module:
            flag_values.register_key_flag_for_module(key_module, flag_values[field.name])


def define_flag(field, flag_values=FLAGS):
    """The absl flag of one options field."""
    meta = field.metadata
    kind = value_type(field)
    common = {"flag_values": flag_values}
    if meta.get("choices"):
        flags.DEFINE_enum(field.name, field.default, list(meta["choices"]), meta["help"],
                          case_sensitive=meta.get("case_sensitive", True), **common)
    elif kind is tuple:
        flags.DEFINE_multi_string(field.name, list(field.default), meta["help"], **common)
    elif kind is bool:
        flags.DEFINE_bool(field.name, field.default, meta["help"], **common)
    elif kind is int:
        flags.DEFINE_integer(field.name, field.default, meta["help"], **common)
    elif kind is float:
        flags.DEFINE_float(field.name, field.default, meta["help"], **common)
    else:
        flags.DEFINE_string(field.name, field.default, meta["help"], **common)


def read_options(options_class, flag_values=FLAGS):
    """The options object of the parsed flags, every value checked (InputError)."""
    return options_class(**{field.name: flag_values[field.name].value
                            for field in dataclasses.fields(options_class)})


def quiet_logging(flag_values=FLAGS):
    """Our lines only (console.setup), unless --verbosity=1 or BERT_TOOLKIT_VERBOSE=1."""
    verbose = flag_values["verbosity"].value >= 1 if "verbosity" in flag_values else False
    console.setup(verbose=verbose)
    if not (verbose or console.verbose_by_environment()):
        absl_logging.set_verbosity(absl_logging.WARNING)


def _parse_flags(argv):
    """absl's flag parsing, reporting a bad flag (unknown name, malformed value) as
    one "error:" line like every other mistake, instead of absl's two-line FATAL."""
    try:
        return FLAGS(argv)
    except flags.Error as e:
        fail(e)


def run_guarded(function, *args):
    """function(*args), with a user's mistake and a stopped run as one line and an
    exit code (see the module docstring)."""
    try:
        return function(*args)
    except (InputError, LostWorker) as e:
        fail(e)
    except Stopped as e:
        sys.stderr.write("stopped: %s\n" % e)
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        # Ctrl-C outside training (which saves a checkpoint first): writes
        # are atomic, so nothing is left half-written.
        sys.stderr.write("stopped: interrupted (Ctrl-C)\n")
        sys.exit(130)


def run(options_class, main, positional_arguments=False):
    """absl's app.run for a script: defines the flags of `options_class`, parses
    them, and calls main(options) (main(options, arguments) with
    `positional_arguments`: the command line's words that are not flags)."""
    define_flags(options_class, key_module=sys.argv[0])

    def guarded_main(argv):
        quiet_logging()

        def read_and_run():
            if len(argv) > 1 and not positional_arguments:
                raise InputError("unexpected argument(s) %s: flags are written --name=value "
                                 "(booleans --name or --noname)" % " ".join(argv[1:]))
            options = read_options(options_class)
            return main(options, argv[1:]) if positional_arguments else main(options)
        run_guarded(read_and_run)
    app.run(guarded_main, flags_parser=_parse_flags)
