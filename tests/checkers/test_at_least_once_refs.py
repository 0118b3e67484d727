"""An at-least-once repeat's new reference is the repeat it is (issue 29).

The world gives every application of a request a new reference
(``mail-<request>-1``, then ``-2``). A runtime that declares ``email.send``
at least once may send twice after a kill and end holding the second
reference: ``resume_equivalence``, ``state_equivalence`` and
``migration_safety`` take that output as the oracle's. An exactly-once
kind's new reference, another request's reference, a reference invented
without a repeat and any other changed field still diverge.
"""

from __future__ import annotations

from typing import Any

from history_builder import CHARGE, SEND, H

from harness.checkers import (
    check_migration_safety,
    check_resume_equivalence,
    check_state_equivalence,
)
from harness.model import Verdict

AT_LEAST = {SEND: "at_least_once", CHARGE: "exactly_once"}
REF1, REF2 = "mail-0a1b2c3d4e-1", "mail-0a1b2c3d4e-2"
PAY1, PAY2 = "pay-5f6a7b8c9d-1", "pay-5f6a7b8c9d-2"


def _oracle(output: dict[str, Any], kind: str = SEND, ref: str = REF1, durable: Any = None) -> H:
    h = H().declaration(AT_LEAST).submit("r1").effect("r1", kind, "h1", external_ref=ref)
    if durable is not None:
        h = h.state("r1", durable)
    return h.final("r1", "completed", output)


def _repeated(
    output: dict[str, Any],
    kind: str = SEND,
    refs: tuple[str, ...] = (REF1, REF2),
    durable: Any = None,
    delivery: dict[str, str] = AT_LEAST,
) -> H:
    """The run sent its request once per ref (a kill after the first apply,
    then a new worker that sent again), and ended with ``output``."""
    h = H().declaration(delivery).submit("r1")
    for ref in refs:
        h = h.effect("r1", kind, "h1", external_ref=ref)
    if durable is not None:
        h = h.state("r1", durable)
    return h.final("r1", "completed", output)


# -- resume_equivalence ------------------------------------------------------------


def test_an_at_least_once_repeat_ending_with_its_new_reference_is_equivalent() -> None:
    h = _repeated({"message_id": REF2, "to": "c-1"}).build()
    o = _oracle({"message_id": REF1, "to": "c-1"}).build()
    r = check_resume_equivalence(h, o)
    assert r.verdict is Verdict.PASS, r.message
    assert r.counts["equivalent"] == 1 and r.counts["at_least_once_new_ref"] == 1


def test_the_reference_inside_a_longer_value_is_set_aside_too() -> None:
    h = _repeated({"receipt": {"lines": [f"sent as {REF2}"]}}).build()
    o = _oracle({"receipt": {"lines": [f"sent as {REF1}"]}}).build()
    assert check_resume_equivalence(h, o).verdict is Verdict.PASS


def test_an_exactly_once_kinds_new_reference_still_diverges() -> None:
    h = _repeated({"ref": PAY2}, kind=CHARGE, refs=(PAY1, PAY2)).build()
    o = _oracle({"ref": PAY1}, kind=CHARGE, ref=PAY1).build()
    r = check_resume_equivalence(h, o)
    assert r.verdict is Verdict.FAIL
    assert f"output differs in ref: '{PAY2}' vs '{PAY1}'" in r.message, r.message


def test_another_changed_field_beside_the_new_reference_still_diverges() -> None:
    h = _repeated({"message_id": REF2, "status": "sent twice"}).build()
    o = _oracle({"message_id": REF1, "status": "sent"}).build()
    r = check_resume_equivalence(h, o)
    assert r.verdict is Verdict.FAIL
    # named with its real values; the reference, a legitimate repeat, is not named
    assert "output differs in status: 'sent twice' vs 'sent'" in r.message, r.message
    assert "message_id" not in r.message


def test_a_new_reference_without_a_repeat_in_the_world_diverges() -> None:
    # one send only, yet the run holds a reference the world gave no one
    h = _repeated({"message_id": REF2}, refs=(REF1,)).build()
    o = _oracle({"message_id": REF1}).build()
    r = check_resume_equivalence(h, o)
    assert r.verdict is Verdict.FAIL and "message_id" in r.message


def test_the_reference_of_another_request_diverges() -> None:
    other = "mail-ffffffffff-1"
    h = _repeated({"message_id": other}).effect("r1", SEND, "h2", external_ref=other).build()
    o = _oracle({"message_id": REF1}).effect("r1", SEND, "h2", external_ref=other).build()
    r = check_resume_equivalence(h, o)
    assert r.verdict is Verdict.FAIL and "message_id" in r.message, r.message


def test_a_second_reference_added_to_the_output_diverges() -> None:
    h = _repeated({"sent": [REF1, REF2]}).build()
    o = _oracle({"sent": [REF1]}).build()
    assert check_resume_equivalence(h, o).verdict is Verdict.FAIL


