"""`python -m bert_toolkit TASK [--task_module=MODULE] --flag=value ...`: the
bert-toolkit command (cli/main.py), for a checkout without pip install."""

from bert_toolkit.cli import main

main.toolkit()
