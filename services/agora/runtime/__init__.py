"""The thin Dapr layer every service stands on: sidecar client, state, pub/sub, actors, tracing."""

import importlib.util
import logging


def _keep_every_grpc_call_out_of_traces() -> None:
    """Dapr's workflow SDK switches OpenTelemetry's gRPC instrumentation on for the whole process
    when that package is installed (dapr-agents brings it): every gRPC call of every client would
    then be a span of its own beside the hops Agora traces, and the SDK's second switch-on logs a
    plain-text warning into the app's JSON log. An app with the package installed traces as one
    without it: the instrumentation is switched off again once the SDK has switched it on."""
    # find_spec of a submodule imports its parents and raises when one is missing, as it is
    # where nothing installed OpenTelemetry's instrumentation packages (the image, for one).
    try:
        if importlib.util.find_spec("opentelemetry.instrumentation.grpc") is None:
            return
    except ModuleNotFoundError:
        return
    instrumentor_log = logging.getLogger("opentelemetry.instrumentation.instrumentor")
    level = instrumentor_log.level
    instrumentor_log.setLevel(logging.ERROR)
    try:
        # Each of the SDK's two workflow client modules switches it on as it is imported.
        import dapr.ext.workflow
        import dapr.ext.workflow.aio  # noqa: F401
        from opentelemetry.instrumentation.grpc import GrpcInstrumentorClient

        GrpcInstrumentorClient().uninstrument()  # type: ignore[no-untyped-call]
    finally:
        instrumentor_log.setLevel(level)


_keep_every_grpc_call_out_of_traces()
