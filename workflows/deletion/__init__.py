"""Bot and account deletion workflows, their operator gate, receipt step and policies."""
