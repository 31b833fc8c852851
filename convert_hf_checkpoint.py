"""Converts a Hugging Face BERT folder to Google's checkpoint layout (bert_toolkit/convert)."""

from bert_toolkit.cli import main

if __name__ == "__main__":
    main.convert_hf_checkpoint()
