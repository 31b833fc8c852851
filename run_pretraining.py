"""Pre-trains BERT (masked LM + next sentence) on create_pretraining_data.py records.

Google's run_pretraining.py command lines work unchanged; the shared run
settings add devices, precision, accumulation, XLA and LAMB. With a
TF_CONFIG naming a cluster, every worker runs this same command and they
train synchronously (MultiWorkerMirroredStrategy); the chief writes
checkpoints, summaries and eval results. See docs/pretraining.md.
"""

from bert_toolkit.cli import main

if __name__ == "__main__":
    main.run_pretraining()
