"""scripts/slurm and scripts/k8s: the requeue on a time limit, and that every
flag the examples pass is one the scripts define."""

import glob
import os
import re
import stat
import subprocess
import sys

import pytest

from tiny import REPO

REQUEUE = os.path.join(REPO, "scripts", "slurm", "run_then_requeue.sh")


def fake_scontrol(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    scontrol = bin_dir / "scontrol"
    scontrol.write_text('#!/bin/sh\necho "$@" >> "%s"\n' % (tmp_path / "calls"))
    scontrol.chmod(scontrol.stat().st_mode | stat.S_IEXEC)
    return dict(os.environ, PATH="%s:%s" % (bin_dir, os.environ["PATH"]), SLURM_JOB_ID="42")


@pytest.mark.parametrize("code, requeued", [(143, True), (0, False), (1, False)])
def test_a_run_stopped_on_sigterm_requeues_its_job(tmp_path, code, requeued):
    env = fake_scontrol(tmp_path)
    result = subprocess.run(["bash", REQUEUE, "sh", "-c", "exit %d" % code], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert result.returncode == code
    calls = (tmp_path / "calls").read_text() if (tmp_path / "calls").exists() else ""
    assert calls == ("requeue 42\n" if requeued else "")
    assert ("requeuing job 42" in result.stderr) == requeued


def example_commands():
    """(file, script, [--flag, ...]) of every run_*.py line in the examples."""
    for path in sorted(glob.glob(os.path.join(REPO, "scripts", "slurm", "*.sbatch")) +
                       glob.glob(os.path.join(REPO, "scripts", "k8s", "*.yaml"))):
        text = open(path).read().replace("\\\n", " ")
        script = re.search(r"(run_\w+\.py)", text).group(1)
        yield os.path.basename(path), script, re.findall(r"(?<![\w-])--(\w+)", text)


@pytest.mark.parametrize("name, script, flags", list(example_commands()))
def test_the_cluster_examples_use_flags_the_scripts_define(name, script, flags):
    if name.endswith(".sbatch"):
        text = open(os.path.join(REPO, "scripts", "slurm", name)).read()
        assert "#SBATCH --signal=TERM@" in text and "#SBATCH --requeue" in text
        assert "scripts/slurm/run_then_requeue.sh \\\n  srun " in text
    else:
        assert "terminationGracePeriodSeconds: 120" in open(
            os.path.join(REPO, "scripts", "k8s", name)).read()
    result = subprocess.run([sys.executable, script, "--helpfull"], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    defined = set(re.findall(r"--\[?(?:no)?\]?(\w+):", result.stdout))
    sbatch_flags = {"job", "nodes", "ntasks", "gres", "cpus", "time", "requeue", "signal"}
    unknown = [f for f in flags if f not in defined and f not in sbatch_flags]
    assert not unknown, (name, unknown)
