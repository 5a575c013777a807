"""The machine under the figures: CPU, memory, load, and the huge page pool
(changed only for a run, given back after)."""
import os
import platform
import subprocess
import time

HP = "/proc/sys/vm/nr_hugepages"


def cpu_name() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def meminfo() -> dict:
    m = {}
    with open("/proc/meminfo") as f:
        for line in f:
            k, v = line.split(":", 1)
            m[k] = int(v.split()[0]) * (1024 if v.strip().endswith("kB") else 1)
    return m


def load() -> float:
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def thp_mode() -> str:
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            s = f.read()
        return s[s.index("[") + 1:s.index("]")]
    except (OSError, ValueError):
        return "unknown"


def describe() -> dict:
    m = meminfo()
    return {"cpu": cpu_name(), "nproc": os.cpu_count(), "kernel": platform.release(),
            "mem_total_gib": round(m["MemTotal"] / 2**30, 1),
            "mem_available_gib": round(m["MemAvailable"] / 2**30, 1),
            "thp": thp_mode(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "load_start": load()}


class HugePages:
    """Reserves 2 MiB pages for a loader's segment, and gives back exactly
    what it added (with statement), also on failure."""

    def __init__(self, pages: int):
        self.want, self.added, self.before = pages, 0, None

    def __enter__(self):
        with open(HP) as f:
            self.before = int(f.read())
        free = meminfo()["HugePages_Free"]
        need = max(0, self.want - free)
        if need:
            with open(HP, "w") as f:
                f.write(str(self.before + need))
            with open(HP) as f:
                now = int(f.read())
            self.added = now - self.before
            if meminfo()["HugePages_Free"] < self.want:
                self.__exit__(None, None, None)
                raise RuntimeError(f"could not reserve {self.want} huge pages of 2 MiB "
                                   f"(the kernel gave {self.added} of {need} more)")
        return self

    def __exit__(self, *exc):
        if self.added:  # what this run added, whatever others did meanwhile
            with open(HP) as f:
                now = int(f.read())
            with open(HP, "w") as f:
                f.write(str(max(0, now - self.added)))
            self.added = 0
        return False
