"""Every guess counts: unknown join codes (through the join form's own path, whose name check
runs first), wrong teacher keys, sessions, tickets and student keys are counted per client
address and per key tried, and answered slowly past a few; the right code or key, from
anyone else, is answered at full speed."""

from __future__ import annotations

import pytest

from classroom import Classroom, core

GUESSER, HONEST = "203.0.113.66", "198.51.100.7"


@pytest.fixture
def room(tmp_path):
    waits: list[float] = []
    room = Classroom(f"sqlite:///{tmp_path / 'guess.sqlite'}", sleep=waits.append)
    room.waits = waits
    return room


def test_unknown_codes_in_the_name_check_are_counted_and_slowed(room):
    code, _ = room.create_class("Guarded", n_items=1)
    for i in range(50):
        with pytest.raises(LookupError):
            room.name_taken(f"Q{i:05d}", "Ada", client=GUESSER)
    assert len(room.waits) == 50 - core.FREE_FAILURES, "the form's first call slows too"
    assert room.waits == sorted(room.waits) and max(room.waits) == core.MAX_DELAY_S
    assert room.failures(f"guess:{GUESSER}") == 50
    before = len(room.waits)
    assert room.name_taken(code, "Ada", client=HONEST) is False
    room.join(code, "Ada", client=HONEST)
    assert room.name_taken(code, "Ada", client=GUESSER), "the right code: full speed, anyone"
    assert len(room.waits) == before


def test_wrong_student_keys_are_counted_per_client_and_per_key(room):
    code, _ = room.create_class("Guarded", n_items=2)
    key = room.join(code, "Ada")
    calls = [
        lambda k: room.student(k, client=GUESSER),
        lambda k: room.progress(k, client=GUESSER),
        lambda k: room.exercise(k, 0, client=GUESSER),
        lambda k: room.set_position(k, 1, client=GUESSER),
        lambda k: room.submit(k, 0, [1, 2], "s1", client=GUESSER),
        lambda k: room.reveal(k, 0, client=GUESSER),
    ]
    for i in range(48):
        with pytest.raises(LookupError):
            calls[i % len(calls)](f"wrong-student-key-{i}")
    assert len(room.waits) == 48 - core.FREE_FAILURES
    before = len(room.waits)
    assert room.student(key, client=HONEST).name == "Ada"
    room.set_position(key, 1, client=GUESSER)  # the right key is never slowed, even here
    room.submit(key, 0, room.exercise(key, 0).answer, "ok", client=GUESSER)
    assert len(room.waits) == before

    room.waits.clear()
    for i in range(core.FREE_FAILURES + 3):  # one stolen-looking key tried from everywhere
        with pytest.raises(LookupError):
            room.student("the-same-wrong-key", client=f"192.0.2.{i}")
    assert len(room.waits) == 3, "a key tried again and again is slowed wherever it comes from"


def test_wrong_sessions_and_tickets_are_guesses_like_keys(room):
    code, teacher_key = room.create_class("Guarded", n_items=1)
    for i in range(10):
        with pytest.raises(PermissionError):
            room.teacher_class(code, f"not-a-session-{i}", client=GUESSER)
        with pytest.raises(LookupError):
            room.redeem_ticket(f"not-a-ticket-{i}", client=GUESSER)
    assert room.failures(f"guess:{GUESSER}") == 20
    assert len(room.waits) == 20 - core.FREE_FAILURES
    before = len(room.waits)
    token = room.sign_in(code, teacher_key, client=GUESSER)
    code_back, session = room.redeem_ticket(room.ticket(code, token), client=GUESSER)
    assert code_back == code and room.teacher_class(code, session, client=GUESSER).code == code
    assert len(room.waits) == before, "the teacher's own key and tickets: full speed"


@pytest.mark.slow
@pytest.mark.parametrize("lang", ["en", "ko"])
def test_unknown_codes_through_the_join_form_slow_that_client_only(lang, tmp_path, monkeypatch):
    """The join form's own path (AppTest): its name check used to meet an unknown code first,
    and answered it uncounted and at full speed. In each language enough to be slowed (each
    press is a script run; fifty, up to the longest wait, are the name check's own test
    above: test_unknown_codes_in_the_name_check_are_counted_and_slowed)."""
    import ui.classroom
    from tests.app import helpers
    from ui.i18n import translate

    monkeypatch.setenv("ATTENTION_LAB_DATABASE_URL", f"sqlite:///{tmp_path / 'form.sqlite'}")
    ui.classroom._room.clear()
    try:
        page_room = ui.classroom._room()
        waits: list[float] = []
        page_room._sleep = waits.append
        who = {"client": GUESSER}
        monkeypatch.setattr(ui.classroom, "client", lambda: who["client"])
        code, _ = page_room.create_class("Guarded", n_items=1)

        at = helpers.open_page("classroom", timeout=180, lang=lang)
        join = translate("classroom.join.button", lang)
        guesses = core.FREE_FAILURES + 3
        for i in range(guesses):
            guess = f"Z{i:05d}"
            at.text_input(key="join_code").set_value(guess)
            at.text_input(key="join_name").set_value("Mallory")
            at = next(b for b in at.button if b.label == join).click().run()
            assert not at.exception
            said = translate("classroom.unknown_code", lang, code=guess)
            assert said in [e.value for e in at.error]
        assert len(waits) == guesses - core.FREE_FAILURES, "every guess counted, past 5 slowed"
        assert page_room.failures(f"guess:{GUESSER}") == guesses

        before = len(waits)
        who["client"] = HONEST
        honest = helpers.open_page("classroom", timeout=180, lang=lang, **{"class": code})
        honest.text_input(key="join_name").set_value("Ada")
        honest = next(b for b in honest.button if b.label == join).click().run()
        assert not honest.exception and honest.query_params.get("student")
        assert len(waits) == before, "the right code from another client: no wait at all"
    finally:
        ui.classroom._room.clear()
