#!/bin/sh
# One-shot, idempotent: the namespace and the custom search attributes (lifecycle/search_attributes.py) that
# operators query by. The server's healthcheck only sees its port open, so this waits for real health first.
set -eu
NAMESPACE=default
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
    temporal operator namespace describe -n "$NAMESPACE" >/dev/null 2>&1 ||
        temporal operator namespace create -n "$NAMESPACE" --retention "$RETENTION"
}

search_attribute_ready() {
    temporal operator search-attribute list -n "$NAMESPACE" | grep -qw "$1" ||
        temporal operator search-attribute create -n "$NAMESPACE" --name "$1" --type Keyword
}

with_retries temporal operator cluster health
with_retries namespace_ready
for attribute in AccountId BotId SiteId LifecycleStatus; do
    with_retries search_attribute_ready "$attribute"
done
