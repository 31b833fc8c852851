"""Run folders of every head export_hf.py writes, on all-MiniLM-L6-v2's real weights.

The encoder is the Hub's all-MiniLM-L6-v2 as convert_hf_checkpoint.py converts it
(bert_toolkit.assets); each head's variables are drawn from a generator seeded per
case, so the folders are the same on every machine. A folder holds what a training
run leaves: model.ckpt-1.*, bert_config.json, vocab.txt and (for a fine-tuned head)
serving_config.json with the task's records. tests/convert/test_hf_export.py and
tests/fixtures/make_hf_export_reference.py (which records transformers' outputs on
the exported folders) both build them here.
"""

import json
import os

import numpy as np

from bert_toolkit import assets
from bert_toolkit.convert import hf_checkpoint

# case -> (serving_config.json or None, head variable name -> shape factory).
SENTIMENT = ["negative", "neutral", "positive"]
TOPICS = ["politics", "sports", "science", "arts"]
ENTITIES = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG"]
MAX_SEQ_LENGTH = 128


def _fine_tuned(task, labels=(), **settings):
    return dict({"task": task, "labels": list(labels), "do_lower_case": True,
                 "max_seq_length": MAX_SEQ_LENGTH}, **settings)


CASES = {
    "classifier": _fine_tuned("classification", SENTIMENT, pooling="pooler",
                              multi_label=False, long_text="truncate"),
    "classifier_mean": _fine_tuned("classification", SENTIMENT, pooling="mean",
                                   multi_label=False, long_text="truncate"),
    "multi_label": _fine_tuned("classification", TOPICS, pooling="pooler", multi_label=True,
                               long_text="truncate"),
    "tagger": _fine_tuned("token_classification", ENTITIES),
    "squad": _fine_tuned("squad", max_seq_length=384, doc_stride=128),
    "pretraining": None,
    "encoder": None,
}


def head_shapes(case, hidden, vocab_size):
    """name -> shape of the variables `case`'s head adds to the encoder's."""
    serving_config = CASES[case]
    if case == "pretraining":
        return {"cls/predictions/transform/dense/kernel": (hidden, hidden),
                "cls/predictions/transform/dense/bias": (hidden,),
                "cls/predictions/transform/LayerNorm/gamma": (hidden,),
                "cls/predictions/transform/LayerNorm/beta": (hidden,),
                "cls/predictions/output_bias": (vocab_size,),
                "cls/seq_relationship/output_weights": (2, hidden),
                "cls/seq_relationship/output_bias": (2,)}
    if case == "squad":
        return {"cls/squad/output_weights": (2, hidden), "cls/squad/output_bias": (2,)}
    if serving_config is None:
        return {}
    labels = len(serving_config["labels"])
    return {"output_weights": (labels, hidden), "output_bias": (labels,)}


def head_variables(case, hidden, vocab_size):
    """name -> float32 array: the seeded head of `case` (scaled so logits spread ~1)."""
    rng = np.random.RandomState(sorted(CASES).index(case) + 1)
    variables = {}
    for name, shape in sorted(head_shapes(case, hidden, vocab_size).items()):
        scale = 0.02 if name.endswith("kernel") else 0.1
        value = rng.standard_normal(shape) * scale
        if name.endswith("gamma"):
            value += 1.0
        variables[name] = value.astype(np.float32)
    return variables


def make_run_dir(case, folder):
    """Writes `case`'s run folder (see the module docstring); returns it."""
    import tensorflow as tf
    minilm = assets.minilm_checkpoint()
    reader = tf.train.load_checkpoint(minilm["init_checkpoint"])
    variables = {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}
    config = hf_checkpoint.read_json(minilm["bert_config_file"])
    variables.update(head_variables(case, config["hidden_size"], config["vocab_size"]))
    os.makedirs(folder, exist_ok=True)
    hf_checkpoint.write_checkpoint(variables, os.path.join(folder, "model.ckpt-1"))
    with open(os.path.join(folder, "checkpoint"), "w") as f:
        f.write('model_checkpoint_path: "model.ckpt-1"\n')
    for key in ("bert_config_file", "vocab_file"):
        with open(minilm[key], "rb") as source, \
                open(os.path.join(folder, os.path.basename(minilm[key])), "wb") as target:
            target.write(source.read())
    if CASES[case] is not None:
        with open(os.path.join(folder, "serving_config.json"), "w") as f:
            json.dump(CASES[case], f, indent=2, sort_keys=True)
    return folder


def export_case(case, root):
    """root/<case>-run (made here) exported to root/<case>; returns the hf folder."""
    from bert_toolkit.convert import hf_export
    from bert_toolkit.convert.options import ExportHfOptions
    run_dir = make_run_dir(case, os.path.join(root, case + "-run"))
    hf_dir = os.path.join(root, case)
    hf_export.export(ExportHfOptions(model_dir=run_dir, hf_dir=hf_dir))
    return hf_dir


def folder_digests(folder):
    """relative path -> sha256 hex of every file under `folder`."""
    import hashlib
    digests = {}
    for base, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(base, name)
            with open(path, "rb") as f:
                digests[os.path.relpath(path, folder)] = hashlib.sha256(f.read()).hexdigest()
    return dict(sorted(digests.items()))
