"""Activities: every side effect the workflows cause."""
