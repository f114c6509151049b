"""`make run`: the local stack in the foreground until Ctrl-C."""

from __future__ import annotations

import signal
import sys
import time

from local_stack.stack import LocalStack, StackOptions


def main() -> int:
    stack = LocalStack(StackOptions())

    def _interrupt(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _interrupt)
    try:
        stack.start()
        print(
            f"\nLocal stack is up:\n  Dagster UI      {stack.dagster_url}\n"
            f"  Simulated TAB   {stack.sim_base_url}\n"
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
