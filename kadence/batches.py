"""The executions an executions record carries: itself, or each entry of an ExecutionBatch.

A batch's entries are ExecutionRequested records as single records carry them (Avro single
object encoding), all of the batch's tenant and due instant. Every reader of an executions
topic (the worker, the reaper reading a run back, `kadence tail`, the test kit and the chaos
checker) takes them apart here, so they all agree on what a batch holds.
"""

from __future__ import annotations

from kadence.codec import Codec
from kadence.entry_templates import EntryReader
from kadence.errors import DecodeError
from kadence.models import ExecutionBatch, ExecutionRequested, WireModel, entries_of

AVRO_MAGIC = b"\xc3\x01"
"""How an Avro single-object record begins (a batch's entries are never JSON)."""


class BadEntryError(DecodeError):
    """An entry of a batch that is not one of its executions."""

    code = "invalid_batch_entry"


def entry(
    codec: Codec, batch: ExecutionBatch, index: int, reader: EntryReader | None = None
) -> ExecutionRequested:
    """Entry `index` of `batch`, decoded (by `reader`, from its job's kept parts, when given:
    the same model, kadence/entry_templates.py); raises a DecodeError when it is not an
    ExecutionRequested of the batch's tenant due at the batch's instant."""
    data = batch.executions[index]
    if not data.startswith(AVRO_MAGIC):
        raise BadEntryError(f"entry {index} of the batch is not an Avro record")
    ex = codec.decode(data, (ExecutionRequested,)) if reader is None else reader.decode(data)
    assert isinstance(ex, ExecutionRequested)
    if ex.tenant != batch.tenant or ex.due_at != batch.due_at:
        raise BadEntryError(
            f"entry {index} of the batch ({ex.execution_id}) is of tenant {ex.tenant!r} due at "
            f"{ex.due_at.isoformat()}, not the batch's {batch.tenant!r} at "
            f"{batch.due_at.isoformat()}"
        )
    return ex


def executions_in(codec: Codec, record: WireModel) -> list[ExecutionRequested]:
    """The executions an executions record carries: the record itself, a batch's entries (an
    unreadable entry left out), or none (a revocation)."""
    if isinstance(record, ExecutionRequested):
        return [record]
    if not isinstance(record, ExecutionBatch):
        return []
    out = []
    for i in range(len(record.executions)):
        try:
            out.append(entry(codec, record, i))
        except DecodeError:
            continue
    return out


def records_in(codec: Codec, record: WireModel) -> list[WireModel]:
    """What a decoded record says, one model each: a batch's executions or outcomes (an
    unreadable execution left out), or the record itself."""
    if isinstance(record, ExecutionBatch):
        return [*executions_in(codec, record)]
    return entries_of(record)
