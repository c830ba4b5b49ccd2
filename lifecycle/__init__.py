"""What the API, the worker and the workflows share: settings, the schema, contracts and ids."""
