"""Run folders of every family and head export_hf.py writes, from the Hub-layout fixtures.

A case is a family's fixture folder (tests/fixtures/families/<case>/) converted by
convert_hf_checkpoint, and a role: what a run of a task leaves in its output_dir
(bert_model.ckpt with the encoder and the task's head drawn from a generator seeded
per case and role, bert_config.json, the tokenizer files, serving_config.json for a
fine-tuned head). tests/convert/test_family_export.py and
tests/fixtures/make_family_export_reference.py (which records what transformers
makes of the exported folders) both build them here, so the folders are the same
on every machine.
"""

import json
import os
import shutil

import numpy as np

from bert_toolkit.convert import hf_checkpoint, hf_export
from bert_toolkit.convert.options import ExportHfOptions
from bert_toolkit.model import modeling

from hf_export_models import folder_digests  # noqa: F401  (the tests read it here)

HERE = os.path.dirname(os.path.abspath(__file__))
FAMILIES_DIR = os.path.join(os.path.dirname(HERE), "fixtures", "families")
REFERENCE = os.path.join(os.path.dirname(HERE), "fixtures", "family_export_reference")

CASES = ["roberta", "xlm-roberta", "electra", "distilbert", "albert", "modernbert",
         "deberta-v3", "deberta-v3-nobuckets"]
# A case's model_family where the case is not named as its family.
FAMILIES = {"deberta-v3": "deberta-v2", "deberta-v3-nobuckets": "deberta-v2"}
LABELS = ["negative", "neutral", "positive"]
ENTITIES = ["O", "B-ENT", "I-ENT"]
MAX_SEQ_LENGTH = 64

# role -> serving_config.json of the run (None: no fine-tuned head).
ROLES = {
    "encoder": None,
    "classifier": {"task": "classification", "labels": LABELS, "pooling": "pooler",
                   "multi_label": False, "long_text": "truncate",
                   "max_seq_length": MAX_SEQ_LENGTH},
    "mean": {"task": "classification", "labels": LABELS, "pooling": "mean",
             "multi_label": False, "long_text": "truncate", "max_seq_length": MAX_SEQ_LENGTH},
    "tagger": {"task": "token_classification", "labels": ENTITIES,
               "max_seq_length": MAX_SEQ_LENGTH},
    "squad": {"task": "squad", "max_seq_length": MAX_SEQ_LENGTH},
    "pretraining": None,
}

_HEAD_PREFIXES = ("cls/", "output_", "bert/pooler/")


def roles(case, converted_dir):
    """The roles a case exports: all, but pre-training only where the fixture's class
    has a masked-LM head (ElectraModel has none)."""
    variables = read_variables(os.path.join(converted_dir, hf_checkpoint.CHECKPOINT_NAME))
    has_mlm = "cls/predictions/output_bias" in variables
    return [role for role in ROLES if role != "pretraining" or has_mlm]


def read_variables(prefix):
    """name -> float32 array of every variable of a checkpoint."""
    import tensorflow as tf
    reader = tf.train.load_checkpoint(prefix)
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def _seeded(shapes, seed):
    """name -> float32 array: a head drawn from a generator seeded per case and role,
    scaled so that logits spread about 1."""
    rng = np.random.RandomState(seed)
    variables = {}
    for name, shape in sorted(shapes.items()):
        variables[name] = (rng.standard_normal(shape) * 0.3).astype(np.float32)
    return variables


def run_variables(case, role, converted_dir):
    """The variables of the case's run for `role`: the converted encoder, a pooler (a
    seeded one where the source had none, as a run's graph always makes one), and the
    role's head (the converted masked-LM and sentence heads for pre-training)."""
    converted = read_variables(os.path.join(converted_dir, hf_checkpoint.CHECKPOINT_NAME))
    config = hf_checkpoint.read_json(os.path.join(converted_dir,
                                                  hf_checkpoint.BERT_CONFIG_NAME))
    hidden = config["hidden_size"]
    seed = CASES.index(case) * 10 + list(ROLES).index(role) + 1
    variables = {n: v for n, v in converted.items() if not n.startswith(_HEAD_PREFIXES)}
    pooler = {n: v for n, v in converted.items() if n.startswith("bert/pooler/")}
    pooler_shapes = {n: tuple(s) for n, s in modeling.bert_variable_shapes(
        modeling.BertConfig.from_dict(config)).items() if n.startswith("bert/pooler/")}
    variables.update(pooler or _seeded(pooler_shapes, seed + 100))
    if role == "pretraining":
        variables.update({n: v for n, v in converted.items() if n.startswith("cls/")})
    elif role == "squad":
        variables.update(_seeded({"cls/squad/output_weights": (2, hidden),
                                  "cls/squad/output_bias": (2,)}, seed))
    elif ROLES[role] is not None:
        labels = len(ROLES[role]["labels"])
        variables.update(_seeded({"output_weights": (labels, hidden),
                                  "output_bias": (labels,)}, seed))
    return variables


def converted_dir(case, root):
    """root/converted/<case>: the fixture converted once (made here if absent)."""
    folder = os.path.join(root, "converted", case)
    if not os.path.isdir(folder):
        hf_checkpoint.convert(os.path.join(FAMILIES_DIR, case), folder)
    return folder


def make_run_dir(case, role, root):
    """root/<case>-<role>-run: a Google-layout folder standing for the run's output_dir."""
    source = converted_dir(case, root)
    folder = os.path.join(root, "%s-%s-run" % (case, role))
    os.makedirs(folder)
    for name in os.listdir(source):
        if not name.startswith(hf_checkpoint.CHECKPOINT_NAME):
            shutil.copyfile(os.path.join(source, name), os.path.join(folder, name))
    hf_checkpoint.write_checkpoint(run_variables(case, role, source),
                                   os.path.join(folder, hf_checkpoint.CHECKPOINT_NAME))
    if ROLES[role] is not None:
        with open(os.path.join(folder, "serving_config.json"), "w") as f:
            json.dump(ROLES[role], f, indent=2, sort_keys=True)
    return folder


def export_case(case, role, root):
    """Exports the case's run for `role` to root/<case>-<role>; returns that folder."""
    run_dir = make_run_dir(case, role, root)
    hf_dir = os.path.join(root, "%s-%s" % (case, role))
    hf_export.export(ExportHfOptions(model_dir=run_dir, hf_dir=hf_dir))
    return hf_dir

