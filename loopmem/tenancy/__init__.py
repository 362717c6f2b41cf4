"""Who is calling and on whose behalf: principals from bearer keys, the scope they act in, keys and tenants.

`principal` resolves a key (`key_lookup`: one statement), `scope` derives the (tenant, subject) isolation boundary
from it and never from a request body, `services` are the operator use cases on tenants and keys (`key_batches`
issues many at once), and `audit` is the deletion audit every forget, supersede and erase writes to.
"""
