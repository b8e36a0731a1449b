"""A checker app for sums, as a team would write one with the SDK: the output's last number must
be the sum of the task's two operands. One more route answers out of the checker contract, as a
broken checker would."""

from __future__ import annotations

import re

from agora.runtime.service import serve
from agora.sdk.checks import CheckAnswer, CheckerSettings, CheckRequest, checker_app


def sums_up(request: CheckRequest) -> CheckAnswer:
    a, b = (int(n) for n in re.findall(r"\d+", request.spec.description)[:2])
    numbers = re.findall(r"-?\d+", request.outcome.summary)
    if not numbers:
        return CheckAnswer(passed=False, reason="the answer holds no number")
    got = int(numbers[-1])
    if got == a + b:
        return CheckAnswer(passed=True, reason=f"{a} + {b} is {got}")
    return CheckAnswer(passed=False, reason=f"{a} + {b} is {a + b}, not {got}")


settings = CheckerSettings()
app = checker_app(sums_up, settings)


@app.post("/out-of-contract")
async def out_of_contract() -> dict[str, object]:
    return {"verdict": "passed", "confidence": "very"}


if __name__ == "__main__":
    serve(app, settings)
