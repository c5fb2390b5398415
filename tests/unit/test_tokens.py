"""API tokens: shown once, stored as salted hashes, checked in constant time; expiry and
revocation; stored on SQLite and PostgreSQL (the store fixture)."""

from __future__ import annotations

import dataclasses

from test_store import store_fixture, store_url_fixture  # noqa: F401  (fixtures)

from gpupool.core import tokens
from gpupool.core.audit import AuditAction, AuditEntry
from gpupool.store import Store


def test_a_token_is_its_id_and_a_secret_the_store_never_holds(store: Store) -> None:
    minted = tokens.mint()
    record = store.create_token("alice", "laptop", minted, 100.0, None, "alice")
    text = minted.text(record.id)
    assert text.startswith(f"gpupool_{record.id}_")
    presented = tokens.parse(text)
    assert presented == tokens.Presented(record.id, minted.secret)
    stored = store.token(record.id)
    assert stored is not None and tokens.matches(stored, presented)
    # Only the salt and the hash are kept: the secret appears nowhere in the row.
    assert minted.secret not in repr(stored)
    assert stored.digest != minted.secret and len(stored.salt) == 2 * tokens.SALT_BYTES


def test_a_wrong_secret_or_another_id_does_not_match(store: Store) -> None:
    minted = tokens.mint()
    record = store.create_token("alice", "t", minted, 100.0, None, "alice")
    other = tokens.mint()
    assert not tokens.matches(record, tokens.Presented(record.id, other.secret))
    assert not tokens.matches(record, tokens.Presented(record.id + 1, minted.secret))


def test_the_same_secret_hashes_differently_under_two_salts() -> None:
    a, b = tokens.mint(), tokens.mint()
    assert tokens.digest(a.salt, "x" * 64) != tokens.digest(b.salt, "x" * 64)


def test_text_that_is_not_a_token_is_not_parsed() -> None:
    good = "gpupool_7_" + "a" * 64
    assert tokens.parse(good) == tokens.Presented(7, "a" * 64)
    for bad in ("", "Bearer x", "gpupool_0_" + "a" * 64, "gpupool_7_" + "a" * 63,
                "gpupool_7_" + "A" * 64, good + "0", "gpupool_x_" + "a" * 64, good * 20):  # fmt: skip
        assert tokens.parse(bad) is None, bad


def test_expiry_and_revocation(store: Store) -> None:
    record = store.create_token("bob", "ci", tokens.mint(), 100.0, 200.0, "root")
    assert record.usable(199.9) and not record.usable(200.0)
    revoked = store.revoke_token(record.id, 150.0)
    assert revoked.revoked_at == 150.0 and not revoked.usable(160.0)
    assert store.revoke_token(record.id, 170.0).revoked_at == 150.0  # the first time stays
    assert store.tokens("bob") == []
    assert [t.id for t in store.tokens("bob", revoked=True)] == [record.id]


def test_tokens_are_listed_by_user_and_used_times_kept(store: Store) -> None:
    a = store.create_token("alice", "a", tokens.mint(), 1.0, None, "alice")
    b = store.create_token("bob", "b", tokens.mint(), 2.0, None, "root")
    assert [t.id for t in store.tokens()] == [a.id, b.id]
    assert [t.id for t in store.tokens("bob")] == [b.id]
    store.touch_token(a.id, 5.0)
    found = store.token(a.id)
    assert found is not None and found.last_used_at == 5.0
    assert dataclasses.replace(found, last_used_at=None) == a


def test_the_audit_log_keeps_entries_in_order(store: Store) -> None:
    first = AuditEntry(10.0, "root", "unix uid 0", AuditAction.CANCEL_JOB, "job 3", "")
    second = AuditEntry(
        20.0, "ops", "token 4", AuditAction.CHANGE_PROJECT, "project v", "quota 1 -> 2"
    )
    store.record_audit(first)
    store.record_audit(second)
    assert store.audit_entries() == [first, second]
    assert store.audit_entries(since=15.0) == [second]
