"""Services written by nobody here: each implements the deletion contract (proto/) and nothing else of this
project."""
