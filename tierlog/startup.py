"""How a `tierlog` process imports: shared by `python -m tierlog` (tierlog/__main__.py) and
the test suite's pre-imported parent of server processes (tests/integration/zygote_server.py),
so both import exactly what a production process does."""

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


class _NotInstalled(MetaPathFinder):
    """Finds _DEV_ONLY's packages as absent. (A None in sys.modules is not enough: Cython's
    `import pandas`, pyarrow's, takes a None found there for the module.)"""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname.partition(".")[0] in _DEV_ONLY:
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None


def leave_out_dev_only_packages() -> None:
    """Before any other import of the process."""
    if not any(isinstance(f, _NotInstalled) for f in sys.meta_path):
        sys.meta_path.insert(0, _NotInstalled())
