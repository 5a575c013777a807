"""shmkv-loader serving images from 2 MiB hugetlb pages, as in production:
a hugetlbfs mount of its own, the pool grown for the images and given back,
the loader stopped and the mount removed after (with statement)."""
import os
import shutil
import signal
import subprocess
import tempfile
import time

from machine import HugePages


class HugeLoader:
    """Loads each image of caches {name: path} at startup (config `source`)
    into hugetlb memory; attach(name, root=self.root) reads it."""

    def __init__(self, loader: str, caches: dict, probe_python: str, log: str):
        self.loader, self.caches, self.py, self.log = loader, caches, probe_python, log
        size = sum(os.path.getsize(p) for p in caches.values())
        self.pages = size // (2 << 20) + 8 * len(caches) + 8
        self.work = self.proc = self.hp = None
        self.mounted = False

    def __enter__(self):
        try:
            self.hp = HugePages(self.pages).__enter__()
            self.work = tempfile.mkdtemp(prefix="shmkv-peers-loader.")
            os.chmod(self.work, 0o755)
            self.root = os.path.join(self.work, "root")
            huge, spool = os.path.join(self.work, "huge"), os.path.join(self.work, "spool")
            for d in (self.root, huge, spool):
                os.makedirs(d, mode=0o755)
            subprocess.run(["mount", "-t", "hugetlbfs", "-o", "pagesize=2M", "none", huge],
                           check=True)
            self.mounted = huge
            conf = os.path.join(self.work, "loader.conf")
            with open(conf, "w") as f:
                f.write(f"[loader]\nroot = {self.root}\nspool = {spool}\n"
                        f"hugetlb_dir = {huge}\nmemory = hugetlb\n")
                for name, path in self.caches.items():
                    f.write(f"[cache {name}]\nsource = {os.path.abspath(path)}\nmemory = hugetlb\n")
            self.proc = subprocess.Popen([self.loader, "--config", conf, "--foreground"],
                                         stdout=open(self.log, "a"), stderr=subprocess.STDOUT)
            deadline = time.monotonic() + 120 + self.pages / 50  # a slow, loaded machine
            for name in self.caches:
                self._wait(name, deadline)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _wait(self, name, deadline):
        probe = ("import shmkv,sys\n"
                 "c = shmkv.attach(sys.argv[1], sys.argv[2]); c.close()")
        while True:
            r = subprocess.run([self.py, "-c", probe, name, self.root], capture_output=True)
            if r.returncode == 0:
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"shmkv-loader exited ({self.proc.returncode}); see {self.log}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"shmkv-loader: cache {name} not published in time; "
                                   f"see {self.log}")
            time.sleep(0.5)

    def __exit__(self, *exc):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.mounted:
            # the segments stay after the loader (readers keep serving): remove them
            for f in os.listdir(self.mounted):
                p = os.path.join(self.mounted, f)
                shutil.rmtree(p, ignore_errors=True) if os.path.isdir(p) else os.unlink(p)
            subprocess.run(["umount", self.mounted], check=False)
            self.mounted = False
        if self.work:
            shutil.rmtree(self.work, ignore_errors=True)
            self.work = None
        if self.hp:
            self.hp.__exit__(None, None, None)
            self.hp = None
        return False
