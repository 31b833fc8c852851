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
(returncode -9 after the timeout).
"""

import importlib
import json
import os
import runpy
import sys
import tempfile
import time


def run_child(case, out_path, err_path):
    """In the forked child: runs the script as __main__ and exits with its code."""
    code = 0
    try:
        os.chdir(case["cwd"])
        os.environ.update(case.get("env") or {})
        stdin_fd = os.open(os.devnull, os.O_RDONLY)
        if case.get("stdin") is not None:
            stdin_file = tempfile.TemporaryFile()
            stdin_file.write(case["stdin"].encode("utf-8"))
            stdin_file.seek(0)
            stdin_fd = stdin_file.fileno()
        os.dup2(stdin_fd, 0)
        for fd, path in ((1, out_path), (2, err_path)):
            os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), fd)
        sys.argv = list(case["argv"])
        sys.path[0] = os.path.dirname(os.path.abspath(case["argv"][0]))
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
        index, _ = running.pop(pid)
        results[index] = {"returncode": os.waitstatus_to_exitcode(status)}
        for key, suffix in (("stdout", "out"), ("stderr", "err")):
            with open(os.path.join(scratch, "%d.%s" % (index, suffix)),
                      encoding="utf-8", errors="replace") as f:
                results[index][key] = f.read()
    return results


def main():
    request = json.load(sys.stdin)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path.insert(0, repo)
    for module in request.get("preload", []):
        importlib.import_module(module)
    results = run_cases(request["cases"], request.get("parallel", 2),
                        request.get("timeout", 300))
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
