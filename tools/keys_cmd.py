"""`roundhouse keys DIR NAME... [--submitters NAME...]`: make CURVE key pairs for the scheduler,
agents and submitters."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

import zmq.auth

from roundhouse.errors import UsageError
from roundhouse.runtime.files import make_folder
from roundhouse.wire.security import (
    AGENT,
    AUTHORIZED,
    KEY_CHARS,
    SCHEDULER_KEY,
    SUBMITTER,
    check_name,
    key_role,
    public_of,
)


def register(sub) -> None:
    p = sub.add_parser("keys", help="make CURVE keys: the scheduler's, and one pair per agent or submitter")
    p.add_argument("folder", help="the key folder (created if needed)")
    p.add_argument("names", nargs="*", metavar="NAME", help="agents' node names")
    p.add_argument(
        "--submitters",
        action="extend",  # (given again, it adds names: `--submitters a b --submitters c`)
        nargs="+",
        default=[],
        metavar="NAME",
        help="submitters' names: their keys may submit jobs and ask for status, not register a node",
    )
    p.set_defaults(handler=keys_command)


def keys_command(args) -> int:
    folder = Path(args.folder)  # (as the paths below: `keys/` is said `keys`, never `keys//scheduler.key`)
    asked = list(dict.fromkeys([SCHEDULER_KEY, *args.names, *args.submitters]))
    existing = [name for name in asked if (folder / f"{name}.key").is_file() and (folder / f"{name}.key_secret").is_file()]
    written = make_keys(args.folder, args.names, args.submitters)
    for path in written:
        print(path)
    if not written:
        print(f"{folder}: every key already exists")
    elif existing:
        print(f"kept the existing key pairs of {', '.join(existing)} (never replaced: remove a pair to make it again)")
    for note in kept_notes(folder, existing):
        print(f"note: {note}")
    # (How each kind of key is used, for the kinds asked for: both when only the scheduler's was.)
    either = not args.names and not args.submitters
    files = f"{folder / SCHEDULER_KEY}.key and {folder / 'NAME'}.key_secret"
    lines = [f"scheduler: roundhouse serve ... --keys {folder}"]
    if args.names or either:
        lines.append(f"each node NAME needs {files}: roundhouse agent --name NAME --keys DIR ...")
    if args.submitters or either:
        lines.append(f"each submitter NAME needs {files}: roundhouse submit ADDRESS --name NAME --keys DIR ...")
    print("\n".join(lines))
    return 0


def make_keys(directory: str | Path, names: list[str], submitters: Sequence[str] = ()) -> list[Path]:
    """Create the scheduler's pair (if missing) and one pair per agent name and per submitter;
    admit each one's public key. Each key says its role (an agent's or a submitter's), and the
    scheduler lets no submitter's key register a node. Returns the files written. Existing
    pairs are kept (never silently replaced)."""
    submitters = list(submitters)
    if not str(directory).strip():  # (often an unset shell variable: not the current folder)
        raise UsageError("key folder: the name is empty")
    for name in [*names, *submitters]:
        check_name(name, "key name")
    if SCHEDULER_KEY in names or SCHEDULER_KEY in submitters:
        raise UsageError("'scheduler' is the scheduler's own key; name agents and submitters otherwise")
    both = sorted(set(names) & set(submitters))
    if both:
        raise UsageError(f"{', '.join(both)}: named both as an agent and as a submitter; a key has one role")
    folder = _private_folder(Path(directory))
    _private_folder(folder / AUTHORIZED)
    written: list[Path] = []
    roles = {name: AGENT for name in names} | {name: SUBMITTER for name in submitters}
    for name in [SCHEDULER_KEY, *names, *submitters]:
        public, secret = folder / f"{name}.key", folder / f"{name}.key_secret"
        if public.exists() and secret.exists():
            _check_pair(public, secret)
            _check_role(public, name, roles.get(name))
            continue
        if public.exists() or secret.exists():
            raise UsageError(f"{folder}: half a key pair for '{name}'; remove {public.name} / {secret.name} and run again")
        # Both files are made readable by their owner only (the secret one is never readable by
        # others, not even for a moment); the public one is then opened to others as usual.
        mask = os.umask(0o077)
        try:
            zmq.auth.create_certificates(str(folder), name, metadata={"role": roles[name]} if name in roles else None)
        finally:
            os.umask(mask)
        if name in roles:  # (pyzmq writes metadata into the secret file only; the scheduler reads the public one)
            text = public.read_text(encoding="utf-8")
            public.write_text(text.replace("\nmetadata\n", f'\nmetadata\n    role = "{roles[name]}"\n', 1), encoding="utf-8")
        os.chmod(public, 0o644 & ~mask)
        written += [public, secret]
        if name != SCHEDULER_KEY:
            written.append(_admit(public))
    return written


def _admit(public: Path) -> Path:
    """Copy `public` into the authorized folder as a new file, put in place at once: a key
    written over in place would leave a running scheduler admitting what it read before."""
    admitted = public.parent / AUTHORIZED / public.name
    partial = admitted.with_name(f".{public.name}.partial")  # (not `*.key`: never read as one)
    shutil.copy(public, partial)
    os.replace(partial, admitted)
    return admitted


def kept_notes(directory: str | Path, names: Sequence[str]) -> list[str]:
    """What an operator should know of the kept pairs of `names` (agents' or submitters'): one
    the scheduler does not admit (its public key not in the authorized folder, or another key
    there under its name), and a secret key that others than its owner can read."""
    folder = Path(directory)
    notes = []
    for name in names:
        public, secret = folder / f"{name}.key", folder / f"{name}.key_secret"
        admitted = folder / AUTHORIZED / public.name
        if name != SCHEDULER_KEY and not admitted.is_file():
            notes.append(
                f"'{name}' is not admitted: no {AUTHORIZED}/{public.name} (removed to turn it away?); "
                f"copy {public} there to admit it"
            )
        elif name != SCHEDULER_KEY:
            try:
                ours, _ = zmq.auth.load_certificate(str(public))
                theirs, _ = zmq.auth.load_certificate(str(admitted))
            except (ValueError, OSError):
                theirs, ours = b"", b"?"
            if theirs != ours:
                notes.append(
                    f"'{name}': {admitted} is not the public key of {secret.name}: the scheduler admits another key "
                    f"as '{name}'; copy {public} over it (or remove it to turn '{name}' away)"
                )
        mode = secret.stat().st_mode & 0o777
        if mode & 0o077:
            notes.append(
                f"{secret}: this secret key can be read by others than its owner (mode {mode:o}); "
                f"`chmod 600 {secret}` (and make a new pair if others may have read it)"
            )
    return notes


def _check_pair(public: Path, secret: Path) -> None:
    """An existing pair kept as it is must be one: two key files (an empty or cut-short file, as
    a failed copy leaves, is not) whose public keys agree, the secret one's being its secret
    key's. Otherwise a UsageError saying which
    files to remove to make the pair again."""
    remove = f"remove {public.name} and {secret.name} to make the pair again"
    try:
        held, _ = zmq.auth.load_certificate(str(public))
        paired, private = zmq.auth.load_certificate(str(secret))
    except (ValueError, OSError) as err:
        raise UsageError(f"{public.parent}: '{public.stem}' has a key pair that is not one ({err}); {remove}") from None
    if private is None or len(private) != KEY_CHARS or len(held) != KEY_CHARS:
        raise UsageError(
            f"{public.parent}: '{public.stem}' has a key pair that is not one (a key is missing or cut short); {remove}"
        )
    if held != paired or public_of(private) not in (None, paired):
        raise UsageError(f"{public.parent}: {public.name} is not the public key of {secret.name}; {remove}")


def _private_folder(path: Path) -> Path:
    """A key folder: one made here is its owner's only (0700); an existing one is left as it is
    (the secret keys in it are their owner's only either way)."""
    created = not path.exists()
    folder = make_folder(path, "key folder")
    if created:
        os.chmod(folder, 0o700)
    return folder


def _check_role(public: Path, name: str, asked: str | None) -> None:
    """An existing pair kept for `name` must have the role asked of it now (a key made before
    keys had roles may do either, so it serves as an agent's but not as a submitter's)."""
    if asked is None:
        return
    held = key_role(public)
    if held != asked and not (held == "" and asked == AGENT):
        had = f"an {held}'s key" if held == AGENT else f"a {held}'s key" if held else "a key of no role (agent or submitter)"
        raise UsageError(
            f"{public}: '{name}' already has {had}; remove {public.name}, {public.stem}.key_secret and "
            f"{AUTHORIZED}/{public.name} to make it again as {'an agent' if asked == AGENT else 'a submitter'}"
        )
