"""Celery app, tasks and the adapter that feeds training/ events into the database (docs/architecture.md#layers)."""
