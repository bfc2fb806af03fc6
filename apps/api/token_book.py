"""The API's static tokens: KADENCE_API_TOKENS and KADENCE_API_TOKENS_FILE, the file read again
when it changes, without a restart.

A look-up costs one SHA-256 and a dict look-up; at most once a second it also costs a stat of
the file, and a read when its mtime, size or inode changed. A file that cannot be read or
parsed keeps the tokens the book had (the reason is logged once per change of the file), so a
half-written or mistyped file never drops every caller; at start it must be valid."""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from kadence.api_tokens import MAX_FILE_BYTES, Token, TokenEntry, parse_tokens, tokens_of

log = logging.getLogger(__name__)
CHECK_EVERY_S = 1.0


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class TokenFileError(ValueError):
    """KADENCE_API_TOKENS_FILE cannot be used: missing, too big, not JSON, a bad entry."""


class TokenBook:
    """Hash -> token, from the setting and the file. Thread-safe: routes look up from worker
    threads, the body limit from the event loop."""

    def __init__(
        self,
        fixed: Mapping[str, TokenEntry | Mapping[str, object]],
        path: Path | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._fixed = tokens_of(fixed)
        self._path = path
        self._clock = clock
        self._lock = threading.Lock()
        self._seen: tuple[int, int, int] | None = None
        self._checked = clock()
        self._tokens = self._fixed
        if path is not None:
            self._seen = _stat(path)
            try:
                self._tokens = self._merged(path)
            except TokenFileError as exc:
                raise TokenFileError(f"KADENCE_API_TOKENS_FILE {path}: {exc}") from None

    def __len__(self) -> int:
        return len(self.tokens())

    def get(self, digest: str) -> Token | None:
        return self.tokens().get(digest)

    def tokens(self) -> Mapping[str, Token]:
        """The current tokens, the file checked again if a second has passed."""
        if self._path is not None and self._clock() - self._checked >= CHECK_EVERY_S:
            self._reload(self._path)
        return self._tokens

    def _reload(self, path: Path) -> None:
        if not self._lock.acquire(blocking=False):
            return  # another thread is reading it: use the tokens as they are
        try:
            self._checked = self._clock()
            seen = _stat(path)
            if seen == self._seen:
                return
            self._seen = seen
            try:
                self._tokens = self._merged(path)
            except TokenFileError as exc:
                log.error("KADENCE_API_TOKENS_FILE %s: %s; keeping the previous tokens", path, exc)
                return
            log.info("KADENCE_API_TOKENS_FILE %s read again: %d tokens", path, len(self._tokens))
        finally:
            self._lock.release()

    def _merged(self, path: Path) -> dict[str, Token]:
        try:
            with path.open("rb") as f:
                text = f.read(MAX_FILE_BYTES + 1)
        except OSError as exc:
            raise TokenFileError(f"cannot be read ({exc.strerror or exc})") from None
        try:
            found = parse_tokens(text)
        except ValueError as exc:
            raise TokenFileError(str(exc)) from None
        names = {t.name for t in self._fixed.values()}
        for digest, token in found.items():
            if digest in self._fixed or token.name in names:
                raise TokenFileError(
                    f"the token {token.name!r} is also in KADENCE_API_TOKENS (a hash or a name "
                    "in both)"
                )
        return {**self._fixed, **found}


def _stat(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)
