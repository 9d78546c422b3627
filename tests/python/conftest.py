"""Where the suite finds the module and the CLI it compares with.

HEADPRUNE_PYTHONPATH  the directory holding the package headprune/ (default: build/python of this
                      checkout, where the build puts the extension beside copies of the .py files)
HEADPRUNE_CLI         the headprune program (default: build/headprune)

Run: PYTHONPATH= /usr/bin/python3 -m pytest -q tests/python   (CTest's `python` test does this).
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PYTHONPATH = Path(os.environ.get("HEADPRUNE_PYTHONPATH") or REPO / "build" / "python").resolve()
CLI = Path(os.environ.get("HEADPRUNE_CLI") or REPO / "build" / "headprune").resolve()
FIXTURES = REPO / "tests" / "fixtures"

sys.path.insert(0, str(PYTHONPATH))


class Cli:
    """The headprune program, run with quiet logs; returns the CompletedProcess.

    HP_BLAS_AUTO=0: the program does not restart itself with other OpenBLAS kernels
    (util/blas.h), so it computes with the kernels this Python process loaded and its results can
    be compared bit for bit."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.env = dict(os.environ, HP_BLAS_AUTO="0")

    def __call__(self, *args, check: bool = True) -> subprocess.CompletedProcess:
        cmd = [str(self.path), "--log-level", "warn", *[str(a) for a in args]]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=self.env)
        if check and r.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)} exited {r.returncode}:\n{r.stderr}")
        return r


@pytest.fixture(scope="session", autouse=True)
def scratch_under_pytest(tmp_path_factory):
    """Temporary directories the module and the docs' examples make go under pytest's own base
    directory (which pytest prunes), not into the system's /tmp."""
    import tempfile
    before = tempfile.tempdir
    tempfile.tempdir = str(tmp_path_factory.mktemp("tempfile"))
    yield
    tempfile.tempdir = before


@pytest.fixture(scope="session")
def cli() -> Cli:
    if not CLI.is_file():
        pytest.fail(f"the headprune program is not at {CLI} (build it, or set HEADPRUNE_CLI)")
    return Cli(CLI)


@pytest.fixture(scope="session")
def tiny(cli: Cli, tmp_path_factory) -> Path:
    """A random-weight BERT-shaped classifier (2 layers x 3 heads) made by `headprune init`."""
    out = tmp_path_factory.mktemp("tiny") / "ckpt"
    cli("--seed", "1234", "init", "--config", FIXTURES / "tiny_bert.json", "--out", out)
    return out
