"""Text as integer code points, and the character classes of Python's ``re``.

Kernels work on one flat ``uint32`` array of code points plus row offsets,
never on Python ``str`` objects. The classes come from running the ``re``
engine itself over every code point, so ``\\s`` and ``\\w`` in a kernel mean
exactly what they mean in scikit-learn's regular expressions.
"""

import re

import numpy as np

SPACE, WORD = 1, 2  # bits of the class table: re's \s, re's \w
_classes = None


def char_classes() -> np.ndarray:
    """uint8 per code point (0..0x10FFFF): SPACE | WORD bits. Built once (~0.2 s)."""
    global _classes
    if _classes is None:
        everything = "".join(map(chr, range(0x110000)))
        table = np.zeros(0x110000, np.uint8)
        for pattern, bit in ((r"\s+", SPACE), (r"\w+", WORD)):
            for match in re.finditer(pattern, everything):
                table[match.start() : match.end()] |= bit
        _classes = table
    return _classes


def encode(texts: list) -> tuple[np.ndarray, np.ndarray]:
    """(code points, offsets): text i is ``codes[offsets[i]:offsets[i + 1]]``."""
    codes = np.frombuffer("".join(texts).encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    if len(texts) == 1:  # a single row: numpy's per-call overhead is most of the cost
        return codes, np.array([0, len(codes)], dtype=np.int64)
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)), out=offsets[1:])
    return codes, offsets
