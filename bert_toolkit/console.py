"""What a run prints: our own lines on stderr, TensorFlow's chatter kept out.

Our lines (the plan, progress with time left, results) go through `info` and
`warning`, to a logger of their own, so hiding TensorFlow's INFO messages
(`Calling model_fn`, `Using config: {...}`, checkpoint listeners) loses none
of them. TensorFlow speaks again with absl's `--verbosity=1` or
BERT_TOOLKIT_VERBOSE=1. The formatting and throttling of progress lines are
pure functions, testable without TensorFlow.
"""

import logging
import os
import sys
import time

_LOGGER = logging.getLogger("bert_toolkit")

# A progress line at least this often, even when log_every_n_steps is far away.
PROGRESS_SECONDS = 30.0

# TensorFlow's WARNING lines about what a run does on purpose: the distribute
# coordinator of a multi-worker run, which only trains, says it has no
# evaluation function and no evaluation strategy.
_FRAMEWORK_NOTES = ("`eval_fn` is not passed in", "`eval_strategy` is not passed in")


class _WithoutFrameworkNotes(logging.Filter):
    def filter(self, record):
        return not str(record.msg).startswith(_FRAMEWORK_NOTES)


def setup(verbose=False):
    """Our lines to stderr, plain; TensorFlow's INFO lines and per-call deprecation
    notices hidden unless `verbose` (or BERT_TOOLKIT_VERBOSE=1). Its warnings and
    errors still print. Scripts call it before they run, the Python API too.

    Deprecations are switched off only once something has imported TensorFlow:
    importing it here would cost seconds and make forking worker processes unsafe.
    """
    if not _LOGGER.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        _LOGGER.addHandler(handler)
        _LOGGER.setLevel(logging.INFO)
        _LOGGER.propagate = False
    verbose = verbose or verbose_by_environment()
    tensorflow_logger = logging.getLogger("tensorflow")
    tensorflow_logger.setLevel(logging.INFO if verbose else logging.WARNING)
    if verbose:
        return
    if not any(isinstance(f, _WithoutFrameworkNotes) for f in tensorflow_logger.filters):
        tensorflow_logger.addFilter(_WithoutFrameworkNotes())
    # Libraries that log through absl directly (TensorFlow's SavedModel loader,
    # say) would print INFO lines between ours.
    logging.getLogger("absl").setLevel(logging.WARNING)
    if "tensorflow" in sys.modules:
        from tensorflow.python.util import deprecation

        # TensorFlow's logger has its own handler; propagating to absl's root
        # handler would print every line twice.
        tensorflow_logger.propagate = False
        # The tf.compat.v1 API we build on is deprecated by design; repeating so
        # on every call buries the log.
        deprecation._PRINT_DEPRECATION_WARNINGS = False


def verbose_by_environment():
    """BERT_TOOLKIT_VERBOSE=1: TensorFlow's INFO lines wanted."""
    return os.environ.get("BERT_TOOLKIT_VERBOSE", "") not in ("", "0")


def info(message, *args):
    _LOGGER.info(message, *args)


def warning(message, *args):
    _LOGGER.warning("warning: " + message, *args)


def duration(seconds):
    """'45 s', '12 min 05 s' or '2 h 03 min' for a number of seconds."""
    seconds = int(round(max(seconds, 0)))
    if seconds < 60:
        return "%d s" % seconds
    if seconds < 3600:
        return "%d min %02d s" % divmod(seconds, 60)
    return "%d h %02d min" % (seconds // 3600, seconds % 3600 // 60)


def progress_line(unit, done, total, rate, rate_unit, elapsed, left, extra=()):
    """'step 150/300 (50%), 26.2 examples/s, 1 min 10 s elapsed, 1 min 10 s left, ...'.

    unit: what done/total count ("step", "example"); rate: `rate_unit` per
    second (e.g. examples/s); elapsed, left: seconds; extra: (name, value)
    pairs appended, e.g. ("loss", 0.41). total None: a stream of unknown
    length ('document 1200, 350.0 documents/s, 3 s elapsed').
    """
    # Below 1 a second, three digits: a step of 8,192 tokens is 0.0117 examples/s.
    rate_field = ("%.1f %s/s" if rate >= 1 or rate == 0 else "%.3g %s/s") % (rate, rate_unit)
    if total is None:
        fields = ["%s %d" % (unit, done), rate_field, duration(elapsed) + " elapsed"]
    else:
        percent = int(100.0 * done / total) if total else 100
        fields = ["%s %d/%d (%d%%)" % (unit, done, total, percent),
                  rate_field, duration(elapsed) + " elapsed",
                  duration(left) + " left" if done < total else "done"]
    fields += ["%s %s" % (name, value if isinstance(value, str) else "%.4g" % value)
               for name, value in extra]
    return ", ".join(fields)


def seconds_left(done, total, recent_seconds_per_unit):
    """The time the rest of the run takes at the recent pace."""
    return max(total - done, 0) * recent_seconds_per_unit


def is_due(done, last_done, now, last_time, every_n, total, every_seconds=PROGRESS_SECONDS,
           aligned=False):
    """Whether a progress line is due: the first unit, every `every_n` units,
    after `every_seconds`, and at the last unit. `aligned`: every multiple of
    `every_n` instead (training steps: lines at steps 50, 100, ... whatever
    step the run resumed from or a timed line fell on)."""
    if done <= last_done:
        return False
    counted = (done // every_n > last_done // every_n if aligned
               else done - last_done >= every_n)
    return last_done == 0 or done >= total or counted or now - last_time >= every_seconds


class Progress(object):
    """Progress of `total` units (examples, documents, requests; None: unknown)
    on stderr: a line when one is due (is_due), and `finish` with the rate.

    The rate and the time left are those of the units after the first add: the
    first batch of an evaluation also starts the session (seconds of graph
    optimisation), and a line on it alone promised minutes for seconds of work.
    So the first line comes a second or more after the first add."""

    def __init__(self, unit, total, every_n=None, clock=None, show=True):
        self._clock = clock or time.time
        self.unit, self.total, self.done = unit, total, 0
        # A stream of unknown length reports by time only.
        self._every_n = every_n or (max(1, total // 10) if total is not None else float("inf"))
        self._start = self._last_time = self._clock()
        self._last_done = 0
        self._first = None  # (done, time) after the first add
        self._show = show

    def add(self, count):
        self.done += count
        now = self._clock()
        if self._first is None:
            self._first, self._last_time = (self.done, now), now
            return
        total = self.total if self.total is not None else float("inf")
        # At most a line a second: a short run says little, and that once.
        if self.done < total and now - self._last_time >= 1.0 and is_due(
                self.done, self._last_done, now, self._last_time, self._every_n, total) and (
                    self.total is not None or now - self._last_time >= PROGRESS_SECONDS):
            self._last_done, self._last_time = self.done, now
            self._print(now)

    def line(self, now=None):
        now = now or self._clock()
        elapsed = max(now - self._start, 1e-9)
        first_done, first_time = self._first or (0, self._start)
        # A second at least: units handed over one by one from one batch would
        # give a rate of thousands.
        if self.done > first_done and now - first_time >= 1.0:
            rate = (self.done - first_done) / (now - first_time)
        else:
            rate = self.done / elapsed
        left = (seconds_left(self.done, self.total, 1.0 / max(rate, 1e-9))
                if self.total is not None else None)
        return progress_line(self.unit, self.done, self.total, rate, self.unit + "s", elapsed,
                             left)

    def _print(self, now):
        if self._show:
            info(self.line(now))

    def finish(self):
        self._print(self._clock())
