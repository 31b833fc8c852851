"""The one exception type for mistakes in what a user gave us, and how scripts report it."""

import sys


class InputError(ValueError):
    """A bad file, flag or value supplied by the user.

    The message is one line that names the file (and line) or flag and says what
    was expected. Entry scripts print it without a traceback and exit non-zero;
    any other exception is a bug and keeps its traceback.
    """


class Stopped(Exception):
    """Training stopped on a signal after saving a checkpoint; the message says how
    to resume. Entry scripts print it as one line and exit with `exit_code`."""

    def __init__(self, message, exit_code):
        super().__init__(message)
        self.exit_code = exit_code


class LostWorker(Exception):
    """Another worker of the cluster stopped answering; the message says how to
    resume. Entry scripts print it as one "error:" line and exit 1."""


def input_error(path, line_number, message):
    """An InputError reading `<path>[:<line>]: <message>` (line_number may be None)."""
    where = "%s:%d" % (path, line_number) if line_number else str(path)
    return InputError("%s: %s" % (where, message))


def show(value, limit=60):
    """repr() of a user value, shortened, so a message stays one short line."""
    text = repr(value)
    if len(text) > limit:
        text = text[:limit - 3] + "..."
    return text


def show_list(values, limit=20):
    """Comma-separated reprs of at most `limit` values, then how many in all."""
    values = list(values)
    shown = ", ".join(show(v) for v in values[:limit])
    if len(values) > limit:
        shown += ", ... (%d in all)" % len(values)
    return shown


def check_labels(labels, allowed, origin, path, line_number):
    """InputError at path:line_number for the first of `labels` not in `allowed`;
    `origin` says where the allowed set comes from ("found in train.csv")."""
    for label in labels:
        if label not in allowed:
            raise input_error(path, line_number, "label %s is not one of the %d labels %s: %s"
                              % (show(label), len(allowed), origin, show_list(allowed)))


def fail(message):
    """Prints `message` as the one line "error: ..." on stderr and exits with code 1.

    Every entry script reports a user's mistake through here, so the contract
    (one line, exit 1) holds for all of them.
    """
    sys.stderr.write("error: %s\n" % " ".join(str(message).split()))
    sys.stderr.flush()
    sys.exit(1)
