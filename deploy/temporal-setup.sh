#!/bin/sh
# One-shot, idempotent: the namespace and the custom search attributes (lifecycle/search_attributes.py) that
# operators query by. The server's healthcheck only sees its port open, so this waits for real health first.
set -eu
ADDRESS=${TEMPORAL_ADDRESS:?is empty}
NAMESPACE=${TEMPORAL_NAMESPACE:-default}
RETENTION=30d

with_retries() {
    attempt=1
    until "$@"; do
        if [ "$attempt" -ge 40 ]; then
            echo "gave up after $attempt attempts: $*" >&2
            return 1
        fi
        attempt=$((attempt + 1))
        sleep 3
    done
}

namespace_ready() {
    temporal operator namespace describe --address "$ADDRESS" -n "$NAMESPACE" >/dev/null 2>&1 ||
        temporal operator namespace create --address "$ADDRESS" -n "$NAMESPACE" --retention "$RETENTION"
}

search_attribute_ready() {
    temporal operator search-attribute list --address "$ADDRESS" -n "$NAMESPACE" | grep -qw "$1" ||
        temporal operator search-attribute create --address "$ADDRESS" -n "$NAMESPACE" --name "$1" --type Keyword
}

with_retries temporal operator cluster health --address "$ADDRESS"
with_retries namespace_ready
for attribute in AccountId BotId SiteId LifecycleStatus; do
    with_retries search_attribute_ready "$attribute"
done
