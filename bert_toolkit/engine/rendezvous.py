"""A cluster from one address: --cluster=tcp://HOST:PORT builds every worker's TF_CONFIG.

For clusters with neither Slurm nor Kubernetes (and for Distributed_BERT's
`--distributed-init-method tcp://HOST:PORT`), every worker is started with the
same address, the number of workers and its own rank:

    worker 0   listens at HOST:PORT (HOST must name its machine);
    worker r   connects there (retrying while worker 0 is not up yet) and says
               its rank and the address its TensorFlow server will take: the
               interface it reached HOST through, and a port free there;
    worker 0   when all have arrived, answers each with the list of every
               worker's address (its own first), and closes the port.

Every worker then runs with the same cluster in TF_CONFIG, {"worker": [...]}
with its rank as task index, and from there on trains exactly as with a
TF_CONFIG written by hand (multi_worker.py: MultiWorkerMirroredStrategy, the
stop vote, the lost-worker rule). Nothing waits forever: a worker that never
arrives ends worker 0 after `timeout_seconds` with one line, and worker 0
tells the workers that had arrived the same line; a worker 0 that never
listens ends the others after the same time; a worker that disagrees on the
number of workers, or a rank given twice, ends them all at once.

The messages are one line of JSON each way; a connection that does not speak
it (a port scanner, say) is dropped and does not count.
"""

import json
import socket
import time
import urllib.parse

from bert_toolkit.errors import InputError, LostWorker

SCHEME = "tcp://"
_PROTOCOL = "bert_toolkit-rendezvous-1"
_MAX_MESSAGE = 1 << 16
# How long a worker 0 that has heard from everyone waits at most for one reply
# to leave, and how often a worker retries a worker 0 that is not listening yet.
_SEND_SECONDS = 10.0
_RETRY_SECONDS = 0.5


def is_address(value):
    """True for a --cluster value of the form tcp://HOST:PORT."""
    return isinstance(value, str) and value.startswith(SCHEME)


def parse_address(value, flag="--cluster"):
    """(host, port) of tcp://HOST:PORT; InputError naming `flag` otherwise."""
    parsed = urllib.parse.urlsplit(value) if is_address(value) else None
    try:
        port = parsed.port if parsed else None
    except ValueError:
        port = None
    if not parsed or not parsed.hostname or port is None or parsed.path not in ("", "/"):
        raise InputError("%s=%s: expected tcp://HOST:PORT, the address worker 0 listens at "
                         "(e.g. tcp://10.0.0.1:11111)" % (flag, value))
    return parsed.hostname, port


def describe(address):
    """The cluster line's start: where the cluster came from."""
    return "cluster: met at %s" % address


def tf_config(address, world_size, rank, timeout_seconds=300, flag="--cluster"):
    """The TF_CONFIG text of worker `rank` of `world_size`, met at `address`
    (tcp://HOST:PORT); blocks until every worker has arrived (see the module
    docstring). InputError for a bad address or disagreeing workers, LostWorker
    when a worker is still missing after `timeout_seconds`."""
    host, port = parse_address(address, flag)
    if not 0 <= rank < world_size:
        raise InputError("%s=%s: rank %d is not in 0..%d (the cluster has %d workers)"
                         % (flag, address, rank, world_size - 1, world_size))
    if rank == 0:
        workers = _serve(host, port, world_size, timeout_seconds, address, flag)
    else:
        workers = _join(host, port, world_size, rank, timeout_seconds, address)
    return json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker",
                                                                 "index": rank}})


