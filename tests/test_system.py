"""The machine's description and the cache of what was measured on it (no TensorFlow)."""

import json
import subprocess
import sys
import textwrap

from bert_toolkit import system

from tiny import REPO

X86 = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz
flags\t\t: fpu sse2 avx2 avx512f avx512_bf16 avx512_fp16 avx_vnni

processor\t: 1
model name\t: Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz
flags\t\t: fpu sse2 avx2 avx512f avx512_bf16 avx512_fp16 avx_vnni amx_bf16
"""
ARM = """processor\t: 0
BogoMIPS\t: 2100.00
Features\t: fp asimd evtstrm aes sve bf16 i8mm
CPU implementer\t: 0x41
CPU part\t: 0xd40
"""


def test_the_cpu_is_described_by_its_first_processor(tmp_path, monkeypatch):
    x86, arm = tmp_path / "x86", tmp_path / "arm"
    x86.write_text(X86)
    arm.write_text(ARM)
    model, flags = system.cpu_description(str(x86))
    assert model.startswith("Intel(R) Xeon(R) Platinum 8481C") and "amx_bf16" not in flags
    assert flags == sorted(flags) and "avx512_bf16" in flags
    assert system.cpu_description(str(arm)) == (
        "0xd40", ["aes", "asimd", "bf16", "evtstrm", "fp", "i8mm", "sve"])
    model, flags = system.cpu_description(str(tmp_path / "missing"))
    assert model and flags == []
    describe = system.cpu_description
    for text, has_units in ((X86, True), (ARM, True), ("flags\t: fpu avx2 fma\n", False)):
        x86.write_text(text)
        described = describe(str(x86))
        monkeypatch.setattr(system, "cpu_description", lambda: described)
        assert system.cpu_supports_bf16() is has_units


def test_a_record_is_read_back_under_its_key_only(tmp_path, monkeypatch):
    monkeypatch.setenv("BERT_TOOLKIT_CACHE", str(tmp_path))
    key = system.machine_key(tensorflow="2.15.1", threads=2)
    assert key["tensorflow"] == "2.15.1" and key["cores"] == system.available_cores()
    assert system.read_machine_record("rates", key) is None
    path = system.write_machine_record("rates", key, {"fp32": 1.5})
    assert path.startswith(str(tmp_path / "machine" / "rates-"))
    assert system.read_machine_record("rates", key) == {"fp32": 1.5}
    other = dict(key, tensorflow="2.21.0")
    assert system.read_machine_record("rates", other) is None
    assert system.machine_record_path("rates", other) != path
    system.write_machine_record("rates", other, {"fp32": 2.5})
    assert system.read_machine_record("rates", key) == {"fp32": 1.5}
    with open(path, "w") as f:
        f.write('{"key": ')
    assert system.read_machine_record("rates", key) is None
    assert system.write_machine_record("rates", key, {"fp32": 3.5}) == path
    assert system.read_machine_record("rates", key) == {"fp32": 3.5}
    monkeypatch.setenv("BERT_TOOLKIT_CACHE", path)  # a file: nothing can be written under it
    assert system.write_machine_record("rates", key, {"fp32": 1}) is None


def test_concurrent_writers_never_leave_a_torn_record(tmp_path):
    """Three processes rewrite one record 200 times each while this one reads it:
    every read finds a whole record of the key."""
    writer = textwrap.dedent("""
        import sys
        sys.path.insert(0, sys.argv[1])
        from bert_toolkit import system
        for i in range(200):
            system.write_machine_record("rates", {"k": 1}, {"writer": sys.argv[2], "i": i,
                                                            "pad": "x" * 20000})
    """)
    env = {"BERT_TOOLKIT_CACHE": str(tmp_path), "PATH": "/usr/bin:/bin"}
    writers = [subprocess.Popen([sys.executable, "-c", writer, REPO, str(n)], env=env)
               for n in range(3)]
    reads = 0
    while any(w.poll() is None for w in writers) or reads == 0:
        record_file = tmp_path / "machine"
        for found in (record_file.glob("rates-*.json") if record_file.exists() else []):
            try:
                text = found.read_text()
            except FileNotFoundError:
                continue
            record = json.loads(text)  # raises on a torn file
            assert record["key"] == {"k": 1} and len(record["values"]["pad"]) == 20000
            reads += 1
    assert [w.wait() for w in writers] == [0, 0, 0]
    assert len(list((tmp_path / "machine").glob("rates-*.json"))) == 1
    assert not list((tmp_path / "machine").glob("*.partial-*"))


def test_peak_memory_is_the_resident_high_water_mark(tmp_path):
    """VmHWM of /proc/self/status in bytes; without that file, getrusage's figure."""
    status = tmp_path / "status"
    status.write_text("Name:\tpython\nVmPeak:\t  900000 kB\nVmHWM:\t  123456 kB\n")
    assert system.peak_memory_bytes(str(status)) == 123456 * 1024
    fallback = system.peak_memory_bytes(str(tmp_path / "missing"))
    assert fallback is None or fallback > 10 * 2 ** 20  # this process holds more than 10 MB
