"""scripts/setup_env.sh picks the newest supported Python on PATH, and says in one line
what to do where there is none. Fake interpreters stand in for real ones: each answers
the version check as its version would and makes a virtualenv that records who made it.
"""

import os
import shutil
import subprocess

from tiny import REPO

FAKE_PYTHON = """#!/bin/sh
# A Python {version} stand-in: the version check, --version and `-m venv DIR`.
case "$1" in
  --version) echo "Python {version}" ;;
  -c) exit {check_exit} ;;
  -m) mkdir -p "$3/bin"
      printf '#!/bin/sh\\necho "$0 $*" >> "%s/../made-by-{version}"\\n' "$3/bin" > "$3/bin/python"
      chmod +x "$3/bin/python" ;;
esac
"""


def fake_path(tmp_path, versions):
    """A PATH holding `sh` tools and a fake pythonX.Y (and python3 = the last) per version."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "sh", "dirname", "head", "mkdir", "chmod", "rm", "printf"):
        found = shutil.which(tool)
        if found:
            os.symlink(found, str(bin_dir / tool))
    for version in versions:
        supported = (3, 9) <= tuple(int(part) for part in version.split(".")[:2]) <= (3, 13)
        script = FAKE_PYTHON.format(version=version, check_exit=0 if supported else 1)
        for name in ("python" + ".".join(version.split(".")[:2]), "python3"):
            path = bin_dir / name
            path.write_text(script)
            path.chmod(0o755)
    return str(bin_dir)


def source_setup_env(tmp_path, path, **env):
    shutil.copytree(os.path.join(REPO, "scripts"), str(tmp_path / "checkout" / "scripts"))
    return subprocess.run(["bash", "-c", "source scripts/setup_env.sh requirements.txt"],
                          cwd=str(tmp_path / "checkout"), env=dict(PATH=path, **env),
                          capture_output=True, text=True, timeout=60)


def test_the_newest_supported_python_makes_the_virtualenv(tmp_path):
    result = source_setup_env(tmp_path, fake_path(tmp_path, ["3.11.7", "3.12.1", "3.13.0"]))
    assert result.returncode == 0, result.stderr
    made = os.listdir(str(tmp_path / "checkout" / ".venv"))
    assert "made-by-3.13.0" in made  # and pip ran in it


def test_only_python_3_14_is_one_line_naming_what_works(tmp_path):
    result = source_setup_env(tmp_path, fake_path(tmp_path, ["3.14.0"]))
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("error: no Python 3.9-3.13 found (found 3.14.0): ")
    assert "install python3.13" in result.stderr
    assert not os.path.exists(str(tmp_path / "checkout" / ".venv"))


def test_python_variable_overrides_and_is_checked(tmp_path):
    path = fake_path(tmp_path, ["3.12.1", "3.13.0"])
    result = source_setup_env(tmp_path, path, PYTHON=os.path.join(path, "python3.12"))
    assert result.returncode == 0, result.stderr
    assert "made-by-3.12.1" in os.listdir(str(tmp_path / "checkout" / ".venv"))
    shutil.rmtree(str(tmp_path / "checkout"))
    result = source_setup_env(tmp_path, path, PYTHON="/nowhere/python3")
    assert result.returncode == 1
    assert result.stderr == ("error: PYTHON=/nowhere/python3 is not a Python 3.9-3.13 that "
                             "runs here\n")
