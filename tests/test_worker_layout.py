"""tests/conftest.py's layout of the tests over pytest-xdist's worksteal blocks."""

from conftest import layout_for_workers


def kind_of(name):
    return {"L": "long", "S": "slow"}.get(name[0])


def test_each_block_starts_with_its_share_of_the_heavy_tests():
    names = ["f%d" % i for i in range(30)] + ["S%d" % i for i in range(5)] + ["L0", "L1"]
    laid_out = layout_for_workers(names, 2, kind_of)
    assert sorted(laid_out) == sorted(names)
    first, second = laid_out[:37 // 2], laid_out[37 // 2:]  # the blocks worksteal cuts
    # The long tests head the first block; the slow ones even out the heavy counts.
    assert first[:4] == ["L0", "L1", "S2", "S4"] and second[:3] == ["S0", "S1", "S3"]
    assert kind_of(first[-1]) is None and kind_of(second[-1]) is None


def test_one_worker_runs_the_heavy_tests_first_and_few_tests_still_all_run():
    names = ["f0", "S0", "L0", "f1"]
    assert layout_for_workers(names, 1, kind_of) == ["L0", "S0", "f0", "f1"]
    assert sorted(layout_for_workers(names, 3, kind_of)) == sorted(names)
