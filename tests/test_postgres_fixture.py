import dagster as dg
import pytest
import sqlalchemy as sa


@pytest.mark.integration
def test_fresh_database_is_real_postgres_in_utc(fresh_database_url: str) -> None:
    engine = sa.create_engine(fresh_database_url)
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT version()")).scalar().startswith("PostgreSQL")
        assert conn.execute(sa.text("SHOW timezone")).scalar() in ("UTC", "Etc/UTC")
    engine.dispose()


@pytest.mark.integration
def test_pg_instance_stores_runs_in_postgres(pg_instance: dg.DagsterInstance) -> None:
    @dg.op
    def noop() -> int:
        return 1

    @dg.job
    def tiny_job() -> None:
        noop()

    result = tiny_job.execute_in_process(instance=pg_instance)
    assert result.success
    assert type(pg_instance.run_storage).__name__ == "PostgresRunStorage"
    assert pg_instance.get_run_by_id(result.run_id).status == dg.DagsterRunStatus.SUCCESS
