"""Helpers the Python benchmark scripts in bench/ share (imported from the script's own directory)."""
import platform
import subprocess
import sys


def run(cmd, **kw):
    """Runs cmd and returns its stdout; exits naming the command and the end of its stderr on failure."""
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr[-3000:]}")
    return r.stdout


def cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()
