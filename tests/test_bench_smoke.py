"""Every benchmark command runs end to end on a tiny config, without peers.

The numbers mean nothing here; what is checked is that the commands of
docs/performance.md still run through our code paths (Estimator training,
SavedModel export and serving, tokenization) and print their tables, so the
benchmarks cannot rot. The peers are switched off (--peer=none) so the test
needs neither torch nor transformers. Each command runs as a child of the test
worker's fork server (tests/script_runs.py); the sides a bench runs in
interpreters of their own start as they do for a user.
"""

import json
import os
import sys

import pytest

import script_runs
from tiny import REPO

pytestmark = pytest.mark.bench


def run_bench(script, *flags):
    result = script_runs.run([os.path.join(REPO, "bench", script)] + list(flags),
                             env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"), timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.mark.long
def test_finetune_bench_runs_the_estimator():
    out = run_bench("finetune_bench.py", "--config=tiny", "--seq_length=16", "--batch=4",
                    "--precision=fp32,bf16", "--rounds=1", "--steps_per_round=2",
                    "--warmup_steps=1", "--peak_size=128", "--peer=none",
                    "--mixed_precision=casts,graph_rewrite")
    assert "ours fp32" in out and "examples/s" in out
    assert "ours bf16 " in out and "ours bf16 by graph rewrite" in out
    assert "ours fp32 by graph rewrite" not in out
    assert "peer skipped: --peer=none" in out


def test_finetune_bench_runs_a_family_beside_its_baseline(tmp_path):
    config = tmp_path / "roberta" / "bert_config.json"
    config.parent.mkdir()
    config.write_text(json.dumps(dict(
        vocab_size=96, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, hidden_act="gelu_exact", max_position_embeddings=66,
        type_vocab_size=1, model_family="roberta", layer_norm_eps=1e-5)))
    out = run_bench("finetune_bench.py", "--config=%s" % config, "--baseline_config=tiny",
                    "--seq_length=16", "--batch=4", "--precision=fp32", "--rounds=1",
                    "--steps_per_round=2", "--warmup_steps=1", "--peak_size=128",
                    "--peer=none")
    assert "ours fp32 [tiny]" in out and "ours fp32 / its tiny: " in out


def test_pretraining_bench_trains_run_pretrainings_model_fn(tmp_path):
    results = str(tmp_path / "pretraining.json")
    out = run_bench("pretraining_bench.py", "--config=tiny", "--seq_length=32", "--batch=4",
                    "--rounds=1", "--steps_per_round=2", "--warmup_steps=1",
                    "--peak_size=128", "--peer=none", "--json=%s" % results)
    assert "pre-training tiny, seq 32, 5 masked positions" in out
    assert "ours fp32 adamw" in out and "ours fp32 lamb" in out
    assert "peer skipped: --peer=none" in out
    # docs/performance.md's tables are printed from such files.
    table = run_bench("results_table.py", results).splitlines()
    assert table[0] == "| bench run | ours |"
    assert [line.split(" | ")[0] for line in table[2:]] == [
        "| pre-training tiny, seq 32, batch 4, fp32 adamw",
        "| pre-training tiny, seq 32, batch 4, fp32 lamb"]


def test_pretraining_bench_profile_names_the_masked_lm_head():
    out = run_bench("pretraining_bench.py", "--config=tiny", "--seq_length=32", "--batch=4",
                    "--steps_per_round=2", "--warmup_steps=1", "--peak_size=128",
                    "--peer=none", "--profile", "--optimizer=adamw")
    assert "part of the model" in out and "forward: masked-LM head" in out
    assert "no matmul ran for" in out and "while no matmul runs" in out


def test_matmul_free_wall_shares_out_the_time_no_matmul_ran():
    sys.path.insert(0, os.path.join(REPO, "bench"))
    import estimator_rounds
    spans = [("a, MatMul", True, 0.0, 1.0), ("b, Cast", False, 0.5, 2.0),
             ("c, AddN", False, 1.5, 3.0), ("d, MatMul", True, 3.0, 4.0),
             ("e, Adam", False, 4.2, 4.5), ("f, Cast", False, 1.2, 1.2)]
    walls, matmul_free = estimator_rounds.matmul_free_wall(spans)
    assert walls == pytest.approx({"step": 4.5, "no matmul": 2.5, "after matmuls": 0.5})
    # 1.0-1.5 b alone, 1.5-2.0 b and c, 2.0-3.0 c alone; 4.0-4.2 nothing; 4.2-4.5 e.
    assert matmul_free == pytest.approx({"b, Cast": 0.75, "c, AddN": 1.25,
                                         "(no op working)": 0.2, "e, Adam": 0.3})


def test_inference_bench_serves_the_export():
    out = run_bench("inference_bench.py", "--config=tiny", "--seq_length=16", "--batch=4",
                    "--precision=fp32", "--rounds=1", "--steps_per_round=2",
                    "--warmup_steps=1", "--peak_size=128", "--peer=none", "--onednn=on,off",
                    # One interpreter, given explicitly: its sides keep their plain names.
                    "--tf_python=%s" % sys.executable)
    assert "ours SavedModel fp32 oneDNN on" in out
    assert "ours SavedModel fp32 oneDNN off" in out
    assert "oneDNN on TF" not in out and "ours ran under" not in out


def test_tokenization_bench_checks_identical_features(tmp_path):
    sys.path.insert(0, os.path.join(REPO, "tests"))
    from tiny import TINY_WORDS
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]"] + TINY_WORDS) + "\n")
    texts = tmp_path / "texts.txt"
    texts.write_text("the movie was great .\nthe plot , not the acting , was dull\n"
                     "Une critique très élogieuse !\n")
    out = run_bench("tokenization_bench.py", "--texts=%s" % texts, "--vocab_file=%s" % vocab,
                    "--max_seq_length=8", "--rounds=1", "--peer=none")
    assert "ours rust / ours python" in out
    assert "identical input_ids, input_mask, segment_ids: ours rust yes, ours python yes" in out


