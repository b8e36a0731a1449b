"""`agora` command line: run the local system, and talk to a running one.

Commands that talk to a running system go through a Dapr sidecar's HTTP API (service
invocation and publish). The sidecar is, in this order: `--dapr-http-port`; the system the
`agora run` of this directory started (`.run/current/cluster.json`); the system the last
`agora run` on this machine started (`$AGORA_CACHE/current/cluster.json`, default
`~/.cache/agora`); DAPR_HTTP_ENDPOINT (e.g. `http://agora-console.agora.svc:3500`);
DAPR_HTTP_PORT (on 127.0.0.1, as in a pod beside its sidecar). With DAPR_API_TOKEN set, every
request carries it (`dapr-api-token`), as a sidecar that requires an API token expects.

Expected failures (a file that does not parse or validate, a refusal from the system, no
system running) are printed as `error: ...` lines, exit code 1. A command whose reader goes away
(`agora task show ID | head`) stops without a word, exit code 141, as a Unix tool ended by
SIGPIPE does.

One module per idea: `sidecar` (finding the running system), `transport` (requests through
it, answers read as their contract models), `problems` (expected failures told readably),
`files` (input files read as models), `text` and `listings` (rendering), one module per group
of commands (`run`, with the demo it shows in `demo`; `registry`, `tasks`, `plans`, `debates`,
`escalations`), and `parser` (the arguments and the entry point, `main`: also the `agora`
console script and `python -m agora.cli`).
"""

from agora.cli.parser import main

__all__ = ["main"]
