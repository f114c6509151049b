"""Terminal escapes and bidi characters in a TAB answer reach neither a checkpoint run's `racing/error` tag, its ledger
note nor the `scrapes` audit: the real checkpoint jobs on a real race database and Dagster instance, TAB answering an
error whose text carries every class of control and bidi character (the sample race of test_malformed_event)."""

import datetime as dt
import json
import re

import httpx
import pytest
import sqlalchemy as sa

from orchestration_core.run_outcome import TAG_OUTCOME
from racing_orchestration.checkpoints.jobs import post_race_t5, pre_race_t15
from racing_orchestration.race_db.checkpoints import checkpoint_row, claim_checkpoint
from racing_orchestration.race_db.store import upsert_meetings
from racing_orchestration.tab.models import parse_meetings_response
from tests.racing_orchestration.checkpoints.test_malformed_event import MEETINGS_SAMPLE, RACE_ID, EventTransport, _run

HOSTILE = "\x1b]0;owned\x07\x1b[31m\x00\x01\x7f\x85\x9b\u202eevil\u202a\u2066x\u2069\u200e\u200f\u061c\u2028\ud800"
UNSHOWABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c\ud800-\udfff]")


@pytest.fixture
def sample_race_db(race_db, tab_samples_dir):
    """The race database after the morning scrape of the sample day (its race among them)."""
    with race_db.begin() as conn:
        upsert_meetings(conn, parse_meetings_response(json.loads((tab_samples_dir / MEETINGS_SAMPLE).read_text())))
    return race_db


class HostileAnswer(EventTransport):
    """Answers /events/{id} with `status` and an API error envelope quoting the hostile text."""

    def __init__(self, status: int) -> None:
        super().__init__(b"")
        self.status = status

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        body = json.dumps({"header": {"error": f"race {HOSTILE} refused", "error_code": "E1"}, "data": None})
        return httpx.Response(self.status, content=body.encode(), request=request)


def _clean(text: str) -> None:
    assert text and UNSHOWABLE.search(text) is None, repr(text)


@pytest.mark.integration
@pytest.mark.parametrize(("job", "checkpoint"), [(pre_race_t15, "t15"), (post_race_t5, "post")])
def test_hostile_error_text_is_escaped_in_tags_ledger_and_scrapes(pg_instance, sample_race_db, job,
                                                                  checkpoint) -> None:
    race_db = sample_race_db
    with race_db.begin() as conn:
        claim_checkpoint(conn, RACE_ID, checkpoint, dt.datetime.now(dt.UTC))
    result = _run(job, checkpoint, pg_instance, HostileAnswer(404), race_db, attempt=3)
    assert not result.success
    run = pg_instance.get_run_by_id(result.run_id)
    assert run.tags[TAG_OUTCOME] == "failed"
    _clean(run.tags["racing/error"])
    assert "\\x1b" in run.tags["racing/error"] and "\\u202e" in run.tags["racing/error"]  # shown, escaped
    with race_db.connect() as conn:
        ledger = checkpoint_row(conn, RACE_ID, checkpoint)
        errors = conn.execute(sa.text("SELECT error FROM scrapes WHERE run_id = :r"), {"r": result.run_id}).scalars()
        errors = list(errors)
    assert ledger.state == "failed"
    _clean(ledger.note)
    assert len(errors) == 1
    _clean(errors[0])
