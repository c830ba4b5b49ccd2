"""A search index that owns data about bots, as another team would write it: its own store (a SQLite file and a
folder of snapshot files) and its own worker process, built only from the deletion contract's generated classes
and temporalio. It implements DeleteSubjectData and VerifySubjectErased on a task queue of its own; see
README.md beside it."""
