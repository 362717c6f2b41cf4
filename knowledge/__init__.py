"""The Knowledge Wiki slice memory needs: articles, hybrid search, novelty gate, access ledger."""