def test_ablation_bench_builds_the_variants():
    out = run_bench("ablation_bench.py", "--config=tiny", "--seq_length=16", "--batch=4",
                    "--rounds=1", "--steps_per_round=1",
                    "--variants=fp32,fused-qkv,bf16,no-optimizer,unfused-adamw,float-dropout,"
                    "fused-scores,bf16-unfused,bf16-recompute,fp32-fused,bf16-apply-adam,"
                    "bf16-no-optimizer")
    assert "fused-qkv" in out and "no-optimizer" in out and "float-dropout" in out
    assert "fused-scores" in out and "unfused-adamw" in out and "bf16-unfused" in out
    assert "bf16-recompute" in out and "fp32-fused" in out and "bf16-apply-adam" in out
    assert "bf16-no-optimizer" in out


def test_text_serving_bench_compares_in_graph_with_client_tokenizing():
    out = run_bench("text_serving_bench.py", "--clients=2", "--requests=2", "--rounds=1",
                    "--rows_per_request=2", "--warmup_requests=1")
    assert "in-graph / client tokenizes" in out
    assert "same probabilities (atol 1e-4): yes" in out


@pytest.mark.parametrize("script", ["finetune_bench.py", "pretraining_bench.py",
                                    "inference_bench.py",
                                    "tokenization_bench.py", "ablation_bench.py",
                                    "text_serving_bench.py"])
def test_bench_help(script):
    assert "usage" in run_bench(script, "--help")


@pytest.mark.long
def test_accumulation_bench_times_both_revisions():
    out = run_bench("accumulation_bench.py", "--config=tiny", "--seq_length=32", "--batch=2",
                    "--accumulation=2", "--updates=2", "--before=%s" % REPO,
                    "--layouts=replicas", "--reviews=40")
    assert "round 1: replicas, before:" in out and "round 1: replicas, after:" in out
    assert "all-reduced per update and replica: before 2 x" in out
