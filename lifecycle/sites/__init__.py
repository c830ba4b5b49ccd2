"""Creating and tearing down sites: what the API, the workflows and the activities share."""
