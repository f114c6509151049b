"""Invisible and tag characters in task labels over real HTTP: 422 naming the field and the character, nothing
stored; their visible neighbours are stored as sent."""

from __future__ import annotations

import pytest

from tests.control_api.conftest import RunningApi
from tests.maintenance_jobs.test_label_characters import ALLOWED, REFUSED, code
from tests.task_rows import task_body

pytestmark = [pytest.mark.api, pytest.mark.integration]


def test_labels_with_invisible_characters_get_422_and_nothing_is_stored(api: RunningApi) -> None:
    with api.client() as client:
        assert client.post("/tasks", json=task_body("kept")).status_code == 201
        kept = client.get("/tasks/kept").json()
        for character in REFUSED:
            for field in ("service", "description", "created_by"):
                value = f"ops{character}team"
                posted = client.post("/tasks", json=task_body("label", **{field: value}))
                assert posted.status_code == 422, (code(character), field, posted.text)
                assert posted.json()["field"] == field and code(character) in posted.text, posted.text
                assert "invisible characters" in posted.text
                put = client.put("/tasks/kept", json={field: value})
                assert put.status_code == 422 and put.json()["field"] == field, put.text
        assert "label" not in {t["task_name"] for t in client.get("/tasks").json()}
        assert client.get("/tasks/label").status_code == 404
        assert client.get("/tasks/kept").json() == kept
        for index, character in enumerate(ALLOWED):
            posted = client.post("/tasks", json=task_body(f"ok{index}", service=f"ops{character}",
                                                          description=f"d{character}", created_by=f"c{character}"))
            assert posted.status_code == 201, (code(character), posted.text)
            assert client.get(f"/tasks/ok{index}").json()["service"] == f"ops{character}"
