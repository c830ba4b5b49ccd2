"""Account exports: request one, follow it, download it."""
