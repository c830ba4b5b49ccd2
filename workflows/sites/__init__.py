"""Site creation (a saga) and site teardown."""
