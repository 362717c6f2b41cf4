"""Merged recall: memory and knowledge in one ranked, diversified, explained answer."""
