"""The outside providers a tenant may call: one `openai` client per endpoint, the chat LLM, and a circuit breaker.

`clients` chooses a tenant's provider and reuses one client per endpoint, `sdk_failures` turns what the SDK raises
into each caller's own typed failures, `llm` is the one chat call promotion makes, `circuit_breaker` keeps a failing
provider from being called by every process at once (state in Redis).
"""
