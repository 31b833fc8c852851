"""Expensive fixture results built once per test session, for all pytest-xdist workers."""

import fcntl
import json
import os
import tempfile


def build_once(request, name, build):
    """The result of build(folder), run once per session and read by every caller.

    Under pytest-xdist every worker sets up a module fixture of its own, and those
    of the bad-input tables and of the serving export took 35 to 55 s on each of
    the 2 workers. `--dist loadgroup` cannot keep their tests on one worker: with
    pytest 9.2 and pytest-xdist 3.8 it is ignored, as xdist appends the group to
    item._nodeid while pytest's nodeid now reads item._id.

    So the first caller of `name` runs build(folder) on a new folder of the
    session's temporary directory (under xdist, the parent of the worker's own,
    which all the workers of a session share), holding an exclusive lock the
    other callers wait for, and writes the result to `name`.json last; a caller
    that finds that file returns what it holds. A build that raised, or whose
    process died, leaves no such file, so the next caller builds again. The
    result must be JSON-serialisable (tuples come back as lists). The folder and
    the result are shared: tests must not change them.
    """
    base = request.getfixturevalue("tmp_path_factory").getbasetemp()
    if hasattr(request.config, "workerinput"):  # a pytest-xdist worker
        base = base.parent
    done = base / (name + ".json")
    with open(base / (name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            result = build(tempfile.mkdtemp(prefix=name + "-", dir=base))
            partial = base / (name + ".json.partial")
            partial.write_text(json.dumps(result))
            os.replace(partial, done)
        return json.loads(done.read_text())
