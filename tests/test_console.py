"""What a run prints: progress lines with time left, and no TensorFlow chatter."""

import os
import subprocess
import sys

import pytest

from bert_toolkit import console

from tiny import REPO, write_sentiment_csv, write_tiny_model


def test_progress_line_and_when_it_is_due():
    line = console.progress_line("step", 150, 300, 26.24, "examples", 70, 70.4,
                                 [("loss", 0.41234), ("learning rate", 4.2e-05)])
    assert line == ("step 150/300 (50%), 26.2 examples/s, 1 min 10 s elapsed, "
                    "1 min 10 s left, loss 0.4123, learning rate 4.2e-05")
    assert console.progress_line("step", 300, 300, 1, "examples", 7300, 0).endswith(
        "2 h 01 min elapsed, done")
    assert console.is_due(1, 0, 0.0, 0.0, every_n=50, total=300)        # the first step
    assert not console.is_due(10, 1, 5.0, 0.0, every_n=50, total=300)
    assert console.is_due(51, 1, 5.0, 0.0, every_n=50, total=300)       # every n steps
    assert console.is_due(10, 1, 31.0, 0.0, every_n=50, total=300)      # or every ~30 s
    assert console.is_due(300, 290, 1.0, 0.0, every_n=50, total=300)    # and the last
    # Training steps: at each multiple of n, whatever step the last line was at.
    assert console.is_due(50, 12, 5.0, 0.0, every_n=50, total=300, aligned=True)
    assert not console.is_due(61, 50, 5.0, 0.0, every_n=50, total=300, aligned=True)
    assert not console.is_due(50, 12, 5.0, 0.0, every_n=50, total=300)


def test_progress_counts_to_the_total_with_time_left():
    now = [0.0]
    progress = console.Progress("example", 100, every_n=25, clock=lambda: now[0], show=False)
    now[0] = 10.0
    progress.add(25)
    assert progress.line() == ("example 25/100 (25%), 2.5 examples/s, 10 s elapsed, "
                               "30 s left")
    now[0] = 40.0
    progress.add(75)
    assert progress.line().endswith("40 s elapsed, done")


def test_progress_rate_and_time_left_leave_out_the_first_batchs_start_up():
    """An evaluation's first batch also starts the session: 8 of 800 examples in
    2 s would promise 3 min 18 s. No line then; the next one is at the pace of
    the batches after it."""
    now, lines = [0.0], []
    progress = console.Progress("example", 800, clock=lambda: now[0])
    progress._print = lambda at: lines.append(progress.line(at))
    now[0] = 2.0
    progress.add(8)
    assert lines == []
    now[0] = 3.0
    progress.add(168)
    assert lines == ["example 176/800 (22%), 168.0 examples/s, 3 s elapsed, 4 s left"]
    now[0] = 6.0
    progress.add(624)
    progress.finish()
    assert lines[-1] == "example 800/800 (100%), 198.0 examples/s, 6 s elapsed, done"
    # Predictions handed over one by one from the first batch: no line within a
    # second of the first, and no rate from a moment.
    lines.clear()
    now[0] = 0.0
    progress = console.Progress("example", 4, clock=lambda: now[0])
    progress._print = lambda at: lines.append(progress.line(at))
    now[0] = 2.0
    progress.add(1)
    now[0] = 2.001
    progress.add(1)
    assert lines == []
    progress.add(2)
    progress.finish()
    assert lines == ["example 4/4 (100%), 2.0 examples/s, 2 s elapsed, done"]


# Both compile XLA kernels, whose first compilation logs lines of its own
# (tensorflow_env.xla_kernel): bf16 its element-wise chains and AdamW, fp32 AdamW.
@pytest.mark.parametrize("precision", ["bf16", "fp32"])
def test_short_training_shows_progress_and_a_final_line_and_no_chatter(tmp_path, precision):
    model = write_tiny_model(str(tmp_path / "model"))
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    write_sentiment_csv(str(data_dir / "train.csv"), 24, seed=1)
    write_sentiment_csv(str(data_dir / "dev.csv"), 10, seed=2)
    result = subprocess.run(
        [sys.executable, "run_custom_classifier.py", "--task_name=custom",
         "--data_dir=%s" % data_dir, "--text_a_column=sentence", "--label_column=label",
         "--output_dir=%s" % (tmp_path / "out"), "--max_seq_length=16",
         "--train_batch_size=4", "--num_train_epochs=1", "--do_train", "--do_eval",
         "--precision=%s" % precision]
        + ["--%s=%s" % item for item in model.items()],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stderr.splitlines()
    progress = [line for line in lines if line.startswith("step ")]
    # 6 steps, far fewer than --log_every_n_steps (50): still a line soon after
    # the start with the time left, and a final one that counts every step.
    assert len(progress) >= 2, result.stderr
    assert " left, " in progress[0]
    assert progress[-1].startswith("step 6/6 (100%)")
    assert ", done, loss " in progress[-1] and ", learning rate " in progress[-1]
    assert any(line.startswith("eval: accuracy ") for line in lines)
    for chatter in ("Calling model_fn", "Using config", "local_init_op", "INFO:tensorflow",
                    "includes params argument", "XLA", "absl"):
        assert chatter not in result.stderr
    assert len(lines) < 25, result.stderr
    print(result.stderr)


def test_a_rate_below_one_a_second_keeps_three_digits():
    line = console.progress_line("step", 2, 2, 0.0117, "examples", 85.0, 0.0)
    assert line.startswith("step 2/2 (100%), 0.0117 examples/s, 1 min 25 s elapsed")
