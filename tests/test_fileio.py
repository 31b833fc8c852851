"""Line-numbered reading, atomic writes and folder checks (fileio.py)."""

import os

import pytest
import tensorflow as tf

from bert_toolkit.engine import input_pipeline

tf1 = tf.compat.v1


def test_interrupted_write_leaves_no_file(tmp_path):
    def broken_rows():
        yield {"input_ids": [1]}
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        input_pipeline.cached_tfrecord(str(tmp_path), "train", {"k": 1}, broken_rows)
    assert os.listdir(str(tmp_path)) == []


def test_count_lines_counts_a_last_line_without_newline(tmp_path):
    from bert_toolkit import fileio
    path = str(tmp_path / "lines.txt")
    for content, expected in ((b"", 0), (b"a\n", 1), (b"a\nb", 2), (b"\n\n", 2),
                              (b"x" * 10 + b"\n" + b"y" * 5, 2)):
        with open(path, "wb") as f:
            f.write(content)
        # A block size of 3 puts newlines on block edges.
        assert fileio.count_lines(path, block_size=3) == expected, content


def test_a_failed_block_removes_only_the_folders_it_made(tmp_path):
    from bert_toolkit import fileio
    kept = tmp_path / "kept"
    kept.mkdir()
    target = kept / "new" / "deeper"
    with pytest.raises(RuntimeError):
        with fileio.new_folders_removed_on_failure(str(target)):
            assert target.is_dir()
            raise RuntimeError("a bad line")
    assert os.listdir(str(kept)) == []
    with pytest.raises(RuntimeError):
        with fileio.new_folders_removed_on_failure(str(target)):
            (kept / "new" / "other.txt").write_text("not ours")
            raise RuntimeError("a bad line")
    assert sorted(os.listdir(str(kept / "new"))) == ["other.txt"]  # "deeper" went
    with fileio.new_folders_removed_on_failure(str(target)):
        pass
    assert target.is_dir()
