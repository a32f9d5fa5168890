"""The Python MCP SDK (PyPI `mcp` 2.x) meeting the paywall, driven by test/e2e/paywall-wait.test.ts.

Arguments: the MCP server URL at the proxy, an access token, the SDK's connect mode (`2026-07-28`
pinned, or `auto`) and what the customer does with the checkout the paywall's URL elicitation
offers: `decline`, `accept` (agrees to open the page and never pays) or `pay` (accepts, then pays
on the hosted page a second later, as a person does while the call waits). Calls `add` twice; on
a plan of one call, the second meets the paywall. Prints `RESULT <json>` with each call's answer.
"""

import asyncio
import json
import sys
from typing import Any

import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

CARD = {"card": {"number": "4242424242424242", "expMonth": 12, "expYear": 2035, "cvc": "123"}}


def outcome(result: types.CallToolResult) -> dict[str, Any]:
    return {
        "text": "".join(block.text for block in result.content if isinstance(block, types.TextContent)),
        "isError": bool(result.is_error),
        "meta": result.meta,
    }


async def main(server_url: str, token: str, mode: str, action: str) -> None:
    asked: list[dict[str, Any]] = []
    payments: list[asyncio.Task[Any]] = []

    async def pay_later(url: str) -> int:
        await asyncio.sleep(1)
        async with httpx2.AsyncClient(timeout=30) as web:
            return (await web.post(f"{url}/pay", json=CARD)).status_code

    async def on_elicitation(_context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        if not isinstance(params, types.ElicitRequestURLParams):
            return types.ElicitResult(action="decline")
        asked.append({"mode": "url", "url": params.url, "message": params.message})
        if action == "decline":
            return types.ElicitResult(action="decline")
        if action == "pay":
            payments.append(asyncio.create_task(pay_later(params.url)))
        return types.ElicitResult(action="accept")

    calls: list[dict[str, Any]] = []
    # The SDK's own read timeout (300 s), as create_mcp_http_client sets it: the call may wait.
    timeout = httpx2.Timeout(30, read=300)
    async with httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"}, timeout=timeout) as http:
        async with Client(
            streamable_http_client(server_url, http_client=http),
            mode=mode,
            elicitation_callback=on_elicitation,
        ) as client:
            for arguments in ({"a": 20, "b": 22}, {"a": 2, "b": 3}):
                try:
                    calls.append(outcome(await client.call_tool("add", arguments)))
                except MCPError as error:
                    calls.append({"error": {"code": error.code, "message": error.error.message}})
    paid = [await task for task in payments]
    print("RESULT " + json.dumps({"calls": calls, "asked": asked, "paid": paid}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]))
