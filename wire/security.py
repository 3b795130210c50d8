"""Who may talk to the scheduler: ZeroMQ CURVE keys, and the explicit insecure mode.

A key folder made by `roundhouse keys DIR NODE... --submitters NAME...` (tools/keys_cmd.py) holds::

    scheduler.key, scheduler.key_secret     the scheduler's key pair
    NAME.key, NAME.key_secret               one pair per agent or submitter
    authorized/NAME.key                     the public keys the scheduler admits

Each pair says its role in its metadata (`role = "agent"` or `role = "submitter"`): a
submitter's key may submit jobs and ask for status but not register a node, so that giving
someone a key to submit with does not give them the cluster's nodes. A key made before keys
had roles (no `role`) may do either, as it could then.

The scheduler reads `scheduler.key_secret` and `authorized/`; an agent or submitter called
NAME reads `NAME.key_secret` and `scheduler.key` (so a node needs only those two files).
Every connection is encrypted and the scheduler admits only the public keys in `authorized/`
(re-read when a file there is added, removed or written over, so adding a node, or making its
key again, needs no restart). Each message says which key its connection was admitted with
(`KEY_PROPERTY`), so that a key removed, or made again under its name, cuts off a connection
still using the old one (a registered agent so cut off is told with `key_refused`, and stops).
A refused peer is logged. A secret key file that others than its
owner can read is used, with a warning naming it.

Insecure mode (`--insecure`) skips all of this and is allowed only on loopback or local
addresses; it says so loudly when it starts.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import re
import struct
from collections.abc import Mapping
from pathlib import Path

import attrs
import zmq
import zmq.auth
from zmq.auth.thread import ThreadAuthenticator
from zmq.utils import z85

from roundhouse.errors import UsageError
from roundhouse.wire.protocol import NAME_RE

SCHEDULER_KEY = "scheduler"
AUTHORIZED = "authorized"
AGENT, SUBMITTER = "agent", "submitter"  # a key's role
_LOOPBACK_V4 = ipaddress.ip_network("127.0.0.0/8")
_LOG = logging.getLogger("roundhouse.security")
# A CURVE key in a key file: 32 bytes, written as 40 Z85 characters.
KEY_BYTES = 32
KEY_CHARS = 40


def is_loopback(address: str) -> bool:
    """Whether `address` stays on this machine: `ipc://` or `inproc://`, or TCP to an IP address
    in 127.0.0.0/8, to ::1, or to exactly `localhost`. Not a prefix test: `tcp://127.example.net`
    is a DNS name anywhere, and ZeroMQ's `tcp://SOURCE;DESTINATION` form (any `;`) connects to
    its destination."""
    if ";" in address:
        return False
    if address.startswith(("ipc://", "inproc://")):
        return True
    if not address.startswith("tcp://"):
        return False
    host, colon, port = address[len("tcp://") :].rpartition(":")
    if not colon or not host:
        return False
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if host == "localhost":
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return ip in _LOOPBACK_V4 or ip == ipaddress.IPv6Address("::1")


def allow_ipv6(socket, address: str) -> None:
    """Let `socket` use IPv6 when `address` names an IPv6 host (`tcp://[::1]:5555`): ZeroMQ's
    sockets use IPv4 alone unless told, and then say only "No such device". Other addresses
    leave the socket as it was (on IPv4 alone, as agents and schedulers have always been)."""
    host = address.partition("://")[2].rpartition(":")[0]
    if address.startswith("tcp://") and host.startswith("[") and host.endswith("]"):
        socket.setsockopt(zmq.IPV6, 1)


def check_port(address: str) -> None:
    """Refuse a TCP port past 65535, which ZeroMQ takes modulo 65536 (a scheduler would listen
    elsewhere than it says)."""
    port = re.fullmatch(r"tcp://.*:(\d+)", address)
    if port is not None and not 0 < int(port.group(1)) <= 65535:
        raise UsageError(f"{address}: port {port.group(1)} is not a TCP port (1 to 65535)")


def check_connect_address(address: str, in_process: bool = True) -> None:
    """Refuse an address ZeroMQ cannot connect to (`tcp://host:notaport`), before any socket of
    the caller exists: a half-built context would otherwise be left to hang in `term()`. The
    address is read, not tried: a trial connection without the caller's keys would reach the
    scheduler and be counted there as a refused peer. What is read is what ZeroMQ's own
    `connect` checks before it connects: a transport a DEALER socket can use, a TCP host of
    letters, digits and `.-_:%[]` (`;` between a source and a destination) ending in a numeric
    port, an IPC path short enough for a socket's name. Without `in_process` (a command, whose
    scheduler is another process) an inproc:// address, which no other process reaches, is
    refused too."""
    check_port(address)
    transport, sep, rest = address.partition("://")
    problem = None
    if sep and transport == "inproc" and not in_process:
        problem = (
            "an inproc:// address is reachable only inside one process, not a `roundhouse serve`'s; "
            "use tcp://HOST:PORT (or ipc://PATH on this machine)"
        )
    elif not sep or transport not in _CONNECTABLE:
        also = ", ipc://PATH or inproc://NAME" if in_process else " or ipc://PATH"
        problem = f"not an address a client connects to (tcp://HOST:PORT{also})"
    elif transport == "tcp" and not re.fullmatch(_TCP_ADDRESS, rest):
        problem = "not HOST:PORT (a host name or IP address, and a port number)"
    elif transport == "ipc" and not 0 < len(rest.encode()) < IPC_PATH_BYTES:
        problem = f"the path must be 1 to {IPC_PATH_BYTES - 1} bytes long"
    if problem:
        raise UsageError(f"cannot connect to {address}: {problem}")


# The transports a DEALER socket connects over, a TCP address as ZeroMQ's `connect` checks it
# (first character, the characters allowed after it, a port that starts with a digit: here all
# digits), and the room for an IPC path in a Unix socket's address (with its closing NUL).
_CONNECTABLE = ("tcp", "ipc", "inproc")
_TCP_ADDRESS = r"[A-Za-z0-9\[:][A-Za-z0-9.\-:%;\[\]_*]*:[0-9]+"
IPC_PATH_BYTES = 108


def check_name(name: str, what: str) -> None:
    """Node, submitter and key names name files in key and work folders and travel in messages:
    plain names only (no path separators, no '..')."""
    if not re.fullmatch(NAME_RE, name):
        raise UsageError(f"bad {what} {name!r}: use up to 64 letters, digits, '.', '_' and '-', starting with a letter or digit")


def _check_choice(keys: str | None, insecure: bool) -> None:
    """One of --keys DIR and --insecure, not both. Refuse `--keys ""` (often an unset shell
    variable), which would otherwise be taken as no --keys at all: with --insecure, a run without
    keys that was meant to have them."""
    if keys is not None and not keys.strip():
        raise UsageError("--keys: the name is empty")
    if keys and insecure:
        raise UsageError("give either --keys DIR or --insecure, not both")


def _insecure_on_loopback(insecure: bool, address: str, no_keys: str) -> None:
    """Without keys: --insecure must be given (else `no_keys` says what to give), and only for a
    loopback address, where no other machine can connect."""
    if not insecure:
        raise UsageError(no_keys)
    if not is_loopback(address):
        raise UsageError(f"--insecure is only for loopback addresses (tcp://127.0.0.1:PORT), not {address}")


def _give_keys(socket: zmq.Socket, public: bytes, secret: bytes | None, server_public: bytes | None, refused: str) -> None:
    """Give `socket` its CURVE key pair and, on a client, the server's public key (None: the
    socket is the server's). ZeroMQ refusing a key is a usage error, `refused` followed by why."""
    try:
        socket.curve_secretkey = secret
        socket.curve_publickey = public
        if server_public is None:
            socket.curve_server = True
        else:
            socket.curve_serverkey = server_public
    except zmq.ZMQError as err:
        raise UsageError(f"{refused}: {err.strerror}") from None


