"""Contextual embeddings of text lines: Google's extract_features.py, and sentence vectors.

Google's command line works unchanged and writes its JSON Lines layout (every
token's values in the --layers asked for). --pooling=mean|cls writes one
sentence vector per input line instead (--normalize: L2-normalised, as
sentence-transformers does), as JSON Lines or, for an --output_file ending in
.npy, one float32 array [lines, hidden]. Input: one text per line, or
`text_a ||| text_b`. Lines stream in batches of --batch_size; with several
replicas (--num_cpu_replicas, --use_gpu --num_gpu_cores) each takes a batch
per step, and the output is the same as with one.
"""

from bert_toolkit.cli import main

if __name__ == "__main__":
    main.extract_features()
