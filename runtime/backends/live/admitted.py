"""Which keys the scheduler admits now, checked on every message, not only when a peer connects.

The authenticator (wire/security.py) checks a peer's CURVE key against `authorized/` when the
peer connects; a connection made before its key file was removed, or before its key was made
again under the same name, would otherwise carry on. So the server keeps, for each User-Id (a
key's name, marked with its role) that the files in `authorized/` give, the public key that
file holds, looks each message's User-Id and key (the authenticator's `KEY_PROPERTY`) up in
it, and refuses a message whose key is no longer there. The folder is looked at again on every
wake-up of the server by one `stat` of the folder (a file added, removed or renamed changes its
time), read again when that changed, and read again at least every `RESCAN_S` seconds for a
file written over in place; a key not admitted is looked up again after a fresh read before it
is refused, so a key added a moment ago is never refused."""

from __future__ import annotations

import os
import time
from pathlib import Path

import zmq.auth

from roundhouse.errors import UsageError
from roundhouse.wire.security import check_key, folder_stamp, key_role, user_id

# A connection's key as the server knows it: (User-Id, public key in Z85; "" if not said).
Peer = tuple[str, str]


class AdmittedKeys:
    """The User-Ids and public keys of the key files in an `authorized/` folder, as the
    authenticator names them."""

    RESCAN_S = 1.0  # a folder unchanged in time is read again this often (a key file written over in place)

    def __init__(self, folder: Path):
        self.folder = folder
        self.user_ids: frozenset[str] = frozenset()
        self.keys: dict[str, str] = {}  # User-Id -> the public key its file holds now
        self.refused: set[Peer] = set()  # keys found removed or replaced (refused until they are back)
        self._by_file: dict[str, Peer] = {}  # key file name -> the User-Id and key it gives
        self._stamp: tuple | None = None
        self._folder_time: int | None = None
        self._read_at = float("-inf")
        self.refresh(force=True)

    def admits(self, user: str, key: str = "") -> bool:
        """Whether a message with this User-Id, from a connection admitted with `key`, is taken:
        two lookups. A key the message does not say ("") is judged by its User-Id alone. A
        peer not admitted and not yet refused is worth a fresh read (`refresh(force=True)`)
        before it is refused: its key may have been added since the folder was last read."""
        return user in self.user_ids and (not key or self.keys.get(user) == key)

    def replaced(self, user: str, key: str) -> bool:
        """Whether the name of a key not admitted is, under another key: it was made again."""
        return bool(key) and user in self.user_ids and self.keys.get(user) != key

    def refresh(self, force: bool = False) -> list[str]:
        """Read the folder again if it may have changed; returns the User-Ids of the keys
        admitted again after being refused (they are back)."""
        now = time.monotonic()
        try:
            folder_time: int | None = os.stat(self.folder).st_mtime_ns
        except OSError:
            folder_time = None
        if not force and folder_time == self._folder_time and now - self._read_at < self.RESCAN_S:
            return []
        self._folder_time, self._read_at = folder_time, now
        stamp = folder_stamp(self.folder)
        if stamp == self._stamp:
            return []
        self._stamp = stamp
        by_file = {}
        for name, *_ in stamp:
            path = self.folder / name
            try:
                public, _ = zmq.auth.load_certificate(str(path))
                check_key(path, "public", public)
                by_file[name] = (user_id(path.stem, key_role(path)), public.decode("ascii"))
            except (ValueError, OSError, UsageError):
                # Present but unreadable (being copied or written over): not removed. What it
                # gave before stands until it can be read again, or is removed.
                if name in self._by_file:
                    by_file[name] = self._by_file[name]
        self._by_file = by_file
        self.keys = dict(by_file.values())
        self.user_ids = frozenset(self.keys)
        back = {peer for peer in self.refused if self.admits(*peer)}
        self.refused -= back
        return sorted({user for user, _ in back})
