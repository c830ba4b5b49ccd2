"""Account exports: what the API, the workflows and the activities share."""
