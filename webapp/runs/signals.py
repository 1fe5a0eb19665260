"""What the runs app announces to whatever groups runs (a sweep, webapp.sweeps), which it knows nothing of.

``slots_changed(run=...)`` is sent inside the service's transaction when a run that belongs to a group ended or
went back to the queue without being sent to a worker: the group decides which of its runs gets a slot next.
"""
from django.dispatch import Signal

slots_changed = Signal()
