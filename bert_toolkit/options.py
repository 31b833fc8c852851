"""Settings defined once: typed, frozen option classes that the flags are made from.

Every setting of the toolkit is a field of an `Options` subclass, declared
with `option(default, help, ...)`: its name is the command-line flag's name,
its type and default the flag's, its help the flag's help. The command-line
layer (bert_toolkit/cli/flags.py) defines the absl flags from the fields and
reads them back into the class, so a default or a check cannot differ between
a command line and Python code that builds the same object.

Checks run when an object is made: first the field-level ones declared with
`option` (whole numbers, finite numbers, choices, required), then each
class's own `check(self)` for settings that depend on each other, base
classes first. A bad value raises errors.InputError naming its flag. No
TensorFlow and no absl here.
"""

import dataclasses
import math
import typing

from bert_toolkit.errors import InputError

_MISSING = dataclasses.MISSING


def option(default, help, *, choices=None, minimum=None, required=False,
           case_sensitive=True, finite=True):
    """A dataclass field holding one setting.

    Args:
      default: the value when the setting is not given (the flag's default).
      help: one or two sentences; the flag's --help text.
      choices: the allowed values of a str setting (an enum flag).
      minimum: int settings: the smallest allowed whole number.
      required: None or "" is refused ("--name is required").
      case_sensitive: choices compare case-insensitively when False; the value
        is kept lower-cased.
      finite: float settings must be finite numbers.
    """
    return dataclasses.field(default=default, metadata={
        "help": help, "choices": tuple(choices) if choices else None, "minimum": minimum,
        "required": required, "case_sensitive": case_sensitive, "finite": finite})


def inherit(options_class, name, default=_MISSING, help=None):
    """The field `name` of `options_class` again, with another default or help:
    how a script's options change a shared setting's default (SQuAD's
    max_seq_length is 384) without defining the setting twice."""
    field = next(f for f in dataclasses.fields(options_class) if f.name == name)
    metadata = dict(field.metadata)
    if help is not None:
        metadata["help"] = help
    return dataclasses.field(default=field.default if default is _MISSING else default,
                             metadata=metadata)


def value_types(field):
    """The types a field's value may have besides None (its flag's type first):
    Optional[int] -> (int,); Optional[Union[str, int]] -> (str, int); a list of
    strings (Tuple[str, ...], a flag given several times) -> (tuple,)."""
    if typing.get_origin(field.type) is tuple:
        return (tuple,)
    return tuple(t for t in typing.get_args(field.type) if t is not type(None)) or (field.type,)


def value_type(field):
    """int, float, bool or str: the type of a field's flag."""
    return value_types(field)[0]


@dataclasses.dataclass(frozen=True)
class Options:
    """The base of every options class: field checks, then each class's `check`."""

    def __post_init__(self):
        for field in dataclasses.fields(self):
            self._check_field(field)
        for cls in reversed(type(self).__mro__):
            check = cls.__dict__.get("check")
            if check is not None:
                check(self)

    def _check_field(self, field):
        value = getattr(self, field.name)
        meta = field.metadata
        if meta.get("required") and value in (None, ""):
            raise InputError("--%s is required" % field.name)
        if value is None:
            return
        kinds = value_types(field)
        kind = kinds[0]
        if kind is int:
            minimum = meta.get("minimum")
            if isinstance(value, bool) or not isinstance(value, int) or (
                    minimum is not None and value < minimum):
                raise InputError("--%s must be a whole number%s, got %s" % (
                    field.name, "" if minimum is None else " >= %d" % minimum, value))
        elif kind is float:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise InputError("--%s must be a number, got %r" % (field.name, value))
            if meta.get("finite") and not math.isfinite(value):
                raise InputError("--%s must be a finite number, got %s" % (field.name, value))
        elif kind is bool and not isinstance(value, bool):
            raise InputError("--%s must be true or false, got %r" % (field.name, value))
        elif kind is tuple:
            if isinstance(value, str) or not all(isinstance(v, str) for v in value):
                raise InputError("--%s must be a list of texts, got %r" % (field.name, value))
            object.__setattr__(self, field.name, tuple(value))
        elif kind is str and (isinstance(value, bool) or not isinstance(value, kinds)):
            raise InputError("--%s must be %s, got %r" % (
                field.name, "text" if kinds == (str,) else "text or a whole number", value))
        choices = meta.get("choices")
        if choices:
            if not meta.get("case_sensitive", True) and isinstance(value, str):
                object.__setattr__(self, field.name, value.lower())
                value = value.lower()
            if value not in choices:
                raise InputError("--%s must be one of %s, got %r"
                                 % (field.name, ", ".join(choices), value))

    def replace(self, **changes):
        """A copy with `changes` applied (and checked again)."""
        return dataclasses.replace(self, **changes)

    def as_dict(self):
        """name -> value of every setting (JSON-compatible)."""
        return dataclasses.asdict(self)

    @classmethod
    def field_names(cls):
        return [field.name for field in dataclasses.fields(cls)]


def check_whole_numbers(values, minimum=1):
    """InputError naming the first flag of `values` (name -> value) that is not a
    whole number >= minimum (for settings computed from other settings)."""
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise InputError("--%s must be a whole number >= %d, got %s"
                             % (name, minimum, value))
