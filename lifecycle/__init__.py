"""What the API, the worker and the workflows share: settings, the schema, ids; per feature, contracts."""
