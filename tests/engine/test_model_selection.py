"""The chief's evaluation record as the other workers of a cluster wait for it
(engine/model_selection.py)."""

import os
import threading
import time

import pytest

from bert_toolkit.engine import model_selection
from bert_toolkit.errors import LostWorker


def test_a_worker_gets_the_chiefs_record_while_the_chief_shows_it_is_alive(
        tmp_path, monkeypatch):
    monkeypatch.setattr(model_selection, "HEARTBEAT_SECONDS", 0.2)
    out = str(tmp_path)
    entry = model_selection.next_entry([], 8, {"accuracy": 0.75}, "accuracy", patience=1)

    def chief():
        with model_selection.evaluating(out, 8):
            time.sleep(2.0)  # an evaluation longer than the silence allowed below
            model_selection.append_entry(out, entry)

    thread = threading.Thread(target=chief)
    thread.start()
    try:
        got = model_selection.wait_for_entry(out, 8, silent_seconds=1.0)
    finally:
        thread.join()
    assert got["step"] == 8 and got["report"]["accuracy"] == 0.75 and not got["stop"]
    assert not os.path.exists(os.path.join(out, model_selection.EVALUATING_FILE))


def test_a_silent_chief_is_reported_lost_with_how_to_resume(tmp_path):
    started = time.time()
    with pytest.raises(LostWorker, match="has not evaluated step 16.*resume from the last "
                                         "checkpoint in " + str(tmp_path)):
        model_selection.wait_for_entry(str(tmp_path), 16, silent_seconds=1.0)
    assert time.time() - started < 5
