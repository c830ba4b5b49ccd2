"""The typed custom search attributes every feature shares, so operators can find runs with `temporal workflow list
--query`, and their registration. What each workflow type starts with is in its feature's workflow_types.py."""

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest, ListSearchAttributesRequest
from temporalio.client import Client
from temporalio.common import SearchAttributeKey

ACCOUNT_ID = SearchAttributeKey.for_keyword("AccountId")
BOT_ID = SearchAttributeKey.for_keyword("BotId")
SITE_ID = SearchAttributeKey.for_keyword("SiteId")
LIFECYCLE_STATUS = SearchAttributeKey.for_keyword("LifecycleStatus")

ALL = (ACCOUNT_ID, BOT_ID, SITE_ID, LIFECYCLE_STATUS)

# What a run starts with: ids and its starting status only, by which operators find runs; no PII goes in.


def dev_server_flags() -> list[str]:
    """`temporal server start-dev` arguments that register every custom attribute."""
    flags: list[str] = []
    for key in ALL:
        flags += ["--search-attribute", f"{key.name}=Keyword"]
    return flags


async def register(client: Client) -> None:
    """Register every custom attribute that the namespace lacks. Safe to repeat on every start."""
    existing = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=client.namespace)
    )
    missing = {
        key.name: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD
        for key in ALL
        if key.name not in existing.custom_attributes
    }
    if missing:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(namespace=client.namespace, search_attributes=missing)
        )
