"""Promotion: what a session learned becomes long-term memory, unattended.

`jobs` (trigger, budget, the worker, the sweep) → `compile` (session turns → candidate facts, gated) →
`persist` (candidates → promoted memories); `evaluation` scores a compiler on the labelled datasets in
`datasets/`; `events` is the structured log every stage writes.
"""
