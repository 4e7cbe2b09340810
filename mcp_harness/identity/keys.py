"""Ed25519 key pairs and Seed account ids (HYPERMEDIA §1.1, §2).

An account id is the multibase base58btc form of the principal bytes `0xed 0x01 ‖ public key` (the did:key style):
`"z" + base58btc(...)`, which for Ed25519 always starts `z6Mk` and is 48 characters long. A key pair is kept as its
32-byte seed, the form Seed's Go and JS code store and import.
"""

from __future__ import annotations

import base64
import binascii
import secrets
from dataclasses import dataclass, field

import nacl.exceptions
import nacl.signing

from mcp_harness.errors import BadRequest
from mcp_harness.hypermedia.cid import _base58btc_decode, _base58btc_encode  # pyright: ignore[reportPrivateUsage]

SEED_BYTES = 32
PUBLIC_KEY_BYTES = 32
SIGNATURE_BYTES = 64
ED25519_PREFIX = b"\xed\x01"
"""Unsigned-varint multicodec 0xed (ed25519-pub), the first bytes of an Ed25519 principal."""
ACCOUNT_ID_LENGTH = 48
"""`z` + 47 base58btc digits: every 34-byte principal starting 0xed 0x01 encodes to exactly 47 digits."""
_ACCOUNT_FORM = "'z' + base58btc(0xed 0x01 ‖ 32-byte Ed25519 public key): 48 characters starting 'z6Mk'"


@dataclass(frozen=True, slots=True, repr=False)
class KeyPair:
    """An Ed25519 key pair. `repr` shows only the account id, so a key pair in a log line or traceback leaks nothing."""

    seed: bytes
    """The 32-byte private seed (RFC 8032 secret key)."""
    public_key: bytes
    """The 32-byte public key derived from the seed."""
    _signing_key: nacl.signing.SigningKey = field(init=False, compare=False)
    """Expanded once: building it costs as much as a signature, and a publish signs several blobs."""

    def __post_init__(self) -> None:
        if len(self.seed) != SEED_BYTES or len(self.public_key) != PUBLIC_KEY_BYTES:
            raise BadRequest(f"A key pair needs a {SEED_BYTES}-byte seed and a {PUBLIC_KEY_BYTES}-byte public key.")
        object.__setattr__(self, "_signing_key", nacl.signing.SigningKey(self.seed))

    @classmethod
    def generate(cls) -> KeyPair:
        """A fresh key pair from the operating system's random source."""
        return cls.from_seed(secrets.token_bytes(SEED_BYTES))

    @classmethod
    def from_seed(cls, seed: bytes) -> KeyPair:
        """The key pair of a 32-byte seed.

        Raises:
            BadRequest: the seed is not exactly 32 bytes.
        """
        if len(seed) != SEED_BYTES:
            raise BadRequest(f"An Ed25519 seed must be exactly {SEED_BYTES} bytes, not {len(seed)}.")
        return cls(seed=bytes(seed), public_key=bytes(nacl.signing.SigningKey(seed).verify_key))

    def sign(self, data: bytes) -> bytes:
        """The 64-byte Ed25519 signature of `data` (the raw bytes, no pre-hashing, as Seed signs blobs)."""
        return self._signing_key.sign(data).signature

    @property
    def account_id(self) -> str:
        """The `z6Mk…` account id of this key pair's public key."""
        return account_id(self.public_key)

    @property
    def principal(self) -> bytes:
        """The 34-byte principal (`0xed 0x01 ‖ public key`), the `signer` field of signed blobs."""
        return ED25519_PREFIX + self.public_key

    def __repr__(self) -> str:
        return f"KeyPair(account_id={self.account_id!r})"


def account_id(public_key: bytes) -> str:
    """The account id of an Ed25519 public key: `"z" + base58btc(0xed 0x01 ‖ public_key)`.

    Raises:
        BadRequest: the public key is not 32 bytes.
    """
    if len(public_key) != PUBLIC_KEY_BYTES:
        raise BadRequest(f"An Ed25519 public key must be {PUBLIC_KEY_BYTES} bytes, not {len(public_key)}.")
    return "z" + _base58btc_encode(ED25519_PREFIX + public_key)


def public_key_of(account: str) -> bytes:
    """The 32-byte public key an account id names. Strict: only the canonical Ed25519 form is accepted.

    Raises:
        BadRequest: the text is not an Ed25519 account id; the message names the expected form.
    """
    refusal = BadRequest(f"Not an Ed25519 account id: {account!r}. Expected {_ACCOUNT_FORM}.")
    if not account.startswith("z") or len(account) != ACCOUNT_ID_LENGTH:
        raise refusal
    try:
        principal = _base58btc_decode(account[1:])
    except ValueError:
        raise refusal from None
    if len(principal) != len(ED25519_PREFIX) + PUBLIC_KEY_BYTES or not principal.startswith(ED25519_PREFIX):
        raise refusal
    return principal[len(ED25519_PREFIX) :]


def verify(public_key: bytes, data: bytes, signature: bytes) -> bool:
    """Whether `signature` is a valid Ed25519 signature of `data` by `public_key`. Never raises on bad input."""
    if len(public_key) != PUBLIC_KEY_BYTES or len(signature) != SIGNATURE_BYTES:
        return False
    try:
        nacl.signing.VerifyKey(public_key).verify(data, signature)
    except (nacl.exceptions.CryptoError, ValueError):  # BadSignatureError is a CryptoError
        return False
    return True


__all__ = ["KeyPair", "account_id", "public_key_of", "verify"]


def decode_key_text(text: str, size: int) -> bytes | None:
    """`size` bytes given as hex (2·size characters) or as base64, standard or URL-safe, padded or not; else None.

    Seeds and the master key are both typed or pasted by people, in whichever form their tool printed.
    """
    value = text.strip()
    if len(value) == 2 * size:
        try:
            return bytes.fromhex(value)
        except ValueError:
            pass  # 2·size characters may still be base64 of something else
    try:
        decoded = base64.b64decode(value.replace("-", "+").replace("_", "/") + "=" * (-len(value) % 4), validate=True)
    except (binascii.Error, ValueError):
        return None
    return decoded if len(decoded) == size else None
