"""The Python API: run a task from its options, predict with an export in this process.

`run` is what every entry script does after reading its flags, so a notebook
gets the same checks, files and numbers as a command line, and the report
back. `predict` answers raw text as serving_client.py does against TensorFlow
Serving (the same tokenization, windows and answers: serving/client.py), with
the SavedModel loaded here instead of behind a URL.
"""

from bert_toolkit import console, fileio
from bert_toolkit.engine import export_layout
from bert_toolkit.tasks import registry


def run(options):
    """Runs the task whose options class `options` is (a ClassifierOptions runs the
    classifier, ...); returns its report (engine/launch.py Report for the
    training tasks). errors.InputError on a user mistake, before anything is
    written; errors.Stopped when a signal stopped training (its step is saved)."""
    entry = registry.entry_for(options)  # imports the task, and so TensorFlow
    console.setup()
    return entry.run(options)


def predict(export_dir, texts, texts_b=None, batch_size=32):
    """Answers for raw `texts` from an export, in this process.

    export_dir: an export's base folder (output_dir/serving, the newest version
    is used) or one version folder, e.g. Report.export_dir. texts: strings
    (question answering: questions); texts_b: the second texts of sentence
    pairs (the contexts), one per text. Returns one dict per text, as
    serving_client.py --output_format=jsonl prints it: a classifier's label
    and probabilities, a tagger's words and labels, an answer's text, offsets
    and probability.
    """
    # The client and server pull in TensorFlow and the tokenizers; only when used.
    from bert_toolkit.serving import client, server
    from bert_toolkit.text import tokenization

    console.setup()
    vocab_file, config_file = export_layout.resolve_assets(export_dir)
    config = client.load_serving_config(config_file)
    tokenizer = tokenization.FullTokenizer(vocab_file, config["do_lower_case"])
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
