"""Sites: create, list, read, delete."""
