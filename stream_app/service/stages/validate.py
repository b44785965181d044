"""The first hop: raw input messages to accepted runs (bundled per target partition, the
partition of their experiment) or dead letters."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from stream_app.core.ingest import Rejection, evaluate_run, processing_error
from stream_app.service.exporter import Exporter
from stream_app.service.outputs import Outputs, Record
from stream_app.service.partitioning import partition_for
from stream_app.service.settings import Settings


class ValidateStage:
    """Validates every input message with the core and forwards it, or dead-letters it."""

    name: Final = "validate"

    def __init__(self, settings: Settings, outputs: Outputs, exporter: Exporter) -> None:
        self.settings = settings
        self.outputs = outputs
        self.exporter = exporter

    async def handle(self, batch: Sequence[Record]) -> int:
        """One batch; an event's problem is its own dead letter, never the batch's. The accepted
        runs go out as one bundle per target partition (`schemas.run_bundle`), in input order."""
        self.exporter.received.inc(len(batch))
        by_partition: dict[int, list[bytes]] = {}
        partitions = self.settings.partitions
        for record in batch:
            result = evaluate_run(record.value, self.settings)  # never raises
            if not isinstance(result, Rejection):
                try:
                    value = result.model_dump_json().encode()
                    partition = partition_for(result.experiment_id, partitions)
                except Exception as exc:
                    result = processing_error(self.name, exc)
                else:
                    by_partition.setdefault(partition, []).append(value)
                    continue
            await self.outputs.reject(record, result)
        for partition, runs in sorted(by_partition.items()):
            await self.outputs.forward_runs(partition, runs)
        return len(batch)

    def drop_cache(self) -> None:
        """Nothing cached: validation is stateless."""
