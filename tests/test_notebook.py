"""notebooks/quickstart.ipynb, executed top to bottom in a Jupyter kernel as a user runs it.

The kernel runs this interpreter (a kernelspec written for the test, not whatever
`python3` kernel the machine has installed), with the checkout on PYTHONPATH, so
the install cell finds the toolkit and installs nothing. The notebook's settings
come from its environment variables: 400 sentences, one epoch, the run in tmp_path.
"""

import json
import os
import re
import sys

import pytest

from tiny import REPO

NOTEBOOK = os.path.join(REPO, "notebooks", "quickstart.ipynb")
CELL_TIMEOUT_SECONDS = 1200


def this_interpreters_kernel(kernels_dir):
    """A kernel manager class whose only kernel, python3, is ipykernel on sys.executable."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import AsyncKernelManager
    from traitlets import default

    spec_dir = os.path.join(kernels_dir, "python3")
    os.makedirs(spec_dir)
    with open(os.path.join(spec_dir, "kernel.json"), "w") as f:
        json.dump({"argv": [sys.executable, "-m", "ipykernel_launcher", "-f",
                            "{connection_file}"],
                   "display_name": "Python 3", "language": "python"}, f)

    class ThisInterpretersKernel(AsyncKernelManager):
        @default("kernel_spec_manager")
        def _kernel_spec_manager_default(self):
            return KernelSpecManager(kernel_dirs=[kernels_dir], ensure_native_kernel=False)

    return ThisInterpretersKernel


def text_of(cell):
    """What a code cell printed (stdout only: the toolkit's progress goes to stderr)."""
    return "".join(output.get("text", "") for output in cell.outputs
                   if output.output_type == "stream" and output.name == "stdout")


@pytest.mark.slow
def test_the_quickstart_notebook_runs_top_to_bottom(tmp_path):
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(notebook)
    assert all(not cell.get("outputs") and cell.get("execution_count") is None
               for cell in notebook.cells if cell.cell_type == "code"), "outputs committed"
    notebook.cells.insert(0, nbformat.v4.new_code_cell(
        "import sys\nprint(sys.executable)", id="test-interpreter"))

    run_dir = tmp_path / "run"
    env = dict(os.environ, NOTEBOOK_LIMIT="400", NOTEBOOK_EPOCHS="1",
               NOTEBOOK_RUN_DIR=str(run_dir), TF_CPP_MIN_LOG_LEVEL="3",
               PYTHONPATH=os.pathsep.join(
                   [REPO] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                             if p]))
    work_dir = tmp_path / "cwd"  # the kernel's working directory: no checkout above it
    work_dir.mkdir()
    client = NotebookClient(
        notebook, kernel_name="python3",
        kernel_manager_class=this_interpreters_kernel(str(tmp_path / "kernels")),
        timeout=CELL_TIMEOUT_SECONDS, startup_timeout=300,
        resources={"metadata": {"path": str(work_dir)}})
    try:
        client.execute(env=env)  # CellExecutionError (with the traceback) if a cell fails
    finally:  # what each cell printed, to read after a failure
        nbformat.write(notebook, str(tmp_path / "executed.ipynb"))

    cells = {cell.id: cell for cell in notebook.cells}
    errors = [(cell.id, output.get("ename"), output.get("evalue"))
              for cell in notebook.cells if cell.cell_type == "code"
              for output in cell.outputs if output.output_type == "error"]
    assert errors == []
    assert os.path.samefile(text_of(cells["test-interpreter"]).strip(), sys.executable)
    assert "nothing to install" in text_of(cells["install"])

    output_dir = run_dir / "classifier"
    with open(output_dir / "eval_results.json") as f:
        results = json.load(f)
    assert results["num_examples"] == 80
    train_text = text_of(cells["train"])
    assert "accuracy %.4f" % results["accuracy"] in train_text, train_text
    # 10 optimizer steps on 320 sentences learn a little: measured, the dev loss went
    # from 0.710 to 0.627 between the first and the last evaluation and the best
    # accuracy was 0.65 on the 80 held out (chance: about 0.5, give or take 0.056).
    with open(output_dir / "eval_history.jsonl") as f:
        history = [json.loads(line) for line in f]
    assert [entry["step"] for entry in history] == [3, 6, 9, 10]
    losses = [entry["report"]["eval_loss"] for entry in history]
    assert losses[-1] < losses[0] - 0.03, losses
    assert results["accuracy"] > 0.55, results

    evaluate = cells["evaluate"]
    assert any("image/png" in output.get("data", {}) for output in evaluate.outputs)
    assert re.search(r"^accuracy +%.4f$" % results["accuracy"], text_of(evaluate), re.M)
    assert (output_dir / "learning_curve.png").is_file()

    rows = re.findall(r"^ *(-?1) +([01]\.\d{4}) +([01]\.\d{4})  \S", text_of(cells["predict"]),
                      re.M)
    assert len(rows) == 4, text_of(cells["predict"])
    for label, negative, positive in rows:
        assert abs(float(negative) + float(positive) - 1) < 2e-4
        assert label == ("1" if float(positive) > float(negative) else "-1")

    assert "inputs['text_a']" in text_of(cells["serving"])  # saved_model_cli's answer
    hf_dir = run_dir / "classifier-hf"
    assert (hf_dir / "config.json").is_file() and (hf_dir / "model.safetensors").is_file()
    assert "model.safetensors" in text_of(cells["huggingface"])