def _key_folder(keys: str, first: str) -> Path:
    """The folder given as `--keys DIR`, which must be one; `first` is the key file read first."""
    folder = Path(keys)
    if not folder.is_dir():
        what = "is not a folder" if folder.exists() else "no such folder"
        raise UsageError(
            f"key file not found: {folder / first} (--keys {keys}: {what}; make a key folder with `roundhouse keys DIR NAME...`)"
        )
    return folder


def _load(path: Path, secret: bool) -> tuple[bytes, bytes | None]:
    if path.is_dir():
        raise UsageError(f"{path}: is a folder, not a key file (make keys with `roundhouse keys DIR NAME...`)")
    if not path.is_file():
        raise UsageError(f"key file not found: {path} (make keys with `roundhouse keys DIR NAME...`)")
    try:
        public, private = zmq.auth.load_certificate(str(path))
    except (ValueError, OSError) as err:
        empty = path.stat().st_size == 0 if path.exists() else False
        why = "the file is empty (a copy that failed?)" if empty else str(err)
        raise UsageError(f"{path}: not a ZeroMQ key file: {why}; copy it again from the folder `roundhouse keys` made") from None
    if secret and private is None:
        raise UsageError(
            f"{path}: holds a public key only, no secret key (was {path.stem}.key copied over it?); "
            f"copy {path.name} from the folder `roundhouse keys` made"
        )
    check_key(path, "public", public)
    if private is not None:
        check_key(path, "secret", private)
        if public_of(private) not in (None, public):  # (a line edited or cut on a copy: no handshake would succeed)
            raise UsageError(
                f"{path}: its public key is not its secret key's (the file was edited or damaged); "
                "copy it again from the folder `roundhouse keys` made"
            )
    return public, private


