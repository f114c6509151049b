"""`make run`: the local stack in the foreground until Ctrl-C."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

from local_stack.stack import LocalStack, StackOptions

# `dagster dev` serves the stock webserver: no login, and it runs a GraphQL mutation a web page can send (an <img>
# GET, a form post) to loopback from the browser of this machine. The compose deployment serves it only behind the
# front (deploy/front); here the stack says plainly whom it is for.
TRUST_NOTICE = ("This stack is for one trusted user on this machine: the Dagster UI has no login, and a web page "
                "opened in this machine's browser can reach it and launch runs. Stop it when you are done; never "
                "publish its ports (the compose deployment serves the UI behind a front with a login: README "
                "\"Ports\").")


def banner(dagster_url: str, sim_url: str, export_dir: str, api_url: str | None, env_file: str = ".local/env") -> str:
    """What `make run` prints once the stack is up."""
    return (
        f"\nLocal stack is up:\n  Dagster UI      {dagster_url}\n"
        f"  Simulated TAB   {sim_url}\n"
        f"  Parquet export  {export_dir}\n"
        + (f"  Control API     {api_url}/docs (INSECURE dev mode: no API key)\n" if api_url else "")
        + f"In another terminal, `source {env_file}` for the racing, maintenance and dagster commands.\n"
        + f"{TRUST_NOTICE}\nPress Ctrl-C to stop everything.\n"
    )


def shown_path(path: Path, cwd: Path) -> str:
    """Pure: `path` relative to `cwd` when inside it (`.local/env` from the repository), else absolute."""
    return str(path.relative_to(cwd)) if path.is_relative_to(cwd) else str(path)


def supervise(options: StackOptions) -> int:
    """Start the stack, print the banner, and keep it up until Ctrl-C (SIGINT), SIGTERM or one of its processes exits;
    then stop everything. The exit status is 0 for each of those ends."""
    stack = LocalStack(options)

    def _interrupt(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    # SIGINT too: Python installs its Ctrl-C handler only where SIGINT arrives at its default, and a shell starts a
    # background job (`make run &` in a script, a CI step) with SIGINT ignored: the stack then ignored its SIGINT.
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        stack.start()
        api_url = stack.api_url if "api" in stack.processes else None
        print(banner(stack.dagster_url, stack.sim_base_url, stack.env["RACING_EXPORT_DIR"], api_url,
                     shown_path(stack.env_file, Path.cwd())), flush=True)
        while all(p.poll() is None for p in stack.processes.values()):
            time.sleep(1)
        print("\nA stack process exited; stopping the rest.", flush=True)
    except KeyboardInterrupt:
        print("\nStopping the local stack...", flush=True)
    finally:
        stack.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    # Arguments go to the simulated feed, e.g. `make run SIM_ARGS="--dense-every 1 --dense-lead 16"`.
    return supervise(StackOptions(sim_args=list(sys.argv[1:] if argv is None else argv)))


if __name__ == "__main__":
    sys.exit(main())
