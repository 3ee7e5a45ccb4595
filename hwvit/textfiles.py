"""Reading the user's text files, with every fault a one-line message that names the file.

``read_yaml`` is the one place hwvit opens a YAML file: ``yaml.safe_load`` (plain data only; a
``!!python/object`` tag is refused, never run), UTF-8, and a one-line error naming the file and,
for a syntax error, the line. Callers check the shape of what they get (mapping, list, fields).
``first_line`` shortens any exception to the one line an error message quotes; ``count`` writes a
number and its noun in the right number (``1 image``, ``2 mismatches``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def first_line(exc: BaseException, *, with_type: bool = False) -> str:
    """The first line of an exception's message (its class name if it has none); with
    ``with_type``, prefixed by the class name (``UnpicklingError: invalid load key``)."""
    lines = str(exc).strip().splitlines()
    if not lines:
        return type(exc).__name__
    return f"{type(exc).__name__}: {lines[0]}" if with_type else lines[0]


def count(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural unless ``n`` is 1: ``1 image``, ``3 images``, ``1 mismatch``,
    ``2 mismatches`` (nouns ending in s, x, z, ch, sh take -es)."""
    if n == 1:
        return f"{n} {noun}"
    return f"{n} {noun}{'es' if noun.endswith(('s', 'x', 'z', 'ch', 'sh')) else 's'}"


def parse_yaml(text: str | bytes, label: str, error: type[Exception] = ValueError, what: str = "") -> Any:
    """``yaml.safe_load`` of ``text``; a syntax error (or a refused tag) raises ``error`` with
    ``"<label>: not valid YAML at line N"`` (the line when YAML names one), or with ``what``
    ``"<label>: cannot read <what>: not valid YAML at line N"``."""
    import yaml  # imported here: `hwvit --help` must not pay for it

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        context = f"cannot read {what}: " if what else ""
        raise error(f"{label}: {context}not valid YAML{where}") from None


def read_yaml(
    path: str | Path, *, what: str = "", error: type[Exception] = ValueError, label: str | None = None
) -> Any:
    """The data of a YAML file (``None`` for an empty one), read as UTF-8. A file that cannot be
    read raises ``error`` with ``"<label>: cannot read <what> (<reason>)"``, one that is not YAML
    as ``parse_yaml`` says; ``label`` defaults to the path, ``what`` names the file's role
    (``config``, ``recipe``)."""
    label = str(path) if label is None else label
    noun = f" {what}" if what else ""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise error(f"{label}: cannot read{noun} (not UTF-8 text)") from None
    except OSError as exc:
        raise error(f"{label}: cannot read{noun} ({exc.strerror or type(exc).__name__})") from None
    return parse_yaml(text, label, error, what)
