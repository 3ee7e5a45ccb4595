"""The bytes of a vector set: `$readmemh` hex text, `.npy` files, checksums and names.

A `.hex` file holds one element per line: the two's-complement value masked to the tensor's
width, written as exactly ``ceil(bits / 4)`` lowercase hex digits and a ``\\n``. A 15-bit signed
-1 is ``7fff``, never ``ffff``: a digit above the declared width is an error, so a reader can
tell a too-wide value from a sign extension.

Formatting is table driven (no per-element Python): a value is cut into 16-bit chunks and each
chunk becomes four ASCII digits by one ``np.take`` into a 65 536-entry table of 4-byte strings.
Widths up to 16 bits take a single gather that includes the newline (~250 M elements/s here).
"""

from __future__ import annotations

import functools
import hashlib
import io
import re

import numpy as np

from hwvit.formats import IntFormat

MANIFEST = "manifest.yaml"
FORMAT_VERSION = 1  # bump when the manifest schema changes incompatibly

# A tensor name is an identifier; a file name is a plain name inside the set's directory.
NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# A block path is dotted identifiers and indices (``layers.3.softmax``); it names a directory.
PATH_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]*(\.[A-Za-z0-9_][A-Za-z0-9_-]*)*$")

_HEX_DIGITS = np.frombuffer(b"0123456789abcdef", np.uint8)
# ASCII byte -> digit value, 255 for anything that is not a hex digit.
_DECODE = np.full(256, 255, np.uint8)
_DECODE[np.frombuffer(b"0123456789", np.uint8)] = np.arange(10)
_DECODE[np.frombuffer(b"abcdef", np.uint8)] = np.arange(10, 16)
_DECODE[np.frombuffer(b"ABCDEF", np.uint8)] = np.arange(10, 16)


class VectorSetError(ValueError):
    """A vector set (or a record to be written as one) is malformed; the message is one line."""


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@functools.cache
def _table(width: int, newline: bool) -> np.ndarray:
    """All 16**width values as ``width`` ASCII hex digits (+ ``\\n``), one void item each."""
    values = np.arange(16**width, dtype=np.int64)
    cols = [_HEX_DIGITS[(values >> (4 * (width - 1 - i))) & 15] for i in range(width)]
    if newline:
        cols.append(np.full(values.size, ord("\n"), np.uint8))
    table = np.ascontiguousarray(np.stack(cols, axis=1).astype(np.uint8))
    return table.view(f"V{table.shape[1]}").reshape(-1)


def encode_hex(data: np.ndarray, bits: int) -> memoryview:
    """`.hex` text of ``data`` (any integer dtype, values assumed to fit ``bits``), row-major.

    Returns a buffer over the formatted array (no copy): write it, hash it, or ``bytes()`` it.
    """
    digits = IntFormat(bits).hex_digits
    flat = np.ascontiguousarray(data).reshape(-1)
    if digits <= 4:  # one gather of "dd..\n" per element
        index = flat.astype(np.int64, copy=False) & ((1 << bits) - 1)
        return memoryview(np.take(_table(digits, True), index)).cast("B")
    raw = flat.astype(np.int64, copy=False).view(np.uint64)
    if bits < 64:
        raw = raw & np.uint64((1 << bits) - 1)
    widths = [4] * (digits // 4)  # 16-bit chunks, most significant first
    if digits % 4:
        widths.insert(0, digits % 4)
    names = [f"c{i}" for i in range(len(widths))]
    line = np.dtype({"names": names + ["nl"], "formats": [f"V{w}" for w in widths] + ["u1"],
                     "offsets": [int(v) for v in np.cumsum([0] + widths)], "itemsize": digits + 1})
    out = np.empty(raw.size, line)
    shift = 4 * digits
    for name, width in zip(names, widths):
        shift -= 4 * width
        chunk = (raw >> np.uint64(shift)) & np.uint64(16**width - 1)
        out[name] = np.take(_table(width, False), chunk.astype(np.intp))
    out["nl"] = ord("\n")
    return memoryview(out.view(np.uint8))


def decode_hex(text: bytes, count: int, bits: int, signed: bool) -> np.ndarray:
    """Parse `.hex` text into ``count`` int64 values; VectorSetError names the first bad line.

    Strict: exactly ``count`` lines of exactly ``IntFormat(bits).hex_digits`` digits, each ``\\n``-terminated,
    each value below ``2**bits``. `$readmemh` accepts far more (comments, ``@addr``, x/z, short
    files), which is why this is the only guard before a simulator sees the file.
    """
    digits = IntFormat(bits).hex_digits
    buf = np.frombuffer(text, np.uint8)
    if buf.size == count * (digits + 1):
        lines = buf.reshape(count, digits + 1)
        values = _DECODE[lines[:, :digits]]
        if bool((lines[:, digits] == ord("\n")).all()) and not bool((values == 255).any()):
            out = np.zeros(count, np.int64)
            for i in range(digits):
                out = (out << 4) | values[:, i]
            if bits < 64:
                too_wide = np.flatnonzero(out >> bits)
                if too_wide.size:
                    i = int(too_wide[0])
                    raise VectorSetError(f"line {i + 1}: value 0x{int(out[i]):x} does not fit {bits} bits")
            if signed and bits < 64:
                out = np.where(out >= 1 << (bits - 1), out - (1 << bits), out)
            return out
    raise VectorSetError(_diagnose(text, count, digits, bits))


def _diagnose(text: bytes, count: int, digits: int, bits: int) -> str:
    """The first thing wrong with a `.hex` text that failed the fast path (runs on bad files only)."""
    lines = text.split(b"\n")
    ends_with_newline = lines[-1] == b""
    if ends_with_newline:
        lines.pop()
    for i, line in enumerate(lines[:count]):
        bad = _DECODE[np.frombuffer(line, np.uint8)] == 255
        if not line:
            return f"line {i + 1}: empty line"
        if bad.any():
            char = chr(line[int(np.flatnonzero(bad)[0])])
            return f"line {i + 1}: non-hex character {char!r}"
        if int(line, 16) >> bits:
            return f"line {i + 1}: value 0x{line.decode()} does not fit {bits} bits"
        if len(line) != digits:
            return f"line {i + 1}: {len(line)} hex digits, expected {digits}"
    if len(lines) < count:
        return f"truncated: {len(lines)} lines, expected {count}"
    if len(lines) > count:
        return f"extra lines: {len(lines)} lines, expected {count}"
    if not ends_with_newline:
        return f"line {len(lines)}: no final newline"
    return "malformed hex text"  # unreachable for text that passed every test above


def encode_npy(data: np.ndarray, bits: int, signed: bool) -> tuple[bytes, memoryview]:
    """`.npy` file (format 1.0, as ``np.save`` writes it) as (header, array buffer), narrowest dtype."""
    array = np.ascontiguousarray(data.astype(IntFormat(bits, signed).dtype, copy=False))
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, np.lib.format.header_data_from_array_1_0(array))
    return header.getvalue(), memoryview(array.reshape(-1).view(np.uint8))


def decode_npy(raw: bytes) -> np.ndarray:
    """Load `.npy` bytes without pickles; VectorSetError on anything that is not a plain array."""
    try:
        return np.load(io.BytesIO(raw), allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise VectorSetError(f"not a valid .npy file ({why})") from None
