"""`pip install .` gives a package that works without the checkout: its console commands
run from any folder, and Google's root modules are the package's own.

The install goes to a --target folder (no dependencies: the test environment has
them) from a copy of the checkout's package files, so the checkout itself stays
untouched, and the commands run from an empty folder with only that target on
PYTHONPATH.
"""

import glob
import os
import shutil
import subprocess
import sys

import pytest

from tiny import REPO, write_sentiment_csv, write_tiny_model

COMMANDS = ("bert-toolkit", "bert-run-classifier", "bert-run-custom-classifier",
            "bert-run-custom-classifier-mlabel",
            "bert-run-seq-labeling", "bert-run-squad", "bert-run-reranking",
            "bert-run-pretraining", "bert-create-pretraining-data", "bert-extract-features",
            "bert-convert-hf-checkpoint", "bert-export-hf", "bert-serving-server",
            "bert-serving-client", "bert-train")


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(target folder with the installed package, its bin folder)."""
    root = tmp_path_factory.mktemp("install")
    source = root / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(os.path.join(REPO, name), str(source / name))
    shutil.copytree(os.path.join(REPO, "bert_toolkit"), str(source / "bert_toolkit"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    target = root / "target"
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
         "--no-build-isolation", "--disable-pip-version-check", "--target", str(target),
         str(source)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return str(target), str(target / "bin")


def _run(installed, command, *args, cwd):
    target, bin_dir = installed
    env = dict(os.environ, PYTHONPATH=target, TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run([os.path.join(bin_dir, command)] + list(args), cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def test_every_console_command_is_installed(installed):
    _, bin_dir = installed
    assert sorted(os.listdir(bin_dir)) == sorted(COMMANDS)
    target = installed[0]
    assert not glob.glob(os.path.join(target, "tests")) and not glob.glob(
        os.path.join(target, "modeling.py"))  # Google's root names stay in the checkout


def test_a_console_command_fine_tunes_and_predicts_from_an_empty_folder(installed, tmp_path):
    model = write_tiny_model(str(tmp_path / "model"))
    data = tmp_path / "data"
    data.mkdir()
    write_sentiment_csv(str(data / "train.csv"), 16, seed=1)
    write_sentiment_csv(str(data / "test.csv"), 6, seed=2)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = _run(installed, "bert-run-classifier", "--task_name=custom", "--data_dir=" +
                  str(data), "--text_a_column=sentence", "--label_column=label",
                  "--vocab_file=" + model["vocab_file"],
                  "--bert_config_file=" + model["bert_config_file"],
                  "--init_checkpoint=" + model["init_checkpoint"], "--output_dir=out",
                  "--max_seq_length=16", "--train_batch_size=4", "--num_train_epochs=1",
                  "--do_train", "--do_predict", cwd=str(elsewhere))
    assert result.returncode == 0, result.stderr[-3000:]
    with open(str(elsewhere / "out" / "test_results.tsv")) as f:
        assert len(f.read().splitlines()) == 6
    probe = subprocess.run(
        [sys.executable, "-c", "import bert_toolkit; print(bert_toolkit.__file__)"],
        cwd=str(elsewhere), env=dict(os.environ, PYTHONPATH=installed[0]),
        capture_output=True, text=True, timeout=120)
    assert probe.stdout.strip().startswith(installed[0])


def test_a_console_commands_mistake_is_one_line(installed, tmp_path):
    result = _run(installed, "bert-run-squad", "--do_train", "--output_dir=out",
                  "--bert_config_file=c.json", cwd=str(tmp_path))
    assert result.returncode == 1
    assert result.stderr.strip() == "error: --train_file is required with --do_train"
    assert not os.path.exists(str(tmp_path / "out"))


def test_googles_root_modules_are_the_packages_own():
    code = ("import modeling, optimization, tokenization\n"
            "from bert_toolkit.model import modeling as m, optimization as o\n"
            "from bert_toolkit.text import tokenization as t\n"
            "assert modeling is m and optimization is o and tokenization is t\n"
            "assert modeling.BertModel and tokenization.FullTokenizer\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]



def requirement_lines(lines):
    """Requirements with spaces dropped and quotes made alike, sorted."""
    return sorted(line.replace(" ", "").replace("'", '"') for line in lines)


def test_pyproject_and_requirements_txt_pin_the_same_platforms():
    with open(os.path.join(REPO, "requirements.txt")) as f:
        pinned = [line.split("#")[0].strip() for line in f]
    with open(os.path.join(REPO, "pyproject.toml")) as f:
        text = f.read()
    # The dependencies array, one quoted requirement a line (tomllib is 3.11+).
    block = text[text.index("dependencies = ["):]
    block = block[:block.index("\n]")]
    declared = [line.strip().rstrip(",")[1:-1] for line in block.splitlines()[1:]
                if line.strip().startswith('"')]
    assert requirement_lines(declared) == requirement_lines(line for line in pinned if line)
