"""The code-server addresses the API's settings parse (CODE_SERVER_ADDRESSES): platform_monitoring/liveness.py."""

from platform_monitoring.liveness import CodeServer, parse_code_servers

__all__ = ["CodeServer", "parse_code_servers"]
