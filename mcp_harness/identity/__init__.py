"""Identity: Ed25519 keys and account ids, the master key that seals secrets, and signing identities.

`identities` (signing identities over the secret store) is imported by its full path: it depends on the store,
which depends on `sealing` here, so re-exporting it from this package would make the import circular.
"""

from mcp_harness.identity.keys import KeyPair, account_id, public_key_of, verify
from mcp_harness.identity.sealing import MASTER_KEY_ENV, MasterKey, load_master_key

__all__ = ["MASTER_KEY_ENV", "KeyPair", "MasterKey", "account_id", "load_master_key", "public_key_of", "verify"]