def public_of(secret: bytes) -> bytes | None:
    """The public key of a secret key (None if this libzmq cannot say)."""
    try:
        return zmq.curve_public(secret)
    except (zmq.ZMQError, ValueError, AttributeError):
        return None


def warn_if_readable(path: Path, log: logging.Logger) -> bool:
    """Warn (and say True) if the secret key file `path` can be read by others than its owner:
    whoever reads it can pose as its owner (`roundhouse keys` writes them 0600)."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    if not mode & 0o077:
        return False
    log.warning(
        "%s: this secret key can be read by others than its owner (mode %o): anyone who read it can pose as '%s'; "
        "make it the owner's only with `chmod 600 %s` (and make a new pair if others may have read it)",
        path,
        mode & 0o777,
        path.stem,
        path,
    )
    return True


def key_role(path: Path) -> str:
    """The role a key file says (AGENT or SUBMITTER), or "" for a key made before keys had
    roles: the `role` line of its metadata section."""
    section, role = "", ""
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.strip() and not line.startswith((" ", "\t", "#")):
            section = line.strip()
        elif section == "metadata":
            key, equals, value = line.partition("=")
            if equals and key.strip() == "role":
                role = value.strip().strip('"')
    return role if role in (AGENT, SUBMITTER) else ""


def user_id(name: str, role: str) -> str:
    """What the scheduler's socket says sent a message (ZeroMQ's User-Id): a key with a role is
    marked with it (a name holds no ':'), a key made before roles is its name."""
    return f"{role}:{name}" if role else name


def key_of_user_id(user: str) -> tuple[str, str]:
    """(key name, AGENT, SUBMITTER or "") of a User-Id made by `user_id`."""
    role, colon, name = user.partition(":")
    return (name, role) if colon else (user, "")


def check_key(path: Path, which: str, key: bytes) -> None:
    """A key ZeroMQ takes: 40 Z85 characters that decode to 32 bytes. A key edited by hand or cut
    short on copying would otherwise fail deep in ZeroMQ (`Invalid argument`), naming no file."""
    try:
        raw = z85.decode(key) if len(key) == KEY_CHARS else b""
        good = len(raw) == KEY_BYTES and z85.encode(raw) == key
    except (ValueError, KeyError, TypeError, OverflowError, struct.error):
        good = False
    if not good:
        raise UsageError(
            f"{path}: not a ZeroMQ key file: the {which} key is not {KEY_CHARS} Z85 characters ({KEY_BYTES} bytes); "
            "make keys with `roundhouse keys DIR NAME...`"
        )


@attrs.frozen
class ServerSecurity:
    """How the scheduler's socket is secured: CURVE with a key folder, or insecure."""

    keys: Path | None  # None: insecure

    @classmethod
    def choose(cls, keys: str | None, insecure: bool, address: str) -> ServerSecurity:
        _check_choice(keys, insecure)
        if keys:
            if not zmq.has("curve"):
                raise UsageError("this libzmq has no CURVE support; reinstall pyzmq, or use --insecure on loopback")
            folder = _key_folder(keys, f"{SCHEDULER_KEY}.key_secret")
            _load(folder / f"{SCHEDULER_KEY}.key_secret", secret=True)
            if not (folder / AUTHORIZED).is_dir():
                raise UsageError(f"{keys}: no '{AUTHORIZED}/' folder of admitted public keys")
            warn_if_readable(folder / f"{SCHEDULER_KEY}.key_secret", _LOG)
            return cls(folder)
        _insecure_on_loopback(
            insecure,
            address,
            "no keys: give --keys DIR (made by `roundhouse keys DIR NAME...`), or --insecure for development on loopback",
        )
        return cls(None)

    @property
    def insecure(self) -> bool:
        return self.keys is None

    def apply(self, context: zmq.Context, socket: zmq.Socket, log: logging.Logger) -> ThreadAuthenticator | None:
        """Secure `socket` (before it binds); returns the running authenticator, if any."""
        if self.keys is None:
            log.warning("INSECURE MODE: no authentication and no encryption; for development on this machine only")
            return None
        public, secret = _load(self.keys / f"{SCHEDULER_KEY}.key_secret", secret=True)
        # The socket's keys first: a key ZeroMQ refuses then leaves no authenticator thread running.
        _give_keys(socket, public, secret, None, f"{self.keys / SCHEDULER_KEY}.key_secret: ZeroMQ refuses its keys")
        auth = _KeyedAuthenticator(context, log=logging.getLogger("roundhouse.auth"))
        auth.start()
        try:
            auth.configure_curve_callback("*", _KnownKeys(self.keys / AUTHORIZED, log))
        except BaseException:
            auth.stop()
            raise
        return auth


