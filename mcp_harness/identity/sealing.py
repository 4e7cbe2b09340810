"""The master key and sealing: secrets are encrypted with PyNaCl `SecretBox` under a key kept OUTSIDE the database.

The key comes from `MCP_HARNESS_MASTER_KEY` (64 hex characters, or base64 of 32 bytes) when that is set, else from
`<data_dir>/master.key` (32 raw bytes, mode 0600). The file is created on first use only when the caller says no
secret was ever sealed for this database: a missing key file next to existing secrets is refused, because a fresh
key could never open them and would only hide the loss.

A key file that other users may read, or that another user owns, is refused rather than silently fixed, as ssh does
with private keys: a loose mode means the key may already have been copied, and the operator should know that.

Key bytes and plaintexts are never logged, never put in an error message, and never shown by `repr`.
"""

from __future__ import annotations

import logging
import os
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path

import nacl.exceptions
import nacl.secret

from mcp_harness.errors import BadRequest, StorageError
from mcp_harness.identity.keys import decode_key_text

logger = logging.getLogger(__name__)

MASTER_KEY_ENV = "MCP_HARNESS_MASTER_KEY"
MASTER_KEY_FILE = "master.key"
KEY_BYTES = nacl.secret.SecretBox.KEY_SIZE
_ACCEPTED_FORMS = "32 bytes written as 64 hex characters or as base64 (44 characters, standard or URL-safe)"
_GENERATE_HINT = "python3 -c 'import secrets; print(secrets.token_hex(32))'"


class MasterKey:
    """A 32-byte SecretBox key and where it came from (for error messages; never the bytes)."""

    __slots__ = ("_box", "source")

    def __init__(self, key: bytes, source: str) -> None:
        if len(key) != KEY_BYTES:
            raise BadRequest(f"A master key must be {KEY_BYTES} bytes, not {len(key)}.")
        self._box = nacl.secret.SecretBox(key)
        self.source = source
        """`MCP_HARNESS_MASTER_KEY` or the key file's path."""

    def seal(self, plaintext: bytes) -> bytes:
        """`nonce ‖ ciphertext ‖ tag` (XSalsa20-Poly1305, a random 24-byte nonce per call)."""
        return bytes(self._box.encrypt(plaintext))

    def open(self, sealed: bytes) -> bytes:
        """The plaintext of a sealed value.

        Raises:
            StorageError: the value was sealed under another key, or was altered; no plaintext is returned.
        """
        try:
            return self._box.decrypt(sealed)
        except (nacl.exceptions.CryptoError, ValueError) as exc:
            raise StorageError(
                f"A sealed secret does not open with the master key from {self.source}: it was sealed under another "
                "key or the stored bytes were altered."
            ) from exc

    def __repr__(self) -> str:
        return f"MasterKey(source={self.source!r})"


def master_key_path(data_dir: Path) -> Path:
    return data_dir / MASTER_KEY_FILE


def parse_master_key(text: str) -> bytes:
    """Decode the environment form of a master key. The message never repeats the value.

    Raises:
        BadRequest: the text is neither 64 hex characters nor base64 of exactly 32 bytes.
    """
    value = text.strip()
    decoded = decode_key_text(value, KEY_BYTES) or b""
    if len(decoded) != KEY_BYTES:
        raise BadRequest(
            f"{MASTER_KEY_ENV} is not a master key ({len(value)} characters). Accepted: {_ACCEPTED_FORMS}. "
            f"Generate one with `{_GENERATE_HINT}`, or unset it to use <data_dir>/{MASTER_KEY_FILE}."
        )
    return decoded


def load_master_key(data_dir: Path, *, create: bool, environ: Mapping[str, str] | None = None) -> MasterKey:
    """The master key from the environment, else from `<data_dir>/master.key`, created only if `create`.

    Blocking (file I/O); call it off the event loop.

    Raises:
        BadRequest: `MCP_HARNESS_MASTER_KEY` is set but malformed.
        StorageError: the key file is unreadable, malformed, too open, or missing while `create` is false.
    """
    env = os.environ if environ is None else environ
    if env.get(MASTER_KEY_ENV):
        return MasterKey(parse_master_key(env[MASTER_KEY_ENV]), MASTER_KEY_ENV)
    path = master_key_path(data_dir)
    key = _read_key_file(path)
    if key is None and create:
        key = _create_key_file(path)
    if key is None:
        raise StorageError(
            f"The master key {path} is missing, but this database holds secrets sealed under a master key. Restore "
            f"{MASTER_KEY_FILE} from a backup (mode 0600) or set {MASTER_KEY_ENV} to the original key. No new key "
            "was made: it could not open the existing secrets."
        )
    return MasterKey(key, str(path))


def _read_key_file(path: Path) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StorageError(f"Cannot read the master key {path}: {exc.strerror}. Check its owner and mode.") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise StorageError(f"The master key {path} is not a regular file. Restore the original key file.")
        if hasattr(os, "geteuid"):
            # Checked on the open descriptor, so a file swapped in after the check is not the one read.
            if info.st_uid != os.geteuid():
                raise StorageError(
                    f"The master key {path} is owned by uid {info.st_uid}, not by this user ({os.geteuid()}); "
                    f"refusing to use it. Run `chown {os.geteuid()} {path}` if it is yours."
                )
            if info.st_mode & 0o077:
                raise StorageError(
                    f"The master key {path} has mode {stat.S_IMODE(info.st_mode):04o}: other users may read it, so "
                    f"it may already be copied. Run `chmod 600 {path}` and retry; if other users really could read "
                    "it, rotate the secrets it protects (provider keys, signing identities)."
                )
        data = os.read(fd, KEY_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) != KEY_BYTES:
        raise StorageError(
            f"The master key {path} holds {len(data)}{'+' if len(data) > KEY_BYTES else ''} bytes, not {KEY_BYTES} "
            f"raw bytes. Restore the original file or set {MASTER_KEY_ENV}."
        )
    return data


def _create_key_file(path: Path) -> bytes:
    """Make a fresh key file, or read the one a concurrent process made first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    key = secrets.token_bytes(KEY_BYTES)
    # Written under a temporary name and hard-linked into place: the link fails if the key exists, and a concurrent
    # reader never sees a half-written file. Where hard links are unsupported, fall back to O_EXCL on the final name.
    temp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    _write_exclusive(temp, key)
    made = True
    try:
        os.link(temp, path)
    except FileExistsError:
        made = False
    except OSError:
        try:
            _write_exclusive(path, key)
        except FileExistsError:
            made = False
    finally:
        temp.unlink(missing_ok=True)
    if not made:
        existing = _read_key_file(path)
        if existing is None:
            raise StorageError(f"The master key {path} vanished while it was being created; retry.")
        return existing
    _fsync_dir(path.parent)
    logger.info("created a new master key at %s", path)
    return key


def _write_exclusive(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return  # not every platform can open a directory; the key file itself is already fsynced
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


__all__ = ["MASTER_KEY_ENV", "MASTER_KEY_FILE", "MasterKey", "load_master_key", "master_key_path", "parse_master_key"]
