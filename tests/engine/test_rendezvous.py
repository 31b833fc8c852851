"""--cluster=tcp://HOST:PORT: workers meet at one address and get one cluster.

The rendezvous runs here in threads of one process (it is plain sockets); the
scripts' runs of it, with training after, are in
tests/tasks/pretraining/test_distributed_bert.py.
"""

import json
import socket
import threading
import time

import pytest

from bert_toolkit.engine import multi_worker, rendezvous
from bert_toolkit.engine.options import RunOptions
from bert_toolkit.errors import InputError, LostWorker

from tiny import free_port


def meet(address, world_size, ranks, timeout=5.0, delays=None, sizes=None):
    """rank -> the TF_CONFIG dict, or the exception, of each of `ranks` started in
    a thread (after delays[rank] seconds, with world size sizes[rank])."""
    results = {}

    def run(rank):
        time.sleep((delays or {}).get(rank, 0))
        try:
            size = (sizes or {}).get(rank, world_size)
            results[rank] = json.loads(rendezvous.tf_config(address, size, rank, timeout))
        except (InputError, LostWorker) as e:
            results[rank] = e
    threads = [threading.Thread(target=run, args=(rank,)) for rank in ranks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout + 30)
    return results


def test_every_worker_gets_the_same_cluster_whoever_comes_first():
    address = "tcp://127.0.0.1:%d" % free_port()
    # Workers 1 and 2 start before worker 0 listens: they retry until it does.
    results = meet(address, 3, [1, 2, 0], delays={2: 0.3, 0: 1.0})
    clusters = [results[rank]["cluster"] for rank in range(3)]
    assert clusters[0] == clusters[1] == clusters[2]
    workers = clusters[0]["worker"]
    assert len(workers) == 3 and len(set(workers)) == 3
    assert all(w.startswith("127.0.0.1:") for w in workers)
    assert [results[rank]["task"] for rank in range(3)] == [
        {"type": "worker", "index": rank} for rank in range(3)]
    # TF_CONFIG as multi_worker reads it: worker 0 is the chief.
    task = multi_worker.parse_tf_config(json.dumps(results[1]))
    assert (task.num_workers, task.worker_index, task.is_chief) == (3, 1, False)


def test_a_worker_that_never_arrives_ends_the_others_in_one_line():
    address = "tcp://127.0.0.1:%d" % free_port()
    start = time.time()
    results = meet(address, 3, [0, 1], timeout=1.5)
    assert time.time() - start < 15
    line = ("--cluster=%s: rank(s) 2 never arrived in 1 s (started with the same address and "
            "world size? --cluster_timeout_seconds waits longer)" % address)
    assert isinstance(results[0], LostWorker) and str(results[0]) == line
    assert isinstance(results[1], InputError) and str(results[1]) == line


def test_a_worker_0_that_never_listens_ends_the_others():
    address = "tcp://127.0.0.1:%d" % free_port()
    results = meet(address, 2, [1], timeout=1.0)
    assert isinstance(results[1], LostWorker)
    assert "rank 0 did not listen there in 1 s" in str(results[1])


@pytest.mark.parametrize("sizes, fragment", [
    ({1: 3}, "rank 1 was started with a world size of 3, rank 0 with 2: every worker "
             "needs the same"),
])
def test_workers_that_disagree_end_together(sizes, fragment):
    address = "tcp://127.0.0.1:%d" % free_port()
    results = meet(address, 2, [0, 1], timeout=5.0, sizes=sizes, delays={1: 0.2})
    for rank in (0, 1):
        assert isinstance(results[rank], InputError)
        assert str(results[rank]) == "--cluster=%s: %s" % (address, fragment)


def test_a_rank_given_twice_ends_the_cluster():
    address = "tcp://127.0.0.1:%d" % free_port()
    results = {}

    def twice():
        try:
            rendezvous.tf_config(address, 3, 1, 5.0)
        except InputError as e:
            results.setdefault("second", []).append(str(e))
    threads = [threading.Thread(target=twice) for _ in range(2)]
    for thread in threads:
        thread.start()
    with pytest.raises(InputError, match="rank 1 arrived twice"):
        rendezvous.tf_config(address, 3, 0, 5.0)
    for thread in threads:
        thread.join(30)
    assert any("rank 1 arrived twice" in line for line in results["second"])


def test_a_stranger_on_the_port_does_not_count():
    address = "tcp://127.0.0.1:%d" % free_port()
    host, port = rendezvous.parse_address(address)

    def stranger():
        time.sleep(0.3)
        with socket.create_connection((host, port)) as s:
            s.sendall(b"GET / HTTP/1.0\r\n\r\n")
    threading.Thread(target=stranger).start()
    results = meet(address, 2, [0, 1], delays={1: 0.8})
    assert results[0]["cluster"] == results[1]["cluster"]


def test_worker_0_on_a_port_it_cannot_take_says_so():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        address = "tcp://127.0.0.1:%d" % busy.getsockname()[1]
        with pytest.raises(InputError, match="rank 0 cannot listen there"):
            rendezvous.tf_config(address, 2, 0, 1.0)


@pytest.mark.parametrize("value", ["tcp://10.0.0.1", "tcp://:11111", "tcp://h:port",
                                   "tcp://h:1/x", "tcp:/h:1"])
def test_a_bad_address_is_one_line(value):
    with pytest.raises(InputError, match="expected tcp://HOST:PORT"):
        rendezvous.parse_address(value)


def test_the_cluster_flags_are_checked_together():
    base = dict(bert_config_file="c.json", output_dir="o")
    assert RunOptions(cluster="tcp://h:1", cluster_world_size=2, cluster_rank=1, **base)
    cases = [
        (dict(cluster="tcp://h:1"), "--cluster=tcp://h:1 needs --cluster_world_size=N"),
        (dict(cluster="tcp://h:1", cluster_world_size=2, cluster_rank=2),
         "--cluster_rank=2 is not in 0..1"),
        (dict(cluster="nodes"), "--cluster=nodes: expected one of auto, tf_config, slurm, "
                                "local, or tcp://HOST:PORT"),
        (dict(cluster="auto", cluster_world_size=2), "go with --cluster=tcp://HOST:PORT"),
    ]
    for changes, message in cases:
        with pytest.raises(InputError) as raised:
            RunOptions(**dict(base, **changes))
        assert message in str(raised.value)


def test_a_world_of_one_is_one_process():
    text, description = multi_worker.resolve_cluster("tcp://127.0.0.1:1", world_size=1)
    assert text is None and "one process" in description
