"""What the benchmarks read about a process from the kernel: peak memory, CPU
time, when it started. Light enough for Spark's Python workers to import."""

from __future__ import annotations

import os
import resource
import sys
import time
from pathlib import Path


def peak_rss() -> int:
    """This process's peak resident memory in bytes: VmHWM, the high-water mark of
    its own address space. Not ``ru_maxrss``: Linux carries that across exec, so a
    spawned child would report its parent's peak."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    # Elsewhere ru_maxrss, which macOS gives in bytes and the others in KiB.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (
        1 if sys.platform == "darwin" else 1024
    )


def cpu_seconds() -> float:
    """CPU time this process has used, user and system."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def process_cpu_seconds(pid: int) -> float:
    """CPU time of another process (the S3 server), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    # utime and stime are fields 14 and 15 of stat(5); fields[0] here is field 3.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def process_started() -> float:
    """Wall-clock time this process started (a Python worker's fork), from /proc.

    The kernel counts a process's start in clock ticks since boot. The boot's
    wall-clock time is taken as now minus the time since boot, to the
    microsecond: ``btime`` in /proc/stat is whole seconds, and reading it put
    every start up to a second early (a worker's start-up measured that much
    too long)."""
    ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
    boot = time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)
    return boot + ticks / os.sysconf("SC_CLK_TCK")
