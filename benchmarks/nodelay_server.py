"""The fake OpenAI server with TCP_NODELAY on its sockets (a diagnostic variant for benchmarks).

``tests/fakes/openai_server.py`` writes each response as two ``send`` calls (status line and headers,
then the body) on a socket with Nagle's algorithm on, so the body waits for the client's delayed ACK
(about 40 ms on Linux) whenever the headers are still unacknowledged. Under a 200 ms reply delay that
adds ~20% to every call and caps 32 concurrent calls well below 32 / 0.2 s. This wrapper sets the
stdlib's ``StreamRequestHandler.disable_nagle_algorithm`` on the fake server's handler and runs its
``main()`` unchanged, so the benchmarks can show the numbers both ways.

Standalone: ``python -m benchmarks.nodelay_server --port 8765 --latency-ms 200``.
"""

from __future__ import annotations

import sys

from tests.fakes import openai_server


def main() -> None:
    """Run the fake server's own main() with TCP_NODELAY set on every accepted connection."""
    openai_server._Handler.disable_nagle_algorithm = True
    openai_server.main(sys.argv[1:])


if __name__ == "__main__":
    main()
