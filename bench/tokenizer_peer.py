"""The peer side of tokenization_bench.py: transformers' pure-Python BERT tokenizer.

`BertTokenizerLegacy` (transformers 5; `BertTokenizer` in 4.x, where the
Python class still had that name) is a port of Google's original
tokenization.py: BasicTokenizer then greedy WordPiece, one text at a time,
in Python. Features are built the way the original run_classifier.py does:
[CLS] text [SEP], truncated to max_seq_length, zero-padded, mask and segment
ids. Runs as a worker under an interpreter that has transformers (see
benchlib); a round converts every text with a fresh tokenizer (cold caches,
as in a real run) and writes the features to an .npz for the identity check.
"""

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402


def python_tokenizer_class():
    import transformers
    legacy = getattr(transformers, "BertTokenizerLegacy", None)
    if legacy is not None:
        return legacy
    # transformers 4.x: BertTokenizer is the Python one, BertTokenizerFast the Rust one.
    return transformers.BertTokenizer


def serve(args):
    with open(args.texts, encoding="utf-8") as f:
        texts = json.load(f)
    tokenizer_class = python_tokenizer_class()
    convert(tokenizer_class, texts[:50], args)  # imports and first-call costs
    benchlib.send({"ready": True, "tokenizer": tokenizer_class.__name__})
    for command in benchlib.commands():
        tokenizer = tokenizer_class(args.vocab_file, do_lower_case=args.do_lower_case)
        started = time.perf_counter()
        features = convert(tokenizer, texts, args)
        seconds = time.perf_counter() - started
        np.savez(command["output"], **features)
        benchlib.send({"texts_per_second": len(texts) / seconds, "seconds": seconds})


def convert(tokenizer, texts, args):
    """input_ids, input_mask, segment_ids int32 [n, max_seq_length], as the original."""
    if isinstance(tokenizer, type):
        tokenizer = tokenizer(args.vocab_file, do_lower_case=args.do_lower_case)
    n, length = len(texts), args.max_seq_length
    input_ids = np.zeros((n, length), np.int32)
    input_mask = np.zeros((n, length), np.int32)
    cls_id, sep_id = tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]"])
    for row, text in enumerate(texts):
        tokens = tokenizer.tokenize(text)[:length - 2]
        ids = [cls_id] + tokenizer.convert_tokens_to_ids(tokens) + [sep_id]
        input_ids[row, :len(ids)] = ids
        input_mask[row, :len(ids)] = 1
    return {"input_ids": input_ids, "input_mask": input_mask,
            "segment_ids": np.zeros_like(input_ids)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--texts", required=True, help="A JSON list of texts.")
    parser.add_argument("--vocab_file", required=True)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--do_lower_case", type=int, default=1)
    args = parser.parse_args()
    benchlib.run_worker(lambda: serve(args))


if __name__ == "__main__":
    main()
