"""Text to vectors, and the pipeline that keeps every embedded row's vector current.

`embedders` is the one interface to the embedding models (local MiniLM in `minilm/`, or a provider), `query_cache`
keeps a repeated query from being embedded twice, `work_queue` is the Redis queue of rows waiting for a vector,
`pipeline` embeds them (drain, sweep, backfill) for every embedded table, `columns` declares the columns every
embedded table carries (an abstract model), and `vector_index` the partial HNSW indexes over its vector column.
"""
