"""serving_server.py started and stopped for tests, on a free loopback port."""

import os
import re
import signal
import subprocess
import sys

from tiny import REPO

ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
MAX_REQUEST_BYTES = 64 * 1024
MAX_ROWS = 40


def start_server(base_path, *flags):
    """(process, model URL) of serving_server.py on a free loopback port."""
    process = subprocess.Popen(
        [sys.executable, "serving_server.py", "--model_name=tiny",
         "--model_base_path=%s" % base_path, "--port=0",
         "--max_request_bytes=%d" % MAX_REQUEST_BYTES,
         "--max_rows_per_request=%d" % MAX_ROWS] + list(flags),
        cwd=REPO, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        universal_newlines=True)
    return process


def server_url(process):
    """The model URL the server prints once it listens (fails with its stderr if it died)."""
    line = process.stdout.readline()
    match = re.search(r" at (http://\S+)", line)
    if not match:
        process.kill()
        raise AssertionError("server did not start: %s\n%s" % (line, process.stderr.read()[-3000:]))
    return match.group(1)


def stop(process):
    """SIGTERM, then the exit code (killing it if it does not stop within 20 s)."""
    process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        return None
