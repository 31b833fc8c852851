"""Predicts on raw text with a model behind TensorFlow Serving (bert_toolkit/serving/client.py)."""

from bert_toolkit.cli import main

if __name__ == "__main__":
    main.serving_client()
