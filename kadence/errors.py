"""One root error for Kadence and the specific failures an operator or caller can act on.

Every message says what went wrong and, where there is one, what to do about it.
"""

from __future__ import annotations


class KadenceError(Exception):
    """Root of every error Kadence raises on purpose."""


class ConfigurationError(KadenceError):
    """Settings are missing or contradict each other; fix the configuration and restart."""


# --- the wire: decoding and encoding records -------------------------------------------------


class DecodeError(KadenceError):
    """Bytes read from a topic could not be turned into a Kadence record.

    `code` is a stable, machine-readable reason that goes into `rejected` records.
    """

    code = "decode_error"


class EmptyRecordError(DecodeError):
    """The record value is empty (a tombstone where a record was expected)."""

    code = "empty_record"


class GarbageBytesError(DecodeError):
    """Neither Avro single-object encoding (0xC3 0x01 ...) nor a JSON document."""

    code = "garbage_bytes"


class TruncatedRecordError(DecodeError):
    """The Avro body ended before the writer schema was fully read."""

    code = "truncated_record"


class UnknownSchemaError(DecodeError):
    """The schema fingerprint is not one this build knows (written by a newer Kadence?)."""

    code = "unknown_schema"

    def __init__(self, message: str, fingerprint: bytes) -> None:
        super().__init__(message)
        self.fingerprint = fingerprint


class UnexpectedRecordTypeError(DecodeError):
    """A valid record of a type that does not belong on this topic."""

    code = "unexpected_record_type"


class InvalidInputError(KadenceError):
    """Input failed validation; `errors` lists each offending field and why (`field: reason`)."""

    def __init__(self, message: str, errors: list[str]) -> None:
        super().__init__(message)
        self.errors = errors


class BulkInputError(InvalidInputError):
    """Item `index` (from 0) of a bulk load is invalid: the `written` items before it were
    written and acknowledged, none after it was."""

    def __init__(self, message: str, errors: list[str], *, index: int, written: int) -> None:
        super().__init__(message, errors)
        self.index = index
        self.written = written


class InvalidRecordError(InvalidInputError, DecodeError):
    """A record read from a topic parsed but failed validation."""

    code = "invalid_record"


class InvalidScheduleError(InvalidInputError):
    """A schedule that cannot be run: malformed cron, unknown zone, bounds out of order, or a
    spec that never matches. `errors` name the field (`schedule.expression: ...`)."""


class PayloadTooLargeError(InvalidInputError):
    """The payload is over the deployment's limit (KADENCE_MAX_PAYLOAD_BYTES)."""


class EncodeError(KadenceError):
    """A model could not be written with its Avro schema (a bug: models and schemas disagree,
    or a model was built without validation). The one error `Codec.encode` raises."""

    code = "encode_error"


class SchemaError(KadenceError):
    """The schemas in schemas/ are missing, unparsable or out of step with the models."""


# --- topics and the cluster -------------------------------------------------------------------


class TopicError(KadenceError):
    """Topic provisioning failed or an existing topic does not match what Kadence needs."""


class TopicMismatchError(TopicError):
    """An existing topic has a different partition count or cleanup policy than required."""


class DeliveryError(KadenceError):
    """The broker did not acknowledge a produced record."""


class BulkWriteError(DeliveryError):
    """A bulk load's writes stopped being acknowledged: the first `written` items are stored;
    what came after may or may not be (written again, a definition is refused as not newer)."""

    def __init__(self, message: str, *, written: int) -> None:
        super().__init__(message)
        self.written = written


# --- writing records -------------------------------------------------------------------------


class RecordTooLargeError(KadenceError):
    """A record Kadence was about to write is larger than the broker accepts.

    Raised before anything is produced, so the unit of work that built it can be undone and the
    input refused or the job quarantined, instead of the produce failing the whole transaction.
    """

    code = "record_too_large"
