"""Parse the human units that config values and `-D` overrides accept.

Durations are seconds as a number, or strings like ``500ms``, ``30s``, ``1h``,
``30d``; sizes are bytes as a number, or ``10kB``/``10MB`` (powers of 1000) and
``10KiB``/``10MiB`` (powers of 1024), as DESIGN section 6a fixes them.
"""

from __future__ import annotations

import math
import re

_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_SIZE_UNITS = {
    "b": 1, "kb": 1000, "mb": 1000**2, "gb": 1000**3, "tb": 1000**4,
    "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4,
}
_NUMBER_UNIT = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([a-zA-Z]*)\s*$")


def parse_duration(value: object) -> float:
    """Seconds as a float; raises ValueError naming the accepted forms."""
    if isinstance(value, bool):
        raise ValueError("expected a duration (seconds, or like 500ms, 30s, 1h, 30d)")
    if isinstance(value, int | float):
        if value < 0:
            raise ValueError("a duration cannot be negative")
        try:
            seconds = float(value)
        except OverflowError:  # an int too large for a float
            seconds = math.inf
        if not math.isfinite(seconds):  # YAML .nan / .inf: NaN compares false with every limit
            raise ValueError("a duration must be a finite number of seconds")
        return seconds
    if isinstance(value, str):
        match = _NUMBER_UNIT.match(value)
        if match and match.group(2).lower() in _DURATION_UNITS | {"": 1.0}:
            unit = match.group(2).lower()
            seconds = float(match.group(1)) * _DURATION_UNITS.get(unit, 1.0)
            if math.isfinite(seconds):  # '1e400' does not match; a 400-digit number would overflow
                return seconds
    raise ValueError("expected a duration (seconds, or like 500ms, 30s, 1h, 30d)")


def parse_size(value: object) -> int:
    """Bytes as an int; kB/MB are powers of 1000, KiB/MiB powers of 1024."""
    if isinstance(value, bool):
        raise ValueError("expected a size (bytes, or like 10kB, 10MB, 10KiB, 10MiB)")
    if isinstance(value, int):
        if value < 0:
            raise ValueError("a size cannot be negative")
        return value
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    if isinstance(value, str):
        match = _NUMBER_UNIT.match(value)
        if match and match.group(2).lower() in _SIZE_UNITS | {"": 1}:
            return int(float(match.group(1)) * _SIZE_UNITS.get(match.group(2).lower(), 1))
    raise ValueError("expected a size (bytes, or like 10kB, 10MB, 10KiB, 10MiB)")
