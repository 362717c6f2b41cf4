"""What the service tells its operators: the Prometheus series, JSON log lines, and the worker's exporter.

`metrics` defines every series once (web and workers record into them), `json_logs` formats production logs,
`worker_metrics` is a Celery worker's own exporter. The web's `GET /metrics` is `loopmem.http.metrics_endpoint`.
"""
