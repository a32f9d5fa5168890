"""The Python MCP SDK (PyPI `mcp` 2.x) as a customer's client, driven by test/e2e/modern-era.test.ts.

Arguments: the MCP server URL at the proxy, an access token, the SDK's connect mode (`legacy` for
the MCP 2025 handshake, `2026-07-28` pinned, or `auto`) and the first tool to call: `deploy`, the
multi-round tool (its handler confirms the form elicitation), or `add`. Then it calls `add`; on a
plan of one call, that meets the paywall. A URL-mode elicitation (the checkout) is declined:
this customer does not pay. Prints `RESULT <json>` with what each call answered.
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


def outcome(result: types.CallToolResult) -> dict[str, Any]:
    return {
        "text": "".join(block.text for block in result.content if isinstance(block, types.TextContent)),
        "isError": bool(result.is_error),
        "meta": result.meta,
    }


async def main(server_url: str, token: str, mode: str, first: str) -> None:
    asked: list[dict[str, Any]] = []

    async def on_elicitation(_context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        if isinstance(params, types.ElicitRequestURLParams):
            asked.append({"mode": "url", "url": params.url, "message": params.message})
            return types.ElicitResult(action="decline")
        asked.append({"mode": "form", "message": params.message})
        return types.ElicitResult(action="accept", content={"confirm": True})

    calls: list[dict[str, Any]] = []
    async with httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"}, timeout=30) as http:
        async with Client(
            streamable_http_client(server_url, http_client=http),
            mode=mode,
            elicitation_callback=on_elicitation,
        ) as client:
            opening = ("deploy", {"env": "prod"}) if first == "deploy" else ("add", {"a": 20, "b": 22})
            for name, arguments in (opening, ("add", {"a": 2, "b": 3})):
                try:
                    calls.append(outcome(await client.call_tool(name, arguments)))
                except MCPError as error:
                    calls.append({"error": {"code": error.code, "message": error.error.message, "data": error.error.data}})
            version = client.protocol_version
    print("RESULT " + json.dumps({"protocolVersion": version, "calls": calls, "asked": asked}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]))
