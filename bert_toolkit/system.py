"""What this machine offers a process: its cores and the CPU's bf16 units. No TensorFlow."""

import os


def available_cores():
    """The CPUs this process may run on (its affinity mask, where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def cpu_supports_bf16():
    """True if this x86 CPU has bf16 matrix instructions (AMX or AVX-512 BF16)."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            flags = next((line for line in cpuinfo if line.startswith("flags")), "")
    except OSError:
        return False
    return any(flag in flags.split() for flag in ("amx_bf16", "avx512_bf16"))
