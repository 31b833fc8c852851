"""The Python API: run a task from its options, predict with a model in this process,
hand a model back as a Hugging Face folder.

`run` is what every entry script does after reading its flags, so a notebook
gets the same checks, files and numbers as a command line, and the report
back. `predict` answers raw text as serving_client.py does against TensorFlow
Serving (the same tokenization, windows and answers: serving/client.py), with
the SavedModel loaded here instead of behind a URL; given a run's output_dir
without an export, it exports the run's latest checkpoint first.
"""

import os

from bert_toolkit import console, fileio
from bert_toolkit.engine import export_layout, run_folder
from bert_toolkit.errors import InputError
from bert_toolkit.tasks import registry

# Settings that only mean something while training, back to their defaults when a
# trained run's options are used again to export it.
_TRAINING_ONLY = {"class_weights": None, "eval_every_n_steps": 0, "eval_every_epoch": False,
                  "best_metric": None, "early_stopping_patience": 0}


def run(options):
    """Runs the task whose options class `options` is (a ClassifierOptions runs the
    classifier, ...); returns its report (engine/launch.py Report for the
    training tasks). errors.InputError on a user mistake, before anything is
    written; errors.Stopped when a signal stopped training (its step is saved)."""
    entry = registry.entry_for(options)  # imports the task, and so TensorFlow
    console.setup()
    return entry.run(options)


def predict(model, texts, texts_b=None, batch_size=32):
    """Answers for raw `texts` from an exported model, in this process.

    model: an export's version folder (e.g. Report.export_dir) or base folder
    (its newest version), or a run's output_dir (its newest export; with none,
    its latest checkpoint is exported first, as --save_for_serving would, from
    the options its training run recorded). texts: strings
    (question answering: questions); texts_b: the second texts of sentence
    pairs (the contexts), one per text. Returns one dict per text, as
    serving_client.py --output_format=jsonl prints it: a classifier's label
    and probabilities, a tagger's words and labels, an answer's text, offsets
    and probability.
    """
    # The client and server pull in TensorFlow and the tokenizers; only when used.
    from bert_toolkit.serving import client, server

    console.setup()
    export_dir = export_of(model)
    vocab_file, config_file = export_layout.resolve_assets(export_dir)
    config = client.load_serving_config(config_file)
    tokenizer = client.export_tokenizer(vocab_file, config)
    kind = client.TASKS[config["task"]]
    servable = server.load_servable(export_dir)
    records = []
    pairs = client.pairs_from_arguments(list(texts), list(texts_b or []),
                                        config["sentence_pairs"])
    for batch in fileio.chunks(pairs, batch_size):
        features, layout = kind.encode(tokenizer, batch, config)
        has_rows = len(next(iter(features.values()))) > 0
        outputs = servable.run(features) if has_rows else {}
        # As TensorFlow Serving's JSON gives them: plain lists, one value per row.
        outputs = {name: values.tolist() for name, values in outputs.items()}
        records += [record for record, _ in kind.results(outputs, config, layout)]
    return records


def export_hf(model_dir, hf_dir, **settings):
    """Writes the model of `model_dir` (a run's output_dir) as a Hugging Face folder
    `hf_dir`, as export_hf.py does; settings: ExportHfOptions' other fields
    (checkpoint, encoder_only, overwrite, ...). Returns what was written (its kind,
    the Hugging Face class or "sentence-transformers"; labels; checkpoint)."""
    from bert_toolkit.convert import hf_export
    from bert_toolkit.convert.options import ExportHfOptions
    return hf_export.export(ExportHfOptions(model_dir=model_dir, hf_dir=hf_dir, **settings))


def export_of(path):
    """The export `path` names: itself (a version or base folder), a run's newest
    export (output_dir/serving), or one made now from a run's latest checkpoint."""
    for candidate in (path, os.path.join(path, export_layout.SERVING_DIR)):
        if os.path.isfile(os.path.join(candidate, export_layout.SAVED_MODEL_FILE)) or \
                export_layout.version_dirs(candidate):
            return candidate
    recorded = run_folder.read_options(path)
    if recorded is None:
        raise InputError("%s: no export here (a folder with %s, or a run's output_dir with "
                         "serving/ or %s); run with save_for_serving=True"
                         % (path, export_layout.SAVED_MODEL_FILE, run_folder.OPTIONS_FILE))
    class_path, settings = recorded
    options_class = registry.load(class_path)
    settings = dict(settings, output_dir=path, do_train=False, do_eval=False,
                    do_predict=False, save_for_serving=True,
                    **{name: value for name, value in _TRAINING_ONLY.items()
                       if name in settings})
    return run(options_class(**settings)).export_dir
