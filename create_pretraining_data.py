"""Creates masked-LM / next-sentence pretraining data (TFRecord) from plain text.

The flags and the records are those of Google's create_pretraining_data.py;
the work is streamed (memory does not grow with the corpus) and spread over
--num_workers processes. See pretraining_data.py for the recipe and for what
differs from the original.

    python create_pretraining_data.py --input_file='corpus/*.txt' \
      --output_file=data/train.tfrecord --vocab_file=$BERT/vocab.txt \
      --do_lower_case --max_seq_length=128 --max_predictions_per_seq=20 \
      --masked_lm_prob=0.15 --random_seed=12345 --dupe_factor=10
"""

import sys

from absl import flags

import common_flags
import fileio
import machine
import pretraining_data
import pretraining_writer

FLAGS = flags.FLAGS

flags.DEFINE_string("input_file", None,
                    "Input text file(s): comma-separated files or globs. One sentence per "
                    "line, a blank line between documents.")
flags.DEFINE_string("output_file", None,
                    "Output TFRecord file(s), comma-separated; records are spread "
                    "round-robin over them.")
flags.DEFINE_string("vocab_file", None, "vocab.txt of the BERT model to pre-train.")
flags.DEFINE_bool("do_lower_case", True,
                  "Lower-case the text (True for uncased models, False for cased).")
flags.DEFINE_bool("do_whole_word_mask", False,
                  "Mask whole words (a word and its ## pieces together) instead of "
                  "single WordPiece tokens.")
flags.DEFINE_integer("max_seq_length", 128, "Tokens per instance, with [CLS] and [SEP]s.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Most masked-LM predictions per instance.")
flags.DEFINE_integer("random_seed", 12345, "Random seed of the data generation.")
flags.DEFINE_integer("dupe_factor", 10,
                     "Passes over the input, each with different masks and pairs.")
flags.DEFINE_float("masked_lm_prob", 0.15, "Fraction of the tokens to predict.")
flags.DEFINE_float("short_seq_prob", 0.1,
                   "Probability of an instance shorter than max_seq_length (random length).")
flags.DEFINE_integer("num_workers", None,
                     "Worker processes (default: the cores available to this process). The "
                     "output does not depend on it.")
flags.DEFINE_integer("documents_per_shard", 256,
                     "Documents per unit of work. Random next sentences are drawn from the "
                     "other documents of the same shard, and instances are shuffled within "
                     "it.")


def main():
    common_flags.require_flags("input_file", "output_file", "vocab_file")
    config = pretraining_data.PretrainingDataConfig(
        vocab_file=FLAGS.vocab_file, do_lower_case=FLAGS.do_lower_case,
        do_whole_word_mask=FLAGS.do_whole_word_mask, max_seq_length=FLAGS.max_seq_length,
        max_predictions_per_seq=FLAGS.max_predictions_per_seq,
        random_seed=FLAGS.random_seed, dupe_factor=FLAGS.dupe_factor,
        masked_lm_prob=FLAGS.masked_lm_prob, short_seq_prob=FLAGS.short_seq_prob)
    input_paths = fileio.expand_patterns(FLAGS.input_file, "input_file")
    output_paths = [p.strip() for p in FLAGS.output_file.split(",") if p.strip()]
    num_workers = FLAGS.num_workers or machine.available_cores()
    pretraining_writer.write_pretraining_data(
        input_paths, output_paths, config, num_workers=num_workers,
        documents_per_shard=FLAGS.documents_per_shard, progress_stream=sys.stderr,
        start_line="reading %d input file(s) with %d worker(s), writing %s"
        % (len(input_paths), num_workers, ", ".join(output_paths)))


if __name__ == "__main__":
    common_flags.run_script(lambda _: main())
