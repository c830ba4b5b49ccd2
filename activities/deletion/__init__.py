"""The deletion activities: the registry as a deletion reads it, bookkeeping, grace, receipts, the email."""
