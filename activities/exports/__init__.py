"""The account export's activities: steps, archive, reconciler."""
