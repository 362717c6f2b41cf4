"""Ranking rules shared by every app: how far a query's top score stands out (`separation`)."""