class _KnownKeys:
    """The ZAP callback: admit a public key found in the authorized folder (re-read when a file
    in it is added, removed or written over), log every refusal."""

    def __init__(self, folder: Path, log: logging.Logger):
        self.folder = folder
        self.log = log
        self._stamp: tuple[tuple[str, int, int, int], ...] | None = None
        self.user_ids: dict[bytes, str] = {}  # public key -> User-Id (its name, marked if a submitter's)
        self._reload()
        if not self.user_ids:
            log.warning(
                "%s holds no public key: every agent and submitter is refused until its key is there "
                "(`roundhouse keys %s NAME...` makes one)",
                folder,
                folder.parent,
            )

    def _reload(self) -> None:
        # Each file's own stamp, not only the folder's: a key file written over in place (a
        # node's key made again, a copy finished after it was first read) leaves the folder's
        # time and its count of files as they were.
        stamp = folder_stamp(self.folder)
        if stamp == self._stamp:
            return
        self._stamp = stamp
        names = {}
        for path in (self.folder / name for name, *_ in stamp):
            try:
                public, _ = zmq.auth.load_certificate(str(path))
                check_key(path, "public", public)
                role = key_role(path)
            except (ValueError, OSError, UsageError):
                self.log.warning("ignoring unreadable key file %s", path)
                continue
            names[public] = user_id(path.stem, role)
        self.user_ids = names

    def callback(self, domain: str, key: bytes) -> bool:
        self._reload()
        name = self.user_ids.get(key)
        if name is None:
            self.log.warning("refused a peer with an unknown CURVE key %s", key.decode(errors="replace"))
            return False
        return True


# The property of every message on an authenticated connection that says which public key the
# connection was admitted with (Z85, as key files hold it). The User-Id names the key; this
# tells a key made again under the same name from the one it replaced.
KEY_PROPERTY = "X-Key"


class _KeyedAuthenticator(ThreadAuthenticator):
    """The ZAP handler: a connection it admits gets its key's name as its User-Id (`user_id`)
    and its public key as its `KEY_PROPERTY`, ZAP metadata that ZeroMQ gives every message of
    the connection. (Requests are handled one at a time, in the authenticator's thread: the
    key noted by `curve_user_id` is the one of the reply that follows it.)"""

    _key = b""

    def curve_user_id(self, client_public_key: bytes) -> str:
        self._key = z85.encode(client_public_key)
        provider = self.credentials_providers.get("*")
        return provider.user_ids.get(self._key, "?") if isinstance(provider, _KnownKeys) else "?"

    def _send_zap_reply(self, request_id: bytes, status_code: bytes, status_text: bytes, user_id: str = "anonymous") -> None:
        key, self._key = self._key, b""
        if status_code != b"200" or not key:
            return super()._send_zap_reply(request_id, status_code, status_text, user_id)
        name = KEY_PROPERTY.encode()
        # (ZMTP's metadata: a name of one length byte, a value of four, big-endian.)
        metadata = bytes([len(name)]) + name + struct.pack(">I", len(key)) + key
        user = user_id.encode(self.encoding, "replace") if isinstance(user_id, str) else user_id
        self.zap_socket.send_multipart([b"1.0", request_id, status_code, status_text, user, metadata])


def folder_stamp(folder: Path) -> tuple[tuple[str, int, int, int], ...]:
    """The `*.key` files in `folder`, each with what changes when it is replaced or written
    over (inode, size, time), by name."""
    files = []
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.name.endswith(".key"):
                    try:
                        st = entry.stat()
                    except OSError:
                        continue
                    files.append((entry.name, st.st_ino, st.st_size, st.st_mtime_ns))
    except OSError:
        pass
    return tuple(sorted(files))


