"""Agent memory: long-term memories and session turns (remember, recall, list, forget, promote)."""
