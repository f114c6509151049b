"""The API's routes, one router per area: tasks (the registry and manual triggers), executions, status."""
