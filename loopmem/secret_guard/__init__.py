"""Secrets refused before anything is stored: the detector and the policy every write passes.

`scan` finds credentials and personal secrets in text (provider token formats from `rules`, secrets known by where
they stand from `structure`, identity numbers from `ids`, wallet seed phrases from `seed_phrase`) and redacts them;
`policy` applies the tenant's secret policy to what a write would store.
"""
