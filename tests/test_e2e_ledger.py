"""The integration suite's ledger: two owners at once are an overlap, unless the first was fenced and
told so late (KIP-848's on_partitions_lost), and only when the test says that is Kafka's to excuse."""

from __future__ import annotations

from integration.e2e import Interval, Ledger

TP = ("orders", 0)


def ledger(*intervals: Interval) -> Ledger:
    led = Ledger()
    led.intervals.extend(intervals)
    return led


def test_two_owners_at_once_overlap_whatever_the_end() -> None:
    for how in ("revoked", "killed", "lost"):
        led = ledger(Interval("a", TP, 0.0, 5.0, how), Interval("b", TP, 3.0))
        assert led.overlaps() == [(TP, "a", "b")], how


def test_a_loss_learnt_late_is_excused_only_on_request_and_counted() -> None:
    led = ledger(Interval("a", TP, 0.0, 5.0, "lost"), Interval("b", TP, 3.0))
    assert led.overlaps(excuse_lost=True) == []
    assert led.lost() == 1
    revoked_late = ledger(Interval("a", TP, 0.0, 5.0, "revoked"), Interval("b", TP, 3.0))
    assert revoked_late.overlaps(excuse_lost=True) == [(TP, "a", "b")]
    # the fenced member's own later interval is no excuse for the other's
    later = ledger(Interval("b", TP, 0.0), Interval("a", TP, 3.0, 5.0, "lost"))
    assert later.overlaps(excuse_lost=True) == [(TP, "b", "a")]