def test_migration_safety_takes_the_new_reference_as_the_repeat_it_is() -> None:
    h = _repeated({"message_id": REF2}).fault("migration", runs=["r1"]).build()
    o = _oracle({"message_id": REF1}).build()
    assert check_migration_safety(h, o).verdict is Verdict.PASS
    h = _repeated({"message_id": REF2}, delivery={SEND: "exactly_once"}).fault(
        "migration", runs=["r1"]
    )
    assert check_migration_safety(h.build(), o).verdict is Verdict.FAIL


# -- state_equivalence ---------------------------------------------------------------


def test_durable_state_holding_the_repeats_reference_is_equivalent() -> None:
    h = _repeated({}, durable={"job": {"status": "done", "result": REF2}}).build()
    o = _oracle({}, durable={"job": {"status": "done", "result": REF1}}).build()
    r = check_state_equivalence(h, o)
    assert r.verdict is Verdict.PASS, r.message
    assert r.counts["at_least_once_new_ref"] == 1


def test_durable_state_with_an_exactly_once_kinds_new_reference_differs() -> None:
    h = _repeated({}, kind=CHARGE, refs=(PAY1, PAY2), durable={"job": {"result": PAY2}})
    o = _oracle({}, kind=CHARGE, ref=PAY1, durable={"job": {"result": PAY1}})
    r = check_state_equivalence(h.build(), o.build())
    assert r.verdict is Verdict.FAIL
    assert f'$.job.result: "{PAY2}" here vs "{PAY1}" in the oracle' in r.message, r.message


def test_durable_state_differing_beside_the_reference_names_the_real_values() -> None:
    h = _repeated({}, durable={"job": {"result": REF2, "sends": 2}}).build()
    o = _oracle({}, durable={"job": {"result": REF1, "sends": 1}}).build()
    r = check_state_equivalence(h, o)
    assert r.verdict is Verdict.FAIL
    assert "$.job.sends: 2 here vs 1 in the oracle" in r.message, r.message


# -- a later request that quotes the repeat's reference ---------------------------
#
# Found by a new user's job queue (2026-12-07): the charge declared at least
# once was repeated after a kill, and the receipt email that followed quoted
# the second payment reference: another request hash than the oracle's
# receipt, and another mail reference in the output, though the email went
# out once, as in the oracle.

AT_LEAST_CHARGE = {CHARGE: "at_least_once", SEND: "exactly_once"}
MAIL_H, MAIL_O = "mail-1111111111-1", "mail-2222222222-1"


def _receipt_run(pays: tuple[str, ...], quoted: str, mail: str, body: str = "receipt for ") -> H:
    h = H().declaration(AT_LEAST_CHARGE).submit("r1")
    for ref in pays:
        h = h.effect("r1", CHARGE, "h1", external_ref=ref, request={"amount": 5})
    digest = "hq-" + quoted  # the world hashes what the receipt says
    h = h.effect("r1", SEND, digest, external_ref=mail, request={"body": body + quoted})
    return h.final("r1", "completed", {"receipt_id": mail, "payment": quoted})


def test_a_request_quoting_the_repeats_new_reference_is_the_oracles_request() -> None:
    h = _receipt_run((PAY1, PAY2), PAY2, MAIL_H).build()
    o = _receipt_run((PAY1,), PAY1, MAIL_O).build()
    r = check_resume_equivalence(h, o)
    assert r.verdict is Verdict.PASS, r.message
    assert r.counts["at_least_once_new_ref"] == 1


def test_a_quoting_request_that_changed_otherwise_still_diverges() -> None:
    h = _receipt_run((PAY1, PAY2), PAY2, MAIL_H, body="REFUND for ").build()
    o = _receipt_run((PAY1,), PAY1, MAIL_O).build()
    r = check_resume_equivalence(h, o)
    assert r.verdict is Verdict.FAIL
    assert "email.send request" in r.message and "receipt_id" in r.message, r.message


def test_a_quoting_request_sent_twice_still_diverges_when_exactly_once() -> None:
    h = _receipt_run((PAY1, PAY2), PAY2, MAIL_H)
    h = h.effect("r1", SEND, "hq-" + PAY2, external_ref="mail-1111111111-2",
                 request={"body": "receipt for " + PAY2})  # fmt: skip
    o = _receipt_run((PAY1,), PAY1, MAIL_O).build()
    r = check_resume_equivalence(h.build(), o)
    assert r.verdict is Verdict.FAIL
    assert "applied 2x here, 1x in the oracle" in r.message, r.message


def test_quoting_a_reference_without_a_repeat_still_diverges() -> None:
    # the charge went once, yet the receipt quotes a reference nobody gave
    h = _receipt_run((PAY1,), PAY2, MAIL_H).build()
    o = _receipt_run((PAY1,), PAY1, MAIL_O).build()
    assert check_resume_equivalence(h, o).verdict is Verdict.FAIL
