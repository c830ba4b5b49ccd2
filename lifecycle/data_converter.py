"""The one data converter of every Temporal client, worker and replayer the project builds.

It is the SDK's default converter in every respect but one: protobuf messages encoded as `json/protobuf` are read
with `ignore_unknown_fields=True`. The SDK's default refuses a field it does not know, so a caller built from one
version of the deletion contract (proto/lifecycle/deletion/v1/service.proto) could not read the response of a
service built from a newer one, nor a service the request of a newer caller. Everything else, dataclasses and
plain JSON values included, is encoded and decoded exactly as before, so recorded histories still replay.
"""

from __future__ import annotations

from temporalio.converter import (
    CompositePayloadConverter,
    DataConverter,
    DefaultPayloadConverter,
    EncodingPayloadConverter,
    JSONProtoPayloadConverter,
)


def _tolerant(converter: EncodingPayloadConverter) -> EncodingPayloadConverter:
    if isinstance(converter, JSONProtoPayloadConverter):
        return JSONProtoPayloadConverter(ignore_unknown_fields=True)
    return converter


class TolerantPayloadConverter(DefaultPayloadConverter):
    """The default payload converters, in their order, with the JSON protobuf one ignoring unknown fields."""

    def __init__(self) -> None:
        # Skips DefaultPayloadConverter.__init__, which would install the strict JSON protobuf converter.
        CompositePayloadConverter.__init__(
            self, *(_tolerant(converter) for converter in DefaultPayloadConverter.default_encoding_payload_converters)
        )


DATA_CONVERTER = DataConverter(payload_converter_class=TolerantPayloadConverter)
