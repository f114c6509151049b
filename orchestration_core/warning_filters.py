"""Known-harmless warnings the project's processes would print at every start, silenced by exact category and
message (never all warnings): imported first by each code location's definitions.

- `backfill_policy` on the partitioned race-data assets: a beta parameter the project uses on purpose (one run per
  backfill range, README "Race data"); Dagster warns once per asset in every process that imports them.
- `owners` on `SensorDefinition.__init__`: Dagster passes it itself when it builds the sensors of the automation and
  the asset checks at repository load; the project sets no owners.
"""

import warnings

from dagster import BetaWarning

HARMLESS_BETA_PARAMETERS = (
    r"Parameter `backfill_policy` of function `asset` is currently in beta",
    r"Parameter `owners` of initializer `SensorDefinition\.__init__` is currently in beta",
)

for _message in HARMLESS_BETA_PARAMETERS:
    warnings.filterwarnings("ignore", message=_message, category=BetaWarning)
