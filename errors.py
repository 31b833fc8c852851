"""The one exception type for mistakes in what a user gave us."""


class InputError(ValueError):
    """A bad file, flag or value supplied by the user.

    The message is one line that names the file (and line) or flag and says what
    was expected. Entry scripts print it without a traceback and exit non-zero;
    any other exception is a bug and keeps its traceback.
    """
