"""The site activities: the saga's steps and undos, files, database, reconciler."""