def _free_port(host):
    """A port nothing listens on now at `host`'s interface (TensorFlow's server
    takes it moments later)."""
    with socket.socket(_family(host), socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _family(host):
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def _join_host_port(host, port):
    return "[%s]:%d" % (host, port) if ":" in host else "%s:%d" % (host, port)


def _send(connection, message):
    connection.sendall((json.dumps(message) + "\n").encode("utf-8"))


def _receive(connection, deadline):
    """The next line of JSON from `connection` as a dict; None if it closed, sent
    something else, or said nothing before `deadline` (time.time())."""
    data = b""
    while b"\n" not in data and len(data) < _MAX_MESSAGE:
        remaining = deadline - time.time()
        if remaining <= 0:
            return None
        connection.settimeout(remaining)
        try:
            piece = connection.recv(4096)
        except (socket.timeout, OSError):
            return None
        if not piece:
            return None
        data += piece
    try:
        message = json.loads(data.split(b"\n", 1)[0].decode("utf-8"))
    except ValueError:
        return None
    return message if isinstance(message, dict) else None


# -- worker 0 ------------------------------------------------------------------------

def _listen(host, port, address, flag):
    """The listening socket of worker 0; InputError if HOST:PORT cannot be taken."""
    listener = socket.socket(_family(host), socket.SOCK_STREAM)
    # A rerun (after a stop, a requeue) takes the port again at once.
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
    except OSError as e:
        listener.close()
        raise InputError("%s=%s: rank 0 cannot listen there (%s): start rank 0 on the "
                         "machine %s names, with the port free"
                         % (flag, address, e.strerror or e, host))
    listener.listen(64)
    return listener


def _serve(host, port, world_size, timeout_seconds, address, flag):
    """Worker 0: waits for ranks 1..world_size-1 and answers them all; returns the
    workers' addresses."""
    listener = _listen(host, port, address, flag)
    deadline = time.time() + timeout_seconds
    arrived = {0: (None, _join_host_port(host, _free_port(host)))}
    try:
        while len(arrived) < world_size:
            problem = _accept_one(listener, arrived, world_size, deadline,
                                  "%s=%s: " % (flag, address))
            if problem:
                _tell_all(arrived, {"error": problem})
                raise InputError(problem)
            if time.time() >= deadline and len(arrived) < world_size:
                missing = [r for r in range(world_size) if r not in arrived]
                line = ("%s=%s: rank(s) %s never arrived in %d s (started with the same "
                        "address and world size? --cluster_timeout_seconds waits longer)"
                        % (flag, address, ", ".join(map(str, missing)), timeout_seconds))
                _tell_all(arrived, {"error": line})
                raise LostWorker(line)
        workers = [arrived[r][1] for r in range(world_size)]
        _tell_all(arrived, {"protocol": _PROTOCOL, "workers": workers})
        return workers
    finally:
        listener.close()
        for connection, _ in arrived.values():
            if connection is not None:
                connection.close()


def _accept_one(listener, arrived, world_size, deadline, prefix=""):
    """Accepts one connection before `deadline` and records its rank in `arrived`
    (rank -> (connection, address)); returns the line (starting with `prefix`)
    that ends every worker when the newcomer disagrees with the cluster, else
    None."""
    listener.settimeout(max(0.05, min(1.0, deadline - time.time())))
    try:
        connection, _ = listener.accept()
    except (socket.timeout, OSError):
        return None
    message = _receive(connection, min(deadline, time.time() + _SEND_SECONDS))
    if not message or message.get("protocol") != _PROTOCOL:
        connection.close()  # not one of ours
        return None
    rank, size = message.get("rank"), message.get("world_size")
    if size != world_size:
        problem = ("rank %s was started with a world size of %s, rank 0 with %d: every "
                   "worker needs the same" % (rank, size, world_size))
    elif not isinstance(rank, int) or not 0 < rank < world_size:
        problem = "a worker arrived with rank %r, expected 1..%d" % (rank, world_size - 1)
    elif rank in arrived:
        problem = "rank %d arrived twice (%s and %s): every worker needs its own rank" % (
            rank, arrived[rank][1], message.get("address"))
    else:
        arrived[rank] = (connection, str(message.get("address")))
        return None
    problem = prefix + problem
    _tell_one(connection, {"error": problem})
    connection.close()
    return problem


def _tell_one(connection, message):
    try:
        connection.settimeout(_SEND_SECONDS)
        _send(connection, message)
    except OSError:
        pass  # that worker is gone; the lost-worker rule covers it from here


def _tell_all(arrived, message):
    for connection, _ in arrived.values():
        if connection is not None:
            _tell_one(connection, message)


# -- the other workers ---------------------------------------------------------------

def _connect(host, port, deadline, address, timeout_seconds):
    """A connection to worker 0, retried until `deadline`; LostWorker after it."""
    while True:
        try:
            return socket.create_connection((host, port), timeout=_RETRY_SECONDS * 4)
        except OSError:
            if time.time() + _RETRY_SECONDS >= deadline:
                raise LostWorker("--cluster=%s: rank 0 did not listen there in %d s (start "
                                 "rank 0 on the machine %s names, with the same address; "
                                 "--cluster_timeout_seconds waits longer)"
                                 % (address, timeout_seconds, host))
            time.sleep(_RETRY_SECONDS)


def _join(host, port, world_size, rank, timeout_seconds, address):
    """Worker `rank` (> 0): reports to worker 0 and returns the workers' addresses
    it answers with."""
    deadline = time.time() + timeout_seconds
    with _connect(host, port, deadline, address, timeout_seconds) as connection:
        # The interface that reaches worker 0 is the one the others reach us on.
        own_host = connection.getsockname()[0]
        own = _join_host_port(own_host, _free_port(own_host))
        connection.settimeout(_SEND_SECONDS)
        _send(connection, {"protocol": _PROTOCOL, "rank": rank, "world_size": world_size,
                           "address": own})
        # Worker 0 answers within its own timeout, which started before we connected.
        answer = _receive(connection, time.time() + timeout_seconds + _SEND_SECONDS)
    if answer is None:
        raise LostWorker("--cluster=%s: rank 0 closed the connection without naming the "
                         "cluster (it ended, or gave up waiting)" % address)
    if "error" in answer:
        raise InputError(str(answer["error"]))
    workers = answer.get("workers")
    if not (isinstance(workers, list) and len(workers) == world_size
            and workers[rank] == own):
        raise LostWorker("--cluster=%s: rank 0 answered with another cluster (%r)"
                         % (address, answer))
    return workers
