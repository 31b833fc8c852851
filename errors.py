"""The one exception type for mistakes in what a user gave us, and how scripts report it."""

import sys


class InputError(ValueError):
    """A bad file, flag or value supplied by the user.

    The message is one line that names the file (and line) or flag and says what
    was expected. Entry scripts print it without a traceback and exit non-zero;
    any other exception is a bug and keeps its traceback.
    """


def input_error(path, line_number, message):
    """An InputError reading `<path>[:<line>]: <message>` (line_number may be None)."""
    where = "%s:%d" % (path, line_number) if line_number else str(path)
    return InputError("%s: %s" % (where, message))


def fail(message):
    """Prints `message` as the one line "error: ..." on stderr and exits with code 1.

    Every entry script reports a user's mistake through here, so the contract
    (one line, exit 1) holds for all of them.
    """
    sys.stderr.write("error: %s\n" % " ".join(str(message).split()))
    sys.stderr.flush()
    sys.exit(1)
