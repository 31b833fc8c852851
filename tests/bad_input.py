"""Running bad-input cases of the entry scripts and checking the one-line contract.

The contract every script keeps for a user's mistake: exit code 1, stderr is
exactly one line starting with "error: " that names the file, line, flag or
variable, and every folder the run could write to is byte-for-byte as it was
(absent if it was absent). Cases run through tests/fork_runner.py: one process
imports TensorFlow once, each case is a forked child running the real script.
"""

import collections
import hashlib
import json
import os
import re
import subprocess
import sys
import types

import fork_runner
import shared_fixture

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

Result = collections.namedtuple("Result", ["command", "returncode", "stdout", "stderr",
                                           "before", "after"])


def snapshot(path):
    """None if `path` does not exist, else relative path -> sha256 of every file
    under it (folders map to None), so any byte written shows."""
    if not os.path.lexists(path):
        return None
    if not os.path.isdir(path):
        return {".": _digest(path)}
    listing = {}
    for folder, _, files in os.walk(path):
        listing[os.path.relpath(folder, path) + "/"] = None
        for name in files:
            full = os.path.join(folder, name)
            listing[os.path.relpath(full, path)] = _digest(full)
    return listing


def _digest(path):
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError as e:  # unreadable on purpose (a permissions case)
        return "unreadable: %s" % e.strerror


def run_commands(commands, watched, stdin=None, envs=None, timeout=300):
    """Result of each command (argv lists, script first), run in forked children.

    watched[i]: the paths command i must leave as they were (snapshots before
    and after). stdin[i]: text for its standard input, or None; envs[i]: extra
    environment variables, or None.
    """
    stdin = stdin or [None] * len(commands)
    envs = envs or [None] * len(commands)
    before = [[snapshot(path) for path in paths] for paths in watched]
    request = {"preload": fork_runner.PRELOAD, "parallel": 2, "timeout": timeout,
               "cases": [{"argv": argv, "cwd": REPO, "stdin": text,
                          "env": dict(env or {}, TF_CPP_MIN_LOG_LEVEL="3")}
                         for argv, text, env in zip(commands, stdin, envs)]}
    process = subprocess.run([sys.executable, os.path.join(REPO, "tests", "fork_runner.py")],
                             input=json.dumps(request), capture_output=True, text=True,
                             cwd=REPO, timeout=timeout * len(commands))
    assert process.returncode == 0, process.stderr[-3000:]
    results = json.loads(process.stdout)
    return [Result(argv, r["returncode"], r["stdout"], r["stderr"], b,
                   [snapshot(path) for path in paths])
            for argv, r, b, paths in zip(commands, results, before, watched)]


def run_once(request, name, run_cases):
    """(world, case name -> (case folder, Result)) from run_cases(folder), which
    makes its world in the folder, runs the cases and returns (the world's
    attributes, case name -> (case folder, Result)): run once per session for all
    test workers (shared_fixture.build_once); world is a namespace of those
    attributes. Tests must leave the folders alone."""
    world, by_name = shared_fixture.build_once(request, name, run_cases)
    return types.SimpleNamespace(**world), {
        case: (folder, Result(*result)) for case, (folder, result) in by_name.items()}


def check_one_error_line(result, expected_parts, exit_code=1, preamble=None):
    """Asserts the contract for `result`; `expected_parts` must be in the line.

    preamble: a regular expression the lines before the error may match (a
    streaming script's start line, printed before it reaches a bad line).
    """
    context = "command: %s\nstderr:\n%s" % (" ".join(result.command), result.stderr[-3000:])
    assert result.returncode == exit_code, context
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    if preamble:
        while len(lines) > 1 and re.match(preamble, lines[0]):
            lines.pop(0)
    assert len(lines) == 1 and lines[0].startswith("error: "), context
    for part in expected_parts:
        assert part in lines[0], "%r not in the message\n%s" % (part, context)
    for before, after in zip(result.before, result.after):
        if before is None:
            assert after in (None, {"./": None}), (after, context)
        else:
            assert after == before, context
