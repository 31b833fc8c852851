"""`--hf_dir` as a Hugging Face Hub model id: `FacebookAI/xlm-roberta-base` -> a local folder.

When --hf_dir is not a folder but reads as `owner/name`, the model is fetched with
huggingface_hub's `snapshot_download`, and only what conversion reads: config.json,
one weights format (safetensors if the model has it, else pytorch_model.bin; the
shards and their index too) and the tokenizer files. The files land in
huggingface_hub's own cache, laid out as it lays it out
(`$HF_HOME/hub/models--owner--name/snapshots/<revision>/`, the revision in
`refs/main`), so a second conversion, or one with HF_HUB_OFFLINE=1 or no network,
reads them from there. Offline with no copy in the cache is one line.

The cache folder and the offline switch are read from the environment at each call
(HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub; HF_HUB_OFFLINE), not
from huggingface_hub's constants, which it fixes when it is first imported.
"""

import os
import re

from bert_toolkit.errors import InputError

# An id as the Hub spells one: owner/name, each of letters, digits, '-', '_', '.'.
_MODEL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")

# What conversion reads besides the weights (the tokenizer files of every family,
# and sentence-transformers' pooling settings, which only add a note).
_WANTED_FILES = ("config.json", "vocab.txt", "tokenizer.json", "vocab.json", "merges.txt",
                 "sentencepiece.bpe.model", "spiece.model", "tokenizer_config.json",
                 "special_tokens_map.json", "added_tokens.json", "1_Pooling/config.json")
_SAFETENSORS = ("model.safetensors", "model.safetensors.index.json", "model-*.safetensors")
_PYTORCH = ("pytorch_model.bin", "pytorch_model.bin.index.json", "pytorch_model-*.bin")

# huggingface_hub's errors that mean "no such model" rather than "cannot reach the
# Hub" (by name: they moved between its modules over the versions we accept).
_NOT_FOUND_ERRORS = ("RepositoryNotFoundError", "GatedRepoError", "RevisionNotFoundError")


def looks_like_model_id(text):
    """True for `owner/name`: what a Hub model id looks like (not a path to a file)."""
    return bool(_MODEL_ID.match(text or ""))


def cache_dir(environ=None):
    """The hub cache folder huggingface_hub would use with this environment."""
    environ = os.environ if environ is None else environ
    if environ.get("HF_HUB_CACHE"):
        return environ["HF_HUB_CACHE"]
    home = environ.get("HF_HOME") or os.path.join(
        environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "huggingface")
    return os.path.join(home, "hub")


def is_offline(environ=None):
    """HF_HUB_OFFLINE set to a true value (1, true, yes, on), as huggingface_hub reads it."""
    environ = os.environ if environ is None else environ
    return environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def wanted_patterns(repo_files):
    """allow_patterns for snapshot_download: the tokenizer and config files, and the
    safetensors weights if the repository has them, else the torch ones."""
    names = set(repo_files)
    has_safetensors = bool(names & {"model.safetensors", "model.safetensors.index.json"})
    return list(_WANTED_FILES) + list(_SAFETENSORS if has_safetensors else _PYTORCH)


def _one_line(error):
    return " ".join(str(error).split()) or type(error).__name__


def _from_cache(model_id, folder, reason):
    from huggingface_hub import snapshot_download
    try:
        return snapshot_download(model_id, cache_dir=folder, local_files_only=True)
    except Exception:  # noqa: BLE001  (any failure here means: not in the cache)
        raise InputError("--hf_dir %s: not a folder, and %s with no copy of that Hub model "
                         "in the cache %s" % (model_id, reason, folder))


def download(model_id):
    """The local folder of Hub model `model_id`: fetched (the files conversion reads),
    or from the cache when offline. InputError for an unknown or gated model, or
    offline without a cached copy."""
    try:
        import huggingface_hub
    except ImportError:
        raise InputError("--hf_dir %s: not a folder; to fetch it as a Hub model id, "
                         "pip install huggingface_hub" % model_id)
    folder = cache_dir()
    if is_offline():
        return _from_cache(model_id, folder, "HF_HUB_OFFLINE is set")
    try:
        files = huggingface_hub.list_repo_files(model_id)
        return huggingface_hub.snapshot_download(model_id, cache_dir=folder,
                                                 allow_patterns=wanted_patterns(files))
    except Exception as e:  # noqa: BLE001  (network errors differ by version and backend)
        if type(e).__name__ in _NOT_FOUND_ERRORS:
            raise InputError("--hf_dir %s: no such folder, and the Hugging Face Hub has no "
                             "model by that id that we may read (%s)"
                             % (model_id, _one_line(e)))
        return _from_cache(model_id, folder, "the Hub cannot be reached (%s)" % _one_line(e))


def resolve(hf_dir):
    """(local folder, model id or None) for --hf_dir: a folder as it is, an `owner/name`
    that is not one fetched from the Hub; InputError for anything else."""
    if os.path.isdir(hf_dir):
        return hf_dir, None
    if not os.path.exists(hf_dir) and looks_like_model_id(hf_dir):
        return download(hf_dir), hf_dir
    raise InputError("--hf_dir %s: no such folder" % os.path.abspath(hf_dir))
