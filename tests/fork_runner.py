"""Runs many command lines of the entry scripts fast: one process imports
TensorFlow and the libraries once, then each command runs in a forked child.

A child is a real run of the script as `python script.py args...` would do it
(its own flags, exit code, stdout and stderr on file descriptors 1 and 2), minus
the seconds of importing TensorFlow again. The parent never runs a TensorFlow
op, which keeps forking safe.

    python tests/fork_runner.py < request.json > results.json

request: {"preload": [module, ...], "parallel": N, "timeout": seconds,
          "cases": [{"argv": [script, arg, ...], "cwd": dir, "env": {name: value},
                     "stdin": text or null}, ...]}
results: [{"returncode": int, "stdout": text, "stderr": text}, ...] in case order
(returncode -9 after the timeout). A case's "environ", if given, replaces the whole
environment (then "env" is added to it).

    python tests/fork_runner.py --serve

preloads PRELOAD, then answers each line of standard input (one case as JSON, with
its "timeout") with one line of standard output (its result as JSON), until end
of input: the server behind tests/script_runs.py. A line {"start": case} instead
forks the case's child and answers {"pid": pid} at once, the child writing to the
files the case names ("stdout", "stderr": paths, the same one for both allowed;
added to, as every child's files are); {"poll": pid} answers {"returncode": code or
null}: the workers of a cluster, runs to signal or kill.
"""

import importlib
import json
import os
import runpy
import sys
import tempfile
import time

# sys.path without this script's folder: a child's is its script's folder + this,
# as a fresh `python script.py` has.
INTERPRETER_PATH = sys.path[1:]
# What the entry scripts import: the children find it imported.
PRELOAD = ["tensorflow", "bert_toolkit.cli.main", "bert_toolkit.cli.flags",
           "bert_toolkit.engine.fine_tuning",
           "bert_toolkit.tasks.classification.task", "bert_toolkit.tasks.seq_labeling.task",
           "bert_toolkit.tasks.squad.task", "bert_toolkit.tasks.reranking.task",
           "bert_toolkit.tasks.pretraining.task", "bert_toolkit.tasks.pretraining.writer",
           "bert_toolkit.tasks.features.extraction", "bert_toolkit.serving.client",
           "bert_toolkit.serving.server", "bert_toolkit.convert.hf_checkpoint",
           # The learning curve a run evaluated during training draws.
           "matplotlib.pyplot"]
# The toolkit's once-per-process caches (pure Python and numpy, about 1 s): built in
# the server, the children find them filled.
WARM = [("bert_toolkit.text.tokenization", "_char_tables"),
        ("bert_toolkit.text.graph_tokenization", "_unicode_tables")]


def run_child(case, out_path, err_path):
    """In the forked child: runs the script as __main__ and exits with its code.
    Its output is added to `out_path` and `err_path`: a run case's are fresh
    scratch files, a started one's were made (or kept) by its caller."""
    code = 0
    try:
        os.chdir(case["cwd"])
        if case.get("environ") is not None:
            os.environ.clear()
            os.environ.update(case["environ"])
        os.environ.update(case.get("env") or {})
        stdin_fd = os.open(os.devnull, os.O_RDONLY)
        if case.get("stdin") is not None:
            stdin_file = tempfile.TemporaryFile()
            stdin_file.write(case["stdin"].encode("utf-8"))
            stdin_file.seek(0)
            stdin_fd = stdin_file.fileno()
        os.dup2(stdin_fd, 0)
        # A fresh sys.stdin: the inherited one may hold bytes the server read ahead.
        sys.stdin = open(0, encoding="utf-8", closefd=False)
        opened = {}  # one open file for a path named twice: one offset, no overwriting
        for fd, path in ((1, out_path), (2, err_path)):
            if path not in opened:
                opened[path] = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.dup2(opened[path], fd)
        sys.argv = list(case["argv"])
        sys.path[:] = [os.path.dirname(os.path.abspath(case["argv"][0]))] + INTERPRETER_PATH
        runpy.run_path(case["argv"][0], run_name="__main__")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        import traceback
        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


# Exit codes of started children (start_child) reaped by run_cases_in's wait for
# any child, kept for their poll.
EXITED = {}


def start_child(case):
    """Forks the child of `case` and returns its pid without waiting for it."""
    pid = os.fork()
    if pid == 0:
        run_child(case, case.get("stdout") or os.devnull, case.get("stderr") or os.devnull)
    return pid


def poll_child(pid):
    """The exit code of the started child `pid`, or None while it runs."""
    if pid not in EXITED:
        reaped, status = os.waitpid(pid, os.WNOHANG)
        if reaped == 0:
            return None
        EXITED[pid] = os.waitstatus_to_exitcode(status)
    return EXITED[pid]


def run_cases(cases, parallel, timeout):
    """The results of `cases`, at most `parallel` children at a time."""
    with tempfile.TemporaryDirectory(prefix="fork_runner_") as scratch:
        return run_cases_in(scratch, cases, parallel, timeout)


def run_cases_in(scratch, cases, parallel, timeout):
    """run_cases with the children's output files in the folder `scratch`."""
    results = [None] * len(cases)
    running = {}  # pid -> (index, started)
    pending = list(range(len(cases)))
    while pending or running:
        while pending and len(running) < parallel:
            index = pending.pop(0)
            out_path = os.path.join(scratch, "%d.out" % index)
            err_path = os.path.join(scratch, "%d.err" % index)
            pid = os.fork()
            if pid == 0:
                run_child(cases[index], out_path, err_path)
            running[pid] = (index, time.time())
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            for child, (index, started) in list(running.items()):
                if time.time() - started > timeout:
                    os.kill(child, 9)
            time.sleep(0.01)
            continue
        if pid not in running:  # a started child, not one of these cases
            EXITED[pid] = os.waitstatus_to_exitcode(status)
            continue
        index, _ = running.pop(pid)
        results[index] = {"returncode": os.waitstatus_to_exitcode(status)}
        for key, suffix in (("stdout", "out"), ("stderr", "err")):
            with open(os.path.join(scratch, "%d.%s" % (index, suffix)),
                      encoding="utf-8", errors="replace") as f:
                results[index][key] = f.read()
    return results


def preload(modules):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for module in modules:
        importlib.import_module(module)


def serve():
    """One result line on stdout for each case line on stdin, until stdin ends."""
    preload(PRELOAD)
    for module, function in WARM:
        getattr(importlib.import_module(module), function)()
    for line in iter(sys.stdin.readline, ""):
        request = json.loads(line)
        if "start" in request:
            result = {"pid": start_child(request["start"])}
        elif "poll" in request:
            result = {"returncode": poll_child(request["poll"])}
        else:
            (result,) = run_cases([request], 1, request.get("timeout", 600))
        sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()


def main():
    if sys.argv[1:] == ["--serve"]:
        return serve()
    request = json.load(sys.stdin)
    preload(request.get("preload", []))
    results = run_cases(request["cases"], request.get("parallel", 2),
                        request.get("timeout", 300))
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
