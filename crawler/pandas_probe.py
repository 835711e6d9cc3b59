"""pyarrow's first conversion of Python objects, answered without importing pandas.

To tell whether a list it converts (``pa.array``, ``pa.table``, ``from_pylist``...) is a pandas object,
pyarrow imports pandas the first time it converts anything in a process where numpy is loaded, if
pandas is installed at all (the ``spark`` and ``dev`` extras install it): ~0.3 s and ~50 MB resident
in every ``crawl``, ``inject`` or ``updatedb``, for a crawl that never holds a pandas object. Measured
on ``crawl``'s first statement (inject's ``pa.table``), docs/benchmarks.md.

``skip()`` makes pyarrow's probe fail once with pandas hidden: pyarrow then takes lists as lists. It
does not keep pandas away: a call that needs pandas (``Table.to_pandas``) imports it then, as pyarrow
retries a failed import whenever pandas is required. PySpark hands pyarrow pandas objects of its own,
so cli.py makes the probe only for a command that runs no Spark (``jobs.engine: spark``, ``fetch --spark``). A conversion that infers its type (no type or
schema given) still looks for pandas' NA in Arrow's C++ code, so the crawler's conversions give one.
"""

from __future__ import annotations

import sys


class _NoPandas:
    """A finder that makes ``import pandas`` fail (a None entry in sys.modules would not: Cython's import,
    which pyarrow's is, takes None for the module)."""

    @staticmethod
    def find_spec(name: str, *_: object) -> None:
        if name == "pandas":
            raise ModuleNotFoundError("pandas hidden from pyarrow's probe", name="pandas")


def skip() -> None:
    """Answer pyarrow's "is pandas there?" with no, unless pandas or no pyarrow is loaded already."""
    if "pandas" in sys.modules or "pyarrow" not in sys.modules:
        return
    import pyarrow as pa

    sys.meta_path.insert(0, _NoPandas)  # type: ignore[arg-type]
    try:
        pa.lib._pandas_api.have_pandas  # noqa: B018 - the probe, made now: pandas looks absent
    finally:
        sys.meta_path.remove(_NoPandas)  # type: ignore[arg-type]
