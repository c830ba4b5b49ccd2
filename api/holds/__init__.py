"""Legal holds on accounts (admin): while one is in force, nothing of the account is deleted."""
