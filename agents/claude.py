"""Claude through the anthropic SDK: a tool-use loop over the workspace, the context and the ladder.

The system prompt and the tool list carry cache_control (they are the same every turn), and so does
the newest user turn, so each request reads the conversation so far from the cache. Guidance and
verdicts that arrive while Claude works are added to the next user turn. The SDK retries 429, 5xx
(529 included) and timeouts on its own; a turn that still fails, or breaks mid-stream, is tried
again a few times; anything else (400, 401...) stops the agent with the API's message. Tokens and
cost are recorded per turn.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import Any

from agents.base import DEFAULT_MODEL, Budget, Host, best_roofline, go_on, render_feedback
from agents.prompt import SYSTEM, task_prompt
from agents.tools import TOOL_SPECS, Toolbox

CACHE = {"type": "ephemeral"}
TURN_ATTEMPTS = 3
RETRYABLE_STATUS = (408, 409, 429)
MAX_CUT_SHORT = 3
CUT_SHORT = "Your reply was cut off at the output token limit. Go on from where it stopped; keep each reply shorter."
RETRYABLE_EVENTS = ("overloaded_error", "api_error", "rate_limit_error", "timeout_error")

# List prices in USD per million tokens (input, output), by model name prefix, longest first.
# Cache writes cost 1.25x input, cache reads 0.1x. Override with [agent] prices in the config.
PRICES: dict[str, tuple[float, float]] = {
    "claude-opus-4-0": (15.0, 75.0),
    "claude-opus-4-1": (15.0, 75.0),
    "claude-opus-4-20250514": (15.0, 75.0),
    "claude-opus": (5.0, 25.0),
    "claude-sonnet": (3.0, 15.0),
    "claude-haiku-3": (0.8, 4.0),
    "claude-haiku": (1.0, 5.0),
}


def price_for(model: str, overrides: dict[str, tuple[float, float]] | None = None) -> tuple[float, float] | None:
    table = {**PRICES, **(overrides or {})}
    for prefix in sorted(table, key=len, reverse=True):
        if model.startswith(prefix):
            return table[prefix]
    return None


@dataclass
class Usage:
    input: int = 0
    output: int = 0
    cache_write: int = 0
    cache_read: int = 0

    def add(self, usage: Any) -> Usage:
        turn = Usage(
            int(getattr(usage, "input_tokens", 0) or 0),
            int(getattr(usage, "output_tokens", 0) or 0),
            int(getattr(usage, "cache_creation_input_tokens", 0) or 0),
            int(getattr(usage, "cache_read_input_tokens", 0) or 0),
        )
        self.input += turn.input
        self.output += turn.output
        self.cache_write += turn.cache_write
        self.cache_read += turn.cache_read
        return turn

    def cost(self, price: tuple[float, float] | None) -> float | None:
        if price is None:
            return None
        per_in, per_out = price[0] / 1e6, price[1] / 1e6
        return (
            self.input * per_in
            + self.cache_write * per_in * 1.25
            + self.cache_read * per_in * 0.1
            + self.output * per_out
        )


class TurnFailed(Exception):
    """The API refused the turn, or kept failing; the message says which."""


def has_credentials() -> bool:
    return bool(os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN"))


@dataclass
class ClaudeAgent:
    model: str = DEFAULT_MODEL
    max_tokens: int = 16_000
    stream: bool = True
    timeout: float = 600.0
    max_retries: int = 4
    retry_wait: float = 5.0  # seconds before a failed turn is tried again (doubling)
    prices: dict[str, tuple[float, float]] = field(default_factory=dict)
    client: Any = None  # an anthropic.Anthropic; made from the environment when None
    backend: str = "claude"

    def __post_init__(self) -> None:
        self._cancel = threading.Event()
        self._in_flight: Any = None

    def cancel(self) -> None:
        self._cancel.set()
        in_flight = self._in_flight
        if in_flight is not None:
            try:
                in_flight.close()  # the stream's response: the reading thread gets an error at once
            except Exception:
                pass

    def run(self, host: Host, budget: Budget) -> str:
        import anthropic

        client = self.client or anthropic.Anthropic(max_retries=self.max_retries, timeout=self.timeout)
        toolbox = Toolbox(host, author=f"claude:{self.model}")
        price = price_for(self.model, self.prices)
        usage = Usage()
        system = [{"type": "text", "text": SYSTEM, "cache_control": CACHE}]
        tools = [dict(spec) for spec in TOOL_SPECS]
        tools[-1]["cache_control"] = CACHE
        first = task_prompt(host.problem)
        feedback = host.feedback()
        if feedback:
            first += "\nBefore you start, the person says:\n" + render_feedback(feedback)
        messages: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": first}]}]
        host.record("start", f"{self.model} on {host.problem.name}", model=self.model, backend=self.backend)
        if price is None and budget.max_cost_usd is not None:
            host.record("warning", f"no price known for {self.model}: the cost budget cannot be applied")
        turn = cut_short = 0
        reason = ""
        while not reason:
            best = best_roofline(toolbox.written)
            budget, reason = self._stop_reason(host, budget, len(toolbox.written), usage.cost(price) or 0.0, best)
            if reason:
                break
            turn += 1
            try:
                message = self._turn(client, system, tools, messages, host)
            except TurnFailed as exc:
                reason = "stopped by the person" if self._cancel.is_set() else str(exc)
                if not self._cancel.is_set():
                    host.record("error", str(exc))
                break
            turn_usage = usage.add(message.usage)
            host.record(
                "turn",
                f"turn {turn}",
                turn=turn,
                stop_reason=message.stop_reason,
                input_tokens=turn_usage.input,
                output_tokens=turn_usage.output,
                cache_write_tokens=turn_usage.cache_write,
                cache_read_tokens=turn_usage.cache_read,
                cost_usd=turn_usage.cost(price),
                total_cost_usd=usage.cost(price),
            )
            content = [block_param(block) for block in message.content]
            messages.append({"role": "assistant", "content": content})
            for block in message.content:
                if block.type == "text" and block.text.strip():
                    host.record("text", block.text)
            calls = [block for block in message.content if block.type == "tool_use"]
            results = [self._use_tool(toolbox, host, call, budget) for call in calls]
            best = best_roofline(toolbox.written)
            budget, reason = self._stop_reason(host, budget, len(toolbox.written), usage.cost(price) or 0.0, best)
            if reason:
                break  # before taking guidance: what is taken is marked delivered, and no turn would carry it
            feedback = host.feedback()
            if feedback:
                host.record("feedback", render_feedback(feedback), count=len(feedback))
                results.append({"type": "text", "text": "While you worked:\n" + render_feedback(feedback)})
            if not results and message.stop_reason == "max_tokens" and cut_short < MAX_CUT_SHORT:
                cut_short += 1  # a reply cut at the token limit is not the model being done
                host.record("warning", f"the reply hit max_tokens ({self.max_tokens}); asking it to go on")
                results.append({"type": "text", "text": CUT_SHORT})
            if not results:
                reason = "the model ended its turn" if message.stop_reason == "end_turn" else str(message.stop_reason)
                break
            messages.append({"role": "user", "content": results})
        host.record("stop", reason, versions=len(toolbox.written), total_cost_usd=usage.cost(price), turns=turn)
        return reason

    def _stop_reason(
        self, host: Host, budget: Budget, versions: int, cost: float, best: float | None
    ) -> tuple[Budget, str]:
        """(the budget to go on with, "") or (it, why to stop); a spent budget pauses the agent here, before its
        next turn, until the person grants more or stops it."""
        if self._cancel.is_set() or host.stop_requested():
            return budget, "stopped by the person"
        return go_on(host, budget, versions, cost, best)

    def _use_tool(self, toolbox: Toolbox, host: Host, call: Any, budget: Budget) -> dict[str, Any]:
        args = call.input if isinstance(call.input, dict) else {}
        spent = budget.max_versions is not None and len(toolbox.written) >= budget.max_versions
        refusal = None
        if self._cancel.is_set() or host.stop_requested():
            refusal = "the person stopped this session before the tool ran"
        elif call.name == "write_version" and spent:  # several writes in one turn can overrun the budget
            refusal = f"not written: this session's budget of {budget.max_versions} versions is spent"
        output, ok = toolbox.use(call.name, args, refusal)
        return {"type": "tool_result", "tool_use_id": call.id, "content": output, "is_error": not ok}

    def _turn(self, client: Any, system: Any, tools: Any, messages: list[dict[str, Any]], host: Host) -> Any:
        """One request, tried again on errors worth retrying; TurnFailed otherwise."""
        import anthropic

        wait = self.retry_wait
        for attempt in range(1, TURN_ATTEMPTS + 1):
            try:
                return self._request(client, system, tools, with_cache_point(messages))
            except anthropic.APIStatusError as exc:
                kind = error_type(exc)
                if exc.status_code < 400:  # an error event in a stream that had started well
                    retryable, detail = kind in RETRYABLE_EVENTS, f"stream broke: {kind}: {error_message(exc)}"
                else:
                    retryable = exc.status_code in RETRYABLE_STATUS or exc.status_code >= 500
                    detail = f"API error {exc.status_code}: {error_message(exc)}"
            except anthropic.APIConnectionError as exc:  # timeouts included
                retryable, detail = True, f"{type(exc).__name__}: {exc}"
            except TypeError as exc:
                if "authentication method" in str(exc):  # the SDK's words when it found no key or token
                    raise TurnFailed(f"no Anthropic credentials: set ANTHROPIC_API_KEY ({exc})") from None
                raise TurnFailed(f"kerneltui failed to make the request ({type(exc).__name__}: {exc})") from exc
            except Exception as exc:  # a stream cut by cancel(), or a malformed event
                if self._cancel.is_set():
                    raise TurnFailed("stopped by the person") from None
                retryable, detail = True, f"{type(exc).__name__}: {exc}"
            if self._cancel.is_set():
                raise TurnFailed("stopped by the person")
            if not retryable or attempt == TURN_ATTEMPTS:
                raise TurnFailed(detail if not retryable else f"gave up after {attempt} attempts: {detail}")
            host.record("retry", f"attempt {attempt} failed ({detail}); trying again in {wait:g} s")
            if self._cancel.wait(wait):
                raise TurnFailed("stopped by the person")
            wait *= 2
        raise TurnFailed("unreachable")

    def _request(self, client: Any, system: Any, tools: Any, messages: list[dict[str, Any]]) -> Any:
        params = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "system": system,
            "tools": tools,
            "messages": messages,
        }
        if not self.stream:
            return client.messages.create(**params)
        with client.messages.stream(**params) as stream:
            self._in_flight = stream
            try:
                for _ in stream:
                    if self._cancel.is_set():
                        break
                if self._cancel.is_set():
                    raise TurnFailed("stopped by the person")
                return stream.get_final_message()
            finally:
                self._in_flight = None


def with_cache_point(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A copy whose newest user turn ends with a cache breakpoint (the API allows four in all)."""
    out = [dict(m) for m in messages]
    last = out[-1]
    content = [dict(block) for block in last["content"]]
    content[-1]["cache_control"] = CACHE
    out[-1] = {**last, "content": content}
    return out


def block_param(block: Any) -> dict[str, Any]:
    """A response block as it goes back in the next request."""
    if block.type == "text":
        return {"type": "text", "text": block.text}
    if block.type == "tool_use":
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    if block.type == "thinking":
        return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
    if block.type == "redacted_thinking":
        return {"type": "redacted_thinking", "data": block.data}
    dumped: dict[str, Any] = block.model_dump(exclude_none=True)
    return dumped


def error_type(exc: Any) -> str:
    body = getattr(exc, "body", None)
    error = body.get("error") if isinstance(body, dict) else None
    return str(error.get("type")) if isinstance(error, dict) else "error"


def error_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
    return str(getattr(exc, "message", exc))
