"""The deletion activities: deleters, bookkeeping, pace, grace, receipts, the email."""
