"""Distributed_BERT's train.py command lines, unchanged, on run_pretraining.py's engine.

Pre-trains BERT on NVIDIA's hdf5 shards (--data folder, --train-subset and
--valid-subset splits) on one GPU, one node or several nodes that meet at
--distributed-init-method tcp://HOST:PORT. See docs/migration.md.
"""

from bert_toolkit.cli import distributed_bert

if __name__ == "__main__":
    distributed_bert.main()
