"""`identity update --avatar FILE`: publish a picture to IPFS and republish the profile with it (HARNESS §14).

The reference's UpdateSigningIdentity uploads the icon bytes, republishes the profile `{name: label, avatar}` and
merges `icon` into the identity's metadata. Here the upload is the same UnixFS import as `write ipfs://`
(store/ipfs_blocks.py), so the picture's CID is the one a Seed node computes and `GET /ipfs/<cid>` serves it; the
metadata change and the signed profile commit in one transaction, so an identity never names a picture its profile
does not show. The description a profile already has is kept.
"""

from __future__ import annotations

from typing import BinaryIO

from mcp_harness.errors import BadRequest, TooLarge
from mcp_harness.identity.identities import (
    IDENTITY_KIND,
    MAX_LABEL_BYTES,
    Identity,
    Keyring,
    load_keypair,
    resolve_identity,
)
from mcp_harness.store.ipfs_blocks import IpfsBlockStore, ipfs_upload


def set_avatar(
    keyring: Keyring, ref: str, picture: BinaryIO | bytes, *, label: str | None = None, max_bytes: int
) -> tuple[Identity, str]:
    """Upload `picture`, then republish the identity's profile with `avatar: ipfs://<cid>` (and `label`, when
    given, as its name). Returns the identity and the picture's `ipfs://` URL.

    Raises:
        NotFound: no such identity. BadRequest: an empty or oversized label. TooLarge: a picture over `max_bytes`.
    """
    identity = resolve_identity(keyring, ref)
    name = identity.label if label is None else label.strip()
    if not name or len(name.encode("utf-8")) > MAX_LABEL_BYTES:
        raise BadRequest(f"An identity label is 1 to {MAX_LABEL_BYTES} bytes of text.")
    pair = load_keypair(keyring, identity.name)
    try:
        picture_cid = ipfs_upload(IpfsBlockStore(keyring.db), picture, max_bytes=max_bytes).cid
    except OverflowError:
        raise TooLarge(f"The picture is larger than {max_bytes} bytes ([ipfs] max_file_bytes).") from None
    icon = f"ipfs://{picture_cid}"
    with keyring.db.transaction():
        record = keyring.secrets.find(keyring.account_id, identity.name)
        metadata = dict(record.metadata) if record is not None else {}
        metadata.update({"kind": IDENTITY_KIND, "accountId": pair.account_id, "label": name, "icon": icon})
        keyring.secrets.update_metadata(keyring.account_id, identity.name, metadata)
        node = keyring.hypermedia
        current = node.profile(pair.account_id) or {}
        node.publish([node.profile_blob(pair, name, icon, current.get("description"))])
    return resolve_identity(keyring, identity.name), icon
