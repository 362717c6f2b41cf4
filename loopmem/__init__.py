"""loopmem core: tenants, API keys, auth, scope, errors, rate limits, custody halt, embedded servers."""
