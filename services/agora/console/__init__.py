"""The console: a web page for the people who decide escalations (`agora.console.app`)."""

__all__: list[str] = []
