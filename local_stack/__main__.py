"""`make run`: the local stack in the foreground until Ctrl-C."""

from __future__ import annotations

import signal
import sys
import time

from local_stack.stack import LocalStack, StackOptions


def main(argv: list[str] | None = None) -> int:
    # Arguments go to the simulated feed, e.g. `make run SIM_ARGS="--dense-every 1 --dense-lead 16"`.
    sim_args = list(sys.argv[1:] if argv is None else argv)
    stack = LocalStack(StackOptions(sim_args=sim_args))

    def _interrupt(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _interrupt)
    try:
        stack.start()
        print(
            f"\nLocal stack is up:\n  Dagster UI      {stack.dagster_url}\n"
            f"  Simulated TAB   {stack.sim_base_url}\n"
            f"  Parquet export  {stack.env['RACING_EXPORT_DIR']}\n"
            + (f"  Control API     {stack.api_url}/docs (INSECURE dev mode: no API key)\n" if "api" in stack.processes else "")
            + "Press Ctrl-C to stop everything.\n",
            flush=True,
        )
        while all(p.poll() is None for p in stack.processes.values()):
            time.sleep(1)
        print("\nA stack process exited; stopping the rest.", flush=True)
    except KeyboardInterrupt:
        print("\nStopping the local stack...", flush=True)
    finally:
        stack.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
