"""Runs an entry script as `python script.py args...` would, without importing
TensorFlow again for each run.

The first run starts a server (`tests/fork_runner.py --serve`) that imports
TensorFlow and the toolkit once; each run is then a child forked from it that
runs the real script as __main__ with the given arguments, working directory,
environment and standard input, and exits with the script's code (see
fork_runner.run_child). That saves the 4-5 s of CPU a fresh interpreter spends
importing TensorFlow, each time. A run whose environment differs from the
server's in a variable read while TensorFlow or Python start up
(IMPORT_TIME_VARIABLES) gets a fresh interpreter instead, so it sees that
setting as a user's run would.

`start` is subprocess.Popen's counterpart, for the runs a test signals, kills or
runs side by side (the workers of a cluster): a forked child with its own pid,
writing to files, with the Popen methods those tests use.
"""

import atexit
import json
import os
import re
import signal
import subprocess
import sys
import time

from tiny import REPO

# Read once, when Python starts or TensorFlow is imported: a run that sets them
# otherwise than the server cannot share its imports. TF_CONFIG and the thread
# counts are read later, by the run itself.
IMPORT_TIME_VARIABLES = re.compile(r"^(PYTHON|CUDA_|TF_(?!CONFIG$|NUM_INTRAOP_THREADS$"
                                   r"|NUM_INTEROP_THREADS$))")

_running = None  # (server process, its environment)


def _shares_imports(env, server_env):
    """True if `env` and `server_env` agree on IMPORT_TIME_VARIABLES."""
    return all(env.get(name) == server_env.get(name)
               for name in set(env) | set(server_env) if IMPORT_TIME_VARIABLES.match(name))


def _server_environment():
    """The environment of this process's server (of the one it would start)."""
    if _running is not None and _running[0].poll() is None:
        return _running[1]
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")


def _server():
    """The server of this process, started if none runs."""
    global _running
    if _running is None or _running[0].poll() is not None:
        env = _server_environment()
        process = subprocess.Popen(
            [sys.executable, os.path.join(REPO, "tests", "fork_runner.py"), "--serve"],
            cwd=REPO, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        atexit.register(_stop, process)
        _running = (process, env)
    return _running


def _stop(process):
    if process.poll() is None:
        process.stdin.close()  # its loop ends with its input
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


def run(argv, cwd=REPO, env=None, input=None, timeout=1200):
    """subprocess.run([sys.executable] + argv, cwd=cwd, env=env, input=input,
    capture_output=True, text=True) for argv = [script, flag, ...]: a
    CompletedProcess with the exit code and what the script printed. A run past
    `timeout` seconds is killed (returncode -9)."""
    env = dict(os.environ if env is None else env)
    if not _shares_imports(env, _server_environment()):
        return subprocess.run([sys.executable] + list(argv), cwd=cwd, env=env, input=input,
                              capture_output=True, text=True, timeout=timeout)
    result = _ask({"argv": list(argv), "cwd": str(cwd), "environ": env, "stdin": input,
                   "timeout": timeout})
    return subprocess.CompletedProcess([sys.executable] + list(argv), result["returncode"],
                                       result["stdout"], result["stderr"])


def _ask(request):
    """The server's answer to one request (fork_runner.serve)."""
    server, _ = _server()
    server.stdin.write(json.dumps(request) + "\n")
    server.stdin.flush()
    line = server.stdout.readline()
    if not line:
        raise RuntimeError("tests/fork_runner.py --serve ended (exit code %s)"
                           % server.wait())
    return json.loads(line)


def start(argv, cwd=REPO, env=None, stdout=None, stderr=None, append=False):
    """subprocess.Popen([sys.executable] + argv, cwd=cwd, env=env) for argv =
    [script, flag, ...], its output written to the file `stdout` and `stderr`
    (paths, which exist when this returns; None: discarded; the same path for
    both: one log), added to them with `append`. Returns a StartedRun, or a Popen
    where the run needs a fresh interpreter (see `run`)."""
    env = dict(os.environ if env is None else env)
    for path in {stdout, stderr} - {None}:
        open(path, "a" if append else "w").close()
    if not _shares_imports(env, _server_environment()):
        files = [open(path, "a") if path else subprocess.DEVNULL for path in (stdout, stderr)]
        if stdout and stderr == stdout:
            files[1] = subprocess.STDOUT
        try:
            return subprocess.Popen([sys.executable] + list(argv), cwd=cwd, env=env,
                                    stdout=files[0], stderr=files[1])
        finally:
            for f in files:
                if hasattr(f, "close"):
                    f.close()
    pid = _ask({"start": {"argv": list(argv), "cwd": str(cwd), "environ": env,
                          "stdout": stdout and str(stdout),
                          "stderr": stderr and str(stderr)}})["pid"]
    return StartedRun([sys.executable] + list(argv), pid)


class StartedRun:
    """A script run by `start`, with the subprocess.Popen interface the tests use:
    pid, returncode, poll, wait, send_signal, terminate, kill. Its exit code comes
    from the server, the child's parent."""

    def __init__(self, args, pid):
        self.args, self.pid, self.returncode = args, pid, None

    def poll(self):
        if self.returncode is None:
            self.returncode = _ask({"poll": self.pid})["returncode"]
        return self.returncode

    def wait(self, timeout=None):
        deadline = None if timeout is None else time.time() + timeout
        while self.poll() is None:
            if deadline is not None and time.time() > deadline:
                raise subprocess.TimeoutExpired(self.args, timeout)
            time.sleep(0.02)
        return self.returncode

    def send_signal(self, sig):
        # A child that exits after this poll stays a zombie until the server's
        # next request reaps it, so its pid cannot have been reused by then.
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self):
        self.send_signal(signal.SIGTERM)

    def kill(self):
        self.send_signal(signal.SIGKILL)
