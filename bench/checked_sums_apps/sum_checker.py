"""A checker app for sums, written with the SDK: the answer's last number must be the sum of
the task's two operands. A number may be written with a decimal part (`579.0`, as the `add`
tool returns it) or with thousands separators (`1,234`)."""

from __future__ import annotations

import re

from agora.sdk.checks import CheckAnswer, CheckRequest, serve_checker

NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def last_number(text: str) -> float | None:
    found = [n.rstrip(",") for n in NUMBER.findall(text)]
    return float(found[-1].replace(",", "")) if found else None


def sums_up(request: CheckRequest) -> CheckAnswer:
    a, b = (int(n) for n in re.findall(r"\d+", request.spec.description)[:2])
    got = last_number(request.outcome.summary)
    if got is None:
        return CheckAnswer(passed=False, reason=f"{a} + {b} is {a + b}; the answer holds no number")
    shown = str(int(got)) if got.is_integer() else str(got)
    if got == a + b:
        return CheckAnswer(passed=True, reason=f"{a} + {b} is {shown}")
    return CheckAnswer(passed=False, reason=f"{a} + {b} is {a + b}, not {shown}")


if __name__ == "__main__":
    serve_checker(sums_up)
