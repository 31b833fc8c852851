"""Writes a model trained here as a Hugging Face folder (bert_toolkit/convert/hf_export.py)."""

from bert_toolkit.cli import main

if __name__ == "__main__":
    main.export_hf()
