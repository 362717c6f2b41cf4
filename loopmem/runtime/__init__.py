"""Processes and background work: what runs, when, and how work leaves a request.

`supervisor` keeps `scripts/serve`'s children running, `embedded` starts the zero-setup PostgreSQL and Redis,
`task_queue` enqueues Celery tasks after commit, `after_response` defers publishes until the response is sent,
`task_retry` and `schedules` define the beat tasks' retries and intervals, `progress` draws operator progress bars,
`operator_checks` names the system checks operator commands run.
"""
