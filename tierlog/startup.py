"""How a `tierlog` process starts, whichever way it was started: `python -m tierlog`
(tierlog/__main__.py: tests, `tierlog dev`'s children) and the `tierlog` command the package
installs (pyproject.toml's [project.scripts]) both call `run()`, so both import only what a
production process needs and import it the same way."""

import gc
import os
import sys
from collections.abc import Sequence
from importlib.abc import MetaPathFinder
from importlib.machinery import ModuleSpec
from types import ModuleType

# Packages a dev install has and the server image has not, which libraries import on their own
# whenever they are installed, for nothing any command uses:
# - hypothesis: kio imports it to register test strategies for its types, and Hypothesis then
#   loads its plugins (trio, pytest): about a third of a broker's start-up;
# - pandas (the spark extra's): pyarrow imports it on the first pa.array() of a Python object,
#   to ask whether that object is a pandas one: ~0.3 s of CPU with dateutil and pytz;
# - trio (selenium's): httpcore imports it to support trio's event loop.
# The test suite starts hundreds of server and CLI processes from a dev install; this makes
# each import what a production one does. In-process users (the tests themselves) are untouched.
_DEV_ONLY = frozenset({"hypothesis", "pandas", "trio"})
# Modules every install has that no command uses: httpx imports its own command line client
# (rich's console, pygments, click: ~35 ms of CPU) whenever those are installed, and falls
# back to a stub when the import fails.
_UNUSED = frozenset({"httpx._main"})


class _NotInstalled(MetaPathFinder):
    """Finds _DEV_ONLY's packages and _UNUSED's modules as absent. (A None in sys.modules is
    not enough: Cython's `import pandas`, pyarrow's, takes a None found there for the
    module.)"""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname.partition(".")[0] in _DEV_ONLY or fullname in _UNUSED:
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None


def prepare() -> None:
    """What a tierlog process does before it imports the command line: run() below, and the
    test suite's pre-imported parent of server processes (tests/integration/zygote_server.py),
    so both import what a production process does, the same way."""
    if not any(isinstance(f, _NotInstalled) for f in sys.meta_path):
        sys.meta_path.insert(0, _NotInstalled())
    # numpy's OpenBLAS (pyarrow imports numpy) starts a BLAS thread per extra core at import,
    # which spins before it sleeps: ~0.1 CPU-s of every process's start (0.93 -> 0.83 for a
    # broker, 0.48 -> 0.40 for `tierlog --help`) for linear algebra no command does. Read at
    # OpenBLAS's load, so set before the imports; one the caller set is kept.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def run() -> int:
    """The command line, from a process's first import on: prepare() goes first."""
    prepare()
    # The command line's imports (pyarrow, SQLAlchemy, httpx, the client: most of a process's
    # start-up) make long-lived module objects only, yet each full collection on the way scans
    # all of them again: ~10% of that CPU. They are imported with the collector off, then
    # frozen (left out of later collections, as ingest/server.py does after a broker's start).
    gc.disable()
    from tierlog.cli.main import main  # after the finder: main imports kio, pyarrow

    gc.freeze()
    gc.enable()
    return main()
