"""Content identifiers (CIDs): the binary form, the string forms, and hashing a block into one.

Only what the harness meets is supported, and anything else is refused rather than guessed at:

- CIDv1 (`<varint version><varint codec><multihash>`), printed and parsed as multibase base32 lower (`b…`), the
  form Seed and modern IPFS use (`bafyrei…` dag-cbor, `bafkrei…` raw);
- CIDv0 (a bare sha2-256 multihash of a dag-pb node), printed and parsed as base58btc (`Qm…`), because older IPFS
  links still use it.

Multicodec and multihash numbers are the registry values from multiformats' `table.csv`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass

DAG_CBOR = 0x71
"""Multicodec of DAG-CBOR blocks: signed hypermedia blobs and tool documents."""
RAW = 0x55
"""Multicodec of raw blocks: UnixFS leaves and files of one chunk."""
DAG_PB = 0x70
"""Multicodec of dag-pb blocks: UnixFS nodes; the only codec a CIDv0 can name."""
SHA2_256 = 0x12
"""Multihash code of sha2-256."""

_SHA2_256_LENGTH = 32
_MAX_VARINT_BYTES = 9  # the unsigned-varint spec caps varints at 63 bits, i.e. nine 7-bit groups
_BASE58_ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_BASE58_INDEX = {char: index for index, char in enumerate(_BASE58_ALPHABET)}
_BASE32_ALPHABET = frozenset("abcdefghijklmnopqrstuvwxyz234567")
_CIDV0_STRING_LENGTH = 46  # base58btc of the 34-byte multihash 0x12 0x20 <digest>: always 46 characters, `Qm…`


@dataclass(frozen=True, slots=True, repr=False)
class CID:
    """A content identifier: which codec the block is in, and a multihash of its bytes.

    Equality and hashing are by value, so CIDs can be set members and dict keys. To sort CIDs the way Seed does
    (Change deps are ordered by binary CID), sort with `key=CID.to_bytes`.
    """

    version: int
    """0 or 1."""
    codec: int
    """Multicodec of the block the CID names, e.g. `DAG_CBOR`; always `DAG_PB` for CIDv0."""
    multihash: bytes
    """`<varint hash code><varint digest length><digest>`."""

    def __post_init__(self) -> None:
        if self.version not in (0, 1):
            raise ValueError(f"CID version must be 0 or 1, not {self.version!r}")
        if self.codec < 0:
            raise ValueError(f"CID codec must be a non-negative multicodec, not {self.codec!r}")
        code, digest = _split_multihash(self.multihash)
        if self.version == 0 and (self.codec != DAG_PB or code != SHA2_256 or len(digest) != _SHA2_256_LENGTH):
            raise ValueError("a CIDv0 can only name a dag-pb block by its 32-byte sha2-256 multihash")

    @classmethod
    def parse(cls, text: str) -> CID:
        """Parse a CID string: CIDv1 in base32 lower (`b…`) or CIDv0 in base58btc (`Qm…`).

        Raises:
            ValueError: the string is neither form, or its bytes are not a valid CID.
        """
        if text.startswith("Qm") and len(text) == _CIDV0_STRING_LENGTH:
            cid = cls.from_bytes(_base58btc_decode(text))
            if cid.version != 0:
                raise ValueError(f"invalid CID {text!r}: a 'Qm…' string must be a CIDv0 sha2-256 multihash")
            return cid
        if text.startswith("b") and len(text) > 1:
            cid = cls.from_bytes(_base32_decode(text[1:]))
            if cid.version != 1:
                raise ValueError(f"invalid CID {text!r}: a base32 CID must be a CIDv1")
            return cid
        raise ValueError(
            f"unsupported CID string {text!r}: expected a CIDv1 in base32 lower ('b…', e.g. 'bafy…') "
            "or a CIDv0 in base58btc ('Qm…')"
        )

    @classmethod
    def from_bytes(cls, data: bytes) -> CID:
        """Read a binary CID, which must span all of `data`.

        Raises:
            ValueError: `data` is not exactly one valid CIDv0 or CIDv1.
        """
        data = bytes(data)
        # A CIDv0 has no version prefix: it is a bare multihash, recognisable because a CIDv1 can't start 0x12.
        if len(data) == 2 + _SHA2_256_LENGTH and data[0] == SHA2_256 and data[1] == _SHA2_256_LENGTH:
            return cls(0, DAG_PB, data)
        version, position = _read_varint(data, 0)
        if version != 1:
            raise ValueError(f"unsupported binary CID: version {version} (only CIDv1, or a bare CIDv0 multihash)")
        codec, position = _read_varint(data, position)
        return cls(1, codec, data[position:])

    def to_bytes(self) -> bytes:
        """The binary CID: the bare multihash for CIDv0, `<version><codec><multihash>` for CIDv1."""
        if self.version == 0:
            return self.multihash
        return varint(self.version) + varint(self.codec) + self.multihash

    @property
    def hash_code(self) -> int:
        """The multihash function code, e.g. `SHA2_256`."""
        return _split_multihash(self.multihash)[0]

    @property
    def digest(self) -> bytes:
        """The raw hash digest, without the multihash prefix."""
        return _split_multihash(self.multihash)[1]

    def __str__(self) -> str:
        if self.version == 0:
            return _base58btc_encode(self.multihash)
        return "b" + base64.b32encode(self.to_bytes()).decode("ascii").lower().rstrip("=")

    def __repr__(self) -> str:
        return f"CID({str(self)!r})"


def cid_of(data: bytes, codec: int = DAG_CBOR) -> CID:
    """The CIDv1 of a block: `codec` and the sha2-256 multihash of `data`, as the JS reference client computes it."""
    digest = hashlib.sha256(data).digest()
    return CID(1, codec, varint(SHA2_256) + varint(len(digest)) + digest)


def varint(value: int) -> bytes:
    """An unsigned LEB128 varint (multiformats' unsigned-varint; also protobuf's, for dag-pb)."""
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _read_varint(data: bytes, position: int) -> tuple[int, int]:
    """Read one unsigned varint at `position`; return it and the position after it."""
    value = 0
    for index in range(_MAX_VARINT_BYTES):
        if position + index >= len(data):
            raise ValueError("truncated varint in CID")
        byte = data[position + index]
        value |= (byte & 0x7F) << (7 * index)
        if not byte & 0x80:
            # The spec requires minimal varints, so two encodings of one CID can't both be accepted.
            if byte == 0 and index > 0:
                raise ValueError("non-minimal varint in CID")
            return value, position + index + 1
    raise ValueError("varint in CID is longer than 9 bytes")


def _split_multihash(multihash: bytes) -> tuple[int, bytes]:
    code, position = _read_varint(multihash, 0)
    length, position = _read_varint(multihash, position)
    digest = multihash[position:]
    if len(digest) != length:
        raise ValueError(f"multihash declares a {length}-byte digest but holds {len(digest)} bytes")
    return code, digest


def _base32_decode(text: str) -> bytes:
    if not set(text) <= _BASE32_ALPHABET:
        raise ValueError(f"invalid base32 CID 'b{text}': only the characters a-z and 2-7 may follow 'b'")
    try:
        data = base64.b32decode(text.upper() + "=" * (-len(text) % 8))
    except binascii.Error as error:
        raise ValueError(f"invalid base32 CID 'b{text}': {error}") from None
    # b32decode ignores stray low bits in the last character; requiring the canonical spelling keeps one string per
    # CID, so string comparison (Seed's version strings) stays meaningful.
    if base64.b32encode(data).decode("ascii").lower().rstrip("=") != text:
        raise ValueError(f"invalid base32 CID 'b{text}': not canonically encoded")
    return data


def _base58btc_encode(data: bytes) -> str:
    number = int.from_bytes(data, "big")
    digits: list[str] = []
    while number:
        number, remainder = divmod(number, 58)
        digits.append(_BASE58_ALPHABET[remainder])
    zeros = len(data) - len(data.lstrip(b"\0"))
    return "1" * zeros + "".join(reversed(digits))


def _base58btc_decode(text: str) -> bytes:
    number = 0
    for char in text:
        index = _BASE58_INDEX.get(char)
        if index is None:
            raise ValueError(f"invalid base58btc CID {text!r}: {char!r} is not a base58btc character")
        number = number * 58 + index
    zeros = len(text) - len(text.lstrip("1"))
    body = number.to_bytes((number.bit_length() + 7) // 8, "big")
    return b"\0" * zeros + body


__all__ = ["CID", "DAG_CBOR", "DAG_PB", "RAW", "SHA2_256", "cid_of", "varint"]
