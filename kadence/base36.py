"""Non-negative integers in base 36 (digits and lower-case letters): compact numbers in text
fields such as offset metadata and history details. `int(text, 36)` reads them back."""

from __future__ import annotations

DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"


def base36(n: int) -> str:
    if n < 0:
        raise ValueError(f"base36 takes a non-negative integer, not {n}")
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = DIGITS[r] + out
        if n == 0:
            return out
