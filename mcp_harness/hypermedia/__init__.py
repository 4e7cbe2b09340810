"""Seed hypermedia: canonical DAG-CBOR and the CIDs that tool documents and signed blobs are addressed by."""

from mcp_harness.hypermedia.cbor import MAX_SAFE_INTEGER, decode, encode, from_json
from mcp_harness.hypermedia.cid import CID, DAG_CBOR, DAG_PB, RAW, SHA2_256, cid_of

__all__ = [
    "CID",
    "DAG_CBOR",
    "DAG_PB",
    "MAX_SAFE_INTEGER",
    "RAW",
    "SHA2_256",
    "cid_of",
    "decode",
    "encode",
    "from_json",
]
