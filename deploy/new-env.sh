#!/bin/sh
# Usage: deploy/new-env.sh TEMPLATE TARGET (`make deploy-env` runs it with .env.example and .env).
# Copies TEMPLATE to TARGET, giving each empty secret (ADMIN_TOKEN, EXPORT_SIGNING_KEY, RECEIPT_SIGNING_KEY,
# SEALING_KEYS, S3_SECRET_ACCESS_KEY, *_PASSWORD, *_CREDENTIAL) 48 random hex digits, longer than the 32 bytes the processes require of a secret.
# Refuses to overwrite TARGET: its secrets are already in the database volumes and in operators' hands.
set -eu
template=$1
target=$2
if [ -e "$target" ]; then
    echo "$target exists; not overwriting it. Read a value back with: sed -n 's/^ADMIN_TOKEN=//p' $target" >&2
    exit 1
fi

random_hex() {
    od -An -tx1 -N24 /dev/urandom | tr -d ' \n'
}

umask 077
while IFS= read -r line || [ -n "$line" ]; do
    case $line in
        ADMIN_TOKEN= | EXPORT_SIGNING_KEY= | RECEIPT_SIGNING_KEY= | SEALING_KEYS= | S3_SECRET_ACCESS_KEY= | *_PASSWORD= | *_CREDENTIAL=) printf '%s%s\n' "$line" "$(random_hex)" ;;
        *) printf '%s\n' "$line" ;;
    esac
done <"$template" >"$target.tmp"
mv "$target.tmp" "$target"
echo "wrote $target (mode 0600). Read the admin token with: sed -n 's/^ADMIN_TOKEN=//p' $target"
