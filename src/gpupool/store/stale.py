"""Refusals of a write that was decided on state that changed since: nothing is written."""

from __future__ import annotations


class StaleState(Exception):
    """A decision was based on state that changed since; nothing was written."""


class LeaseLost(StaleState):
    """The daemon that decided no longer holds the database lease (another took it over, or
    it released it): its commit of starts is refused in the transaction (store/lease.py), and
    it learns at its next renewal that it must stop scheduling."""
