"""The one error tree of the harness.

Every refusal a verb can make is a `HarnessError` carrying an HTTP-style status, so the MCP front, the CLI and
later HTTP routes all map it the same way. Messages name what was wrong and what is accepted. Codes are kebab-case,
like the run error codes (`output-schema`, `config-error`, `interrupted`), so a client meets one style.

```
* HarnessError
  + BadRequest          400  the input is malformed or names something unsupported
  + Forbidden           403  the agent lacks the grant
  + NotFound            404  the address names nothing
  + Conflict            409  the state does not allow it now
  + TooLarge            413  a size limit was exceeded
  + Upstream            502  a remote service failed
  + StorageError        500  the database or disk failed in a way the caller cannot fix
```
"""

from __future__ import annotations

from typing import ClassVar


class HarnessError(Exception):
    """Base of every error the harness reports to a caller."""

    status: ClassVar[int] = 500
    code: ClassVar[str] = "internal"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def to_dict(self) -> dict[str, object]:
        """The structured form put in `structuredContent.error`."""
        return {"code": self.code, "status": self.status, "message": self.message}


class BadRequest(HarnessError):
    """The input is malformed, out of bounds, or names an unsupported form."""

    status = 400
    code = "bad-request"


class Forbidden(HarnessError):
    """The caller is not granted what it asked for."""

    status = 403
    code = "forbidden"


class NotFound(HarnessError):
    """The address or id names nothing."""

    status = 404
    code = "not-found"


class Conflict(HarnessError):
    """The request clashes with current state (a duplicate, a busy session)."""

    status = 409
    code = "conflict"


class TooLarge(HarnessError):
    """A size limit was exceeded."""

    status = 413
    code = "too-large"


class Upstream(HarnessError):
    """A remote service the harness depends on failed."""

    status = 502
    code = "upstream"


class StorageError(HarnessError):
    """The store failed in a way the caller cannot fix (disk full, corrupt database, newer schema)."""

    status = 500
    code = "storage"


__all__ = [
    "BadRequest",
    "Conflict",
    "Forbidden",
    "HarnessError",
    "NotFound",
    "StorageError",
    "TooLarge",
    "Upstream",
]
