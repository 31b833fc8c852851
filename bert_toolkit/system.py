"""What this machine offers a process: its cores, its CPU, its peak memory, and a
cache of what was measured on it. No TensorFlow.

A measurement that depends on the machine (the matmul rates `--precision=auto`
decides by) is kept in the toolkit's cache folder under a key naming the CPU,
its flags, the cores and whatever software the caller adds (TensorFlow's
version): each key has its own small JSON file, so a changed key never reads an
old figure, and two TensorFlows sharing the cache keep their own.
"""

import hashlib
import json
import os
import platform

from bert_toolkit import fileio

# /proc/cpuinfo flags of bf16 matrix instructions: Intel AMX, AVX-512 BF16 (x86),
# and the Arm BF16 extension (its "Features" line).
BF16_FLAGS = ("amx_bf16", "avx512_bf16", "bf16")


def available_cores():
    """The CPUs this process may run on (its affinity mask, where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def cpu_description(cpuinfo_path="/proc/cpuinfo"):
    """(model name, sorted flags) of the first CPU listed in /proc/cpuinfo; the
    flags are x86's "flags" or Arm's "Features". Without /proc/cpuinfo (macOS,
    Windows): platform.processor() and no flags."""
    model, flags = "", []
    try:
        with open(cpuinfo_path, encoding="utf-8", errors="replace") as cpuinfo:
            for line in cpuinfo:
                name, _, value = line.partition(":")
                name = name.strip()
                if name in ("model name", "Model", "CPU part") and not model:
                    model = value.strip()
                elif name in ("flags", "Features") and not flags:
                    flags = value.split()
                if model and flags:
                    break
    except OSError:
        pass
    return model or platform.processor() or "unknown CPU", sorted(set(flags))


def peak_memory_bytes(status_path="/proc/self/status"):
    """The most memory this process has held resident (its high-water mark), in
    bytes: VmHWM of /proc/self/status (Linux); elsewhere getrusage's ru_maxrss
    (bytes on macOS); None where neither exists (Windows)."""
    try:
        with open(status_path, encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024  # "VmHWM:  123456 kB"
    except (OSError, ValueError, IndexError):
        pass
    try:
        import resource
    except ImportError:  # Windows
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak * 1024 if platform.system() == "Linux" else peak  # Linux counts kB


def cpu_supports_bf16():
    """True if the CPU has bf16 matrix instructions (AMX, AVX-512 BF16, Arm BF16).

    What the CPU can decode, not what runs fast: a VM may list avx512_bf16 and
    hide AMX, and there bf16 can be slower than fp32. Without these units bf16
    is emulated and always slower, so only a CPU with them is worth timing."""
    return any(flag in BF16_FLAGS for flag in cpu_description()[1])


def cache_dir():
    """The toolkit's cache folder: $BERT_TOOLKIT_CACHE, else ~/.cache/bert_toolkit."""
    return os.environ.get("BERT_TOOLKIT_CACHE",
                          os.path.join(os.path.expanduser("~"), ".cache", "bert_toolkit"))


def machine_key(**software):
    """What a measurement on this machine depends on: the CPU model, a digest of
    its flags, the cores this process may use, and `software` (e.g. tensorflow=
    "2.15.1", threads=2). A dict of strings and numbers (JSON)."""
    model, flags = cpu_description()
    key = {"cpu": model, "cpu_flags": _digest(" ".join(flags)), "cores": available_cores()}
    key.update(software)
    return key


def _digest(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def machine_record_path(name, key):
    """cache_dir()/machine/<name>-<digest of key>.json: one file per key."""
    return os.path.join(cache_dir(), "machine", "%s-%s.json" % (
        name, _digest(json.dumps(key, sort_keys=True))))


def read_machine_record(name, key):
    """The values saved by write_machine_record(name, key, ...), or None when there
    are none: no file, a file that is not such a record's JSON (a corrupt file is
    ignored; the next write replaces it), or one saved under another key."""
    try:
        with open(machine_record_path(name, key), encoding="utf-8") as f:
            record = json.load(f)
    except (OSError, ValueError):  # ValueError: bad JSON or bad UTF-8
        return None
    if not isinstance(record, dict) or record.get("key") != key:
        return None
    values = record.get("values")
    return values if isinstance(values, dict) else None


def write_machine_record(name, key, values):
    """Saves `values` (a JSON-able dict) under `key`; returns the file, or None if
    the cache folder cannot be written (the measurement is then simply redone).

    The file is written whole beside its final name and renamed over it, so
    concurrent writers (two runs starting at once) never leave a torn file: the
    last rename wins, and each wrote a complete record of the same key."""
    path = machine_record_path(name, key)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fileio.write_text_atomically(path, json.dumps({"key": key, "values": values},
                                                      indent=1, sort_keys=True) + "\n")
    except OSError:
        return None
    return path
