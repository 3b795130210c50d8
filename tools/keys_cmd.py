"""`roundhouse keys DIR NAME...`: make CURVE key pairs for the scheduler, agents and submitters."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import zmq.auth

from roundhouse.errors import UsageError
from roundhouse.runtime.files import make_folder
from roundhouse.wire.security import AUTHORIZED, SCHEDULER_KEY, check_name


def register(sub) -> None:
    p = sub.add_parser("keys", help="make CURVE keys: the scheduler's, and one pair per agent or submitter")
    p.add_argument("folder", help="the key folder (created if needed)")
    p.add_argument("names", nargs="*", metavar="NAME", help="agents' node names and submitters' names")
    p.set_defaults(handler=keys_command)


def keys_command(args) -> int:
    written = make_keys(args.folder, args.names)
    for path in written:
        print(path)
    if not written:
        print(f"{args.folder}: every key already exists")
    print(
        f"scheduler: roundhouse serve ... --keys {args.folder}\n"
        f"each node NAME needs {args.folder}/scheduler.key and {args.folder}/NAME.key_secret: "
        f"roundhouse agent --name NAME --keys DIR ..."
    )
    return 0


def make_keys(directory: str | Path, names: list[str]) -> list[Path]:
    """Create the scheduler's pair (if missing) and one pair per name; admit each name's public
    key. Returns the files written. Existing pairs are kept (never silently replaced)."""
    for name in names:
        check_name(name, "key name")
    if SCHEDULER_KEY in names:
        raise UsageError("'scheduler' is the scheduler's own key; name agents and submitters otherwise")
    folder = make_folder(directory, "key folder")
    make_folder(folder / AUTHORIZED, "key folder")
    written: list[Path] = []
    for name in [SCHEDULER_KEY, *names]:
        public, secret = folder / f"{name}.key", folder / f"{name}.key_secret"
        if public.exists() and secret.exists():
            continue
        if public.exists() or secret.exists():
            raise UsageError(f"{folder}: half a key pair for '{name}'; remove {public.name} / {secret.name} and run again")
        zmq.auth.create_certificates(str(folder), name)
        os.chmod(secret, 0o600)
        written += [public, secret]
        if name != SCHEDULER_KEY:
            shutil.copy(public, folder / AUTHORIZED / public.name)
            written.append(folder / AUTHORIZED / public.name)
    return written
