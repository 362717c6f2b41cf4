"""The guarded heavy-read path: every kNN, search and count of memory rows and articles goes through here.

`scoped` opens the sessions that read; each query they run must pass `where_guard` (the compiled WHERE pins the
tenant, and the subject for memories), and each session holds a slot of `tenant_gate` (the per-tenant in-flight cap).
`hnsw_options` sets a read's HNSW options for its transaction, `prepared` compiles a read once per shape, and
`size_cache` remembers the row counts that choose a read's path. The alias itself is `loopmem.database.router`.
"""
