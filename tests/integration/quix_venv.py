"""The venv quixstreams runs from (`.venv-quix`): quixstreams pins an older confluent-kafka
than the project's, so tests/integration/test_kafka_quix.py starts its app there, as a child
process. Made from PyPI on first use, and kept.

`python -m tests.integration.quix_venv` makes it ahead: scripts/test runs it in the
background while mypy keeps one core busy and the other idles, so a fresh clone's test run
does not install it (~4.6 CPU-s) in the middle of the suite."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

QUIX = "quixstreams==3.28.1"  # its newest; it asks confluent-kafka < 2.13
VENV = Path(__file__).resolve().parents[2] / ".venv-quix"


def quix_python() -> Path:
    """The venv's interpreter, with QUIX installed (made or remade when it is not)."""
    python = VENV / "bin" / "python"
    wanted = QUIX.split("==")[1]
    check = [str(python), "-c", f"import quixstreams as q; assert q.__version__ == {wanted!r}"]
    if not python.exists() or subprocess.run(check, capture_output=True).returncode != 0:
        # No pip of its own: the suite's installs into it (--python), and compiles no module
        # ahead (the app imports a few of them): 12 s of CPU on a fresh clone, now 3.5.
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(VENV)], check=True)
        install = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q"]
        subprocess.run([*install, "--no-compile", QUIX], check=True, timeout=900)
    return python


if __name__ == "__main__":
    quix_python()
