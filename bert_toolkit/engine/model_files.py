"""The pre-trained model's files, read and cross-checked before a run writes anything.

bert_config.json against --max_seq_length, vocab.txt against the config's
vocab_size and the checkpoint's casing, and init_checkpoint against the
variables the model (and its heads) will load: every mismatch is one
InputError line naming the file.
"""

import collections

from bert_toolkit.engine import checkpoints
from bert_toolkit.errors import InputError
from bert_toolkit.model import modeling
from bert_toolkit.text import tokenization

ModelInputs = collections.namedtuple("ModelInputs", [
    "bert_config", "tokenizer", "init_checkpoint"])
"""bert_config: modeling.BertConfig; tokenizer: tokenization.FullTokenizer (None
for runs that do not tokenize); init_checkpoint: checked checkpoint prefix or None."""


def load_model_inputs(options, head_shapes=None, with_tokenizer=True):
    """Reads and cross-checks bert_config, vocab, lower-casing and init_checkpoint.

    head_shapes: bert_config -> {name: shape} of head variables init_checkpoint
    must hold besides BERT's (e.g. the pre-training heads).
    """
    bert_config = modeling.BertConfig.from_json_file(options.bert_config_file)
    modeling.check_max_seq_length(bert_config, options.max_seq_length)
    tokenizer = None
    if with_tokenizer:
        if not options.vocab_file:
            raise InputError("--vocab_file is required")
        tokenization.validate_case_matches_checkpoint(options.do_lower_case,
                                                      options.init_checkpoint)
        tokenizer = tokenization.FullTokenizer(options.vocab_file, options.do_lower_case)
        modeling.check_vocab_matches_config(bert_config, len(tokenizer.vocab),
                                            options.vocab_file)
    init_checkpoint = None
    if options.init_checkpoint:
        expected = dict(modeling.bert_variable_shapes(bert_config),
                        **(head_shapes(bert_config) if head_shapes else {}))
        init_checkpoint = checkpoints.check_checkpoint(options.init_checkpoint, expected)
    return ModelInputs(bert_config, tokenizer, init_checkpoint)
