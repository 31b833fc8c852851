"""Where an export lives and what it holds, shared by the exporter, client and server.

    <output_dir>/serving/<version>/saved_model.pb, variables/, assets.extra/
        assets.extra/vocab.txt            the WordPiece vocabulary
        assets.extra/serving_config.json  what a client needs to build inputs

`<version>` is an integer (the export time in seconds), as TensorFlow Serving
requires; it serves the highest. No TensorFlow here: the client and the
server's request handling do not need it.
"""

import os

from bert_toolkit.errors import InputError

# The inputs of every export's serving_default signature: int32 [batch, max_seq_length].
SERVING_INPUTS = ("input_ids", "input_mask", "segment_ids")
SERVING_DIR = "serving"
SAVED_MODEL_FILE = "saved_model.pb"
ASSETS_EXTRA = "assets.extra"
VOCAB_FILE = "vocab.txt"
SERVING_CONFIG_FILE = "serving_config.json"


def version_dirs(base_path):
    """[(version, path)] of `base_path`'s integer subfolders holding a SavedModel,
    oldest first (TensorFlow Serving serves the highest)."""
    if not os.path.isdir(base_path):
        return []
    found = []
    for name in os.listdir(base_path):
        path = os.path.join(base_path, name)
        if name.isdigit() and os.path.isfile(os.path.join(path, SAVED_MODEL_FILE)):
            found.append((int(name), path))
    return sorted(found)


def resolve_version_dir(path):
    """(version, folder) of the SavedModel `path` names: a version folder itself, or a
    model base path, whose highest integer version is taken. `version` is None for a
    SavedModel folder whose name is not an integer."""
    if os.path.isfile(os.path.join(path, SAVED_MODEL_FILE)):
        name = os.path.basename(os.path.normpath(path))
        return (int(name) if name.isdigit() else None), path
    versions = version_dirs(path)
    if not versions:
        raise InputError("%s: no SavedModel here; expected a folder with %s, or a model base "
                         "path with integer version folders holding one (as "
                         "run_custom_classifier.py --save_for_serving writes)"
                         % (path, SAVED_MODEL_FILE))
    return versions[-1]


def resolve_assets(export_dir=None, vocab_file=None, serving_config=None):
    """(vocab_file, serving_config_file): given explicitly, else from the export's
    assets.extra/ (an explicit file wins over the export's)."""
    if export_dir:
        _, version_dir = resolve_version_dir(export_dir)
        extra = os.path.join(version_dir, ASSETS_EXTRA)
        vocab_file = vocab_file or os.path.join(extra, VOCAB_FILE)
        serving_config = serving_config or os.path.join(extra, SERVING_CONFIG_FILE)
    if not (vocab_file and serving_config):
        raise InputError("give --export_dir (the exported model), or both --vocab_file and "
                         "--serving_config")
    return vocab_file, serving_config
