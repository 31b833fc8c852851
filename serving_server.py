"""A local stand-in for TensorFlow Serving's REST API (bert_toolkit/serving/server.py)."""

from bert_toolkit.cli import main

if __name__ == "__main__":
    main.serving_server()
