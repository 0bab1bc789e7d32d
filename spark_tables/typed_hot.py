"""The typed columns of the hot tail (includeHot, streaming's live records), decoded in the
task by tiering's own decoder (schemaformat/typed_decode.py) with the topic's `lake.mode` and
the schemas from the broker's Schema Registry, so a record reads the same whether it was
tiered yet or not. Imported only by a task that reads hot records: httpx and the registry
client cost every Python worker ~0.2 s of CPU to import, and most tasks read cold files.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pyarrow as pa

from http_transport.trust import default_trust
from schemaformat.base import ParsedSchema
from schemaformat.registry_client import RegistryClient, RegistryError, subject_path
from schemaformat.typed_decode import TYPED_MODES, TypedDecoder
from spark_tables.options import SourceOptions
from spark_tables.typed import ERROR, TYPED


class _RegistryLookup:
    """schemaformat.typed_decode.SchemaLookup over the broker's Schema Registry API."""

    def __init__(self, client: RegistryClient, topic: str) -> None:
        self.client, self.subject = client, f"{topic}-value"

    def schema(self, schema_id: int) -> ParsedSchema:
        try:
            return self.client.schema(schema_id)
        except RegistryError as error:
            if error.status == 404:
                raise LookupError(error.message) from None
            raise

    def latest_id(self) -> int | None:
        try:
            answer = self.client.request(
                "GET", f"/subjects/{subject_path(self.subject)}/versions/latest"
            )
        except RegistryError as error:
            if error.status == 404:
                return None
            raise
        return int(answer["id"])


class HotTyped:
    """Adds the typed columns to hot batches (CONSUMER_SCHEMA), decoded as tiering does."""

    def __init__(self, opts: SourceOptions, struct: pa.DataType | None) -> None:
        assert opts.broker_url is not None
        self.opts, self.struct = opts, struct
        self._decoder: TypedDecoder | bool | None = False  # False: not looked up yet

    def _typed_decoder(self) -> TypedDecoder | None:
        if self._decoder is False:
            url = self.opts.broker_url
            headers = {"Authorization": f"Bearer {self.opts.api_key}"} if self.opts.api_key else {}
            answer = httpx.get(
                f"{url}/topics/{self.opts.topic}",
                headers=headers,
                timeout=30,
                verify=default_trust(),  # one context a process (http_transport/trust.py)
            )
            answer.raise_for_status()
            mode = answer.json().get("configs", {}).get("lake.mode", "key_value")
            client = RegistryClient(f"{url}/schema-registry", api_key=self.opts.api_key or "")
            lookup = _RegistryLookup(client, self.opts.topic)
            self._decoder = TypedDecoder(mode, lookup) if mode in TYPED_MODES else None
        assert not isinstance(self._decoder, bool)
        return self._decoder

    def add(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            if TYPED in batch.schema.names:  # the cold files' fallback: already typed
                yield batch
                continue
            decoder = self._typed_decoder()
            if decoder is None:  # the topic is not typed now: nulls
                yield batch
                continue
            values = batch.column("value")
            table = self.struct if pa.types.is_struct(self.struct) else None
            plan = decoder.plan(table, decoder.schema_ids(values))
            typed = decoder.decode(values, plan)
            columns = [*batch.columns, typed.errors]
            fields = [*batch.schema, pa.field(ERROR, pa.string())]
            if plan.struct is not None:
                columns.append(typed.typed)
                fields.append(pa.field(TYPED, plan.struct))
            yield pa.RecordBatch.from_arrays(columns, schema=pa.schema(fields))