@attrs.frozen
class ClientSecurity:
    """How an agent or submitter connects: with its key pair and the scheduler's public key."""

    keys: Path | None
    name: str = ""

    @classmethod
    def choose(cls, keys: str | None, name: str, insecure: bool, address: str) -> ClientSecurity:
        _check_choice(keys, insecure)
        check_name(name, "--name")
        if keys:
            if name == SCHEDULER_KEY:
                raise UsageError(
                    f"--name {name}: '{SCHEDULER_KEY}' is the scheduler's own key; "
                    "name this agent or submitter as its key pair is named"
                )
            folder = _key_folder(keys, f"{SCHEDULER_KEY}.key")
            _load(folder / f"{SCHEDULER_KEY}.key", secret=False)
            _load(folder / f"{name}.key_secret", secret=True)
            warn_if_readable(folder / f"{name}.key_secret", _LOG)
            return cls(folder, name)
        _insecure_on_loopback(
            insecure, address, "no keys: give --keys DIR (with scheduler.key and NAME.key_secret), or --insecure on loopback"
        )
        return cls(None)

    @property
    def insecure(self) -> bool:
        return self.keys is None

    def named(self, name: str) -> ClientSecurity:
        """The same security under another key name (an emulated node's own pair, NAME-i)."""
        return self if self.keys is None else attrs.evolve(self, name=name)

    def apply(self, socket: zmq.Socket, log: logging.Logger) -> None:
        if self.keys is None:
            log.warning("INSECURE MODE: connecting without authentication or encryption (development only)")
            return
        server_public, _ = _load(self.keys / f"{SCHEDULER_KEY}.key", secret=False)
        public, secret = _load(self.keys / f"{self.name}.key_secret", secret=True)
        _give_keys(socket, public, secret, server_public, f"{self.keys}: ZeroMQ refuses the keys of {self.name!r}")


# Monitor events that mean a peer was refused (or refused us) during the handshake.
HANDSHAKE_FAILED = getattr(zmq, "EVENT_HANDSHAKE_FAILED_NO_DETAIL", 0x800)
HANDSHAKE_FAILURES = {
    HANDSHAKE_FAILED: "handshake failed",
    getattr(
        zmq, "EVENT_HANDSHAKE_FAILED_PROTOCOL", 0x2000
    ): "handshake failed: protocol error (not CURVE, or the wrong server key)",
    getattr(zmq, "EVENT_HANDSHAKE_FAILED_AUTH", 0x4000): "authentication refused (unknown key)",
}
# What the scheduler counts as refusing a peer: a handshake that failed on the protocol or the
# key. A peer that hangs up during the handshake without detail (a client checking that the
# address can be connected to, a port scan) was not refused; in insecure mode every connection
# that does not hang up is admitted.
REFUSALS = {event: what for event, what in HANDSHAKE_FAILURES.items() if event != HANDSHAKE_FAILED}
HANDSHAKE_FAILED_PROTOCOL = getattr(zmq, "EVENT_HANDSHAKE_FAILED_PROTOCOL", 0x2000)
# The protocol error (a monitor event's value) when one end uses CURVE keys and the other none.
MECHANISM_MISMATCH = getattr(zmq, "PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH", 0x11000002)
# What to do about it, said by every side that meets it.
SAME_SECURITY = "give --keys DIR to the scheduler and to every agent and submitter, or --insecure to all of them (loopback only)"


def zmq_reason(err: zmq.ZMQError) -> str:
    """ZeroMQ's reason for an error, without the address pyzmq appends to it (the callers name
    the address themselves)."""
    return zmq.strerror(err.errno) if err.errno else str(err)


def refusal(event: Mapping[str, object], secured: bool, side: str) -> str:
    """Why a refused handshake (a monitor `event` whose kind is in REFUSALS) failed, for `side`:
    "scheduler" (about a peer it refused) or the client ("agent", "submitter"); `secured`:
    whether that side uses CURVE keys. One end with keys and the other without is a mechanism
    mismatch, said as which end has them; any other refusal is said as REFUSALS says it."""
    kind = event.get("event")
    if kind != HANDSHAKE_FAILED_PROTOCOL or event.get("value") != MECHANISM_MISMATCH:
        return REFUSALS[kind] if isinstance(kind, int) else HANDSHAKE_FAILURES[HANDSHAKE_FAILED]
    if side == "scheduler":
        if secured:
            return "it connects without keys (--insecure), and this scheduler admits only CURVE keys"
        return "it connects with CURVE keys (--keys), and this scheduler runs --insecure, without keys"
    if secured:
        return f"it runs --insecure, without keys, and this {side} connects with CURVE keys (--keys)"
    return f"it admits only CURVE keys, and this {side} connects without keys (--insecure)"
