"""Creates masked-LM / next-sentence pretraining data (TFRecord) from plain text.

The flags and the records are those of Google's create_pretraining_data.py;
the work is streamed (memory does not grow with the corpus) and spread over
--num_workers processes. See bert_toolkit/tasks/pretraining/data.py for the recipe and for what
differs from the original.

    python create_pretraining_data.py --input_file='corpus/*.txt' \\
      --output_file=data/train.tfrecord --vocab_file=$BERT/vocab.txt \\
      --do_lower_case --max_seq_length=128 --max_predictions_per_seq=20 \\
      --masked_lm_prob=0.15 --random_seed=12345 --dupe_factor=10
"""

from bert_toolkit.cli import main

if __name__ == "__main__":
    main.create_pretraining_data()
